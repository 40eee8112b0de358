//! The loop runtime: sources feed the queue, workers reconcile, a resync re-queues every known
//! key, an election decides whether this replica may reconcile at all, and a stop drains.
//!
//! ```text
//!  sources ──keys──▶ queue ──▶ N workers ──reconcile(key)──▶ Action / error
//!     ▲                ▲                                         │
//!     └── resync ──────┴──── requeue-after, backoff ◀────────────┘
//! ```

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::election::Election;
use crate::metrics::{LoopMetrics, Metrics};
use crate::queue::{Backoff, Outcome, Queue, State};
use crate::source::{Sink, Source};
use crate::{Action, Key, Reconciler};

/// One control loop: its reconciler, its sources, and how it runs.
pub struct Loop {
    name: String,
    reconciler: Arc<dyn Reconciler>,
    sources: Vec<Arc<dyn Source>>,
    concurrency: usize,
    resync: Option<Duration>,
    backoff: Backoff,
    drain: Duration,
    election: Option<Election>,
    metrics: LoopMetrics,
    hold_failing: bool,
}

impl std::fmt::Debug for Loop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Loop")
            .field("name", &self.name)
            .field("concurrency", &self.concurrency)
            .field("resync", &self.resync)
            .field("election", &self.election)
            .finish_non_exhaustive()
    }
}

/// How long a stopping loop waits for its in-flight reconciles by default.
const DRAIN: Duration = Duration::from_secs(30);

impl Loop {
    /// A loop called `name` (in logs and metrics) running `reconciler`: one worker, no resync,
    /// backoff from 200 ms to 5 min, no election.
    pub fn new(name: impl Into<String>, reconciler: impl Reconciler) -> Loop {
        Loop {
            name: name.into(),
            reconciler: Arc::new(reconciler),
            sources: Vec::new(),
            concurrency: 1,
            resync: None,
            backoff: Backoff::default(),
            drain: DRAIN,
            election: None,
            metrics: LoopMetrics::unregistered(),
            hold_failing: false,
        }
    }

    /// Feeds the loop from `source` too.
    pub fn source(mut self, source: impl Source) -> Loop {
        self.sources.push(Arc::new(source));
        self
    }

    /// Reconciles up to `workers` keys at once (at least one).
    pub fn concurrency(mut self, workers: usize) -> Loop {
        self.concurrency = workers.max(1);
        self
    }

    /// Re-queues every known key each `period`.
    pub fn resync(mut self, period: Duration) -> Loop {
        self.resync = Some(period);
        self
    }

    /// Spaces retries of a failing key out as `backoff` says.
    pub fn backoff(mut self, backoff: Backoff) -> Loop {
        self.backoff = backoff;
        self
    }

    /// Lets a failing key wait out its backoff even when it changes meanwhile: for a loop whose
    /// failures write what it watches (a status recording the failure), which would otherwise
    /// wake it at once, again and again.
    pub fn changes_wait_out_backoff(mut self) -> Loop {
        self.hold_failing = true;
        self
    }

    /// Waits at most `deadline` for in-flight reconciles when stopping or losing leadership.
    pub fn drain_deadline(mut self, deadline: Duration) -> Loop {
        self.drain = deadline;
        self
    }

    /// Reconciles only while leading `election`.
    pub fn elected(mut self, election: Election) -> Loop {
        self.election = Some(election);
        self
    }

    /// Counts the loop in `metrics`.
    pub fn metrics(mut self, metrics: &Metrics) -> Loop {
        self.metrics = metrics.of(&self.name);
        self
    }

    /// The loop's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Runs until `stop` is cancelled, then lets in-flight reconciles finish (within the drain
    /// deadline) and returns.
    pub async fn run(self, stop: CancellationToken) {
        let Some(election) = &self.election else {
            self.term(stop).await;
            return;
        };
        loop {
            let mut leadership = tokio::select! {
                () = stop.cancelled() => return,
                leadership = election.campaign() => match leadership {
                    Ok(leadership) => leadership,
                    Err(error) => {
                        tracing::warn!(controller = %self.name, %error, "campaigning failed; trying again");
                        tokio::select! {
                            () = stop.cancelled() => return,
                            () = tokio::time::sleep(Duration::from_secs(1)) => continue,
                        }
                    }
                },
            };
            let term = stop.child_token();
            let mut running = Box::pin(self.term(term.clone()));
            tokio::select! {
                () = &mut running => {}
                () = leadership.lost() => {
                    tracing::warn!(controller = %self.name, "lost leadership; stopping, then campaigning again");
                    term.cancel();
                    // Another replica may lead once the lease lapses: what is still running
                    // by then is cut off rather than left to act beside the next leader.
                    if tokio::time::timeout(election.stop_deadline(), &mut running).await.is_err() {
                        tracing::warn!(controller = %self.name, deadline = ?election.stop_deadline(), "reconciles still running when a lost leadership must have stopped; aborting them");
                    }
                }
            }
            drop(running);
            leadership.resign().await;
            if stop.is_cancelled() {
                return;
            }
        }
    }

    /// One term of reconciling: from a fresh queue until `stop`.
    async fn term(&self, stop: CancellationToken) {
        let state = if self.hold_failing { State::holding_failing_keys() } else { State::default() };
        let queue = Arc::new(Queue::new(state, self.concurrency));
        let mut helpers = tokio::task::JoinSet::new();
        for source in &self.sources {
            let (source, sink, stop) = (source.clone(), Sink::new(queue.clone()), stop.clone());
            helpers.spawn(async move { source.run(sink, stop).await });
        }
        let timer = queue.clone();
        helpers.spawn(async move { timer.run_timer().await });
        if let Some(period) = self.resync {
            let (sources, queue) = (self.sources.clone(), queue.clone());
            helpers.spawn(async move {
                let mut tick = tokio::time::interval(period);
                tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                tick.tick().await;
                loop {
                    tick.tick().await;
                    for source in &sources {
                        queue.add_all(source.known());
                    }
                }
            });
        }
        let mut workers = tokio::task::JoinSet::new();
        for _ in 0..self.concurrency {
            let worker = Worker {
                name: self.name.clone(),
                reconciler: self.reconciler.clone(),
                queue: queue.clone(),
                backoff: self.backoff,
                metrics: self.metrics.clone(),
            };
            workers.spawn(worker.run(stop.clone()));
        }
        stop.cancelled().await;
        helpers.abort_all();
        // Sources hold the store; they are gone before the loop says it stopped.
        while helpers.join_next().await.is_some() {}
        let drained =
            tokio::time::timeout(self.drain, async { while workers.join_next().await.is_some() {} });
        if drained.await.is_err() {
            tracing::warn!(controller = %self.name, deadline = ?self.drain, "reconciles still running after the drain deadline; leaving them to finish on their own");
            workers.detach_all();
        }
    }
}

/// One worker of a loop: takes keys until told to stop, never stopping mid-reconcile.
struct Worker {
    name: String,
    reconciler: Arc<dyn Reconciler>,
    queue: Arc<Queue>,
    backoff: Backoff,
    metrics: LoopMetrics,
}

impl Worker {
    async fn run(self, stop: CancellationToken) {
        let mut next = None;
        loop {
            let (key, depth) = match next.take() {
                Some(taken) if !stop.is_cancelled() => taken,
                Some(_) => return,
                None => tokio::select! {
                    biased;
                    () = stop.cancelled() => return,
                    taken = self.queue.take() => taken,
                },
            };
            self.metrics.depth.set(i64::try_from(depth).unwrap_or(i64::MAX));
            next = self.reconcile(key).await;
        }
    }

    /// Reconciles `key`; answers the next key when one was waiting.
    async fn reconcile(&self, key: Key) -> Option<(Key, usize)> {
        let span = tracing::info_span!(
            "reconcile",
            controller = %self.name,
            key = %key,
            outcome = tracing::field::Empty,
            duration_ms = tracing::field::Empty,
        );
        let started = tokio::time::Instant::now();
        let result = self.reconciler.reconcile(&key).instrument(span.clone()).await;
        let elapsed = started.elapsed();
        self.metrics.duration.observe(elapsed.as_secs_f64());
        span.record("duration_ms", elapsed.as_secs_f64() * 1000.0);
        let outcome = match &result {
            Ok(Action::AwaitChange) => {
                self.metrics.success.inc();
                span.record("outcome", "success");
                Outcome::Done(Action::AwaitChange)
            }
            Ok(Action::RequeueAfter(after)) => {
                self.metrics.requeue.inc();
                self.metrics.requeues.inc();
                span.record("outcome", "requeue");
                Outcome::Done(Action::RequeueAfter(*after))
            }
            Err(_) => {
                self.metrics.error.inc();
                self.metrics.requeues.inc();
                span.record("outcome", "error");
                Outcome::Failed
            }
        };
        let (finished, next) = self.queue.finish_and_take(&key, outcome, &self.backoff);
        if let (Err(error), Some(retry)) = (&result, finished.retry) {
            span.in_scope(|| tracing::warn!(%error, ?retry, "reconcile failed; retrying after backoff"));
        }
        next
    }
}

#[cfg(test)]
mod tests;
