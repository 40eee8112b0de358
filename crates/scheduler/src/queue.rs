//! The scheduling queue, as kube-scheduler's: Applications waiting for a node are *active*
//! (tried in the queue-sort order once their backoff has passed), *in flight* (decided, bind
//! not yet written), or *unschedulable* (tried, fitting nowhere). An unschedulable Application
//! is not tried again until something that may make it fit happens (a node joins or changes,
//! capacity is freed) or it has waited [`FLUSH_AFTER`]; then it waits out a backoff that
//! doubles with each failed attempt, from [`INITIAL_BACKOFF`] to [`MAX_BACKOFF`]. A change of
//! its own status does not wake it, so explaining a failure does not loop.

use std::cmp::{Ordering, Reverse};
use std::collections::{BinaryHeap, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kayra_registry::Object;

use crate::framework::QueueSort;
use crate::model::App;

/// kube-scheduler's `podInitialBackoffSeconds`.
pub const INITIAL_BACKOFF: Duration = Duration::from_secs(1);
/// kube-scheduler's `podMaxBackoffSeconds`.
pub const MAX_BACKOFF: Duration = Duration::from_secs(10);
/// kube-scheduler's `podMaxInUnschedulablePodsDuration`.
pub const FLUSH_AFTER: Duration = Duration::from_secs(300);

/// Where a waiting Application is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// To be tried.
    Active,
    /// Decided; its bind is being written.
    InFlight,
    /// Tried and fitting nowhere.
    Unschedulable,
}

/// One waiting Application.
#[derive(Debug, Clone)]
pub struct Entry {
    /// What the scheduler reads of it.
    pub app: App,
    /// The object as last seen, for its status.
    pub object: Arc<Object>,
    /// Where it is.
    pub stage: Stage,
    /// Failed attempts so far.
    pub attempts: u32,
    /// Not tried before this.
    pub backoff_until: Option<Instant>,
    /// Since when it is unschedulable.
    pub since: Option<Instant>,
    /// While it is ready to be popped: the number of its item in the queue's ready heap.
    ready: Option<u64>,
}

impl Entry {
    /// A newly waiting Application: active, never tried.
    pub fn new(app: App, object: Arc<Object>) -> Entry {
        Entry {
            app,
            object,
            stage: Stage::Active,
            attempts: 0,
            backoff_until: None,
            since: None,
            ready: None,
        }
    }

    /// A failed attempt at `now`: unschedulable, its backoff doubled (up to the longest).
    fn fail(&mut self, now: Instant) {
        self.attempts += 1;
        let factor = 1u32 << (self.attempts - 1).min(8);
        self.backoff_until = Some(now + (INITIAL_BACKOFF * factor).min(MAX_BACKOFF));
        self.stage = Stage::Unschedulable;
        self.since = Some(now);
    }

    /// Whether a backoff item ending `until` is still this entry's: active, backing off until then.
    fn backs_off_until(&self, until: Instant) -> bool {
        self.stage == Stage::Active && self.backoff_until == Some(until)
    }

    /// Whether a flush item due `at` is still this entry's: unschedulable since `at` less
    /// [`FLUSH_AFTER`].
    fn flushes_at(&self, at: Instant) -> bool {
        self.stage == Stage::Unschedulable && self.since.is_some_and(|since| since + FLUSH_AFTER == at)
    }
}

/// An Application ready to be popped, as the ready heap holds it: the greatest item is the one
/// the queue order places first. An item is current while its entry's `ready` is its `number`;
/// one whose Application has left the ready set, or has been pushed again since, is dropped
/// when it comes up.
struct Ready {
    app: App,
    number: u64,
    order: Arc<dyn QueueSort>,
}

impl Ord for Ready {
    fn cmp(&self, other: &Ready) -> Ordering {
        self.order.compare(&other.app, &self.app).then_with(|| other.number.cmp(&self.number))
    }
}

impl PartialOrd for Ready {
    fn partial_cmp(&self, other: &Ready) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Ready {
    fn eq(&self, other: &Ready) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Ready {}

/// Every Application waiting for a node, indexed by stage so that a pop visits only the
/// Applications it takes (and the stale items it passes): the ready ones in a heap kept in the
/// queue order, the backoffs and flushes that have come due, never every waiting Application.
pub struct Queue {
    entries: HashMap<String, Entry>,
    /// The queue order.
    order: Arc<dyn QueueSort>,
    /// Active, with no backoff left to wait out (as of the last pop), in the queue order: what
    /// a pop takes from.
    ready: BinaryHeap<Ready>,
    /// The number the last ready item got.
    numbered: u64,
    /// Active ones still backing off, by when their backoff ends. An item whose Application
    /// has since left this stage, or backs off until another time, is dropped when it comes up.
    backing_off: BinaryHeap<Reverse<(Instant, String)>>,
    /// Unschedulable ones, for a change that may let them fit.
    unschedulable: HashSet<String>,
    /// Unschedulable ones by when they have waited [`FLUSH_AFTER`]; kept as `backing_off` is.
    flushes: BinaryHeap<Reverse<(Instant, String)>>,
}

impl std::fmt::Debug for Queue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Queue")
            .field("entries", &self.entries.len())
            .field("ready", &self.ready.len())
            .field("backing_off", &self.backing_off.len())
            .field("unschedulable", &self.unschedulable.len())
            .finish_non_exhaustive()
    }
}

impl Queue {
    /// An empty queue that pops in `order`.
    pub fn new(order: Arc<dyn QueueSort>) -> Queue {
        Queue {
            entries: HashMap::new(),
            order,
            ready: BinaryHeap::new(),
            numbered: 0,
            backing_off: BinaryHeap::new(),
            unschedulable: HashSet::new(),
            flushes: BinaryHeap::new(),
        }
    }

    /// How many wait, in any stage.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether none waits.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// One waiting Application.
    pub fn get(&self, id: &str) -> Option<&Entry> {
        self.entries.get(id)
    }

    /// Records an Application as the store has it now: queued when it wants a node, dropped
    /// otherwise. An unschedulable one stays so unless its spec changed (a new generation).
    pub fn upsert(&mut self, app: App, object: Arc<Object>) {
        if !app.wants_placement() {
            self.remove(&app.id);
            return;
        }
        match self.entries.get_mut(&app.id) {
            Some(entry) => {
                let respecified = entry.app.generation != app.generation || entry.app.uid != app.uid;
                let wake = entry.stage == Stage::Unschedulable && respecified;
                // A ready one whose place in the order changed (its priority, say) takes its
                // new place; a status write leaves it where it is.
                let reorder =
                    entry.ready.is_some() && self.order.compare(&entry.app, &app) != Ordering::Equal;
                entry.app = app;
                entry.object = object;
                if reorder || wake {
                    let id = entry.app.id.clone();
                    if reorder {
                        entry.ready = None;
                        self.make_ready(&id);
                        self.compact();
                    }
                    if wake {
                        self.unschedulable.remove(&id);
                        self.make_active(&id);
                    }
                }
            }
            None => {
                let id = app.id.clone();
                self.entries.insert(id.clone(), Entry::new(app, object));
                self.make_ready(&id);
            }
        }
    }

    /// Drops an Application (gone, or bound).
    pub fn remove(&mut self, id: &str) {
        if self.entries.remove(id).is_some() {
            self.unschedulable.remove(id);
        }
    }

    /// Something changed that may let unschedulable Applications fit: they become active
    /// (each still waits out its backoff).
    pub fn move_unschedulable(&mut self) {
        for id in std::mem::take(&mut self.unschedulable) {
            self.make_active(&id);
        }
    }

    /// Up to `most` active Applications whose backoff has passed, in the queue order, now in
    /// flight; with when the next backing-off one is due. Unschedulable ones that waited
    /// [`FLUSH_AFTER`] become active first.
    pub fn pop(&mut self, now: Instant, most: usize) -> (Vec<Entry>, Option<Instant>) {
        while let Some(Reverse((at, id))) = self.flushes.peek().cloned()
            && at <= now
        {
            self.flushes.pop();
            if self.entries.get(&id).is_some_and(|entry| entry.flushes_at(at)) {
                self.unschedulable.remove(&id);
                self.make_active(&id);
            }
        }
        let next = loop {
            let Some(Reverse((until, id))) = self.backing_off.peek().cloned() else { break None };
            let current = self.entries.get(&id).is_some_and(|entry| entry.backs_off_until(until));
            if current && until > now {
                break Some(until);
            }
            self.backing_off.pop();
            if current {
                self.make_ready(&id);
            }
        };
        let mut popped = Vec::new();
        while popped.len() < most
            && let Some(item) = self.ready.pop()
        {
            if let Some(entry) = self.entries.get_mut(&item.app.id)
                && entry.ready == Some(item.number)
            {
                entry.ready = None;
                entry.stage = Stage::InFlight;
                popped.push(entry.clone());
            }
        }
        self.compact();
        (popped, next)
    }

    /// Drops the heaps' stale items once they outnumber the live ones, so that Applications
    /// that fail, wake and fail again, or whose status is written while they wait, do not grow
    /// them for as long as they wait.
    fn compact(&mut self) {
        let live = self.entries.len() + 1024;
        if self.ready.len() > 2 * live {
            let entries = &self.entries;
            self.ready.retain(|item| entries.get(&item.app.id).is_some_and(|e| e.ready == Some(item.number)));
        }
        if self.backing_off.len() > 2 * live {
            let entries = &self.entries;
            self.backing_off
                .retain(|Reverse((until, id))| entries.get(id).is_some_and(|e| e.backs_off_until(*until)));
        }
        if self.flushes.len() > 2 * live {
            let entries = &self.entries;
            self.flushes.retain(|Reverse((at, id))| entries.get(id).is_some_and(|e| e.flushes_at(*at)));
        }
    }

    /// An Application fit nowhere (or its bind failed): unschedulable, with a longer backoff.
    pub fn failed(&mut self, id: &str, now: Instant) {
        if let Some(entry) = self.entries.get_mut(id) {
            entry.fail(now);
            entry.ready = None;
            self.unschedulable.insert(id.to_owned());
            self.flushes.push(Reverse((now + FLUSH_AFTER, id.to_owned())));
        }
    }

    /// An unschedulable Application is to be tried again without waiting for a relevant
    /// change (its backoff still holds): its explanation could not be written.
    pub fn activate(&mut self, id: &str) {
        if self.unschedulable.remove(id) {
            self.make_active(id);
        }
    }

    /// An Application in flight is to be tried again (its bind met a newer version).
    pub fn retry(&mut self, id: &str) {
        if self.entries.get(id).is_some_and(|e| e.stage == Stage::InFlight) {
            self.make_active(id);
        }
    }

    /// Makes a waiting Application active: ready, or backing off until its backoff ends.
    fn make_active(&mut self, id: &str) {
        let Some(entry) = self.entries.get_mut(id) else { return };
        entry.stage = Stage::Active;
        match entry.backoff_until {
            Some(until) => self.backing_off.push(Reverse((until, id.to_owned()))),
            None => self.make_ready(id),
        }
    }

    /// Puts an active Application in the ready heap, unless it is there already.
    fn make_ready(&mut self, id: &str) {
        let Some(entry) = self.entries.get_mut(id) else { return };
        if entry.ready.is_some() {
            return;
        }
        self.numbered += 1;
        entry.ready = Some(self.numbered);
        self.ready.push(Ready { app: entry.app.clone(), number: self.numbered, order: self.order.clone() });
    }
}

#[cfg(test)]
mod tests;
