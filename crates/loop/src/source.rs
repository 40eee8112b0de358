//! Where a loop's keys come from.
//!
//! A [`Source`] feeds keys into the loop's queue and knows every key it has seen, for resyncs.
//! Most sources are a [`ListWatch`] over a [`Feed`]: list the collection, then watch it from
//! the list's revision; resume the watch from the last revision seen after a disconnect, list
//! again when that revision has been compacted away. Each item is mapped to the keys it
//! concerns (the object itself, its owner, the node it is bound to, …) by the feed; when an
//! item's keys change, the old keys are queued too, so that whatever it used to concern is
//! reconciled as well.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kayra_store::{EventKind, KeyValue, RangeRequest, Revision, Store, StoreError};
use tokio_util::sync::CancellationToken;

use crate::Key;
use crate::queue::Queue;

/// Feeds a loop's queue.
#[async_trait::async_trait]
pub trait Source: Send + Sync + 'static {
    /// Queues the keys of whatever changes until `stop`, reconnecting as needed.
    async fn run(&self, sink: Sink, stop: CancellationToken);

    /// Every key the source knows to exist now, for a resync.
    fn known(&self) -> Vec<Key>;
}

/// The handle a source queues keys through.
#[derive(Debug, Clone)]
pub struct Sink {
    queue: Arc<Queue>,
}

impl Sink {
    pub(crate) fn new(queue: Arc<Queue>) -> Sink {
        Sink { queue }
    }

    /// Queues `key` for a reconcile.
    pub fn add(&self, key: Key) {
        self.queue.add(key);
    }

    /// Queues every key of `keys`, at once.
    pub fn add_all(&self, keys: impl IntoIterator<Item = Key>) {
        self.queue.add_all(keys);
    }
}

/// A source of fixed keys: each is queued once at start and at every resync. For loops whose
/// work is one whole thing (an index) rather than one object.
#[derive(Debug, Clone)]
pub struct Fixed {
    keys: Vec<Key>,
}

impl Fixed {
    /// The keys.
    pub fn new(keys: impl IntoIterator<Item = Key>) -> Fixed {
        Fixed { keys: keys.into_iter().collect() }
    }
}

#[async_trait::async_trait]
impl Source for Fixed {
    async fn run(&self, sink: Sink, _stop: CancellationToken) {
        sink.add_all(self.keys.iter().cloned());
    }

    fn known(&self) -> Vec<Key> {
        self.keys.clone()
    }
}

/// One item of a feed: its identity (a store key, `namespace/name`, …) and the loop keys it
/// concerns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Item {
    /// What identifies the item in its collection.
    pub id: String,
    /// The loop keys it concerns.
    pub keys: Vec<Key>,
}

/// A snapshot of a collection.
#[derive(Debug, Clone, Default)]
pub struct Listed {
    /// The revision the snapshot was read at: its watch starts after it.
    pub revision: Revision,
    /// Every item.
    pub items: Vec<Item>,
}

/// One change of a watched collection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// The item was created or changed.
    Put {
        /// The item as it is now.
        item: Item,
        /// The change's revision.
        revision: Revision,
    },
    /// The item was deleted; its keys are those of its last state.
    Delete {
        /// The item as it was.
        item: Item,
        /// The change's revision.
        revision: Revision,
    },
    /// Nothing changed up to this revision.
    Progress(Revision),
}

/// Why a feed stopped.
#[derive(Debug, thiserror::Error)]
pub enum FeedError {
    /// The revision to watch from is older than the retained history: list again.
    #[error("the watch's starting revision is compacted")]
    Expired,
    /// The feed failed; the watch resumes from its last revision after a pause.
    #[error("{0}")]
    Failed(String),
}

impl FeedError {
    /// Whether watching again from the last revision may succeed: after a failure yes; an
    /// expired revision needs a new list instead.
    pub fn is_retryable(&self) -> bool {
        matches!(self, FeedError::Failed(_))
    }
}

impl From<StoreError> for FeedError {
    fn from(error: StoreError) -> FeedError {
        match error {
            StoreError::Compacted { .. } => FeedError::Expired,
            other => FeedError::Failed(other.to_string()),
        }
    }
}

/// The changes of a watched collection, in revision order.
#[async_trait::async_trait]
pub trait Changes: Send {
    /// The next change; `None` when the watch ended (it resumes from the last revision).
    async fn next(&mut self) -> Option<Result<Change, FeedError>>;
}

/// A collection a loop can list and watch: the port [`ListWatch`] runs over.
#[async_trait::async_trait]
pub trait Feed: Send + Sync + 'static {
    /// Every item now.
    async fn list(&self) -> Result<Listed, FeedError>;
    /// Every change after `revision`.
    async fn watch(&self, after: Revision) -> Result<Box<dyn Changes>, FeedError>;
}

/// The keys a change concerns: those the item had before it and those it has now, each once.
/// An item may concern thousands of keys (a Secret every node's Application references), so
/// the two are compared through a set, not key by key.
fn concerned(before: Option<Vec<Key>>, now: Vec<Key>) -> Vec<Key> {
    let before = before.unwrap_or_default();
    if before.is_empty() {
        return now;
    }
    let kept: HashSet<&Key> = now.iter().collect();
    let gone: Vec<Key> = before.into_iter().filter(|key| !kept.contains(key)).collect();
    gone.into_iter().chain(now).collect()
}

/// How long a failed list or watch waits before it is tried again.
const RETRY: Duration = Duration::from_secs(1);

/// A source that lists and watches a [`Feed`], keeping the keys of every item it has seen.
pub struct ListWatch {
    feed: Box<dyn Feed>,
    items: Mutex<HashMap<String, Vec<Key>>>,
}

impl std::fmt::Debug for ListWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ListWatch").finish_non_exhaustive()
    }
}

impl ListWatch {
    /// Lists and watches `feed`.
    pub fn new(feed: impl Feed) -> ListWatch {
        ListWatch { feed: Box::new(feed), items: Mutex::default() }
    }

    fn items(&self) -> std::sync::MutexGuard<'_, HashMap<String, Vec<Key>>> {
        self.items.lock().expect("the source's lock is never held across a panic")
    }

    /// Replaces what is known with a fresh list; queues every key it concerns, and those of
    /// items that are gone.
    fn relisted(&self, listed: Listed, sink: &Sink) {
        let mut fresh: HashMap<String, Vec<Key>> = HashMap::with_capacity(listed.items.len());
        for item in listed.items {
            fresh.insert(item.id, item.keys);
        }
        let mut items = self.items();
        let mut keys: Vec<Key> = items.values().chain(fresh.values()).flatten().cloned().collect();
        keys.sort();
        keys.dedup();
        sink.add_all(keys);
        *items = fresh;
    }

    fn changed(&self, change: Change, sink: &Sink) -> Revision {
        match change {
            Change::Put { item, revision } => {
                let before = self.items().insert(item.id, item.keys.clone());
                sink.add_all(concerned(before, item.keys));
                revision
            }
            Change::Delete { item, revision } => {
                let before = self.items().remove(&item.id);
                sink.add_all(concerned(before, item.keys));
                revision
            }
            Change::Progress(revision) => revision,
        }
    }

    /// Lists, then watches until the watch expires or fails; answers whether to list again.
    async fn watch_from(&self, mut revision: Revision, sink: &Sink, stop: &CancellationToken) -> Relist {
        loop {
            let mut changes = match self.feed.watch(revision).await {
                Ok(changes) => changes,
                Err(FeedError::Expired) => return Relist::Now,
                Err(FeedError::Failed(error)) => {
                    tracing::debug!(%error, revision, "a loop's watch could not start; retrying");
                    return Relist::Later;
                }
            };
            loop {
                let next = tokio::select! {
                    () = stop.cancelled() => return Relist::Stopped,
                    next = changes.next() => next,
                };
                match next {
                    Some(Ok(change)) => revision = revision.max(self.changed(change, sink)),
                    Some(Err(FeedError::Expired)) => return Relist::Now,
                    Some(Err(FeedError::Failed(error))) => {
                        tracing::debug!(%error, revision, "a loop's watch ended; resuming");
                        break;
                    }
                    None => break,
                }
            }
        }
    }
}

/// What a watch's end asks of the source.
enum Relist {
    Now,
    Later,
    Stopped,
}

#[async_trait::async_trait]
impl Source for ListWatch {
    async fn run(&self, sink: Sink, stop: CancellationToken) {
        loop {
            let listed = tokio::select! {
                () = stop.cancelled() => return,
                listed = self.feed.list() => listed,
            };
            let relist = match listed {
                Ok(listed) => {
                    let revision = listed.revision;
                    self.relisted(listed, &sink);
                    self.watch_from(revision, &sink, &stop).await
                }
                Err(error) => {
                    tracing::warn!(%error, "a loop's list failed; retrying");
                    Relist::Later
                }
            };
            match relist {
                Relist::Now => {}
                Relist::Later => {
                    tokio::select! {
                        () = stop.cancelled() => return,
                        () = tokio::time::sleep(RETRY) => {}
                    }
                }
                Relist::Stopped => return,
            }
        }
    }

    fn known(&self) -> Vec<Key> {
        let items = self.items();
        let mut keys: Vec<Key> = items.values().flatten().cloned().collect();
        keys.sort();
        keys.dedup();
        keys
    }
}

/// Maps a stored key-value to the loop keys it concerns.
pub type StoreMapper = Arc<dyn Fn(&KeyValue) -> Vec<Key> + Send + Sync>;

/// A [`Feed`] over a prefix of the store itself, for loops over data the registry does not
/// serve (the catalog's records, leases).
pub struct StoreFeed {
    store: Arc<dyn Store>,
    prefix: String,
    map: StoreMapper,
}

impl std::fmt::Debug for StoreFeed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreFeed").field("prefix", &self.prefix).finish_non_exhaustive()
    }
}

impl StoreFeed {
    /// Every key under `prefix`, mapped by `map`.
    pub fn new(store: Arc<dyn Store>, prefix: impl Into<String>, map: StoreMapper) -> StoreFeed {
        StoreFeed { store, prefix: prefix.into(), map }
    }
}

/// How many keys one page of a store feed's list reads.
const PAGE: usize = 1000;

#[async_trait::async_trait]
impl Feed for StoreFeed {
    async fn list(&self) -> Result<Listed, FeedError> {
        let revision = self.store.revision().await?;
        let mut listed = Listed { revision, items: Vec::new() };
        let mut start = None;
        loop {
            let request = RangeRequest {
                prefix: self.prefix.clone(),
                start: start.take(),
                limit: Some(PAGE + 1),
                revision: Some(revision),
            };
            let mut page = self.store.range(&request).await?;
            let more = page.kvs.len() > PAGE;
            if more {
                start = page.kvs.pop().map(|kv| kv.key);
            }
            for kv in &page.kvs {
                listed.items.push(Item { id: kv.key.clone(), keys: (self.map)(kv) });
            }
            if !more {
                return Ok(listed);
            }
        }
    }

    async fn watch(&self, after: Revision) -> Result<Box<dyn Changes>, FeedError> {
        let watcher = self.store.watch(&self.prefix, after).await?;
        Ok(Box::new(StoreChanges { watcher, map: self.map.clone() }))
    }
}

struct StoreChanges {
    watcher: kayra_store::Watcher,
    map: StoreMapper,
}

#[async_trait::async_trait]
impl Changes for StoreChanges {
    async fn next(&mut self) -> Option<Result<Change, FeedError>> {
        let change = match self.watcher.next_change().await? {
            Ok(change) => change,
            Err(error) => return Some(Err(error.into())),
        };
        Some(Ok(match change {
            kayra_store::Change::Progress(revision) => Change::Progress(revision),
            kayra_store::Change::Event(event) => {
                let item = Item { id: event.kv.key.clone(), keys: (self.map)(&event.kv) };
                let revision = event.kv.mod_revision;
                match event.kind {
                    EventKind::Put => Change::Put { item, revision },
                    EventKind::Delete => Change::Delete { item, revision },
                }
            }
        }))
    }
}

#[cfg(test)]
mod tests;
