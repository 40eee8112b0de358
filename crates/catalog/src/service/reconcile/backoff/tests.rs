//! The fetch back-off's arithmetic and what starts it over.

use super::*;

fn occasion(sync_id: &str, revision: Revision, active: bool) -> Occasion {
    Occasion {
        sync_id: sync_id.into(),
        revision,
        subscriptions: vec![("sre".into(), "uid-1".into(), active)],
    }
}

fn at(seconds: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(seconds)
}

#[test]
fn the_wait_doubles_from_five_seconds_to_five_minutes() {
    let waits: Vec<u64> = (1..=9).map(|failures| delay(failures).as_secs()).collect();
    assert_eq!(waits, [5, 10, 20, 40, 80, 160, 300, 300, 300]);
    assert_eq!(delay(u32::MAX), MAX);
}

#[test]
fn a_fetch_waits_out_its_back_off_until_the_occasion_changes() {
    let mut backoff = FetchBackoff::default();
    let build = occasion("build-1", 7, true);
    assert_eq!(backoff.wait_until("compute", &build, at(0)), None, "nothing failed yet");
    assert_eq!(backoff.failed("compute", build.clone(), at(0)), at(5));
    assert_eq!(backoff.wait_until("compute", &build, at(4)), Some(at(5)));
    assert_eq!(backoff.wait_until("compute", &build, at(5)), None, "the back-off is over");
    assert_eq!(backoff.failed("compute", build.clone(), at(5)), at(15), "doubled");
    assert_eq!(backoff.wait_until("other", &build, at(6)), None, "per registration");

    for (changed, why) in [
        (occasion("build-2", 8, true), "a new build"),
        (occasion("build-1", 8, true), "a write to the registration"),
        (occasion("build-1", 7, false), "a subscription turned off"),
        (Occasion { subscriptions: Vec::new(), ..build.clone() }, "a subscription gone"),
    ] {
        assert_eq!(backoff.wait_until("compute", &changed, at(6)), None, "{why} retries at once");
    }
    assert_eq!(backoff.failed("compute", occasion("build-1", 8, true), at(6)), at(11), "and starts over");

    backoff.succeeded("compute");
    assert_eq!(backoff.wait_until("compute", &occasion("build-1", 8, true), at(7)), None);
    backoff.failed("gone", build.clone(), at(7));
    backoff.retain(|name| name != "gone");
    assert_eq!(backoff.wait_until("gone", &build, at(8)), None, "a deleted registration is forgotten");
}
