//! What a watch cache holds and spans, read on demand: the window of recent changes (how many,
//! what they weigh, the oldest revision a watch may resume from), the revision the cache has
//! reached, how many objects it holds and how many changes it has received.

use kayra_store::Revision;

use super::{Caches, WINDOW};

/// One resource's watch cache, as it is at the moment it is read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatchCacheStatus {
    /// The resource's API group; empty for the core group.
    pub group: String,
    /// The resource's plural.
    pub resource: String,
    /// Changes its window holds, for watches resuming from a revision.
    pub events: usize,
    /// The most changes its window may hold (it also holds at most a configured number of bytes).
    pub capacity: usize,
    /// What the changes in its window weigh together, in bytes of stored objects.
    pub window_bytes: usize,
    /// The oldest revision a watch may resume from: older ones are answered as expired.
    pub oldest_revision: Revision,
    /// The revision up to which it has applied every change: the newest it serves.
    pub revision: Revision,
    /// Objects it holds now.
    pub objects: usize,
    /// Changes it has received from the store since it started.
    pub received: u64,
}

impl Caches {
    /// Every cache that has finished its first list, as it is now.
    pub(crate) fn statuses(&self) -> Vec<WatchCacheStatus> {
        let caches: Vec<_> =
            self.caches.lock().expect("watch caches lock poisoned").values().cloned().collect();
        caches
            .iter()
            .filter_map(|cache| {
                let state = cache.state.lock().expect("watch cache lock poisoned");
                state.primed.then(|| WatchCacheStatus {
                    group: cache.name.group.clone(),
                    resource: cache.name.resource.clone(),
                    events: state.window.len(),
                    capacity: WINDOW,
                    window_bytes: state.window_size,
                    oldest_revision: state.window_start,
                    revision: state.revision,
                    objects: state.objects.len(),
                    received: state.received,
                })
            })
            .collect()
    }
}
