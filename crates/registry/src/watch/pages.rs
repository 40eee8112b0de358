//! Pages of a resource's cache as JSON, and the encodings kept of those asked for again: a
//! page of every object under a prefix (no selector) asked for a second time since the
//! resource's objects last changed is joined into one encoding, kept until they change again,
//! and answered from it, so that clients listing a collection that does not change are served
//! its bytes as they stand rather than gathered again from every object. A page asked for once
//! keeps nothing; what is kept is bounded in bytes, oldest dropped first.

use std::collections::VecDeque;

use bytes::{BufMut, Bytes, BytesMut};
use kayra_store::Revision;

use super::{Caches, Filter};
use crate::JsonItems;
use crate::fields::FieldSelector;
use crate::labels::LabelSelector;

/// The largest page whose encoding is kept.
const PAGE_BYTES: usize = 4 << 20;
/// The most one resource's kept pages weigh together.
const KEPT_BYTES: usize = 8 << 20;
/// How many pages asked for once are remembered.
const ASKED: usize = 16;

/// A page as JSON: each object's encoding, or the page's kept one.
pub(crate) struct JsonPage {
    /// The revision it was read at.
    pub(crate) revision: Revision,
    pub(crate) items: JsonItems,
    /// The key after the page, when more objects follow.
    pub(crate) next: Option<String>,
    /// How many objects follow, when known.
    pub(crate) remaining: Option<u64>,
}

/// The pages one resource's cache was asked for since its objects last changed.
#[derive(Debug, Default)]
pub(super) struct Pages {
    /// Counts the changes to the objects, so that an encoding made from the objects as they
    /// were is not kept after they changed.
    generation: u64,
    /// The pages (prefix and limit) asked for once.
    asked: VecDeque<(String, usize)>,
    kept: VecDeque<Kept>,
    kept_bytes: usize,
}

#[derive(Debug)]
struct Kept {
    prefix: String,
    limit: usize,
    /// The page's items, each object's JSON, joined with commas.
    joined: Bytes,
    next: Option<String>,
    remaining: Option<u64>,
}

impl Pages {
    /// The objects changed: every page is forgotten.
    pub(super) fn changed(&mut self) {
        self.generation += 1;
        self.asked.clear();
        self.kept.clear();
        self.kept_bytes = 0;
    }

    fn kept(&self, prefix: &str, limit: usize) -> Option<&Kept> {
        self.kept.iter().find(|kept| kept.limit == limit && kept.prefix == prefix)
    }

    /// Whether the page was asked for before since the last change; notes that it was.
    fn asked_again(&mut self, prefix: &str, limit: usize) -> bool {
        if self.asked.iter().any(|(asked, at)| *at == limit && asked == prefix) {
            return true;
        }
        if self.asked.len() == ASKED {
            self.asked.pop_front();
        }
        self.asked.push_back((prefix.to_owned(), limit));
        false
    }

    /// Keeps `kept`, encoded from the objects of `generation`, if they have not changed since.
    fn keep(&mut self, generation: u64, kept: Kept) {
        if generation != self.generation
            || kept.joined.len() > PAGE_BYTES
            || self.kept(&kept.prefix, kept.limit).is_some()
        {
            return;
        }
        self.kept_bytes += kept.joined.len();
        self.kept.push_back(kept);
        while self.kept_bytes > KEPT_BYTES {
            let Some(dropped) = self.kept.pop_front() else { break };
            self.kept_bytes -= dropped.joined.len();
        }
    }
}

impl Caches {
    /// As [`Caches::page`], as JSON: a page with no selector asked for again since the
    /// resource's objects last changed is answered from its kept encoding, or joined and kept.
    pub(crate) fn json_page(
        &self,
        base: &str,
        prefix: &str,
        current: Revision,
        labels: LabelSelector,
        fields: FieldSelector,
        limit: usize,
    ) -> Option<JsonPage> {
        let cache = self.caches.lock().expect("watch caches lock poisoned").get(base).cloned()?;
        let whole = labels.is_empty() && fields.is_empty();
        let filter = Filter { namespace: None, labels, fields };
        let (page, keep) = {
            let mut state = cache.state.lock().expect("watch cache lock poisoned");
            if !state.primed || state.readable < current {
                return None;
            }
            if let Some(kept) = state.pages.kept(prefix, limit).filter(|_| whole) {
                return Some(JsonPage {
                    revision: state.readable,
                    items: JsonItems::joined(kept.joined.clone()),
                    next: kept.next.clone(),
                    remaining: kept.remaining,
                });
            }
            let page = state.page(base, prefix, &filter, limit);
            let keep = (whole && state.pages.asked_again(prefix, limit)).then_some(state.pages.generation);
            (page, keep)
        };
        // A page too large to keep is streamed as each object's JSON, never joined whole.
        let small = || page.items.iter().map(|entry| entry.size).sum::<usize>() <= PAGE_BYTES;
        let Some(generation) = keep.filter(|_| small()) else {
            return Some(JsonPage {
                revision: page.revision,
                items: JsonItems::cached(page.items),
                next: page.next,
                remaining: page.remaining,
            });
        };
        let joined = join(&page.items.iter().map(|entry| entry.json()).collect::<Vec<_>>());
        let kept = Kept {
            prefix: prefix.to_owned(),
            limit,
            joined: joined.clone(),
            next: page.next.clone(),
            remaining: page.remaining,
        };
        cache.state.lock().expect("watch cache lock poisoned").pages.keep(generation, kept);
        Some(JsonPage {
            revision: page.revision,
            items: JsonItems::joined(joined),
            next: page.next,
            remaining: page.remaining,
        })
    }
}

/// `items` joined with commas, as a JSON array holds them.
fn join(items: &[Bytes]) -> Bytes {
    let mut joined = BytesMut::with_capacity(items.iter().map(|item| item.len() + 1).sum());
    for item in items {
        if !joined.is_empty() {
            joined.put_u8(b',');
        }
        joined.extend_from_slice(item);
    }
    joined.freeze()
}
