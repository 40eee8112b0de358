//! The work queue's rules, driven directly with time passed in.

use std::time::Duration;

use tokio::time::Instant;

use super::{Backoff, Outcome, State};
use crate::{Action, Key};

fn key(name: &str) -> Key {
    Key::new(name)
}

const BACKOFF: Backoff = Backoff { first: Duration::from_millis(100), max: Duration::from_secs(1) };

#[test]
fn a_key_added_many_times_before_it_runs_is_taken_once() {
    let mut state = State::default();
    for _ in 0..1000 {
        state.add(key("a"));
    }
    assert_eq!(state.depth(), 1);
    assert_eq!(state.take(), Some(key("a")));
    assert_eq!(state.take(), None);
}

#[test]
fn keys_are_taken_in_the_order_they_were_first_added() {
    let mut state = State::default();
    for name in ["b", "a", "b", "c", "a"] {
        state.add(key(name));
    }
    let taken: Vec<Key> = std::iter::from_fn(|| state.take()).collect();
    assert_eq!(taken, vec![key("b"), key("a"), key("c")]);
}

#[test]
fn a_running_key_is_not_handed_out_again_but_runs_once_more_after() {
    let mut state = State::default();
    let now = Instant::now();
    state.add(key("a"));
    assert_eq!(state.take(), Some(key("a")));
    assert!(!state.add(key("a")), "no worker is woken for a running key");
    assert!(!state.add(key("a")));
    assert_eq!(state.take(), None, "never two reconciles of one key at once");
    let finished = state.finish(&key("a"), Outcome::Done(Action::AwaitChange), now, &BACKOFF);
    assert!(finished.requeued);
    assert_eq!(state.take(), Some(key("a")));
    let finished = state.finish(&key("a"), Outcome::Done(Action::AwaitChange), now, &BACKOFF);
    assert!(!finished.requeued, "changes while running are run once");
    assert_eq!(state.take(), None);
}

#[test]
fn failures_back_off_exponentially_to_a_cap_and_a_success_resets_them() {
    let mut state = State::default();
    let now = Instant::now();
    let mut delays = Vec::new();
    for _ in 0..6 {
        state.add(key("a"));
        state.take();
        delays.push(state.finish(&key("a"), Outcome::Failed, now, &BACKOFF).retry.unwrap());
    }
    let millis: Vec<u128> = delays.iter().map(Duration::as_millis).collect();
    assert_eq!(millis, vec![100, 200, 400, 800, 1000, 1000]);
    assert_eq!(state.failures(&key("a")), 6);
    state.add(key("a"));
    state.take();
    assert_eq!(state.finish(&key("a"), Outcome::Done(Action::AwaitChange), now, &BACKOFF).retry, None);
    assert_eq!(state.failures(&key("a")), 0);
    state.add(key("a"));
    state.take();
    assert_eq!(
        state.finish(&key("a"), Outcome::Failed, now, &BACKOFF).retry,
        Some(Duration::from_millis(100))
    );
}

#[test]
fn a_failed_key_is_retried_when_its_backoff_has_passed() {
    let mut state = State::default();
    let now = Instant::now();
    state.add(key("a"));
    state.take();
    state.finish(&key("a"), Outcome::Failed, now, &BACKOFF);
    assert_eq!(
        state.release_due(now + Duration::from_millis(99)),
        (0, Some(now + Duration::from_millis(100)))
    );
    assert_eq!(state.take(), None);
    assert_eq!(state.release_due(now + Duration::from_millis(100)), (1, None));
    assert_eq!(state.take(), Some(key("a")));
}

#[test]
fn a_requeue_after_is_honoured_and_the_earliest_schedule_wins() {
    let mut state = State::default();
    let now = Instant::now();
    state.add(key("a"));
    state.take();
    state.finish(&key("a"), Outcome::Done(Action::RequeueAfter(Duration::from_secs(5))), now, &BACKOFF);
    state.add_at(key("a"), now + Duration::from_secs(9));
    state.add_at(key("a"), now + Duration::from_secs(2));
    assert_eq!(state.release_due(now + Duration::from_secs(1)), (0, Some(now + Duration::from_secs(2))));
    assert_eq!(state.release_due(now + Duration::from_secs(2)), (1, None), "the later schedules are gone");
    assert_eq!(state.take(), Some(key("a")));
    state.finish(&key("a"), Outcome::Done(Action::AwaitChange), now, &BACKOFF);
    assert_eq!(state.release_due(now + Duration::from_secs(60)), (0, None));
}

#[test]
fn taking_a_key_now_cancels_its_schedule() {
    let mut state = State::default();
    let now = Instant::now();
    state.add_at(key("a"), now + Duration::from_secs(1));
    state.add(key("a"));
    assert_eq!(state.take(), Some(key("a")));
    state.finish(&key("a"), Outcome::Done(Action::AwaitChange), now, &BACKOFF);
    assert_eq!(state.release_due(now + Duration::from_secs(2)), (0, None));
    assert_eq!(state.take(), None);
}

#[test]
fn a_schedule_that_falls_due_while_the_key_runs_waits_for_it() {
    let mut state = State::default();
    let now = Instant::now();
    state.add_at(key("a"), now + Duration::from_secs(1));
    state.add(key("b"));
    state.add(key("a"));
    state.take();
    state.take();
    state.add_at(key("a"), now + Duration::from_secs(1));
    assert_eq!(state.release_due(now + Duration::from_secs(1)), (0, None));
    assert_eq!(state.take(), None);
    assert!(state.finish(&key("a"), Outcome::Done(Action::AwaitChange), now, &BACKOFF).requeued);
    assert_eq!(state.take(), Some(key("a")));
}

#[test]
fn backoff_never_overflows() {
    let backoff = Backoff { first: Duration::from_secs(1), max: Duration::from_secs(600) };
    assert_eq!(backoff.delay(1), Duration::from_secs(1));
    assert_eq!(backoff.delay(u32::MAX), Duration::from_secs(600));
}

#[test]
fn a_holding_queue_lets_a_failing_key_wait_out_its_backoff_whatever_changes() {
    let mut state = State::holding_failing_keys();
    let now = Instant::now();
    state.add(key("a"));
    state.take();
    state.finish(&key("a"), Outcome::Failed, now, &BACKOFF);
    assert!(!state.add(key("a")), "a change during the backoff does not run it early");
    assert_eq!(state.take(), None);
    assert_eq!(state.release_due(now + Duration::from_millis(100)), (1, None));
    assert_eq!(state.take(), Some(key("a")));
    state.finish(&key("a"), Outcome::Done(Action::AwaitChange), now, &BACKOFF);
    assert!(state.add(key("a")), "once it succeeded, changes run it at once again");
}
