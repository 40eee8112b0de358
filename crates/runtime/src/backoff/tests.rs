//! The back-off schedule.

use std::time::Duration;

use super::*;

#[test]
fn waits_double_from_ten_seconds_to_five_minutes() {
    let backoff = Backoff::default();
    let waits: Vec<u64> = (0..8).map(|streak| backoff.delay(streak).as_secs()).collect();
    assert_eq!(waits, [10, 20, 40, 80, 160, 300, 300, 300]);
    assert_eq!(backoff.delay(200), Duration::from_secs(300), "a long streak does not overflow");
}

#[test]
fn ten_minutes_of_running_forget_the_crashes() {
    let backoff = Backoff::default();
    let cases = [(4, 599, 4), (4, 600, 0), (0, 1, 0), (7, 3600, 0)];
    for (streak, ran, expect) in cases {
        assert_eq!(
            backoff.streak_after(streak, Duration::from_secs(ran)),
            expect,
            "streak {streak} ran {ran}s"
        );
    }
}
