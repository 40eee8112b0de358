//! The receiving end of a watch, and the bounded channel that feeds it.
//!
//! A watcher is fed whole revisions. When it cannot keep up, the feeding side cuts it off
//! instead of skipping events: the watcher then drains what it was sent and reports
//! [`StoreError::WatchLagged`] naming the last revision it received in full, so a new watch
//! after that revision continues with no gap and no duplicate.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::{Notify, mpsc};

use crate::{Event, Revision, StoreError};

/// The events of one revision that a watcher's prefix selects, in the order they were written;
/// a batch with no events reports progress up to its revision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatchBatch {
    /// The revision every event in the batch was written at.
    pub revision: Revision,
    /// The events; none for a progress report.
    pub events: Vec<Event>,
}

/// What a watch yields: an event, or word that everything up to a revision has been sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// A change under the prefix.
    Event(Event),
    /// Every event up to and including this revision has been delivered; nothing under the
    /// prefix changed since the last one.
    Progress(Revision),
}

/// A stream of events under a prefix, in revision order. Dropping it ends the watch.
#[derive(Debug)]
pub struct Watcher {
    ready: VecDeque<Event>,
    /// Progress the backlog reported after its events, not yet told.
    progress: Option<Revision>,
    receiver: mpsc::Receiver<Result<Arc<WatchBatch>, StoreError>>,
    cut_off: Arc<AtomicBool>,
    last_revision: Revision,
    finished: bool,
    progress_asked: Arc<Notify>,
    /// Whether the store reports progress to this watcher only once it has sent every change
    /// up to the revision reported.
    ordered_progress: bool,
}

/// A way to ask a [`Watcher`] for a progress report, kept by whoever waits on what the watcher
/// reaches while another task reads it.
#[derive(Debug, Clone)]
pub struct ProgressRequester(Arc<Notify>);

impl ProgressRequester {
    /// Asks the store to tell the watcher promptly how far it is, as a progress report when
    /// nothing under its prefix changed. Requests made before the store takes one count as
    /// one. A store whose watchers are told of every revision as it is written has nothing
    /// more to tell and ignores it.
    pub fn request(&self) {
        self.0.notify_one();
    }
}

impl Watcher {
    /// A way to ask for this watcher's progress from elsewhere ([`ProgressRequester::request`]);
    /// `None` when its progress reports are not ordered, since an answer to a request could
    /// then not be relied on.
    pub fn progress_requester(&self) -> Option<ProgressRequester> {
        self.ordered_progress.then(|| ProgressRequester(self.progress_asked.clone()))
    }

    /// Marks a watcher whose store may report progress up to a revision before it has sent
    /// every change up to it (etcd before 3.4.31 and 3.5.13): a change can still follow at or
    /// below a revision reported. Such a report tells roughly how far the watch is, enough to
    /// start following from there, but not that a copy kept from its changes is complete.
    pub fn with_unordered_progress(mut self) -> Watcher {
        self.ordered_progress = false;
        self
    }

    /// Whether every progress report comes after every change it covers.
    pub fn progress_is_ordered(&self) -> bool {
        self.ordered_progress
    }

    /// The next event; `None` once the store has shut down. After an error nothing follows.
    pub async fn next(&mut self) -> Option<Result<Event, StoreError>> {
        loop {
            match self.next_change().await? {
                Ok(Change::Event(event)) => return Some(Ok(event)),
                Ok(Change::Progress(_)) => continue,
                Err(error) => return Some(Err(error)),
            }
        }
    }

    /// The next event or progress report; `None` once the store has shut down.
    pub async fn next_change(&mut self) -> Option<Result<Change, StoreError>> {
        loop {
            if let Some(event) = self.ready.pop_front() {
                return Some(Ok(Change::Event(event)));
            }
            if let Some(reached) = self.progress.take() {
                return Some(Ok(Change::Progress(reached)));
            }
            if self.finished {
                return None;
            }
            match self.receiver.recv().await {
                Some(Ok(batch)) if batch.events.is_empty() => {
                    self.last_revision = self.last_revision.max(batch.revision);
                    return Some(Ok(Change::Progress(self.last_revision)));
                }
                Some(Ok(batch)) => {
                    self.last_revision = batch.revision;
                    self.ready.extend(batch.events.iter().cloned());
                }
                Some(Err(error)) => {
                    self.finished = true;
                    return Some(Err(error));
                }
                None => {
                    self.finished = true;
                    if self.cut_off.load(Ordering::Acquire) {
                        return Some(Err(StoreError::WatchLagged { resume_after: self.last_revision }));
                    }
                    return None;
                }
            }
        }
    }
}

/// The feeding end of a [`Watcher`], held by whatever delivers its events.
#[derive(Debug)]
pub struct WatchSender {
    sender: mpsc::Sender<Result<Arc<WatchBatch>, StoreError>>,
    cut_off: Arc<AtomicBool>,
    progress_asked: Arc<Notify>,
}

/// Whether a watcher is still listening after a delivery attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    /// The batch was queued.
    Queued,
    /// The watcher is gone or was cut off; drop this sender.
    Gone,
}

impl WatchSender {
    /// Queues a batch without waiting. A full queue cuts the watcher off: it will report
    /// [`StoreError::WatchLagged`] once it has drained what it holds.
    pub fn offer(&self, batch: Arc<WatchBatch>) -> Delivery {
        match self.sender.try_send(Ok(batch)) {
            Ok(()) => Delivery::Queued,
            Err(mpsc::error::TrySendError::Full(_)) => {
                self.cut_off.store(true, Ordering::Release);
                Delivery::Gone
            }
            Err(mpsc::error::TrySendError::Closed(_)) => Delivery::Gone,
        }
    }

    /// Ends the watch with an error, delivered after what the watcher already holds. When the
    /// queue is full the watcher is cut off instead, which it reports as lagged.
    pub fn fail(self, error: StoreError) {
        if let Err(mpsc::error::TrySendError::Full(_)) = self.sender.try_send(Err(error)) {
            self.cut_off.store(true, Ordering::Release);
        }
    }

    /// Resolves when the watcher has been dropped.
    pub async fn closed(&self) {
        self.sender.closed().await;
    }

    /// Whether the watcher has been dropped.
    pub fn is_closed(&self) -> bool {
        self.sender.is_closed()
    }

    /// Resolves when the watcher's reader has asked for a progress report since the last time
    /// this resolved.
    pub async fn progress_requested(&self) {
        self.progress_asked.notified().await;
    }
}

/// A watcher that starts after revision `after`, first yields `backlog` (history read before
/// the watch went live), then whatever the returned sender queues, holding at most `capacity`
/// queued batches before it is cut off.
pub fn watch_channel(capacity: usize, after: Revision, backlog: Vec<WatchBatch>) -> (WatchSender, Watcher) {
    let (sender, receiver) = mpsc::channel(capacity.max(1));
    let cut_off = Arc::new(AtomicBool::new(false));
    let last_revision = backlog.last().map_or(after, |batch| batch.revision);
    // A backlog that ends in a progress report (no events) reports it once its events are out.
    let progress = backlog.last().filter(|batch| batch.events.is_empty()).map(|batch| batch.revision);
    let ready = backlog.into_iter().flat_map(|batch| batch.events).collect();
    let progress_asked = Arc::new(Notify::new());
    let watcher = Watcher {
        ready,
        progress,
        receiver,
        cut_off: cut_off.clone(),
        last_revision,
        finished: false,
        progress_asked: progress_asked.clone(),
        ordered_progress: true,
    };
    (WatchSender { sender, cut_off, progress_asked }, watcher)
}
