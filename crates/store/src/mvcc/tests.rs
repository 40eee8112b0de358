//! Engine behaviour the conformance suite cannot see: the record layout, automatic compaction,
//! lease expiry on a paused clock, and reopening a backend.

use std::sync::Arc;
use std::time::Duration;

use super::backend::{Backend, MemoryBackend};
use super::record::{self, HEADER_LEN, Rev, Version, decode, encode};
use super::{MvccStore, Options};
use crate::{LeaseId, Op, RangeRequest, Revision, Store, StoreError, Txn};

#[tokio::test]
async fn history_beyond_the_bound_is_compacted_automatically() {
    let store = MvccStore::in_memory(Options { history: 16, ..Options::default() }).unwrap();
    for i in 0..100u32 {
        store.put(&format!("k{}", i % 3), i.to_be_bytes().to_vec()).await.unwrap();
    }
    tokio::time::timeout(Duration::from_secs(5), async {
        while !matches!(store.watch("", 10).await, Err(StoreError::Compacted { .. })) {
            tokio::task::yield_now().await;
        }
    })
    .await
    .expect("housekeeping compacts old history");
    let compacted = store.inner.read().compacted;
    assert!(
        (100 - 16 - 2..=100 - 16).contains(&compacted),
        "kept about 16 revisions, compacted at {compacted}"
    );
    assert!(store.watch("", 100 - 16).await.is_ok(), "the retained history stays watchable");
    assert_eq!(store.range(&RangeRequest::prefix("k")).await.unwrap().kvs.len(), 3);
    let statistics = store.engine_statistics().expect("the engine counts its own compactions");
    let automatic = statistics.automatic_compactions();
    assert!(automatic >= 1, "the housekeeping compaction is counted");
    store.compact(compacted + 1).await.unwrap();
    assert_eq!(
        statistics.automatic_compactions(),
        automatic,
        "a compaction asked for is the asker's to count"
    );
}

#[tokio::test(start_paused = true)]
async fn leases_expire_on_the_clock_and_keep_alive_defers_them() {
    let store = MvccStore::in_memory(Options::default()).unwrap();
    let lease = store.grant_lease(Duration::from_millis(1500)).await.unwrap();
    assert_eq!(lease.ttl, Duration::from_secs(2), "TTLs round up to whole seconds");
    let op = Op::Put { key: "node/a".into(), value: b"up".to_vec(), lease: Some(lease.id) };
    store.txn(Txn { compares: vec![], ops: vec![op] }).await.unwrap();
    tokio::time::sleep(Duration::from_millis(1900)).await;
    store.keep_alive(lease.id).await.unwrap();
    tokio::time::sleep(Duration::from_millis(1900)).await;
    assert!(store.get("node/a").await.unwrap().is_some());
    tokio::time::sleep(Duration::from_millis(200)).await;
    tokio::task::yield_now().await;
    assert_eq!(store.get("node/a").await.unwrap(), None);
    assert!(matches!(store.keep_alive(lease.id).await, Err(StoreError::LeaseNotFound(_))));
}

#[tokio::test]
async fn reopening_a_backend_restores_keys_history_and_leases() {
    let backend: Arc<dyn Backend> = Arc::new(MemoryBackend::default());
    let (lease, written) = {
        let store = MvccStore::open(backend.clone(), Options::default()).unwrap();
        let lease = store.grant_lease(Duration::from_secs(30)).await.unwrap();
        store.put("a", b"1".to_vec()).await.unwrap();
        let op = Op::Put { key: "b".into(), value: b"2".to_vec(), lease: Some(lease.id) };
        let written = store.txn(Txn { compares: vec![], ops: vec![op] }).await.unwrap().revision();
        store.put("a", b"3".to_vec()).await.unwrap();
        (lease, written)
    };
    let store = MvccStore::open(backend, Options::default()).unwrap();
    assert_eq!(store.revision().await.unwrap(), written + 1);
    assert_eq!(store.get("a").await.unwrap().unwrap().version, 2);
    let mut watcher = store.watch("", written).await.unwrap();
    assert_eq!(watcher.next().await.unwrap().unwrap().prev.unwrap().value, b"1");
    store.revoke_lease(lease.id).await.unwrap();
    assert_eq!(store.get("b").await.unwrap(), None, "the lease still owned its key after reopening");
    let next = store.grant_lease(Duration::from_secs(1)).await.unwrap();
    assert!(next.id > lease.id, "lease ids are never reused");
}

#[tokio::test]
async fn damaged_records_are_reported_not_panicked_on() {
    let backend = Arc::new(MemoryBackend::default());
    backend.apply(vec![(b"r\0\0\0\0\0\0\0\x01\0\0\0\0".to_vec(), Some(b"short".to_vec()))]).unwrap();
    match MvccStore::open(backend, Options::default()) {
        Err(StoreError::Corrupt(message)) => assert!(message.contains("malformed record"), "{message}"),
        other => panic!("a damaged record must fail the open, got {other:?}"),
    }
}

#[test]
fn opening_outside_a_runtime_is_an_error() {
    assert!(matches!(MvccStore::in_memory(Options::default()), Err(StoreError::InvalidArgument(_))));
}

#[tokio::test]
async fn a_compaction_cut_short_by_a_crash_is_finished_on_open() {
    let backend = Arc::new(MemoryBackend::default());
    {
        let store = MvccStore::open(backend.clone(), Options::default()).unwrap();
        for value in ["1", "2", "3"] {
            store.put("a", value.as_bytes().to_vec()).await.unwrap();
        }
        store.put("b", b"x".to_vec()).await.unwrap();
    }
    // What a crash leaves after the compaction point was written but before any record went.
    backend.apply(vec![(record::COMPACTED_KEY.to_vec(), Some(3u64.to_be_bytes().to_vec()))]).unwrap();
    let store = MvccStore::open(backend.clone(), Options::default()).unwrap();
    let mut records = 0;
    backend
        .scan(b"r", b"s", &mut |_, _| {
            records += 1;
            Ok(())
        })
        .unwrap();
    assert_eq!(records, 2, "only a@3 and b@4 are still needed");
    let at = RangeRequest { revision: Some(3), ..RangeRequest::prefix("") };
    assert_eq!(store.range(&at).await.unwrap().kvs[0].value, b"3");
    let before = RangeRequest { revision: Some(2), ..RangeRequest::prefix("") };
    assert!(matches!(store.range(&before).await, Err(StoreError::Compacted { requested: 2, compacted: 3 })));
}

#[tokio::test]
async fn the_revision_survives_compacting_away_every_record() {
    let backend = Arc::new(MemoryBackend::default());
    {
        let store = MvccStore::open(backend.clone(), Options::default()).unwrap();
        store.put("a", b"1".to_vec()).await.unwrap();
        let deleted =
            store.txn(Txn { compares: vec![], ops: vec![Op::delete("a")] }).await.unwrap().revision();
        store.compact(deleted).await.unwrap();
    }
    let store = MvccStore::open(backend, Options::default()).unwrap();
    assert_eq!(store.revision().await.unwrap(), 2, "revisions never move back");
    assert_eq!(store.put("a", b"again".to_vec()).await.unwrap(), 3);
}

#[test]
fn records_round_trip() {
    let cases = [
        ("a", Version::Live { create_revision: 3, version: 7, lease: None }, &b"v"[..]),
        ("/registry/x", Version::Live { create_revision: 1, version: 1, lease: Some(LeaseId(-5)) }, b""),
        ("gone", Version::Tombstone, b""),
    ];
    for (key, version, value) in cases {
        let record = decode(&encode(key, version, value)).expect("a fresh record decodes");
        assert_eq!((record.key.as_str(), record.version, record.value.as_slice()), (key, version, value));
    }
}

#[test]
fn truncated_records_are_corrupt_not_panics() {
    let bytes = encode("key", Version::Live { create_revision: 1, version: 1, lease: None }, b"value");
    for len in 0..HEADER_LEN + 3 {
        assert!(matches!(decode(&bytes[..len]), Err(StoreError::Corrupt(_))), "length {len}");
    }
}

#[test]
fn record_keys_sort_by_revision() {
    let revs = [Rev { main: 1, sub: 2 }, Rev { main: 2, sub: 0 }, Rev { main: 256, sub: 0 }];
    for pair in revs.windows(2) {
        assert!(pair[0].key() < pair[1].key());
        assert_eq!(Rev::from_key(&pair[0].key()).expect("decodes"), pair[0]);
    }
}

/// A persistent-looking backend whose flushes wait until the test lets them through.
struct GatedBackend {
    inner: MemoryBackend,
    gate: std::sync::Mutex<std::sync::mpsc::Receiver<()>>,
    /// Flushes begun (waiting at the gate or done).
    begun: std::sync::atomic::AtomicUsize,
    flushes: std::sync::atomic::AtomicUsize,
    /// The name of the thread each flush ran on.
    flushed_on: std::sync::Mutex<Vec<String>>,
}

impl Backend for GatedBackend {
    fn get(&self, key: &[u8], read: &mut super::backend::Reader<'_>) -> Result<bool, StoreError> {
        self.inner.get(key, read)
    }
    fn scan(
        &self,
        from: &[u8],
        to: &[u8],
        visit: &mut super::backend::Visitor<'_>,
    ) -> Result<(), StoreError> {
        self.inner.scan(from, to, visit)
    }
    fn apply(&self, batch: Vec<super::backend::BatchEntry>) -> Result<(), StoreError> {
        self.inner.apply(batch)
    }
    fn flush(&self) -> Result<(), StoreError> {
        self.begun.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let _ = self.gate.lock().unwrap().recv_timeout(Duration::from_secs(10));
        self.flushes.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let thread = std::thread::current().name().unwrap_or_default().to_owned();
        self.flushed_on.lock().unwrap().push(thread);
        Ok(())
    }
    fn is_persistent(&self) -> bool {
        true
    }
}

fn gated() -> (Arc<GatedBackend>, std::sync::mpsc::Sender<()>) {
    let (open, gate) = std::sync::mpsc::channel();
    let backend = Arc::new(GatedBackend {
        inner: MemoryBackend::default(),
        gate: std::sync::Mutex::new(gate),
        begun: std::sync::atomic::AtomicUsize::new(0),
        flushes: std::sync::atomic::AtomicUsize::new(0),
        flushed_on: std::sync::Mutex::default(),
    });
    (backend, open)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watching_at_a_revision_not_yet_durable_neither_panics_nor_skips() {
    let (backend, open) = gated();
    let store = MvccStore::open(backend.clone(), Options::default()).unwrap();
    let writer = {
        let store = store.clone();
        tokio::spawn(async move { store.put("k", b"v".to_vec()).await })
    };
    while store.revision().await.unwrap() == 0 {
        tokio::task::yield_now().await;
    }
    // Revision 1 is applied but not durable, so not yet published to watchers.
    let mut from_zero = store.watch("", 0).await.unwrap();
    let mut from_one = store.watch("", 1).await.unwrap();
    open.send(()).unwrap();
    assert_eq!(writer.await.unwrap().unwrap(), 1);
    let event =
        tokio::time::timeout(Duration::from_secs(5), from_zero.next()).await.unwrap().unwrap().unwrap();
    assert_eq!(event.revision(), 1);
    open.send(()).unwrap();
    store.put("k", b"w".to_vec()).await.unwrap();
    let event =
        tokio::time::timeout(Duration::from_secs(5), from_one.next()).await.unwrap().unwrap().unwrap();
    assert_eq!(event.revision(), 2, "a watch after 1 starts at 2");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn while_a_flush_waits_for_the_disk_every_runtime_worker_keeps_serving() {
    let (backend, open) = gated();
    let store = MvccStore::open(backend.clone(), Options::default()).unwrap();
    let writer = {
        let store = store.clone();
        tokio::spawn(async move { store.put("k", b"v".to_vec()).await })
    };
    while backend.begun.load(std::sync::atomic::Ordering::SeqCst) == 0 {
        tokio::task::yield_now().await;
    }
    // The flush is held at the gate. Two tasks that can only finish together, each holding
    // its worker until the other runs, need both workers.
    let arrived = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let meet = |arrived: Arc<std::sync::atomic::AtomicUsize>| async move {
        arrived.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while arrived.load(std::sync::atomic::Ordering::SeqCst) < 2 {
            assert!(std::time::Instant::now() < deadline, "a worker was held by the flush");
            std::thread::yield_now();
        }
    };
    let (first, second) = (tokio::spawn(meet(arrived.clone())), tokio::spawn(meet(arrived.clone())));
    let met = tokio::try_join!(first, second);
    open.send(()).unwrap();
    met.expect("both workers served while the flush waited");
    assert_eq!(writer.await.unwrap().unwrap(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_whose_writer_went_away_still_becomes_durable_and_visible() {
    let (backend, open) = gated();
    let store = MvccStore::open(backend.clone(), Options::default()).unwrap();
    let mut watcher = store.watch("", 0).await.unwrap();
    let first = {
        let store = store.clone();
        tokio::spawn(async move { store.put("a", b"1".to_vec()).await })
    };
    while backend.begun.load(std::sync::atomic::Ordering::SeqCst) < 1 {
        tokio::task::yield_now().await;
    }
    // The second write is applied while the first flush is under way; then its writer goes.
    let second = {
        let store = store.clone();
        tokio::spawn(async move { store.put("b", b"2".to_vec()).await })
    };
    while store.revision().await.unwrap() < 2 {
        tokio::task::yield_now().await;
    }
    second.abort();
    open.send(()).unwrap();
    first.await.unwrap().unwrap();
    open.send(()).unwrap();
    for revision in [1, 2] {
        let event = tokio::time::timeout(Duration::from_secs(5), watcher.next())
            .await
            .expect("published")
            .unwrap()
            .unwrap();
        assert_eq!(event.revision(), revision);
    }
    assert!(backend.flushes.load(std::sync::atomic::Ordering::SeqCst) >= 2, "the orphaned write was flushed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_commit_counts_every_write_it_made_durable_together() {
    let (backend, open) = gated();
    let store = MvccStore::open(backend.clone(), Options::default()).unwrap();
    let statistics = store.engine_statistics().expect("the engine counts its group commits");
    let put = |key: String| {
        let store = store.clone();
        tokio::spawn(async move { store.put(&key, b"v".to_vec()).await })
    };
    let first = put("first".to_owned());
    while backend.begun.load(std::sync::atomic::Ordering::SeqCst) < 1 {
        tokio::task::yield_now().await;
    }
    // Five writers arrive while the first flush is under way: the next flush carries them all.
    let waiting: Vec<_> = (0..5).map(|i| put(format!("k{i}"))).collect();
    while store.revision().await.unwrap() < 6 {
        tokio::task::yield_now().await;
    }
    open.send(()).unwrap();
    first.await.unwrap().unwrap();
    open.send(()).unwrap();
    for writer in waiting {
        writer.await.unwrap().unwrap();
    }
    let batches = statistics.commit_batches();
    assert_eq!((batches.commits, batches.writes), (2, 6), "{batches:?}");
    assert_eq!(batches.buckets[0], (Some(1), 1), "the first write went alone: {batches:?}");
    assert_eq!(batches.buckets[3], (Some(8), 1), "the five went together: {batches:?}");
    assert_eq!(backend.flushes.load(std::sync::atomic::Ordering::SeqCst), 2, "one flush each");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transactions_sent_together_share_one_flush() {
    let (backend, open) = gated();
    let store = MvccStore::open(backend.clone(), Options::default()).unwrap();
    let txns = (0..10).map(|i| Txn { compares: vec![], ops: vec![Op::put(format!("k{i}"), "v")] }).collect();
    let sent = {
        let store = store.clone();
        tokio::spawn(async move { store.txn_all(txns).await })
    };
    open.send(()).unwrap();
    let results = sent.await.unwrap();
    let revisions: Vec<Revision> = results.into_iter().map(|result| result.unwrap().revision()).collect();
    assert_eq!(
        revisions,
        (1..=10).collect::<Vec<_>>(),
        "applied in the order sent, each at its own revision"
    );
    assert_eq!(backend.flushes.load(std::sync::atomic::Ordering::SeqCst), 1, "one flush for all ten");
}

/// A runtime whose one thread writes in the background, as the control loops' runtime does.
fn background_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("background-writer")
        .on_thread_start(crate::priority::mark_thread_background)
        .enable_all()
        .build()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_background_write_starts_no_flush_and_rides_the_next_foreground_one() {
    let (backend, open) = gated();
    // The committer would flush the background write only after a minute.
    let options = Options { background_flush_delay: Duration::from_secs(60), ..Options::default() };
    let store = MvccStore::open(backend.clone(), options).unwrap();
    let statistics = store.engine_statistics().expect("the engine counts its group commits");
    let background = background_runtime();
    let follow_up = {
        let store = store.clone();
        background.spawn(async move { store.put("status", b"Unschedulable".to_vec()).await })
    };
    while store.revision().await.unwrap() < 1 {
        tokio::task::yield_now().await;
    }
    // One flush may pass the gate: the user's write leads it, and it carries both writes.
    open.send(()).unwrap();
    store.put("user", b"v".to_vec()).await.unwrap();
    let follow_up = tokio::time::timeout(Duration::from_secs(30), follow_up).await;
    assert_eq!(follow_up.expect("the background write was acknowledged").unwrap().unwrap(), 1);
    let batches = statistics.commit_batches();
    assert_eq!((batches.commits, batches.writes), (1, 2), "one flush made both durable: {batches:?}");
    let flushed_on = backend.flushed_on.lock().unwrap().clone();
    assert_eq!(flushed_on.len(), 1, "{flushed_on:?}");
    assert_ne!(flushed_on[0], "background-writer", "the background write led no flush");
    background.shutdown_background();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_background_write_alone_is_flushed_by_the_committer_after_its_delay() {
    let (backend, open) = gated();
    let delay = Duration::from_millis(50);
    let store =
        MvccStore::open(backend.clone(), Options { background_flush_delay: delay, ..Options::default() })
            .unwrap();
    let mut watcher = store.watch("", 0).await.unwrap();
    open.send(()).unwrap();
    let background = background_runtime();
    let started = std::time::Instant::now();
    let follow_up = {
        let store = store.clone();
        background.spawn(async move { store.put("status", b"Unschedulable".to_vec()).await })
    };
    let follow_up = tokio::time::timeout(Duration::from_secs(30), follow_up).await;
    assert_eq!(follow_up.expect("the background write was acknowledged").unwrap().unwrap(), 1);
    assert!(started.elapsed() >= delay, "acknowledged after {:?}, before the delay", started.elapsed());
    assert_eq!(*backend.flushed_on.lock().unwrap(), ["kayra-commit"], "the committer flushed it");
    let event = tokio::time::timeout(Duration::from_secs(5), watcher.next()).await.unwrap().unwrap().unwrap();
    assert_eq!(event.revision(), 1, "watchers see the background write once durable");
    background.shutdown_background();
}

#[tokio::test]
async fn a_volatile_engine_counts_no_group_commit() {
    let store = MvccStore::in_memory(Options::default()).unwrap();
    store.put("k", b"v".to_vec()).await.unwrap();
    let batches = store.engine_statistics().expect("counted").commit_batches();
    assert_eq!((batches.commits, batches.writes), (0, 0), "nothing is flushed in memory");
}

#[tokio::test]
async fn absurd_lease_ttls_are_capped_not_panicked_on() {
    let store = MvccStore::in_memory(Options::default()).unwrap();
    let lease = store.grant_lease(Duration::MAX).await.unwrap();
    assert_eq!(lease.ttl, Duration::from_secs(9_000_000_000));
    assert_eq!(store.keep_alive(lease.id).await.unwrap(), lease.ttl);
}

#[tokio::test]
async fn compares_at_revision_zero_are_refused() {
    let store = MvccStore::in_memory(Options::default()).unwrap();
    let txn = Txn { compares: vec![crate::Compare::ModifiedAt("k".into(), 0)], ops: vec![Op::put("k", "v")] };
    assert!(matches!(store.txn(txn).await, Err(StoreError::InvalidArgument(_))));
    let all = RangeRequest { limit: Some(0), ..RangeRequest::prefix("") };
    store.put("x", b"1".to_vec()).await.unwrap();
    assert_eq!(store.range(&all).await.unwrap().kvs.len(), 1, "a zero limit is no limit");
}

#[tokio::test]
async fn a_watch_that_starts_behind_on_a_quiet_prefix_reports_progress_without_another_write() {
    let store = MvccStore::in_memory(Options::default()).unwrap();
    store.put("quiet/a", b"1".to_vec()).await.unwrap();
    let after = store.revision().await.unwrap();
    for i in 0..5u32 {
        store.put(&format!("busy/{i}"), i.to_be_bytes().to_vec()).await.unwrap();
    }
    let current = store.revision().await.unwrap();
    // As a watch cache resuming after it lagged: nothing under the prefix changed since, and
    // no write follows, yet the watcher learns it is up to date.
    let mut watcher = store.watch("quiet/", after).await.unwrap();
    let change = tokio::time::timeout(Duration::from_secs(5), watcher.next_change())
        .await
        .expect("progress without another write");
    assert_eq!(change.unwrap().unwrap(), crate::Change::Progress(current));
    let mut busy = store.watch("busy/", after).await.unwrap();
    for _ in 0..5 {
        let change = busy.next_change().await.unwrap().unwrap();
        assert!(matches!(change, crate::Change::Event(_)), "{change:?}");
    }
    assert!(
        tokio::time::timeout(Duration::from_millis(100), busy.next_change()).await.is_err(),
        "a backlog ending in events reports no extra progress"
    );
}
