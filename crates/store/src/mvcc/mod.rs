//! The multi-version engine behind the in-memory and sled stores.
//!
//! History lives in a [`Backend`](backend::Backend) as one record per key version, keyed by
//! revision; an in-memory index maps each key to its versions, and is rebuilt from the records
//! when a store opens. Writes are serialised under one lock, applied to the backend as one
//! atomic batch, made durable by group commit, and only then acknowledged and published to
//! watchers, in revision order. A housekeeping task expires leases and compacts history beyond
//! the configured bound.

pub mod backend;
mod commit;
mod record;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::ops::Bound;
use std::sync::{Arc, Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard, Weak};
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::watch::{Delivery, WatchSender, watch_channel};
use crate::{
    DEFAULT_MAX_VALUE_SIZE, EngineStatistics, Event, EventKind, KeyValue, Lease, LeaseId, Op, RangeRequest,
    RangeResult, Revision, Store, StoreError, Txn, TxnResult, WatchBatch, Watcher,
};
use backend::{Backend, BatchEntry, MemoryBackend};
use commit::{GroupCommit, Seq};
use record::{Rev, Version};

/// How an engine-backed store behaves.
#[derive(Debug, Clone)]
pub struct Options {
    /// The largest value accepted, in bytes.
    pub max_value_size: usize,
    /// How many revisions of history to keep for watches and old reads; older history is
    /// compacted automatically. Zero keeps everything until [`Store::compact`] is called.
    pub history: Revision,
    /// How many revisions a watcher may have queued before it is cut off as too slow.
    pub watch_buffer: usize,
    /// How long a background write ([`crate::priority`]) waits for a foreground write's flush
    /// before the engine flushes it by itself.
    pub background_flush_delay: Duration,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            max_value_size: DEFAULT_MAX_VALUE_SIZE,
            history: 100_000,
            watch_buffer: 1024,
            background_flush_delay: commit::BACKGROUND_FLUSH_DELAY,
        }
    }
}

/// A store over a [`Backend`]: the in-memory store, and the engine the sled adapter wraps.
#[derive(Debug, Clone)]
pub struct MvccStore {
    inner: Arc<Inner>,
}

struct Inner {
    backend: Arc<dyn Backend>,
    options: Options,
    state: RwLock<State>,
    feed: Mutex<Feed>,
    commit: Arc<GroupCommit>,
    housekeeping: Arc<Notify>,
    statistics: Arc<EngineStatistics>,
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Inner").field("options", &self.options).finish_non_exhaustive()
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        // Lets the housekeeping task notice that the store is gone.
        self.housekeeping.notify_one();
    }
}

struct State {
    index: BTreeMap<String, Vec<Entry>>,
    revision: Revision,
    compacted: Revision,
    leases: HashMap<LeaseId, LeaseState>,
    lease_seq: i64,
}

/// One version of a key, as the index remembers it.
#[derive(Debug, Clone, Copy)]
struct Entry {
    rev: Rev,
    version: Version,
}

struct LeaseState {
    ttl: Duration,
    deadline: Instant,
    keys: BTreeSet<String>,
}

/// Batches waiting for durability, and the watchers they go to once durable.
struct Feed {
    published: Revision,
    pending: VecDeque<(Seq, Arc<WatchBatch>)>,
    subscribers: Vec<Subscriber>,
}

struct Subscriber {
    prefix: String,
    after: Revision,
    sender: WatchSender,
}

/// What one write did, for its caller and its watchers.
struct Written {
    revision: Revision,
    prev: Vec<Option<KeyValue>>,
    seq: Option<Seq>,
}

impl MvccStore {
    /// A store that lives in memory. Must be called inside a Tokio runtime.
    pub fn in_memory(options: Options) -> Result<MvccStore, StoreError> {
        MvccStore::open(Arc::new(MemoryBackend::default()), options)
    }

    /// Opens the store kept in `backend`, rebuilding the index from its records. Must be
    /// called inside a Tokio runtime, which runs the store's housekeeping.
    pub fn open(backend: Arc<dyn Backend>, options: Options) -> Result<MvccStore, StoreError> {
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| {
            StoreError::InvalidArgument("a store must be opened inside a Tokio runtime".to_owned())
        })?;
        let state = load(backend.as_ref())?;
        let housekeeping = Arc::new(Notify::new());
        let feed = Feed { published: state.revision, pending: VecDeque::new(), subscribers: Vec::new() };
        let statistics = Arc::new(EngineStatistics::default());
        let commit = GroupCommit::start(backend.clone(), options.background_flush_delay, statistics.clone())?;
        let inner = Arc::new(Inner {
            backend,
            options,
            state: RwLock::new(state),
            feed: Mutex::new(feed),
            commit,
            housekeeping: housekeeping.clone(),
            statistics,
        });
        let weak = Arc::downgrade(&inner);
        inner.commit.set_publisher(Box::new(move |durable| {
            if let Some(inner) = weak.upgrade() {
                inner.publish(durable);
            }
        }));
        runtime.spawn(housekeep(Arc::downgrade(&inner), housekeeping));
        Ok(MvccStore { inner })
    }
}

/// Reads the metadata, leases and records a backend holds into a fresh state.
fn load(backend: &dyn Backend) -> Result<State, StoreError> {
    let meta = |key: &[u8], name: &str| -> Result<u64, StoreError> {
        let mut value = 0;
        backend.get(key, &mut |bytes| {
            value = record::decode_u64(name, bytes)?;
            Ok(())
        })?;
        Ok(value)
    };
    let compacted = meta(record::COMPACTED_KEY, "the compaction point")?;
    let mut state = State {
        index: BTreeMap::new(),
        // Every write that advances the revision leaves a record at it, unless compaction has
        // since removed it, and then the compaction point is at least as high.
        revision: compacted,
        compacted,
        leases: HashMap::new(),
        lease_seq: meta(record::LEASE_SEQ_KEY, "the lease sequence")? as i64,
    };
    let now = Instant::now();
    backend.scan(&[record::LEASE_TAG], &[record::LEASE_TAG + 1], &mut |key, value| {
        let ttl = Duration::from_secs(record::decode_u64("a lease's TTL", value)?.clamp(1, MAX_LEASE_TTL));
        let lease = LeaseState { ttl, deadline: now + ttl, keys: BTreeSet::new() };
        state.leases.insert(record::lease_from_key(key)?, lease);
        Ok(())
    })?;
    backend.scan(&[record::RECORD_TAG], &[record::RECORD_TAG + 1], &mut |key, value| {
        let rev = Rev::from_key(key)?;
        let record = record::decode(value)?;
        state.revision = state.revision.max(rev.main);
        state.index.entry(record.key).or_default().push(Entry { rev, version: record.version });
        Ok(())
    })?;
    // A compaction interrupted by a crash may have left records it no longer needed.
    for rev in trim(&mut state.index, state.compacted) {
        backend.apply(vec![(rev.key().to_vec(), None)])?;
    }
    for (key, entries) in &state.index {
        if let Some(Entry { version: Version::Live { lease: Some(lease), .. }, .. }) = entries.last()
            && let Some(lease) = state.leases.get_mut(lease)
        {
            lease.keys.insert(key.clone());
        }
    }
    Ok(state)
}

impl Inner {
    fn read(&self) -> RwLockReadGuard<'_, State> {
        self.state.read().expect("store state lock poisoned")
    }

    fn write(&self) -> RwLockWriteGuard<'_, State> {
        self.state.write().expect("store state lock poisoned")
    }

    /// The key's value as of one of its index entries.
    fn load(&self, key: &str, entry: Entry) -> Result<Option<KeyValue>, StoreError> {
        let Version::Live { create_revision, version, lease } = entry.version else {
            return Ok(None);
        };
        let mut value = None;
        self.backend.get(&entry.rev.key(), &mut |bytes| {
            value = Some(record::value(bytes)?);
            Ok(())
        })?;
        let value = value.ok_or_else(|| {
            StoreError::Corrupt(format!("the record of {key:?} at revision {} is missing", entry.rev.main))
        })?;
        Ok(Some(KeyValue {
            key: key.to_owned(),
            value,
            create_revision,
            mod_revision: entry.rev.main,
            version,
            lease,
        }))
    }

    /// The key's value at revision `at`.
    fn visible(&self, state: &State, key: &str, at: Revision) -> Result<Option<KeyValue>, StoreError> {
        match state.index.get(key).and_then(|entries| visible_entry(entries, at)) {
            Some(entry) => self.load(key, entry),
            None => Ok(None),
        }
    }

    /// Applies puts and deletes at one new revision, together with `extra` backend entries.
    /// Nothing is written when no op changes anything and `extra` is empty.
    /// Evaluates `txn`'s compares and, when they hold, writes its ops at a new revision:
    /// answers its result and the sequence of the write to wait for before acknowledging it.
    fn apply_txn(&self, state: &mut State, txn: &Txn) -> Result<(TxnResult, Option<Seq>), StoreError> {
        let mut current = Vec::with_capacity(txn.compares.len());
        let mut holds = true;
        for compare in &txn.compares {
            let kv = self.visible(state, compare.key(), state.revision)?;
            holds &= compare.holds(kv.as_ref());
            current.push(kv);
        }
        if !holds {
            return Ok((TxnResult::Conflict { revision: state.revision, current }, None));
        }
        for op in &txn.ops {
            if let Op::Put { lease: Some(lease), .. } = op
                && !state.leases.contains_key(lease)
            {
                return Err(StoreError::LeaseNotFound(*lease));
            }
        }
        let written = self.write_ops(state, &txn.ops, Vec::new())?;
        Ok((TxnResult::Applied { revision: written.revision, prev: written.prev }, written.seq))
    }

    fn write_ops(
        &self,
        state: &mut State,
        ops: &[Op],
        mut extra: Vec<BatchEntry>,
    ) -> Result<Written, StoreError> {
        let main = state.revision + 1;
        let mut batch = Vec::with_capacity(ops.len() + extra.len() + 1);
        let mut prev = Vec::with_capacity(ops.len());
        let mut events = Vec::with_capacity(ops.len());
        let mut entries = Vec::with_capacity(ops.len());
        for op in ops {
            let current = self.visible(state, op.key(), state.revision)?;
            let rev = Rev { main, sub: entries.len() as u32 };
            let (version, kv) = match op {
                Op::Put { key, value, lease } => {
                    let create_revision = current.as_ref().map_or(main, |kv| kv.create_revision);
                    let version = current.as_ref().map_or(1, |kv| kv.version + 1);
                    let live = Version::Live { create_revision, version, lease: *lease };
                    batch.push((rev.key().to_vec(), Some(record::encode(key, live, value))));
                    let kv = KeyValue {
                        key: key.clone(),
                        value: value.clone(),
                        create_revision,
                        mod_revision: main,
                        version,
                        lease: *lease,
                    };
                    (live, kv)
                }
                Op::Delete { key } => {
                    if current.is_none() {
                        prev.push(None);
                        continue;
                    }
                    batch.push((rev.key().to_vec(), Some(record::encode(key, Version::Tombstone, &[]))));
                    (Version::Tombstone, tombstone(key, main))
                }
            };
            let kind = if matches!(op, Op::Put { .. }) { EventKind::Put } else { EventKind::Delete };
            events.push(Event { kind, kv, prev: current.clone() });
            entries.push((op.key(), Entry { rev, version }, current.and_then(|kv| kv.lease)));
            prev.push(events.last().and_then(|event| event.prev.clone()));
        }
        if entries.is_empty() && extra.is_empty() {
            return Ok(Written { revision: state.revision, prev, seq: None });
        }
        let revision = if entries.is_empty() { state.revision } else { main };
        batch.append(&mut extra);
        self.backend.apply(batch)?;

        for (key, entry, old_lease) in entries {
            if let Some(lease) = old_lease.and_then(|lease| state.leases.get_mut(&lease)) {
                lease.keys.remove(key);
            }
            if let Version::Live { lease: Some(lease), .. } = entry.version
                && let Some(lease) = state.leases.get_mut(&lease)
            {
                lease.keys.insert(key.to_owned());
            }
            state.index.entry(key.to_owned()).or_default().push(entry);
        }
        state.revision = revision;
        let seq = self.commit.next_seq();
        if !events.is_empty() {
            let batch = Arc::new(WatchBatch { revision, events });
            self.feed.lock().expect("watch feed lock poisoned").pending.push_back((seq, batch));
        }
        let history = self.options.history;
        if history > 0 && state.revision - state.compacted > history + history / 8 {
            self.housekeeping.notify_one();
        }
        Ok(Written { revision, prev, seq: Some(seq) })
    }

    /// Waits until the write is durable, then hands every durable batch to the watchers.
    async fn finish(&self, seq: Option<Seq>) -> Result<(), StoreError> {
        let Some(seq) = seq else { return Ok(()) };
        let durable = self.commit.wait(seq).await?;
        self.publish(durable);
        Ok(())
    }

    fn publish(&self, durable: Seq) {
        let mut feed = self.feed.lock().expect("watch feed lock poisoned");
        let feed = &mut *feed;
        while let Some((seq, _)) = feed.pending.front()
            && *seq <= durable
        {
            let (_, batch) = feed.pending.pop_front().expect("front exists, checked above");
            feed.published = batch.revision;
            feed.subscribers.retain(|subscriber| deliver(subscriber, &batch) == Delivery::Queued);
        }
    }

    /// Every event under `prefix` in `(after, upto]`, read back from the backend's records.
    fn history(
        &self,
        state: &State,
        prefix: &str,
        after: Revision,
        upto: Revision,
    ) -> Result<Vec<WatchBatch>, StoreError> {
        let mut batches: Vec<WatchBatch> = Vec::new();
        if after >= upto {
            // Nothing published lies after `after` yet: the live feed brings the rest.
            return Ok(batches);
        }
        let from = Rev { main: after + 1, sub: 0 }.key();
        let to = Rev { main: upto + 1, sub: 0 }.key();
        self.backend.scan(&from, &to, &mut |key, value| {
            let rev = Rev::from_key(key)?;
            let record = record::decode(value)?;
            if !record.key.starts_with(prefix) {
                return Ok(());
            }
            let entries = state.index.get(&record.key).map(Vec::as_slice).unwrap_or_default();
            let before = entries.partition_point(|entry| entry.rev < rev);
            let prev = match before.checked_sub(1) {
                Some(at) => self.load(&record.key, entries[at])?,
                None => None,
            };
            let event = match record.version {
                Version::Live { create_revision, version, lease } => Event {
                    kind: EventKind::Put,
                    kv: KeyValue {
                        key: record.key,
                        value: record.value,
                        create_revision,
                        mod_revision: rev.main,
                        version,
                        lease,
                    },
                    prev,
                },
                Version::Tombstone => {
                    Event { kind: EventKind::Delete, kv: tombstone(&record.key, rev.main), prev }
                }
            };
            match batches.last_mut() {
                Some(batch) if batch.revision == rev.main => batch.events.push(event),
                _ => batches.push(WatchBatch { revision: rev.main, events: vec![event] }),
            }
            Ok(())
        })?;
        // A watcher that starts behind learns that it has reached `upto` even when nothing
        // under its prefix changed since `after`: a quiet prefix would otherwise report no
        // progress until the next write anywhere.
        if batches.last().is_none_or(|batch| batch.revision < upto) {
            batches.push(WatchBatch { revision: upto, events: Vec::new() });
        }
        Ok(batches)
    }

    /// Drops the history no read at or after `revision` needs. The compaction point is
    /// recorded first and the records removed after, one by one: a crash in between leaves
    /// records that the next open removes.
    fn compact_locked(&self, state: &mut State, revision: Revision) -> Result<Seq, StoreError> {
        self.backend.apply(vec![(record::COMPACTED_KEY.to_vec(), Some(revision.to_be_bytes().to_vec()))])?;
        state.compacted = revision;
        for rev in trim(&mut state.index, revision) {
            self.backend.apply(vec![(rev.key().to_vec(), None)])?;
        }
        Ok(self.commit.next_seq())
    }

    /// Revokes the lease, deleting its keys at one revision.
    fn revoke_locked(&self, state: &mut State, lease: LeaseId) -> Result<Written, StoreError> {
        let keys = match state.leases.get(&lease) {
            Some(found) => found.keys.iter().cloned().map(Op::delete).collect::<Vec<_>>(),
            None => return Err(StoreError::LeaseNotFound(lease)),
        };
        let written = self.write_ops(state, &keys, vec![(record::lease_key(lease).to_vec(), None)])?;
        state.leases.remove(&lease);
        Ok(written)
    }

    /// Revokes expired leases and compacts history past the bound; answers when to look again.
    async fn housekeep(&self) -> Option<Instant> {
        let now = Instant::now();
        let mut failed = false;
        let expired: Vec<LeaseId> = {
            let state = self.read();
            state.leases.iter().filter(|(_, lease)| lease.deadline <= now).map(|(id, _)| *id).collect()
        };
        for lease in expired {
            let written = {
                let mut state = self.write();
                match state.leases.get(&lease) {
                    Some(found) if found.deadline <= Instant::now() => self.revoke_locked(&mut state, lease),
                    _ => continue,
                }
            };
            match written {
                Ok(written) => {
                    if let Err(error) = self.finish(written.seq).await {
                        tracing::warn!(%error, %lease, "expiring a lease did not become durable");
                    }
                }
                Err(error) => {
                    failed = true;
                    tracing::warn!(%error, %lease, "expiring a lease failed; retrying in a second");
                }
            }
        }
        let history = self.options.history;
        let compaction = {
            let mut state = self.write();
            if history > 0 && state.revision - state.compacted > history + history / 8 {
                let target = state.revision - history;
                Some(self.compact_locked(&mut state, target))
            } else {
                None
            }
        };
        match compaction {
            Some(Ok(seq)) => {
                self.statistics.compacted_automatically();
                if let Err(error) = self.finish(Some(seq)).await {
                    tracing::warn!(%error, "compaction did not become durable");
                }
            }
            Some(Err(error)) => tracing::warn!(%error, "compacting history failed"),
            None => {}
        }
        let next = self.read().leases.values().map(|lease| lease.deadline).min();
        // A lease whose revocation failed is past its deadline: retry after a pause, not at once.
        if failed { next.map(|next| next.max(Instant::now() + Duration::from_secs(1))) } else { next }
    }
}

/// The housekeeping loop; ends when the store is dropped.
async fn housekeep(inner: Weak<Inner>, wake: Arc<Notify>) {
    loop {
        let Some(store) = inner.upgrade() else { return };
        let next = store.housekeep().await;
        drop(store);
        match next {
            Some(deadline) => {
                tokio::select! {
                    () = tokio::time::sleep_until(deadline) => {}
                    () = wake.notified() => {}
                }
            }
            None => wake.notified().await,
        }
    }
}

/// Queues a batch for one watcher, keeping only the events under its prefix; a batch with none
/// of them still reports progress.
fn deliver(subscriber: &Subscriber, batch: &Arc<WatchBatch>) -> Delivery {
    if batch.revision <= subscriber.after {
        return Delivery::Queued;
    }
    let selected = |event: &&Event| event.kv.key.starts_with(&subscriber.prefix);
    if batch.events.iter().all(|event| selected(&event)) {
        return subscriber.sender.offer(batch.clone());
    }
    // Nothing under the prefix changed: an empty batch tells the watcher how far it is.
    let events: Vec<Event> = batch.events.iter().filter(selected).cloned().collect();
    subscriber.sender.offer(Arc::new(WatchBatch { revision: batch.revision, events }))
}

/// Removes from the index every entry no read at or after `revision` needs: for each key,
/// everything before its last entry at or before `revision`, and that entry too when it is a
/// deletion. Answers the removed entries' records.
fn trim(index: &mut BTreeMap<String, Vec<Entry>>, revision: Revision) -> Vec<Rev> {
    let mut removed = Vec::new();
    index.retain(|_, entries| {
        let upto = entries.partition_point(|entry| entry.rev.main <= revision);
        if let Some(latest) = upto.checked_sub(1) {
            let drop = match entries[latest].version {
                Version::Tombstone => upto,
                Version::Live { .. } => latest,
            };
            removed.extend(entries.drain(..drop).map(|entry| entry.rev));
        }
        !entries.is_empty()
    });
    removed
}

/// The entry visible at revision `at`: the last one written at or before it, unless deleted.
fn visible_entry(entries: &[Entry], at: Revision) -> Option<Entry> {
    let upto = entries.partition_point(|entry| entry.rev.main <= at);
    let entry = entries[..upto].last()?;
    matches!(entry.version, Version::Live { .. }).then_some(*entry)
}

fn tombstone(key: &str, revision: Revision) -> KeyValue {
    KeyValue {
        key: key.to_owned(),
        value: Vec::new(),
        create_revision: 0,
        mod_revision: revision,
        version: 0,
        lease: None,
    }
}

/// Resolves a requested read revision against the retained history.
fn read_revision(state: &State, requested: Option<Revision>) -> Result<Revision, StoreError> {
    match requested {
        None | Some(0) => Ok(state.revision),
        Some(requested) if requested > state.revision => {
            Err(StoreError::FutureRevision { requested, current: state.revision })
        }
        Some(requested) if requested < state.compacted => {
            Err(StoreError::Compacted { requested, compacted: state.compacted })
        }
        Some(requested) => Ok(requested),
    }
}

/// Lease TTLs are whole seconds, at least one.
fn whole_seconds(ttl: Duration) -> Duration {
    let seconds = ttl.as_secs().saturating_add(u64::from(ttl.subsec_nanos() > 0));
    Duration::from_secs(seconds.clamp(1, MAX_LEASE_TTL))
}

/// The longest lease, as etcd caps it (about 285 years).
const MAX_LEASE_TTL: u64 = 9_000_000_000;

#[async_trait]
impl Store for MvccStore {
    async fn get(&self, key: &str) -> Result<Option<KeyValue>, StoreError> {
        let state = self.inner.read();
        self.inner.visible(&state, key, state.revision)
    }

    async fn range(&self, request: &RangeRequest) -> Result<RangeResult, StoreError> {
        request.validate()?;
        let state = self.inner.read();
        let at = read_revision(&state, request.revision)?;
        let start = request.start.as_deref().unwrap_or(&request.prefix);
        let limit = request.limit.filter(|limit| *limit > 0).unwrap_or(usize::MAX);
        let mut kvs = Vec::new();
        let mut count = 0;
        let keys = state.index.range::<str, _>((Bound::Included(start), Bound::Unbounded));
        for (key, entries) in keys.take_while(|(key, _)| key.starts_with(&request.prefix)) {
            let Some(entry) = visible_entry(entries, at) else { continue };
            count += 1;
            if kvs.len() < limit {
                kvs.extend(self.inner.load(key, entry)?);
            }
        }
        Ok(RangeResult { more: count > kvs.len(), kvs, count, revision: at })
    }

    async fn txn(&self, txn: Txn) -> Result<TxnResult, StoreError> {
        txn.validate(self.inner.options.max_value_size)?;
        let (result, seq) = {
            let mut state = self.inner.write();
            self.inner.apply_txn(&mut state, &txn)?
        };
        self.inner.finish(seq).await?;
        Ok(result)
    }

    /// Applies them in the order given, each under a hold of the lock of its own (so that
    /// another writer waits for one of them at most, not for all), and waits for one flush
    /// that covers them all.
    async fn txn_all(&self, txns: Vec<Txn>) -> Vec<Result<TxnResult, StoreError>> {
        let mut last = None;
        let mut results: Vec<Result<TxnResult, StoreError>> = txns
            .iter()
            .map(|txn| {
                txn.validate(self.inner.options.max_value_size)?;
                let (result, seq) = self.inner.apply_txn(&mut self.inner.write(), txn)?;
                last = seq.or(last);
                Ok(result)
            })
            .collect();
        if let Err(error) = self.inner.finish(last).await {
            // Each applied transaction shares the flush that failed: each answers its error.
            for result in results.iter_mut().filter(|result| result.is_ok()) {
                *result = Err(match &error {
                    StoreError::Closed => StoreError::Closed,
                    other => StoreError::Engine {
                        action: "make the transactions durable".to_owned(),
                        source: other.to_string().into(),
                    },
                });
            }
        }
        results
    }

    async fn watch(&self, prefix: &str, after: Revision) -> Result<Watcher, StoreError> {
        let state = self.inner.read();
        if after < state.compacted {
            return Err(StoreError::Compacted { requested: after, compacted: state.compacted });
        }
        if after > state.revision {
            return Err(StoreError::FutureRevision { requested: after, current: state.revision });
        }
        let mut feed = self.inner.feed.lock().expect("watch feed lock poisoned");
        // Watchers dropped on a quiet prefix are noticed here, as well as on delivery.
        feed.subscribers.retain(|subscriber| !subscriber.sender.is_closed());
        let backlog = self.inner.history(&state, prefix, after, feed.published)?;
        let (sender, watcher) = watch_channel(self.inner.options.watch_buffer, after, backlog);
        feed.subscribers.push(Subscriber { prefix: prefix.to_owned(), after, sender });
        Ok(watcher)
    }

    async fn compact(&self, revision: Revision) -> Result<(), StoreError> {
        let seq = {
            let mut state = self.inner.write();
            if revision > state.revision {
                return Err(StoreError::FutureRevision { requested: revision, current: state.revision });
            }
            if revision <= state.compacted {
                return Err(StoreError::Compacted { requested: revision, compacted: state.compacted });
            }
            self.inner.compact_locked(&mut state, revision)?
        };
        self.inner.finish(Some(seq)).await
    }

    async fn revision(&self) -> Result<Revision, StoreError> {
        Ok(self.inner.read().revision)
    }

    async fn grant_lease(&self, ttl: Duration) -> Result<Lease, StoreError> {
        let ttl = whole_seconds(ttl);
        let (lease, seq) = {
            let mut state = self.inner.write();
            let lease = LeaseId(state.lease_seq + 1);
            // The sequence first: a crash between the two writes only skips an id.
            let seq = (record::LEASE_SEQ_KEY.to_vec(), Some(lease.0.to_be_bytes().to_vec()));
            self.inner.backend.apply(vec![seq])?;
            let ttl_bytes = ttl.as_secs().to_be_bytes().to_vec();
            self.inner.backend.apply(vec![(record::lease_key(lease).to_vec(), Some(ttl_bytes))])?;
            state.lease_seq = lease.0;
            let deadline = Instant::now() + ttl;
            state.leases.insert(lease, LeaseState { ttl, deadline, keys: BTreeSet::new() });
            (lease, self.inner.commit.next_seq())
        };
        self.inner.housekeeping.notify_one();
        self.inner.finish(Some(seq)).await?;
        Ok(Lease { id: lease, ttl })
    }

    async fn keep_alive(&self, lease: LeaseId) -> Result<Duration, StoreError> {
        let mut state = self.inner.write();
        let found = state.leases.get_mut(&lease).ok_or(StoreError::LeaseNotFound(lease))?;
        found.deadline = Instant::now() + found.ttl;
        Ok(found.ttl)
    }

    async fn revoke_lease(&self, lease: LeaseId) -> Result<(), StoreError> {
        let written = {
            let mut state = self.inner.write();
            self.inner.revoke_locked(&mut state, lease)?
        };
        self.inner.finish(written.seq).await
    }

    fn engine_statistics(&self) -> Option<Arc<EngineStatistics>> {
        Some(self.inner.statistics.clone())
    }
}
