//! Checks of the runtime that each store must pass, for the tests of the store adapters (feature
//! `testing`): two replicas of one elected loop over one store hand over, never reconciling at
//! once. Also [`Conflicts`], a store that counts the campaigns that found a leader, for a test
//! to wait on a candidate's attempts rather than sleep.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kayra_store::{
    KeyValue, Lease, LeaseId, RangeRequest, RangeResult, Revision, Store, StoreError, Txn, TxnResult, Watcher,
};
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::election::Election;
use crate::runtime::Loop;
use crate::source::Fixed;
use crate::{Action, Key, ReconcileError, Reconciler};

/// One reconcile, as a [`Recorder`] saw it.
#[derive(Debug, Clone)]
pub struct Run {
    /// The key reconciled.
    pub key: Key,
    /// When the reconcile started.
    pub started: Instant,
    /// When it ended.
    pub ended: Instant,
}

/// A reconciler that takes `work` per key, succeeds, and records every reconcile.
#[derive(Debug, Clone)]
pub struct Recorder {
    work: Duration,
    runs: Arc<Mutex<Vec<Run>>>,
    changed: Arc<Notify>,
}

impl Recorder {
    /// A recorder whose reconciles each take `work`.
    pub fn new(work: Duration) -> Recorder {
        Recorder { work, runs: Arc::default(), changed: Arc::new(Notify::new()) }
    }

    /// Every reconcile so far, in the order they ended.
    pub fn runs(&self) -> Vec<Run> {
        self.runs.lock().expect("the recorder's lock is never held across a panic").clone()
    }

    /// Waits until `done` holds of the runs; panics after a minute.
    pub async fn until(&self, done: impl Fn(&[Run]) -> bool) {
        let waited = tokio::time::timeout(Duration::from_secs(60), async {
            loop {
                let changed = self.changed.notified();
                if done(&self.runs()) {
                    return;
                }
                changed.await;
            }
        });
        waited.await.expect("the loop got there within a minute");
    }
}

#[async_trait::async_trait]
impl Reconciler for Recorder {
    async fn reconcile(&self, key: &Key) -> Result<Action, ReconcileError> {
        let started = Instant::now();
        tokio::time::sleep(self.work).await;
        let run = Run { key: key.clone(), started, ended: Instant::now() };
        self.runs.lock().expect("the recorder's lock is never held across a panic").push(run);
        self.changed.notify_waiters();
        Ok(Action::AwaitChange)
    }
}

/// One replica of the elected loop `name` over `store`: fixed keys `a`, `b`, `c`, a resync
/// every 100 ms, two workers, reconciles of 20 ms. Answers its task, its stop, and its record.
pub fn replica(
    store: Arc<dyn Store>,
    name: &str,
    candidate: &str,
    ttl: Duration,
) -> (tokio::task::JoinHandle<()>, CancellationToken, Recorder) {
    let recorder = Recorder::new(Duration::from_millis(20));
    let election = Election::new(store, format!("/elections/{name}"), candidate, ttl);
    let lp = Loop::new(name, recorder.clone())
        .source(Fixed::new(["a", "b", "c"].map(Key::new)))
        .resync(Duration::from_millis(100))
        .concurrency(2)
        .elected(election);
    let stop = CancellationToken::new();
    (tokio::spawn(lp.run(stop.clone())), stop, recorder)
}

/// Two replicas of one loop over one store: while one leads the other reconciles nothing, and
/// when the leader stops the other takes over, never reconciling while the first still is.
pub async fn check_hand_over(store: Arc<dyn Store>) {
    let ttl = Duration::from_secs(1);
    let (first, stop_first, first_record) = replica(store.clone(), "hand-over", "first", ttl);
    first_record.until(|runs| runs.len() >= 3).await;
    let campaigning = Conflicts::new(store);
    let (second, stop_second, second_record) = replica(campaigning.clone(), "hand-over", "second", ttl);
    // The second's candidate finds the key held, waits a lease's life for it to fall vacant, and
    // finds it held again: it must have reconciled nothing all that while.
    campaigning.until(2).await;
    assert!(second_record.runs().is_empty(), "the second replica waits while the first leads");
    assert!(first_record.runs().len() > 3, "the first replica goes on reconciling on its resyncs");
    stop_first.cancel();
    first.await.expect("the first replica stops cleanly");
    let first_ended = first_record.runs().iter().map(|run| run.ended).max().expect("the first reconciled");
    second_record.until(|runs| runs.len() >= 3).await;
    let second_started =
        second_record.runs().iter().map(|run| run.started).min().expect("the second reconciled");
    assert!(second_started >= first_ended, "no key reconciled by both replicas at once");
    stop_second.cancel();
    second.await.expect("the second replica stops cleanly");
}

/// A store that counts the transactions it answers with a conflict: over an election's key,
/// each is a candidate's campaign that found another leading (the elected loops of
/// [`replica`] write nothing else).
pub struct Conflicts {
    inner: Arc<dyn Store>,
    count: AtomicUsize,
    changed: Notify,
}

impl Conflicts {
    /// `inner`, its conflicts counted.
    pub fn new(inner: Arc<dyn Store>) -> Arc<Conflicts> {
        Arc::new(Conflicts { inner, count: AtomicUsize::new(0), changed: Notify::new() })
    }

    /// Waits until `count` transactions have conflicted; panics after a minute.
    pub async fn until(&self, count: usize) {
        let waited = tokio::time::timeout(Duration::from_secs(60), async {
            loop {
                let changed = self.changed.notified();
                if self.count.load(Ordering::Acquire) >= count {
                    return;
                }
                changed.await;
            }
        });
        waited.await.unwrap_or_else(|_| panic!("{count} campaigns did not find a leader within a minute"));
    }
}

#[async_trait::async_trait]
impl Store for Conflicts {
    async fn get(&self, key: &str) -> Result<Option<KeyValue>, StoreError> {
        self.inner.get(key).await
    }
    async fn range(&self, request: &RangeRequest) -> Result<RangeResult, StoreError> {
        self.inner.range(request).await
    }
    async fn txn(&self, txn: Txn) -> Result<TxnResult, StoreError> {
        let result = self.inner.txn(txn).await?;
        if matches!(result, TxnResult::Conflict { .. }) {
            self.count.fetch_add(1, Ordering::AcqRel);
            self.changed.notify_waiters();
        }
        Ok(result)
    }
    async fn watch(&self, prefix: &str, after: Revision) -> Result<Watcher, StoreError> {
        self.inner.watch(prefix, after).await
    }
    async fn compact(&self, revision: Revision) -> Result<(), StoreError> {
        self.inner.compact(revision).await
    }
    async fn revision(&self) -> Result<Revision, StoreError> {
        self.inner.revision().await
    }
    async fn grant_lease(&self, ttl: Duration) -> Result<Lease, StoreError> {
        self.inner.grant_lease(ttl).await
    }
    async fn keep_alive(&self, lease: LeaseId) -> Result<Duration, StoreError> {
        self.inner.keep_alive(lease).await
    }
    async fn revoke_lease(&self, lease: LeaseId) -> Result<(), StoreError> {
        self.inner.revoke_lease(lease).await
    }
}
