//! Node liveness's verdicts, from the Ready condition and the Lease's renewal.

use super::*;

#[test]
fn a_node_is_silent_once_its_heartbeat_is_older_than_the_timeout() {
    let now: jiff::Timestamp = "2026-01-01T00:01:00Z".parse().expect("a time");
    let timeout = Duration::from_secs(40);
    let ready = |status: &str, heartbeat: &str| json!({"type": "Ready", "status": status, "lastHeartbeatTime": heartbeat});
    assert_eq!(verdict(None, None, now, timeout), Verdict::Nothing);
    assert_eq!(
        verdict(Some(&ready("Unknown", "2026-01-01T00:00:00Z")), None, now, timeout),
        Verdict::Nothing
    );
    assert_eq!(
        verdict(Some(&ready("True", "2026-01-01T00:00:50Z")), None, now, timeout),
        Verdict::Alive(Duration::from_secs(31))
    );
    assert_eq!(verdict(Some(&ready("True", "2026-01-01T00:00:19Z")), None, now, timeout), Verdict::Silent);
    assert_eq!(verdict(Some(&ready("False", "2026-01-01T00:00:00Z")), None, now, timeout), Verdict::Silent);
    assert_eq!(
        verdict(Some(&json!({"type": "Ready", "status": "True"})), None, now, timeout),
        Verdict::Silent
    );
}

#[test]
fn a_renewed_lease_keeps_a_node_alive_whose_status_is_old() {
    let now: jiff::Timestamp = "2026-01-01T00:05:00Z".parse().expect("a time");
    let timeout = Duration::from_secs(40);
    let at = |time: &str| time.parse::<jiff::Timestamp>().ok();
    let ready = json!({"type": "Ready", "status": "True", "lastHeartbeatTime": "2026-01-01T00:00:00Z"});
    assert_eq!(
        verdict(Some(&ready), at("2026-01-01T00:04:50Z"), now, timeout),
        Verdict::Alive(Duration::from_secs(31)),
        "the lease's renewal is the heartbeat"
    );
    assert_eq!(
        verdict(Some(&ready), at("2026-01-01T00:04:19Z"), now, timeout),
        Verdict::Silent,
        "a stale lease"
    );
    let fresh = json!({"type": "Ready", "status": "True", "lastHeartbeatTime": "2026-01-01T00:04:50Z"});
    assert_eq!(
        verdict(Some(&fresh), at("2026-01-01T00:00:00Z"), now, timeout),
        Verdict::Alive(Duration::from_secs(31)),
        "the later of the two counts"
    );
    let unknown = json!({"type": "Ready", "status": "Unknown", "lastHeartbeatTime": "2026-01-01T00:00:00Z"});
    assert_eq!(verdict(Some(&unknown), at("2026-01-01T00:04:59Z"), now, timeout), Verdict::Nothing);
}
