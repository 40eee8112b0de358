//! Group commit: writers that wait for durability at the same time share one flush.
//!
//! Every applied batch takes a sequence number. A foreground writer waits until the durable
//! sequence reaches its own; the first one to find no flush running leads one, which covers
//! everything applied before it started, and wakes every waiter when it ends. Under load each
//! flush covers the batches that arrived during the previous one, so the cost of durability is
//! shared instead of paid per write.
//!
//! A background writer ([`crate::priority`]) never leads a flush: it rides the next one, and
//! when none is running it asks the committer thread for one within a short delay
//! ([`BACKGROUND_FLUSH_DELAY`] by default). The committer also makes durable, within the same
//! delay, whatever a flush left behind that nobody waits for (a write whose request was
//! cancelled), so every applied batch becomes durable and reaches the watchers.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use crate::mvcc::backend::Backend;
use crate::{EngineStatistics, StoreError};

/// A sequence number given to each applied batch, in apply order.
pub(crate) type Seq = u64;

/// How long a background write waits, by default, for a foreground write's flush before the
/// committer flushes it: short beside a loop's own pace, long beside a flush, so that a burst
/// of follow-up writes shares a few flushes instead of keeping the disk busy.
pub(crate) const BACKGROUND_FLUSH_DELAY: Duration = Duration::from_millis(2);

pub(crate) struct GroupCommit {
    backend: Arc<dyn Backend>,
    applied: AtomicU64,
    state: Mutex<CommitState>,
    flushed: Notify,
    publisher: OnceLock<Box<dyn Fn(Seq) + Send + Sync>>,
    /// Where each flush's size is counted.
    statistics: Arc<EngineStatistics>,
    /// The committer thread's plan; the thread runs while the group commit lives.
    committer: Arc<Committer>,
    /// How long a background write waits for someone else's flush.
    background_delay: Duration,
}

impl std::fmt::Debug for GroupCommit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GroupCommit")
            .field("applied", &self.applied)
            .field("state", &self.state)
            .finish_non_exhaustive()
    }
}

impl Drop for GroupCommit {
    fn drop(&mut self) {
        let mut plan = self.committer.plan.lock().expect("committer lock poisoned");
        plan.closed = true;
        drop(plan);
        self.committer.wake.notify_one();
    }
}

#[derive(Debug, Default)]
struct CommitState {
    durable: Seq,
    flushing: bool,
    /// The last flush that failed: everything up to `.0` may not be durable.
    failure: Option<(Seq, String)>,
}

/// When the committer thread flushes next, shared between it and the group commit.
#[derive(Debug, Default)]
struct Committer {
    plan: Mutex<Plan>,
    wake: Condvar,
}

#[derive(Debug, Default)]
struct Plan {
    /// The next flush the committer owes, if any.
    due: Option<Instant>,
    /// The group commit is gone: the thread ends.
    closed: bool,
}

impl GroupCommit {
    /// Group commit over `backend` with nothing applied yet, flushing background writes within
    /// `background_delay` and counting each flush's size in `statistics`. A persistent backend
    /// gets its committer thread.
    pub(crate) fn start(
        backend: Arc<dyn Backend>,
        background_delay: Duration,
        statistics: Arc<EngineStatistics>,
    ) -> Result<Arc<GroupCommit>, StoreError> {
        let persistent = backend.is_persistent();
        let commit = Arc::new(GroupCommit {
            backend,
            applied: AtomicU64::new(0),
            state: Mutex::default(),
            flushed: Notify::new(),
            publisher: OnceLock::new(),
            statistics,
            committer: Arc::default(),
            background_delay,
        });
        if persistent {
            let (weak, committer) = (Arc::downgrade(&commit), commit.committer.clone());
            std::thread::Builder::new()
                .name("kayra-commit".to_owned())
                .spawn(move || run_committer(&weak, &committer))
                .map_err(|error| StoreError::engine("start the committer thread", error.to_string()))?;
        }
        Ok(commit)
    }

    /// Records that one more batch has been applied; called with the engine's write lock held,
    /// so sequence numbers follow apply order.
    pub(crate) fn next_seq(&self) -> Seq {
        self.applied.fetch_add(1, Ordering::AcqRel) + 1
    }

    /// Resolves once batch `seq` is durable, answering the durable sequence reached. Called on
    /// the thread that applied the batch, whose class ([`crate::priority`]) decides whether
    /// the wait may lead a flush.
    pub(crate) async fn wait(self: &Arc<Self>, seq: Seq) -> Result<Seq, StoreError> {
        if !self.backend.is_persistent() {
            return Ok(self.applied.load(Ordering::Acquire));
        }
        let background = crate::priority::is_background_thread();
        if background {
            self.statistics.wrote_in_background();
        }
        loop {
            let flushed = self.flushed.notified();
            tokio::pin!(flushed);
            flushed.as_mut().enable();
            {
                let mut state = self.state.lock().expect("group commit lock poisoned");
                if state.durable >= seq {
                    return Ok(state.durable);
                }
                if let Some((upto, reason)) = &state.failure
                    && *upto >= seq
                    && !state.flushing
                {
                    return Err(StoreError::engine("make a write durable", reason.clone()));
                }
                if !state.flushing {
                    if background {
                        drop(state);
                        self.flush_within(self.background_delay);
                    } else {
                        state.flushing = true;
                        state.failure = None;
                        drop(state);
                        self.lead_flush();
                        continue;
                    }
                }
            }
            flushed.await;
        }
    }

    /// Flushes as the leader of the next group, on a blocking thread. A flush waits for the
    /// disk (a write and a sync of what was appended); a runtime worker that waited with it
    /// would leave the other requests, whose writes the next flush carries, one worker short
    /// for that long, so fewer of them would reach the next flush. The flush completes and
    /// wakes the waiters even if the leader's caller goes away.
    fn lead_flush(self: &Arc<Self>) {
        let this = self.clone();
        drop(tokio::task::spawn_blocking(move || this.flush_once()));
    }

    /// One flush, then: record it (and how many batches it made durable), wake the waiters and
    /// publish what became durable. What was applied meanwhile is flushed by a waiter that
    /// leads next, or else by the committer within the background delay, so a write whose writer
    /// went away (a cancelled request) still becomes durable and visible to watchers.
    fn flush_once(&self) {
        let upto = self.applied.load(Ordering::Acquire);
        let result = self.backend.flush();
        let mut state = self.state.lock().expect("group commit lock poisoned");
        match result {
            Ok(()) => {
                if upto > state.durable {
                    self.statistics.group_committed(upto - state.durable);
                }
                state.durable = state.durable.max(upto);
            }
            Err(error) => {
                tracing::error!(%error, "flushing the store failed");
                state.failure = Some((upto, error.to_string()));
            }
        }
        state.flushing = false;
        let durable = state.durable;
        let left_behind = state.failure.is_none() && self.applied.load(Ordering::Acquire) > durable;
        drop(state);
        self.flushed.notify_waiters();
        if let Some(publish) = self.publisher.get() {
            publish(durable);
        }
        if left_behind {
            self.flush_within(self.background_delay);
        }
    }

    /// Asks the committer to flush within `delay` unless a flush covers everything first.
    fn flush_within(&self, delay: Duration) {
        let due = Instant::now() + delay;
        let mut plan = self.committer.plan.lock().expect("committer lock poisoned");
        if plan.due.is_none_or(|planned| due < planned) {
            plan.due = Some(due);
            drop(plan);
            self.committer.wake.notify_one();
        }
    }

    /// The committer's flush: led here unless one is running (whose end plans the next) or
    /// nothing is left to make durable.
    fn flush_due(&self) {
        let mut state = self.state.lock().expect("group commit lock poisoned");
        if state.flushing || state.durable >= self.applied.load(Ordering::Acquire) {
            return;
        }
        state.flushing = true;
        state.failure = None;
        drop(state);
        self.flush_once();
    }

    /// Sets what hands durable batches to watchers; called once, when the store opens.
    pub(crate) fn set_publisher(&self, publish: Box<dyn Fn(Seq) + Send + Sync>) {
        let _ = self.publisher.set(publish);
    }
}

/// The committer thread: sleeps until a flush is due, leads it, and ends with the group commit.
fn run_committer(commit: &Weak<GroupCommit>, committer: &Committer) {
    let mut plan = committer.plan.lock().expect("committer lock poisoned");
    loop {
        if plan.closed {
            return;
        }
        let Some(due) = plan.due else {
            plan = committer.wake.wait(plan).expect("committer lock poisoned");
            continue;
        };
        let now = Instant::now();
        if now < due {
            plan = committer.wake.wait_timeout(plan, due - now).expect("committer lock poisoned").0;
            continue;
        }
        plan.due = None;
        drop(plan);
        match commit.upgrade() {
            Some(commit) => commit.flush_due(),
            None => return,
        }
        plan = committer.plan.lock().expect("committer lock poisoned");
    }
}
