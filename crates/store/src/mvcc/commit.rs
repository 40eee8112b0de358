//! Group commit: writers that wait for durability at the same time share one flush.
//!
//! Every applied batch takes a sequence number. A writer waits until the durable sequence
//! reaches its own; the first waiter to find no flush running starts one, which covers
//! everything applied before it started, and wakes every waiter when it ends. Under load each
//! flush covers the batches that arrived during the previous one, so the cost of durability is
//! shared instead of paid per write.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use tokio::sync::Notify;

use crate::mvcc::backend::Backend;
use crate::{EngineStatistics, StoreError};

/// A sequence number given to each applied batch, in apply order.
pub(crate) type Seq = u64;

pub(crate) struct GroupCommit {
    applied: AtomicU64,
    state: Mutex<CommitState>,
    flushed: Notify,
    publisher: OnceLock<Box<dyn Fn(Seq) + Send + Sync>>,
    /// Where each flush's size is counted.
    statistics: Arc<EngineStatistics>,
}

impl std::fmt::Debug for GroupCommit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GroupCommit")
            .field("applied", &self.applied)
            .field("state", &self.state)
            .finish_non_exhaustive()
    }
}

#[derive(Debug, Default)]
struct CommitState {
    durable: Seq,
    flushing: bool,
    /// The last flush that failed: everything up to `.0` may not be durable.
    failure: Option<(Seq, String)>,
}

impl GroupCommit {
    /// Group commit with nothing applied yet, counting each flush's size in `statistics`.
    pub(crate) fn new(statistics: Arc<EngineStatistics>) -> GroupCommit {
        GroupCommit {
            applied: AtomicU64::new(0),
            state: Mutex::default(),
            flushed: Notify::new(),
            publisher: OnceLock::new(),
            statistics,
        }
    }

    /// Records that one more batch has been applied; called with the engine's write lock held,
    /// so sequence numbers follow apply order.
    pub(crate) fn next_seq(&self) -> Seq {
        self.applied.fetch_add(1, Ordering::AcqRel) + 1
    }

    /// Resolves once batch `seq` is durable, answering the durable sequence reached.
    pub(crate) async fn wait(
        self: &Arc<Self>,
        backend: &Arc<dyn Backend>,
        seq: Seq,
    ) -> Result<Seq, StoreError> {
        if !backend.is_persistent() {
            return Ok(self.applied.load(Ordering::Acquire));
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
                    state.flushing = true;
                    state.failure = None;
                    drop(state);
                    self.lead_flush(backend);
                    continue;
                }
            }
            flushed.await;
        }
    }

    /// Flushes as the leader of the next group. On a multi-threaded runtime with more than one
    /// worker the leader flushes right where it runs, with no thread hand-off at all: a flush
    /// is short (a write and a sync of what was appended), at most one runs at a time (the
    /// others wait for it asynchronously), so it holds at most one worker while the rest run and
    /// steal its queued tasks. With a single worker the runtime moves its other tasks to
    /// another thread first (`block_in_place`); elsewhere the flush runs on a blocking thread.
    /// Every way the flush completes and wakes the waiters even if the leader's caller goes away.
    fn lead_flush(self: &Arc<Self>, backend: &Arc<dyn Backend>) {
        let (this, backend) = (self.clone(), backend.clone());
        let flush = move || this.flush_once(backend);
        let runtime = tokio::runtime::Handle::current();
        match runtime.runtime_flavor() {
            tokio::runtime::RuntimeFlavor::MultiThread if runtime.metrics().num_workers() > 1 => flush(),
            tokio::runtime::RuntimeFlavor::MultiThread => tokio::task::block_in_place(flush),
            _ => drop(tokio::task::spawn_blocking(flush)),
        }
    }

    /// One flush, then: record it (and how many batches it made durable), wake the waiters, publish what became durable, and when
    /// more was applied meanwhile, flush again in the background, so a write whose writer went
    /// away (a cancelled request) still becomes durable and visible to watchers.
    fn flush_once(self: Arc<Self>, backend: Arc<dyn Backend>) {
        let upto = self.applied.load(Ordering::Acquire);
        let result = backend.flush();
        let mut state = self.state.lock().expect("group commit lock poisoned");
        let again = match result {
            Ok(()) => {
                if upto > state.durable {
                    self.statistics.group_committed(upto - state.durable);
                }
                state.durable = state.durable.max(upto);
                self.applied.load(Ordering::Acquire) > state.durable
            }
            Err(error) => {
                tracing::error!(%error, "flushing the store failed");
                state.failure = Some((upto, error.to_string()));
                false
            }
        };
        state.flushing = again;
        let durable = state.durable;
        drop(state);
        self.flushed.notify_waiters();
        if let Some(publish) = self.publisher.get() {
            publish(durable);
        }
        if again {
            drop(tokio::task::spawn_blocking(move || self.flush_once(backend)));
        }
    }

    /// Sets what hands durable batches to watchers; called once, when the store opens.
    pub(crate) fn set_publisher(&self, publish: Box<dyn Fn(Seq) + Send + Sync>) {
        let _ = self.publisher.set(publish);
    }
}
