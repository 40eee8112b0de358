//! What a watch cache keeps of the objects its registry wrote, for the changes their writes
//! make: such a change is applied from the object written, not by decoding the stored bytes.

use std::collections::HashMap;

use kayra_store::Revision;

use crate::Object;

/// Objects this registry wrote, by key, with the revision of the write: the change that write
/// makes takes its object from here instead of decoding the stored bytes again.
#[derive(Default)]
pub(super) struct Written {
    pub(super) objects: HashMap<String, (Revision, Object)>,
    /// The latest revision the cache has looked for here: an object written at or below it
    /// comes too late, and is not kept.
    seen: Revision,
}

/// The most written objects a cache holds for changes it has not applied yet; past it, a
/// change is decoded from the store's bytes as usual.
pub(super) const WRITTEN: usize = 4096;

impl Written {
    /// Whether an object written at `revision` would come too late to be used, or find no room.
    pub(super) fn late(&self, revision: Revision) -> bool {
        revision <= self.seen || self.objects.len() >= WRITTEN
    }

    /// Keeps the object written under `key` at `revision` for its change, unless it is late.
    pub(super) fn offer(&mut self, key: &str, revision: Revision, object: Object) {
        if !self.late(revision) {
            self.objects.insert(key.to_owned(), (revision, object));
        }
    }

    /// The object written under `key` at `revision`, if kept; one kept for an earlier revision
    /// is dropped, one for a later stays. Asked for every change, in revision order.
    pub(super) fn take(&mut self, key: &str, revision: Revision) -> Option<Object> {
        self.seen = self.seen.max(revision);
        match self.objects.get(key) {
            Some((at, _)) if *at <= revision => {
                let (at, object) = self.objects.remove(key).expect("found above");
                (at == revision).then_some(object)
            }
            _ => None,
        }
    }

    /// A fresh list at `revision` holds everything written up to it.
    pub(super) fn listed(&mut self, revision: Revision) {
        self.seen = self.seen.max(revision);
        self.objects.retain(|_, (at, _)| *at > revision);
    }
}
