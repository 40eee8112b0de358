//! The keyed work queue: what a loop has to reconcile, deduplicated, with per-key backoff.
//!
//! Its rules are client-go's workqueue's:
//! - a key added many times before a worker takes it is taken once;
//! - a key being reconciled is never handed to a second worker; added meanwhile, it is marked
//!   and queued again when the running reconcile finishes;
//! - a key may be scheduled for later (a requeue, or a retry after backoff); the earliest
//!   schedule wins, and taking the key now cancels it;
//! - failures of a key grow its backoff exponentially up to a cap; a success resets it.
//!
//! [`State`] holds the rules and does no IO (its tests drive it directly); [`Queue`] wraps it
//! for workers that wait.

use std::cmp::Reverse;
use std::collections::hash_map::Entry;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::sync::Mutex;
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

use crate::{Action, Key};

/// How failures of a key space out its retries: `first`, doubling to at most `max`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// The delay after the first failure.
    pub first: Duration,
    /// The longest delay.
    pub max: Duration,
}

impl Default for Backoff {
    fn default() -> Backoff {
        Backoff { first: Duration::from_millis(200), max: Duration::from_secs(300) }
    }
}

impl Backoff {
    /// The delay after `failures` consecutive failures (the first is 1).
    pub fn delay(&self, failures: u32) -> Duration {
        let doublings = failures.saturating_sub(1).min(32);
        self.first.saturating_mul(1u32 << doublings.min(31)).min(self.max)
    }
}

/// How a reconcile ended, as the queue needs to know it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// It succeeded and asked for this next.
    Done(Action),
    /// It failed: retry after backoff.
    Failed,
}

/// Where a known key stands. A key is in at most one of these at a time; a key in none (neither
/// waiting nor running) has no slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Slot {
    /// Waiting in `ready` for a worker.
    Queued,
    /// Being reconciled.
    Active,
    /// Being reconciled, and added again meanwhile: queued again when it finishes.
    ActiveDirty,
}

/// The queue's rules over time passed in: no IO, no clock of its own.
///
/// Every key's standing is one slot in one map, so that each step (add, take, finish) hashes the
/// key once: the queue's cost per key is mostly hashing, under a lock every worker shares.
#[derive(Debug, Default)]
pub struct State {
    ready: VecDeque<Key>,
    slots: HashMap<Key, Slot>,
    active: usize,
    scheduled: HashMap<Key, Instant>,
    timers: BinaryHeap<Reverse<(Instant, u64, Key)>>,
    failures: HashMap<Key, u32>,
    sequence: u64,
    hold_failing: bool,
}

impl State {
    /// A queue where a failing key waits out its backoff even when it changes meanwhile (for
    /// loops whose own writes on failure would otherwise wake them at once).
    pub fn holding_failing_keys() -> State {
        State { hold_failing: true, ..State::default() }
    }

    /// Queues `key` to run as soon as a worker is free; answers whether a worker should be
    /// woken (the key was not already waiting or running).
    pub fn add(&mut self, key: Key) -> bool {
        if self.hold_failing
            && !self.failures.is_empty()
            && self.failures.contains_key(&key)
            && self.scheduled.contains_key(&key)
        {
            return false;
        }
        match self.slots.entry(key) {
            Entry::Occupied(mut slot) => {
                if *slot.get() == Slot::Active {
                    slot.insert(Slot::ActiveDirty);
                }
                false
            }
            Entry::Vacant(slot) => {
                self.ready.push_back(slot.key().clone());
                slot.insert(Slot::Queued);
                true
            }
        }
    }

    /// Schedules `key` to be queued at `at`, unless it is already scheduled earlier.
    pub fn add_at(&mut self, key: Key, at: Instant) {
        match self.scheduled.get(&key) {
            Some(earlier) if *earlier <= at => {}
            _ => {
                self.scheduled.insert(key.clone(), at);
                self.sequence += 1;
                self.timers.push(Reverse((at, self.sequence, key)));
            }
        }
    }

    /// Queues every scheduled key whose time has come; answers how many were queued and when
    /// the next one is due.
    pub fn release_due(&mut self, now: Instant) -> (usize, Option<Instant>) {
        let mut released = 0;
        while let Some(Reverse((at, _, key))) = self.timers.peek().cloned() {
            if self.scheduled.get(&key) != Some(&at) {
                self.timers.pop();
                continue;
            }
            if at > now {
                return (released, Some(at));
            }
            self.timers.pop();
            self.scheduled.remove(&key);
            if self.add(key) {
                released += 1;
            }
        }
        (released, None)
    }

    /// The next key for a worker, which now holds it until [`State::finish`].
    pub fn take(&mut self) -> Option<Key> {
        let key = self.ready.pop_front()?;
        if let Some(slot) = self.slots.get_mut(&key) {
            *slot = Slot::Active;
        }
        self.active += 1;
        if !self.scheduled.is_empty() {
            self.scheduled.remove(&key);
        }
        Some(key)
    }

    /// A worker finished `key` at `now` with `outcome`; answers the delay of a retry after a
    /// failure, and whether the key was queued again at once (it changed while running).
    pub fn finish(&mut self, key: &Key, outcome: Outcome, now: Instant, backoff: &Backoff) -> Finished {
        let dirty = match self.slots.remove(key) {
            Some(Slot::Active) => false,
            Some(Slot::ActiveDirty) => true,
            // Not running (no worker finishes a key it did not take): nothing to finish.
            Some(Slot::Queued) => {
                self.slots.insert(key.clone(), Slot::Queued);
                return Finished { retry: None, requeued: false };
            }
            None => return Finished { retry: None, requeued: false },
        };
        self.active -= 1;
        let retry = match outcome {
            Outcome::Done(action) => {
                if !self.failures.is_empty() {
                    self.failures.remove(key);
                }
                if let Action::RequeueAfter(after) = action {
                    self.add_at(key.clone(), now + after);
                }
                None
            }
            Outcome::Failed => {
                let failures = self.failures.entry(key.clone()).or_insert(0);
                *failures = failures.saturating_add(1);
                let delay = backoff.delay(*failures);
                self.add_at(key.clone(), now + delay);
                Some(delay)
            }
        };
        let requeued = dirty && self.add(key.clone());
        Finished { retry, requeued }
    }

    /// Keys waiting for a worker.
    pub fn depth(&self) -> usize {
        self.ready.len()
    }

    /// Keys being reconciled.
    pub fn in_flight(&self) -> usize {
        self.active
    }

    /// Consecutive failures of `key` so far.
    pub fn failures(&self, key: &Key) -> u32 {
        self.failures.get(key).copied().unwrap_or(0)
    }
}

/// What finishing a key did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Finished {
    /// The retry's delay, after a failure.
    pub retry: Option<Duration>,
    /// The key changed while it ran and is queued again.
    pub requeued: bool,
}

/// The queue shared by a loop's sources, timer and workers.
#[derive(Debug, Default)]
pub struct Queue {
    state: Mutex<State>,
    work: Notify,
    timer: Notify,
    workers: usize,
}

impl Queue {
    /// A queue over `state` served by `workers` workers.
    pub fn new(state: State, workers: usize) -> Queue {
        Queue { state: Mutex::new(state), work: Notify::new(), timer: Notify::new(), workers }
    }

    /// Queues `key` now.
    pub fn add(&self, key: Key) {
        if self.lock().add(key) {
            self.work.notify_one();
        }
    }

    /// Queues `key` at `at`.
    pub fn add_at(&self, key: Key, at: Instant) {
        self.lock().add_at(key, at);
        self.timer.notify_one();
    }

    /// Queues every key of `keys` now, under one lock.
    pub fn add_all(&self, keys: impl IntoIterator<Item = Key>) {
        let added = {
            let mut state = self.lock();
            keys.into_iter().filter(|key| state.add(key.clone())).count()
        };
        // One wake-up per idle worker at most; the rest are taken by workers as they finish.
        for _ in 0..added.min(self.workers.max(1)) {
            self.work.notify_one();
        }
    }

    /// Waits for a key to work on; answers it and how many keys still wait.
    pub async fn take(&self) -> (Key, usize) {
        loop {
            if let Some(taken) = self.try_take() {
                return taken;
            }
            let notified = self.work.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if let Some(taken) = self.try_take() {
                return taken;
            }
            notified.await;
        }
    }

    /// Takes a key if one waits, for tests that drive a queue by hand.
    #[cfg(test)]
    pub(crate) fn try_take_for_tests(&self) -> Option<(Key, usize)> {
        self.try_take()
    }

    /// Finishes a taken key successfully, for tests that drive a queue by hand.
    #[cfg(test)]
    pub(crate) fn finish_for_tests(&self, key: &Key) {
        self.lock().finish(key, Outcome::Done(Action::AwaitChange), Instant::now(), &Backoff::default());
    }

    fn try_take(&self) -> Option<(Key, usize)> {
        let mut state = self.lock();
        state.take().map(|key| (key, state.depth()))
    }

    /// A worker finished `key`; when another key waits, the worker takes it at once, under the
    /// same lock (a busy worker locks the queue once per key).
    pub fn finish_and_take(
        &self,
        key: &Key,
        outcome: Outcome,
        backoff: &Backoff,
    ) -> (Finished, Option<(Key, usize)>) {
        let (finished, next) = {
            let mut state = self.lock();
            let finished = state.finish(key, outcome, Instant::now(), backoff);
            let next = state.take().map(|key| (key, state.depth()));
            (finished, next)
        };
        if finished.requeued && next.is_none() {
            self.work.notify_one();
        }
        if outcome != Outcome::Done(Action::AwaitChange) {
            self.timer.notify_one();
        }
        (finished, next)
    }

    /// Queues scheduled keys as their time comes, until dropped.
    pub async fn run_timer(&self) {
        loop {
            let notified = self.timer.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let (released, next) = self.lock().release_due(Instant::now());
            for _ in 0..released {
                self.work.notify_one();
            }
            match next {
                Some(at) => {
                    tokio::select! {
                        () = tokio::time::sleep_until(at) => {}
                        () = &mut notified => {}
                    }
                }
                None => notified.await,
            }
        }
    }

    /// Keys waiting for a worker.
    pub fn depth(&self) -> usize {
        self.lock().depth()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().expect("the work queue's lock is never held across a panic")
    }
}

#[cfg(test)]
mod tests;
