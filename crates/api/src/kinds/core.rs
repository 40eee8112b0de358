//! The core `v1` Kinds Kayra serves in their builtin Kubernetes shapes (Namespace, Node,
//! Event), and the reviews (`authorization.k8s.io`, `authentication.k8s.io`) `kubectl auth`
//! creates: their defaults, validation, and how the scheme serves each.

use std::sync::Arc;

use k8s_openapi::api::authentication::v1::{SelfSubjectReview, TokenReview};
use k8s_openapi::api::authorization::v1::{SelfSubjectAccessReview, SelfSubjectRulesReview};
use k8s_openapi::api::core::v1::{Event, Namespace, NamespaceSpec, NamespaceStatus, Node, Pod};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::{ConditionType, Kind};
use crate::scheme::{Behaviour, KindInfo, NAMESPACE_VERBS, NameRule, STATUS, Typed, typed};
use crate::table::{Column, age_of, field_of_typed_entry, text, text_or_none};
use crate::validation::FieldError;
use crate::verb::Verb;

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

impl Kind for SelfSubjectAccessReview {}

impl Kind for SelfSubjectRulesReview {}

impl Kind for SelfSubjectReview {}
impl Kind for TokenReview {}

/// An Event's `type`: whether it is routine or something an operator should look at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum EventType {
    /// `Normal`: routine.
    Normal,
    /// `Warning`: something an operator should look at.
    Warning,
}

impl EventType {
    /// The word on the wire.
    pub const fn as_str(self) -> &'static str {
        match self {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        }
    }

    /// The type `word` names, if it names one.
    pub fn parse(word: &str) -> Option<EventType> {
        [EventType::Normal, EventType::Warning].into_iter().find(|kind| kind.as_str() == word)
    }
}

/// Every Event type, as the wire spells them.
const EVENT_TYPES: &[&str] = &[EventType::Normal.as_str(), EventType::Warning.as_str()];

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
        if let Some(kind) = self.type_.as_deref().filter(|t| EventType::parse(t).is_none()) {
            errors.push(FieldError::not_supported("type", kind, EVENT_TYPES));
        }
        errors
    }
}

/// Namespaces as served: cluster-scoped, named by a DNS label, deleted in two steps.
pub(crate) fn namespace() -> KindInfo {
    KindInfo {
        short_names: &["ns"],
        subresources: &[STATUS],
        field_labels: &["status.phase"],
        columns: &[Column {
            name: "Status",
            type_: "string",
            format: "",
            description: "The status of the namespace",
            priority: 0,
            cell: |o, _| Value::String(text(o, "status.phase")),
        }],
        verbs: NAMESPACE_VERBS,
        builtin: true,
        ..KindInfo::v1(
            "",
            "Namespace",
            "namespaces",
            "namespace",
            false,
            NameRule::Label,
            Arc::new(NamespaceBehaviour(Typed::new())),
        )
    }
}

/// Nodes as served: cluster-scoped, registered with their status.
pub(crate) fn node() -> KindInfo {
    KindInfo {
        short_names: &["no"],
        subresources: &[STATUS],
        field_labels: &["spec.unschedulable"],
        columns: &[
            Column {
                name: "Status",
                type_: "string",
                format: "",
                description: "The node's readiness",
                priority: 0,
                cell: node_status,
            },
            Column {
                name: "Roles",
                type_: "string",
                format: "",
                description: "The roles of the node",
                priority: 0,
                cell: |_, _| Value::String("<none>".into()),
            },
            Column {
                name: "Version",
                type_: "string",
                format: "",
                description: "Agent version reported by the node",
                priority: 0,
                cell: |o, _| Value::String(text(o, "status.nodeInfo.kubeletVersion")),
            },
            Column {
                name: "Internal-IP",
                type_: "string",
                format: "",
                description: "The node's internal address",
                priority: 1,
                cell: node_internal_ip,
            },
            Column {
                name: "OS-Image",
                type_: "string",
                format: "",
                description: "OS image reported by the node",
                priority: 1,
                cell: |o, _| text_or_none(o, "status.nodeInfo.osImage"),
            },
            Column {
                name: "Kernel-Version",
                type_: "string",
                format: "",
                description: "Kernel version reported by the node",
                priority: 1,
                cell: |o, _| text_or_none(o, "status.nodeInfo.kernelVersion"),
            },
        ],
        builtin: true,
        create_keeps_status: true,
        ..KindInfo::v1("", "Node", "nodes", "node", false, NameRule::Subdomain, typed::<Node>())
    }
}

/// Events as served, with the fields `kubectl get events --field-selector` uses.
pub(crate) fn event() -> KindInfo {
    KindInfo {
        short_names: &["ev"],
        field_labels: &[
            "involvedObject.kind",
            "involvedObject.namespace",
            "involvedObject.name",
            "involvedObject.uid",
            "involvedObject.apiVersion",
            "involvedObject.resourceVersion",
            "involvedObject.fieldPath",
            "reason",
            "reportingComponent",
            "source",
            "type",
        ],
        columns: &[
            Column {
                name: "Last Seen",
                type_: "string",
                format: "",
                description: "Time since the event was last seen",
                priority: 0,
                cell: |o, now| Value::String(age_of(&text(o, "lastTimestamp"), now)),
            },
            Column {
                name: "Type",
                type_: "string",
                format: "",
                description: "Normal or Warning",
                priority: 0,
                cell: |o, _| Value::String(text(o, "type")),
            },
            Column {
                name: "Reason",
                type_: "string",
                format: "",
                description: "Why the event happened",
                priority: 0,
                cell: |o, _| Value::String(text(o, "reason")),
            },
            Column {
                name: "Object",
                type_: "string",
                format: "",
                description: "The object the event is about",
                priority: 0,
                cell: |o, _| {
                    Value::String(format!(
                        "{}/{}",
                        text(o, "involvedObject.kind").to_lowercase(),
                        text(o, "involvedObject.name")
                    ))
                },
            },
            Column {
                name: "Subobject",
                type_: "string",
                format: "",
                description: "The part of the object the event is about",
                priority: 1,
                cell: |o, _| Value::String(text(o, "involvedObject.fieldPath")),
            },
            Column {
                name: "Source",
                type_: "string",
                format: "",
                description: "Who reported the event, and on which node",
                priority: 1,
                cell: |o, _| {
                    let (component, host) = (text(o, "source.component"), text(o, "source.host"));
                    Value::String(if host.is_empty() { component } else { format!("{component}, {host}") })
                },
            },
            Column {
                name: "Message",
                type_: "string",
                format: "",
                description: "What happened",
                priority: 0,
                cell: |o, _| Value::String(text(o, "message").trim().to_owned()),
            },
            Column {
                name: "First Seen",
                type_: "string",
                format: "",
                description: "Time since the event was first seen",
                priority: 1,
                cell: |o, now| Value::String(age_of(&text(o, "firstTimestamp"), now)),
            },
            Column {
                name: "Count",
                type_: "integer",
                format: "",
                description: "How many times the event happened",
                priority: 1,
                cell: |o, _| {
                    let count =
                        o.get("series").and_then(|series| series.get("count")).or_else(|| o.get("count"));
                    json!(count.and_then(Value::as_i64).filter(|count| *count > 0).unwrap_or(1))
                },
            },
            Column {
                name: "Name",
                type_: "string",
                format: "",
                description: "The event's own name",
                priority: 1,
                cell: |o, _| Value::String(text(o, "metadata.name")),
            },
        ],
        builtin: true,
        ..KindInfo::v1("", "Event", "events", "event", true, NameRule::Subdomain, typed::<Event>())
    }
}

/// The reviews `kubectl auth can-i` and `kubectl auth whoami` create, and the TokenReview a
/// verifier elsewhere asks whether a service-account token is valid with.
pub(crate) fn reviews() -> [KindInfo; 4] {
    [
        review(
            "authorization.k8s.io",
            "SelfSubjectAccessReview",
            "selfsubjectaccessreviews",
            "selfsubjectaccessreview",
            typed::<SelfSubjectAccessReview>(),
        ),
        review(
            "authorization.k8s.io",
            "SelfSubjectRulesReview",
            "selfsubjectrulesreviews",
            "selfsubjectrulesreview",
            typed::<SelfSubjectRulesReview>(),
        ),
        review(
            "authentication.k8s.io",
            "SelfSubjectReview",
            "selfsubjectreviews",
            "selfsubjectreview",
            typed::<SelfSubjectReview>(),
        ),
        review("authentication.k8s.io", "TokenReview", "tokenreviews", "tokenreview", typed::<TokenReview>()),
    ]
}

/// A namespace is deleted in two steps: marked `Terminating` while its contents are deleted,
/// then gone once the `kubernetes` finalizer in `spec.finalizers` is removed.
struct NamespaceBehaviour(Typed<Namespace>);

impl Behaviour for NamespaceBehaviour {
    fn normalize(&self, object: &Value) -> Result<(Value, Vec<String>), String> {
        self.0.normalize(object)
    }

    fn unknown_fields(&self, object: &Value) -> Result<Vec<String>, String> {
        self.0.unknown_fields(object)
    }

    fn validate(
        &self,
        object: &serde_json::Map<String, Value>,
        old: Option<&serde_json::Map<String, Value>>,
    ) -> Vec<FieldError> {
        self.0.validate(object, old)
    }

    fn schema(&self, generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        self.0.schema(generator)
    }

    fn finalizing(&self, object: &serde_json::Map<String, Value>) -> bool {
        let spec = object
            .get("spec")
            .and_then(|spec| spec.get("finalizers"))
            .and_then(Value::as_array)
            .is_some_and(|f| !f.is_empty());
        spec || self.0.finalizing(object)
    }

    fn mark_deleting(&self, object: &mut Value) {
        if let Some(map) = object.as_object_mut() {
            let status = map.entry("status").or_insert_with(|| Value::Object(Default::default()));
            if let Some(status) = status.as_object_mut() {
                status.insert("phase".into(), Value::String("Terminating".into()));
            }
        }
    }
}

/// A review Kind: create-only, answered at once.
fn review(
    group: &str,
    kind: &'static str,
    plural: &'static str,
    singular: &'static str,
    behaviour: Arc<dyn Behaviour>,
) -> KindInfo {
    KindInfo {
        verbs: &[Verb::Create],
        builtin: true,
        review: true,
        ..KindInfo::v1(group, kind, plural, singular, false, NameRule::Path, behaviour)
    }
}

fn node_status(object: &Value, _: jiff::Timestamp) -> Value {
    let ready = field_of_typed_entry(object, "/status/conditions", ConditionType::Ready.as_str(), "status")
        .map(|status| if status == "True" { "Ready" } else { "NotReady" })
        .unwrap_or("Unknown");
    let cordoned = object.pointer("/spec/unschedulable").and_then(Value::as_bool).unwrap_or(false);
    Value::String(if cordoned { format!("{ready},SchedulingDisabled") } else { ready.to_owned() })
}

fn node_internal_ip(object: &Value, _: jiff::Timestamp) -> Value {
    let address =
        field_of_typed_entry(object, "/status/addresses", "InternalIP", "address").unwrap_or("<none>");
    Value::String(address.to_owned())
}

#[cfg(test)]
mod tests;
