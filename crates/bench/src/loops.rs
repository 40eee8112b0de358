//! The loop runtime benchmark (`kayra-bench loop`): what `kayra_loop::runtime::Loop` costs over
//! the bare minimum of running keys through a reconciler, and how well it folds a storm of
//! changes into few reconciles.
//!
//! - Throughput: 10 000 distinct keys through a no-op reconcile, from the loop's start until the
//!   reconciler has seen them all, next to a bare tokio channel doing the same work in the same
//!   run (the keys dealt in turn to as many worker tasks as the loop has, each with an mpsc
//!   channel of its own, so that no lock is shared, each calling the same reconciler through an
//!   `Arc<dyn Reconciler>`): the same work minus the queue's dedupe, backoff bookkeeping and
//!   metrics. Rounds alternate; medians are printed.
//! - Storm: 100 000 changes round-robin over 1 000 keys, added as fast as one task can, while
//!   each reconcile takes 1 ms (a store read and write on a quiet local store). Every change is
//!   seen — each key's last reconcile reads its last change — in far fewer reconciles.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use kayra_loop::runtime::Loop;
use kayra_loop::source::{Fixed, Sink, Source};
use kayra_loop::{Action, Key, ReconcileError, Reconciler};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::report::{Report, Size};

/// Workers of the loop and of the bare channel loop alike.
const WORKERS: usize = 4;

/// How much work each measurement does.
#[derive(Debug, Clone, Copy)]
struct Sizes {
    /// Keys of the throughput run.
    keys: usize,
    /// Alternating rounds of the throughput run (after one warm-up round of each).
    rounds: usize,
    /// Changes of the storm.
    changes: usize,
    /// Keys the storm's changes are spread over.
    storm_keys: usize,
}

const FULL: Sizes = Sizes { keys: 10_000, rounds: 15, changes: 100_000, storm_keys: 1_000 };
const SMOKE: Sizes = Sizes { keys: 1_000, rounds: 1, changes: 2_000, storm_keys: 100 };
/// What one reconcile of the storm takes.
const STORM_WORK: Duration = Duration::from_millis(1);

/// A reconcile that does nothing but count, and says when it has counted to `target`.
struct Noop {
    seen: AtomicUsize,
    target: usize,
    done: Arc<Notify>,
}

#[async_trait::async_trait]
impl Reconciler for Noop {
    async fn reconcile(&self, _key: &Key) -> Result<Action, ReconcileError> {
        if self.seen.fetch_add(1, Ordering::Relaxed) + 1 == self.target {
            self.done.notify_one();
        }
        Ok(Action::AwaitChange)
    }
}

fn noop(done: &Arc<Notify>, target: usize) -> Noop {
    Noop { seen: AtomicUsize::new(0), target, done: done.clone() }
}

fn distinct_keys(count: usize) -> Vec<Key> {
    (0..count).map(|i| Key::new(format!("namespace-{}/object-{i}", i % 100))).collect()
}

/// Keys per second of a [`Loop`] fed every key at once by a fixed source.
async fn through_the_loop(keys: &[Key]) -> Result<f64, String> {
    let done = Arc::new(Notify::new());
    let lp = Loop::new("bench", noop(&done, keys.len()))
        .source(Fixed::new(keys.iter().cloned()))
        .concurrency(WORKERS);
    let stop = CancellationToken::new();
    let started = Instant::now();
    let running = tokio::spawn(lp.run(stop.clone()));
    let finished = tokio::time::timeout(Duration::from_secs(60), done.notified()).await;
    let elapsed = started.elapsed();
    stop.cancel();
    running.await.map_err(|error| format!("the loop panicked: {error}"))?;
    finished.map_err(|_| "the loop did not reconcile every key within a minute".to_owned())?;
    Ok(keys.len() as f64 / elapsed.as_secs_f64())
}

/// Keys per second of worker tasks each taking keys from a channel of its own, the keys dealt
/// to them in turn: no lock or queue is shared between the workers.
async fn through_a_channel(keys: &[Key]) -> Result<f64, String> {
    let done = Arc::new(Notify::new());
    let reconciler: Arc<dyn Reconciler> = Arc::new(noop(&done, keys.len()));
    let keys = keys.to_vec();
    let count = keys.len();
    let started = Instant::now();
    let mut senders = Vec::with_capacity(WORKERS);
    let mut workers = tokio::task::JoinSet::new();
    for _ in 0..WORKERS {
        let (sender, mut receiver) = tokio::sync::mpsc::unbounded_channel::<Key>();
        senders.push(sender);
        let reconciler = reconciler.clone();
        workers.spawn(async move {
            while let Some(key) = receiver.recv().await {
                let _ = reconciler.reconcile(&key).await;
            }
        });
    }
    tokio::spawn(async move {
        for (n, key) in keys.into_iter().enumerate() {
            let _ = senders[n % WORKERS].send(key);
        }
    });
    let finished = tokio::time::timeout(Duration::from_secs(60), done.notified()).await;
    let elapsed = started.elapsed();
    workers.abort_all();
    finished.map_err(|_| "the channel loop did not reconcile every key within a minute".to_owned())?;
    Ok(count as f64 / elapsed.as_secs_f64())
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// The storm's keys, and how many changes each has had so far.
struct Changes {
    keys: Vec<Key>,
    versions: Vec<AtomicU64>,
}

impl Changes {
    fn index(key: &Key) -> usize {
        key.as_str().strip_prefix("storm/").and_then(|i| i.parse().ok()).unwrap_or(usize::MAX)
    }
}

/// A source that makes the storm: each of `count` changes bumps its key's version, then adds
/// the key.
struct Storm {
    changes: Arc<Changes>,
    count: usize,
    pushed: Arc<Notify>,
}

#[async_trait::async_trait]
impl Source for Storm {
    async fn run(&self, sink: Sink, _stop: CancellationToken) {
        for i in 0..self.count {
            let at = i % self.changes.keys.len();
            self.changes.versions[at].fetch_add(1, Ordering::Release);
            sink.add(self.changes.keys[at].clone());
        }
        self.pushed.notify_one();
    }

    fn known(&self) -> Vec<Key> {
        self.changes.keys.clone()
    }
}

/// A 1 ms reconcile that records the version of its key it read, as a real one reads the
/// object's latest state.
struct Slow {
    changes: Arc<Changes>,
    read: Arc<[AtomicU64]>,
    reconciles: Arc<AtomicUsize>,
}

#[async_trait::async_trait]
impl Reconciler for Slow {
    async fn reconcile(&self, key: &Key) -> Result<Action, ReconcileError> {
        let at = Changes::index(key);
        let version = self.changes.versions.get(at).ok_or("not a storm key")?.load(Ordering::Acquire);
        tokio::time::sleep(STORM_WORK).await;
        self.read[at].fetch_max(version, Ordering::Relaxed);
        self.reconciles.fetch_add(1, Ordering::Relaxed);
        Ok(Action::AwaitChange)
    }
}

struct StormFigures {
    reconciles: usize,
    pushing: Duration,
    settled: Duration,
}

/// Runs the storm until every key's last change is reconciled; answers how many reconciles
/// that took.
async fn storm(sizes: Sizes) -> Result<StormFigures, String> {
    let changes = Arc::new(Changes {
        keys: (0..sizes.storm_keys).map(|i| Key::new(format!("storm/{i}"))).collect(),
        versions: (0..sizes.storm_keys).map(|_| AtomicU64::new(0)).collect(),
    });
    let read: Arc<[AtomicU64]> = (0..sizes.storm_keys).map(|_| AtomicU64::new(0)).collect();
    let reconciles = Arc::new(AtomicUsize::new(0));
    let reconciler = Slow { changes: changes.clone(), read: read.clone(), reconciles: reconciles.clone() };
    let pushed = Arc::new(Notify::new());
    let source = Storm { changes: changes.clone(), count: sizes.changes, pushed: pushed.clone() };
    let lp = Loop::new("storm", reconciler).source(source).concurrency(WORKERS);
    let stop = CancellationToken::new();
    let started = Instant::now();
    let running = tokio::spawn(lp.run(stop.clone()));
    pushed.notified().await;
    let pushing = started.elapsed();
    let last = (sizes.changes / sizes.storm_keys) as u64;
    let caught_up = async {
        while read.iter().any(|read| read.load(Ordering::Relaxed) < last) {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    };
    let caught_up = tokio::time::timeout(Duration::from_secs(60), caught_up).await;
    let settled = started.elapsed();
    // Anything still queued would run now: give it a moment to show in the count.
    tokio::time::sleep(Duration::from_millis(100)).await;
    stop.cancel();
    running.await.map_err(|error| format!("the loop panicked: {error}"))?;
    caught_up.map_err(|_| "the storm's last changes were not all reconciled within a minute".to_owned())?;
    Ok(StormFigures { reconciles: reconciles.load(Ordering::Relaxed), pushing, settled })
}

/// Runs the loop benchmark and prints its figures.
pub(crate) async fn run(size: Size) -> Result<(), String> {
    println!("loop runtime benchmark: one run; the ratio compares two figures from this run\n");
    let sizes = size.pick(FULL, SMOKE);
    let Sizes { keys: count, rounds, changes, storm_keys } = sizes;
    let keys = distinct_keys(count);
    through_the_loop(&keys).await?;
    through_a_channel(&keys).await?;
    let (mut ours, mut bare, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..rounds {
        let loop_rate = through_the_loop(&keys).await?;
        let channel_rate = through_a_channel(&keys).await?;
        ratios.push(loop_rate / channel_rate);
        ours.push(loop_rate);
        bare.push(channel_rate);
    }
    println!(
        "{count} distinct keys through a no-op reconcile, {WORKERS} workers, median of {rounds} alternating rounds, beside bare mpsc channels, one per worker (target ratio >= 0.5)"
    );
    let mut report = Report::new("loop", size);
    report
        .figure(format!("{count} keys through a no-op reconcile, of bare channels"), median(ours), "keys/s")
        .ceiling(median(bare))
        .ratio(median(ratios));

    let storm = storm(sizes).await?;
    println!(
        "a storm of {changes} changes round-robin over {storm_keys} keys, added as fast as one task can, reconcile = {} ms sleep, {WORKERS} workers (target: at most two reconciles per key)",
        STORM_WORK.as_millis()
    );
    report.figure("storm: changes added in", storm.pushing.as_secs_f64() * 1e3, "ms");
    report.figure("storm: every key's last change seen at", storm.settled.as_secs_f64() * 1e3, "ms");
    report.figure(
        format!("storm: reconciles for {changes} changes of {storm_keys} keys"),
        storm.reconciles as f64,
        "count",
    );
    report.print();
    Ok(())
}
