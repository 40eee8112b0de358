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
}

impl Entry {
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

/// Every Application waiting for a node, indexed by stage so that a pop visits only the
/// Applications it may take: the active ones whose backoff has passed, the backoffs and flushes
/// that have come due, never every waiting Application.
#[derive(Debug, Default)]
pub struct Queue {
    entries: HashMap<String, Entry>,
    /// Active, with no backoff left to wait out (as of the last pop): what a pop chooses from.
    ready: HashSet<String>,
    /// Active ones still backing off, by when their backoff ends. An item whose Application
    /// has since left this stage, or backs off until another time, is dropped when it comes up.
    backing_off: BinaryHeap<Reverse<(Instant, String)>>,
    /// Unschedulable ones, for a change that may let them fit.
    unschedulable: HashSet<String>,
    /// Unschedulable ones by when they have waited [`FLUSH_AFTER`]; kept as `backing_off` is.
    flushes: BinaryHeap<Reverse<(Instant, String)>>,
}

impl Queue {
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
                entry.app = app;
                entry.object = object;
                if wake {
                    let id = entry.app.id.clone();
                    self.unschedulable.remove(&id);
                    self.make_active(&id);
                }
            }
            None => {
                let id = app.id.clone();
                let entry = Entry {
                    app,
                    object,
                    stage: Stage::Active,
                    attempts: 0,
                    backoff_until: None,
                    since: None,
                };
                self.entries.insert(id.clone(), entry);
                self.ready.insert(id);
            }
        }
    }

    /// Drops an Application (gone, or bound).
    pub fn remove(&mut self, id: &str) {
        if self.entries.remove(id).is_some() {
            self.ready.remove(id);
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

    /// Up to `most` active Applications whose backoff has passed, in `order`, now in flight;
    /// with when the next backing-off one is due. Unschedulable ones that waited
    /// [`FLUSH_AFTER`] become active first.
    pub fn pop(
        &mut self,
        now: Instant,
        most: usize,
        order: impl Fn(&Entry, &Entry) -> Ordering,
    ) -> (Vec<Entry>, Option<Instant>) {
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
                self.ready.insert(id);
            }
        };
        let mut ready: Vec<&Entry> = self.ready.iter().filter_map(|id| self.entries.get(id)).collect();
        if ready.len() > most {
            ready.select_nth_unstable_by(most, |a, b| order(a, b));
            ready.truncate(most);
        }
        ready.sort_by(|a, b| order(a, b));
        let ids: Vec<String> = ready.iter().map(|entry| entry.app.id.clone()).collect();
        let popped = ids
            .iter()
            .filter_map(|id| {
                self.ready.remove(id);
                let entry = self.entries.get_mut(id)?;
                entry.stage = Stage::InFlight;
                Some(entry.clone())
            })
            .collect();
        self.compact();
        (popped, next)
    }

    /// Drops the heaps' stale items once they outnumber the live ones, so that Applications
    /// that fail, wake and fail again do not grow them for as long as a flush takes.
    fn compact(&mut self) {
        let live = self.entries.len() + 1024;
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
            self.ready.remove(id);
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
            None => {
                self.ready.insert(id.to_owned());
            }
        }
    }
}

#[cfg(test)]
mod tests;
