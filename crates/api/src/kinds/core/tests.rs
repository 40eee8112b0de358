//! Event expiry.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, Time};

use super::*;

fn at(text: &str) -> jiff::Timestamp {
    text.parse().unwrap()
}

#[test]
fn an_event_expires_an_hour_after_it_last_happened_on_a_whole_minute() {
    let event = |last: Option<&str>, micro: Option<&str>, created: Option<&str>| Event {
        last_timestamp: last.map(|t| Time(at(t))),
        event_time: micro.map(|t| MicroTime(at(t))),
        metadata: ObjectMeta { creation_timestamp: created.map(|t| Time(at(t))), ..ObjectMeta::default() },
        ..Event::default()
    };
    let cases = [
        (
            event(Some("2026-12-01T10:00:30Z"), None, Some("2026-12-01T09:00:00Z")),
            Some("2026-12-01T11:01:00Z"),
        ),
        // Written now about something long ago: an hour from the write.
        (
            event(Some("2026-11-01T10:00:00Z"), None, Some("2026-12-01T10:00:00Z")),
            Some("2026-12-01T11:00:00Z"),
        ),
        (event(Some("2026-12-01T10:00:00Z"), None, None), Some("2026-12-01T11:00:00Z")),
        (event(None, Some("2026-12-01T10:59:59.5Z"), None), Some("2026-12-01T12:00:00Z")),
        (event(None, None, Some("2026-12-01T10:00:01Z")), Some("2026-12-01T11:01:00Z")),
        (event(None, None, None), None),
    ];
    for (event, expected) in cases {
        assert_eq!(event.expires_at(), expected.map(at), "{event:?}");
    }
}
