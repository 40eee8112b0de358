//! The client's end of a watch: the events a cache queued for it, taken in order.

use super::*;

/// One event queued for a client.
#[derive(Debug)]
pub(super) struct Pending {
    pub(super) revision: Revision,
    pub(super) event: WatchEvent,
    pub(super) entry: Arc<Entry>,
}

/// A client's stream of events. Dropping it ends the watch.
#[derive(Debug)]
pub struct WatchStream {
    pub(super) backlog: VecDeque<Pending>,
    pub(super) receiver: mpsc::Receiver<Pending>,
    /// Bytes queued for this client and not taken yet (the backlog is not counted).
    pub(super) queued: Arc<AtomicUsize>,
    pub(super) cache: Weak<Cache>,
    pub(super) last: Revision,
}

impl WatchStream {
    /// The next event; an error once the stream was cut off (too slow, or the cache had to
    /// start over), after which the client resumes from [`WatchStream::revision`].
    pub async fn next(&mut self) -> Result<WatchEvent, RegistryError> {
        self.take().await.map(|pending| pending.event)
    }

    /// The next event with its object encoded as JSON: the same bytes `serde_json` writes for
    /// [`WatchEvent::object`], encoded once per object version for every client of the cache.
    pub async fn next_json(&mut self) -> Result<(WatchEvent, Bytes), RegistryError> {
        self.take().await.map(|pending| {
            let json = pending.entry.json();
            (pending.event, json)
        })
    }

    /// The next event when one is queued already, without waiting: `None` when none is. A
    /// client that drains what is ready this way handles a burst of changes in one go.
    pub fn try_next(&mut self) -> Option<Result<WatchEvent, RegistryError>> {
        if let Some(pending) = self.backlog.pop_front() {
            self.last = self.last.max(pending.revision);
            return Some(Ok(pending.event));
        }
        match self.receiver.try_recv() {
            Ok(pending) => Some(Ok(self.taken(pending).event)),
            Err(mpsc::error::TryRecvError::Empty) => None,
            Err(mpsc::error::TryRecvError::Disconnected) => Some(Err(self.closed())),
        }
    }

    /// The revision the stream's cache has reached, as it moves: every write to the store
    /// moves it, whether or not this stream selects the change, so a client waiting for
    /// [`WatchStream::revision`] to pass some revision learns when to look again. `None` once
    /// the cache is gone.
    pub fn cache_progress(&self) -> Option<watch::Receiver<Revision>> {
        self.cache.upgrade().map(|cache| cache.progress.subscribe())
    }

    async fn take(&mut self) -> Result<Pending, RegistryError> {
        if let Some(pending) = self.backlog.pop_front() {
            self.last = self.last.max(pending.revision);
            return Ok(pending);
        }
        match self.receiver.recv().await {
            Some(pending) => Ok(self.taken(pending)),
            None => Err(self.closed()),
        }
    }

    fn taken(&mut self, pending: Pending) -> Pending {
        self.queued.fetch_sub(pending.entry.size, Ordering::Relaxed);
        self.last = pending.revision;
        pending
    }

    fn closed(&self) -> RegistryError {
        RegistryError::Expired {
            message: format!(
                "the watch was closed after revision {}: it fell behind, or the server restarted it; \
                 watch again from there",
                self.last
            ),
            continue_from: None,
        }
    }

    /// The latest revision the client has been brought up to: the revision of its last event,
    /// or of the cache when nothing it selects changed since. A bookmark reports this.
    pub fn revision(&self) -> Revision {
        // The cache's revision first: every event at or before it was queued before it was
        // reached, so an empty, open queue means the client has them all.
        let cache = self.cache.upgrade().map_or(0, |cache| cache.readable());
        // A watch from now queues every current object at the revision it started from: the
        // client has reached that revision only once it took the last of them.
        if let Some(queued) = self.backlog.front() {
            return self.last.min(queued.revision.saturating_sub(1));
        }
        let idle = self.receiver.is_empty() && !self.receiver.is_closed();
        if idle { self.last.max(cache) } else { self.last }
    }
}
