//! Checks of the runtime that each store must pass, for the tests of the store adapters (feature
//! `testing`): two replicas of one elected loop over one store hand over, never reconciling at
//! once.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use kayra_store::Store;
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
    let (second, stop_second, second_record) = replica(store, "hand-over", "second", ttl);
    tokio::time::sleep(Duration::from_millis(1500)).await;
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
