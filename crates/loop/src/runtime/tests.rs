//! The runtime's promises, each driven through a real loop with a recording reconciler.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kayra_store::Store;
use kayra_store::mvcc::{MvccStore, Options};
use tokio::sync::{Notify, mpsc};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::Loop;
use crate::election::Election;
use crate::queue::Backoff;
use crate::source::{Fixed, Sink, Source};
use crate::{Action, Key, ReconcileError, Reconciler};

/// A source the test pushes keys into.
struct Pushed(Mutex<Option<mpsc::UnboundedReceiver<Key>>>);

fn pushed() -> (mpsc::UnboundedSender<Key>, Pushed) {
    let (sender, receiver) = mpsc::unbounded_channel();
    (sender, Pushed(Mutex::new(Some(receiver))))
}

#[async_trait::async_trait]
impl Source for Pushed {
    async fn run(&self, sink: Sink, _stop: CancellationToken) {
        let receiver = self.0.lock().unwrap().take();
        let Some(mut receiver) = receiver else { return };
        while let Some(key) = receiver.recv().await {
            sink.add(key);
        }
    }

    fn known(&self) -> Vec<Key> {
        Vec::new()
    }
}

/// One reconcile, as the recorder saw it.
#[derive(Debug, Clone)]
struct Run {
    key: Key,
    started: Instant,
    ended: Instant,
}

type Script = Box<dyn Fn(&Key, usize) -> Result<Action, ReconcileError> + Send + Sync>;

/// Records every reconcile; each takes `work`, and `script(key, nth)` decides its outcome.
struct Recorder {
    runs: Arc<Mutex<Vec<Run>>>,
    running: Arc<Mutex<HashMap<Key, usize>>>,
    peak: Arc<Mutex<(usize, usize)>>,
    work: Duration,
    gate: Option<(Key, Arc<Notify>, Arc<Notify>)>,
    script: Script,
    changed: Arc<Notify>,
}

#[derive(Clone)]
struct Record {
    runs: Arc<Mutex<Vec<Run>>>,
    peak: Arc<Mutex<(usize, usize)>>,
    changed: Arc<Notify>,
}

impl Record {
    fn runs(&self) -> Vec<Run> {
        self.runs.lock().unwrap().clone()
    }

    fn count(&self, key: &str) -> usize {
        self.runs().iter().filter(|run| run.key.as_str() == key).count()
    }

    fn peak_parallel(&self) -> usize {
        self.peak.lock().unwrap().1
    }

    /// Waits until `done` holds of the runs.
    async fn until(&self, done: impl Fn(&[Run]) -> bool) {
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

fn recorder(work: Duration, script: Script) -> (Recorder, Record) {
    let recorder = Recorder {
        runs: Arc::default(),
        running: Arc::default(),
        peak: Arc::default(),
        work,
        gate: None,
        script,
        changed: Arc::new(Notify::new()),
    };
    let record = Record {
        runs: recorder.runs.clone(),
        peak: recorder.peak.clone(),
        changed: recorder.changed.clone(),
    };
    (recorder, record)
}

fn succeed() -> Script {
    Box::new(|_, _| Ok(Action::AwaitChange))
}

#[async_trait::async_trait]
impl Reconciler for Recorder {
    async fn reconcile(&self, key: &Key) -> Result<Action, ReconcileError> {
        let started = Instant::now();
        {
            let mut running = self.running.lock().unwrap();
            let count = running.entry(key.clone()).or_insert(0);
            *count += 1;
            assert_eq!(*count, 1, "{key} is reconciled twice at once");
            let mut peak = self.peak.lock().unwrap();
            peak.0 += 1;
            peak.1 = peak.1.max(peak.0);
        }
        if let Some((gated, entered, release)) = &self.gate
            && gated == key
        {
            entered.notify_one();
            release.notified().await;
        }
        tokio::time::sleep(self.work).await;
        let nth = self.runs.lock().unwrap().iter().filter(|run| &run.key == key).count();
        let result = (self.script)(key, nth);
        *self.running.lock().unwrap().get_mut(key).unwrap() -= 1;
        self.peak.lock().unwrap().0 -= 1;
        self.runs.lock().unwrap().push(Run { key: key.clone(), started, ended: Instant::now() });
        self.changed.notify_waiters();
        result
    }
}

fn keys(names: &[&str]) -> Vec<Key> {
    names.iter().map(Key::new).collect()
}

#[tokio::test(start_paused = true)]
async fn a_thousand_changes_to_one_key_before_it_runs_make_one_reconcile() {
    let (mut reconciler, record) = recorder(Duration::ZERO, succeed());
    let (entered, release) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
    reconciler.gate = Some((Key::new("gate"), entered.clone(), release.clone()));
    let (push, source) = pushed();
    let stop = CancellationToken::new();
    let running = tokio::spawn(Loop::new("test", reconciler).source(source).run(stop.clone()));
    push.send(Key::new("gate")).unwrap();
    entered.notified().await;
    for _ in 0..1000 {
        push.send(Key::new("a")).unwrap();
    }
    tokio::time::sleep(Duration::from_millis(10)).await;
    release.notify_one();
    record.until(|runs| runs.iter().any(|run| run.key.as_str() == "a")).await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(record.count("a"), 1);
    stop.cancel();
    running.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn one_key_is_never_reconciled_twice_at_once_and_a_change_while_running_runs_again() {
    let (reconciler, record) = recorder(Duration::from_millis(50), succeed());
    let (push, source) = pushed();
    let stop = CancellationToken::new();
    let running = tokio::spawn(Loop::new("test", reconciler).source(source).concurrency(8).run(stop.clone()));
    for _ in 0..20 {
        push.send(Key::new("a")).unwrap();
        tokio::time::sleep(Duration::from_millis(7)).await;
    }
    let last_push = Instant::now();
    record.until(|runs| runs.iter().any(|run| run.started >= last_push)).await;
    let runs = record.runs();
    assert!(runs.len() >= 2, "changes while running were reconciled again: {runs:?}");
    for pair in runs.windows(2) {
        assert!(pair[1].started >= pair[0].ended, "overlapping reconciles of one key: {pair:?}");
    }
    stop.cancel();
    running.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn keys_run_in_parallel_up_to_the_configured_number() {
    let (reconciler, record) = recorder(Duration::from_millis(100), succeed());
    let names: Vec<String> = (0..12).map(|i| format!("k{i}")).collect();
    let stop = CancellationToken::new();
    let source = Fixed::new(names.iter().map(Key::new));
    let running = tokio::spawn(Loop::new("test", reconciler).source(source).concurrency(3).run(stop.clone()));
    record.until(|runs| runs.len() == 12).await;
    assert_eq!(record.peak_parallel(), 3);
    stop.cancel();
    running.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn failures_back_off_exponentially_and_a_success_resets_the_backoff() {
    // Fails three times, succeeds, then (after a change) fails once more.
    let script: Script =
        Box::new(|_, nth| if nth < 3 || nth == 4 { Err("not yet".into()) } else { Ok(Action::AwaitChange) });
    let (reconciler, record) = recorder(Duration::ZERO, script);
    let (push, source) = pushed();
    let backoff = Backoff { first: Duration::from_millis(100), max: Duration::from_secs(10) };
    let stop = CancellationToken::new();
    let running =
        tokio::spawn(Loop::new("test", reconciler).source(source).backoff(backoff).run(stop.clone()));
    push.send(Key::new("a")).unwrap();
    record.until(|runs| runs.len() == 4).await;
    push.send(Key::new("a")).unwrap();
    record.until(|runs| runs.len() == 6).await;
    let runs = record.runs();
    let gap = |i: usize| (runs[i].started - runs[i - 1].ended).as_millis();
    assert_eq!([gap(1), gap(2), gap(3)], [100, 200, 400], "backoff doubles");
    assert_eq!(gap(5), 100, "a success reset the backoff");
    stop.cancel();
    running.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_requeue_after_is_honoured() {
    let script: Script = Box::new(|_, nth| {
        Ok(if nth == 0 { Action::RequeueAfter(Duration::from_secs(7)) } else { Action::AwaitChange })
    });
    let (reconciler, record) = recorder(Duration::ZERO, script);
    let stop = CancellationToken::new();
    let running =
        tokio::spawn(Loop::new("test", reconciler).source(Fixed::new(keys(&["a"]))).run(stop.clone()));
    record.until(|runs| runs.len() == 2).await;
    let runs = record.runs();
    assert_eq!((runs[1].started - runs[0].ended).as_secs(), 7);
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert_eq!(record.count("a"), 2, "done means done until something changes");
    stop.cancel();
    running.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_resync_requeues_every_known_key() {
    let (reconciler, record) = recorder(Duration::ZERO, succeed());
    let stop = CancellationToken::new();
    let lp =
        Loop::new("test", reconciler).source(Fixed::new(keys(&["a", "b"]))).resync(Duration::from_secs(10));
    let running = tokio::spawn(lp.run(stop.clone()));
    tokio::time::sleep(Duration::from_secs(35)).await;
    assert_eq!((record.count("a"), record.count("b")), (4, 4), "at start, then at 10, 20 and 30 s");
    stop.cancel();
    running.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_stop_lets_in_flight_reconciles_finish_and_takes_no_new_key() {
    let (reconciler, record) = recorder(Duration::from_secs(3), succeed());
    let stop = CancellationToken::new();
    let (push, source) = pushed();
    let running = tokio::spawn(Loop::new("test", reconciler).source(source).run(stop.clone()));
    push.send(Key::new("a")).unwrap();
    push.send(Key::new("b")).unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    stop.cancel();
    running.await.unwrap();
    let runs = record.runs();
    assert_eq!(runs.len(), 1, "the in-flight reconcile finished; the waiting key was not taken");
    assert_eq!(runs[0].key.as_str(), "a");
}

#[tokio::test(start_paused = true)]
async fn a_stop_waits_no_longer_than_the_drain_deadline() {
    let (reconciler, _record) = recorder(Duration::from_secs(3600), succeed());
    let stop = CancellationToken::new();
    let lp =
        Loop::new("test", reconciler).source(Fixed::new(keys(&["a"]))).drain_deadline(Duration::from_secs(5));
    let running = tokio::spawn(lp.run(stop.clone()));
    tokio::time::sleep(Duration::from_secs(1)).await;
    let stopped = Instant::now();
    stop.cancel();
    running.await.unwrap();
    assert_eq!(stopped.elapsed().as_secs(), 5);
}

// The memory store's leases run on tokio's clock, as the election's renewals do: paused, the
// one-second leases lapse only when the test lets time pass, however busy the machine is.
#[tokio::test(start_paused = true)]
async fn a_leader_hands_over_to_the_next_replica_over_the_memory_store() {
    let store: Arc<dyn Store> = Arc::new(MvccStore::in_memory(Options::default()).unwrap());
    crate::testing::check_hand_over(store).await;
}

#[tokio::test(start_paused = true)]
async fn a_leader_dropped_without_a_stop_is_replaced_promptly() {
    let store: Arc<dyn Store> = Arc::new(MvccStore::in_memory(Options::default()).unwrap());
    let ttl = Duration::from_secs(1);
    let replica = |name: &str| {
        let (reconciler, record) = recorder(Duration::ZERO, succeed());
        let election = Election::new(store.clone(), "/elections/crash", name, ttl);
        let lp = Loop::new("crash", reconciler).source(Fixed::new(keys(&["a"]))).elected(election);
        (tokio::spawn(lp.run(CancellationToken::new())), record)
    };
    let (first, first_record) = replica("first");
    first_record.until(|runs| !runs.is_empty()).await;
    let (second, second_record) = replica("second");
    first.abort();
    let crashed = Instant::now();
    second_record.until(|runs| !runs.is_empty()).await;
    // On the paused clock the lapse is exact: the dropped leader's lease runs out at most one
    // lease after its last renewal, and the next replica is already waiting for the key.
    assert!(crashed.elapsed() < ttl * 3, "taken over within about one lease: {:?}", crashed.elapsed());
    second.abort();
}

/// A reconciler that never finishes, and says when it started and when it was cut off.
struct Stuck {
    started: Arc<Notify>,
    cut_off: Arc<std::sync::atomic::AtomicBool>,
}

struct CutOff(Arc<std::sync::atomic::AtomicBool>);

impl Drop for CutOff {
    fn drop(&mut self) {
        self.0.store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

#[async_trait::async_trait]
impl Reconciler for Stuck {
    async fn reconcile(&self, _key: &Key) -> Result<Action, ReconcileError> {
        let _guard = CutOff(self.cut_off.clone());
        self.started.notify_one();
        std::future::pending().await
    }
}

#[tokio::test(start_paused = true)]
async fn a_leader_that_lost_its_lease_cuts_off_what_still_runs_before_the_lease_could_lapse() {
    let store: Arc<dyn Store> = Arc::new(MvccStore::in_memory(Options::default()).unwrap());
    let ttl = Duration::from_secs(15);
    let (started, cut_off) = (Arc::new(Notify::new()), Arc::new(std::sync::atomic::AtomicBool::new(false)));
    let reconciler = Stuck { started: started.clone(), cut_off: cut_off.clone() };
    let election = Election::new(store.clone(), "/elections/stuck", "a", ttl);
    let stop_deadline = election.stop_deadline();
    let lp = Loop::new("stuck", reconciler)
        .source(Fixed::new(keys(&["a"])))
        .drain_deadline(Duration::from_secs(60))
        .elected(election);
    let running = tokio::spawn(lp.run(CancellationToken::new()));
    started.notified().await;
    let lease = store.get("/elections/stuck").await.unwrap().unwrap().lease.expect("the key has a lease");
    store.revoke_lease(lease).await.unwrap();
    let revoked = Instant::now();
    while !cut_off.load(std::sync::atomic::Ordering::SeqCst) {
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(revoked.elapsed() < ttl, "the stuck reconcile is cut off before the lease's 15 s end");
    }
    // The next keep-alive (a third of the lease on) finds the lease gone; the reconcile is cut
    // off the stop deadline later, however long the loop's own drain deadline is.
    assert!(
        revoked.elapsed() <= ttl / 3 + stop_deadline + Duration::from_millis(200),
        "{:?}",
        revoked.elapsed()
    );
    running.abort();
}
