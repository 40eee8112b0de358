//! The scheduling queue, as kube-scheduler's: Applications waiting for a node are *active*
//! (tried in the queue-sort order once their backoff has passed), *in flight* (decided, bind
//! not yet written), or *unschedulable* (tried, fitting nowhere). An unschedulable Application
//! is not tried again until something that may make it fit happens (a node joins or changes,
//! capacity is freed) or it has waited [`FLUSH_AFTER`]; then it waits out a backoff that
//! doubles with each failed attempt, from [`INITIAL_BACKOFF`] to [`MAX_BACKOFF`]. A change of
//! its own status does not wake it, so explaining a failure does not loop.

use std::cmp::Ordering;
use std::collections::HashMap;
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

/// Every Application waiting for a node.
#[derive(Debug, Default)]
pub struct Queue {
    entries: HashMap<String, Entry>,
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
            self.entries.remove(&app.id);
            return;
        }
        match self.entries.get_mut(&app.id) {
            Some(entry) => {
                let respecified = entry.app.generation != app.generation || entry.app.uid != app.uid;
                if entry.stage == Stage::Unschedulable && respecified {
                    entry.stage = Stage::Active;
                }
                entry.app = app;
                entry.object = object;
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
                self.entries.insert(id, entry);
            }
        }
    }

    /// Drops an Application (gone, or bound).
    pub fn remove(&mut self, id: &str) {
        self.entries.remove(id);
    }

    /// Something changed that may let unschedulable Applications fit: they become active
    /// (each still waits out its backoff).
    pub fn move_unschedulable(&mut self) {
        for entry in self.entries.values_mut().filter(|e| e.stage == Stage::Unschedulable) {
            entry.stage = Stage::Active;
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
        let mut next: Option<Instant> = None;
        let mut ready: Vec<&Entry> = Vec::new();
        for entry in self.entries.values_mut() {
            if entry.stage == Stage::Unschedulable
                && entry.since.is_some_and(|since| now >= since + FLUSH_AFTER)
            {
                entry.stage = Stage::Active;
            }
        }
        for entry in self.entries.values() {
            if entry.stage != Stage::Active {
                continue;
            }
            match entry.backoff_until {
                Some(until) if until > now => next = Some(next.map_or(until, |n| n.min(until))),
                _ => ready.push(entry),
            }
        }
        ready.sort_by(|a, b| order(a, b));
        let ids: Vec<String> = ready.iter().take(most).map(|entry| entry.app.id.clone()).collect();
        let popped = ids
            .iter()
            .filter_map(|id| {
                let entry = self.entries.get_mut(id)?;
                entry.stage = Stage::InFlight;
                Some(entry.clone())
            })
            .collect();
        (popped, next)
    }

    /// An Application fit nowhere (or its bind failed): unschedulable, with a longer backoff.
    pub fn failed(&mut self, id: &str, now: Instant) {
        if let Some(entry) = self.entries.get_mut(id) {
            entry.attempts += 1;
            let factor = 1u32 << (entry.attempts - 1).min(8);
            entry.backoff_until = Some(now + (INITIAL_BACKOFF * factor).min(MAX_BACKOFF));
            entry.stage = Stage::Unschedulable;
            entry.since = Some(now);
        }
    }

    /// An unschedulable Application is to be tried again without waiting for a relevant
    /// change (its backoff still holds): its explanation could not be written.
    pub fn activate(&mut self, id: &str) {
        if let Some(entry) = self.entries.get_mut(id).filter(|e| e.stage == Stage::Unschedulable) {
            entry.stage = Stage::Active;
        }
    }

    /// An Application in flight is to be tried again (its bind met a newer version).
    pub fn retry(&mut self, id: &str) {
        if let Some(entry) = self.entries.get_mut(id).filter(|e| e.stage == Stage::InFlight) {
            entry.stage = Stage::Active;
        }
    }
}

#[cfg(test)]
mod tests;
