//! The core `v1` Kinds Kayra serves in their builtin Kubernetes shapes.

use k8s_openapi::api::core::v1::{Event, Namespace, NamespaceSpec, NamespaceStatus, Node, Pod};

use super::Kind;
use crate::validation::FieldError;

impl Kind for Namespace {
    fn default_fields(&mut self) {
        // Until it is deleted, a namespace keeps the finalizer that makes its deletion wait
        // for its contents; once deleted, only the namespace finalizer removes it.
        if self.metadata.deletion_timestamp.is_none() {
            let spec = self.spec.get_or_insert_with(NamespaceSpec::default);
            let finalizers = spec.finalizers.get_or_insert_with(Vec::new);
            if !finalizers.iter().any(|f| f == "kubernetes") {
                finalizers.push("kubernetes".to_owned());
            }
        }
        let status = self.status.get_or_insert_with(NamespaceStatus::default);
        status.phase.get_or_insert_with(|| "Active".to_owned());
    }

    fn validate(&self, _old: Option<&Self>) -> Vec<FieldError> {
        let mut errors = Vec::new();
        if let Some(phase) = self
            .status
            .as_ref()
            .and_then(|s| s.phase.as_deref())
            .filter(|p| !matches!(*p, "Active" | "Terminating"))
        {
            errors.push(FieldError::not_supported("status.phase", phase, &["Active", "Terminating"]));
        }
        errors
    }
}

impl Kind for Node {}

impl Kind for Pod {}

impl Kind for k8s_openapi::api::authorization::v1::SelfSubjectAccessReview {}

impl Kind for k8s_openapi::api::authorization::v1::SelfSubjectRulesReview {}

impl Kind for k8s_openapi::api::authentication::v1::SelfSubjectReview {}

/// How long an Event is kept after it last happened: kube-apiserver's default `--event-ttl`.
pub const EVENT_TTL: jiff::SignedDuration = jiff::SignedDuration::from_hours(1);

impl Kind for Event {
    const MAY_EXPIRE: bool = true;

    /// An hour after it was written or last happened, whichever is later (a client's old
    /// timestamps do not cut its life short), rounded up to a whole minute: the Events of one
    /// minute expire together, on one lease.
    fn expires_at(&self) -> Option<jiff::Timestamp> {
        let last = [
            self.metadata.creation_timestamp.as_ref().map(|time| time.0),
            self.last_timestamp.as_ref().map(|time| time.0),
            self.event_time.as_ref().map(|time| time.0),
            self.series.as_ref().and_then(|series| series.last_observed_time.as_ref()).map(|time| time.0),
        ]
        .into_iter()
        .flatten()
        .max()?;
        let expires = last.checked_add(EVENT_TTL).ok()?.as_second();
        jiff::Timestamp::from_second(expires + (60 - expires.rem_euclid(60)) % 60).ok()
    }

    fn validate(&self, _old: Option<&Self>) -> Vec<FieldError> {
        let mut errors = Vec::new();
        if self.involved_object.kind.as_deref().unwrap_or_default().is_empty() {
            errors.push(FieldError::required("involvedObject.kind"));
        }
        if let Some(kind) = self.type_.as_deref().filter(|t| !matches!(*t, "Normal" | "Warning")) {
            errors.push(FieldError::not_supported("type", kind, &["Normal", "Warning"]));
        }
        errors
    }
}

#[cfg(test)]
mod tests {
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
            metadata: ObjectMeta {
                creation_timestamp: created.map(|t| Time(at(t))),
                ..ObjectMeta::default()
            },
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
}
