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

#[test]
fn event_types_are_the_words_kubectl_shows() {
    for (kind, word) in [(EventType::Normal, "Normal"), (EventType::Warning, "Warning")] {
        assert_eq!(kind.as_str(), word);
        assert_eq!(EventType::parse(word), Some(kind));
        assert_eq!(serde_json::to_value(kind).unwrap(), word);
    }
    assert_eq!(EventType::parse("Error"), None);
    let event = |kind: &str| Event {
        type_: Some(kind.to_owned()),
        involved_object: k8s_openapi::api::core::v1::ObjectReference {
            kind: Some("Pod".to_owned()),
            ..Default::default()
        },
        ..Event::default()
    };
    assert!(event("Warning").validate(None).is_empty());
    let refused = event("Error").validate(None);
    assert_eq!(refused.len(), 1);
    assert_eq!(refused[0].field, "type");
}
