//! A change as a watching client sees it.

use std::sync::Arc;

use crate::object::Object;

/// One change as a client sees it, through its selectors.
#[derive(Debug, Clone, PartialEq)]
pub enum WatchEvent {
    /// The object is new to the client: created, or changed so that it now matches.
    Added(Arc<Object>),
    /// The object changed and still matches.
    Modified(Arc<Object>),
    /// The object was deleted, or changed so that it no longer matches (then it is the last
    /// state that matched, at the revision of the change).
    Deleted(Arc<Object>),
}

impl WatchEvent {
    /// The object the event carries.
    pub fn object(&self) -> &Object {
        self.shared()
    }

    /// The object the event carries, as the watch cache holds it: a follower that keeps it
    /// shares the cache's copy instead of making one of its own.
    pub fn shared(&self) -> &Arc<Object> {
        match self {
            WatchEvent::Added(object) | WatchEvent::Modified(object) | WatchEvent::Deleted(object) => object,
        }
    }

    /// `ADDED`, `MODIFIED` or `DELETED`.
    pub fn kind(&self) -> &'static str {
        match self {
            WatchEvent::Added(_) => "ADDED",
            WatchEvent::Modified(_) => "MODIFIED",
            WatchEvent::Deleted(_) => "DELETED",
        }
    }
}
