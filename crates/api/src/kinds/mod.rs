//! Every Kind's shape, defaults and validation, and how the scheme serves it.
//!
//! A Kind is a serde type with a JSON schema (its doc comments are what `kubectl explain`
//! prints) that implements [`Kind`]. The core `v1` Kinds are `k8s-openapi`'s builtin shapes.
//! Each module also describes how its Kinds are served (names, scope, subresources, selectable
//! fields, table columns) as the [`KindInfo`](crate::scheme::KindInfo)s the scheme lists.

pub mod application;
pub mod applicationset;
pub mod catalog;
pub mod check;
pub mod core;
pub mod csr;
pub mod lease;
pub mod rbac;
pub mod revision;
pub mod secret;
pub mod service;
pub mod usage;

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::validation::FieldError;

/// What every Kind provides beyond its shape.
pub trait Kind: Serialize + DeserializeOwned + schemars::JsonSchema + Send + Sync + 'static {
    /// Fills in defaults.
    fn default_fields(&mut self) {}

    /// Checks the object; on update, `old` is what it replaces.
    fn validate(&self, old: Option<&Self>) -> Vec<FieldError> {
        let _ = old;
        Vec::new()
    }

    /// When the object ceases to exist by itself (a bootstrap token), if ever.
    fn expires_at(&self) -> Option<jiff::Timestamp> {
        None
    }

    /// Adjusts the `status` a write of the object (not of its status) carries over from `old`,
    /// on the JSON forms: what the write made untrue goes.
    fn carried_status(
        old: &serde_json::Map<String, serde_json::Value>,
        object: &mut serde_json::Map<String, serde_json::Value>,
    ) {
        let _ = (old, object);
    }

    /// Adjusts an object restored from its history (a rollback) from the current one, on the
    /// JSON forms: what the control plane decided since (a placement, an allocated address)
    /// stays as it is now.
    fn restored(
        current: &serde_json::Map<String, serde_json::Value>,
        restored: &mut serde_json::Map<String, serde_json::Value>,
    ) {
        let _ = (current, restored);
    }

    /// Whether objects of this Kind may expire ([`Kind::expires_at`] can answer a time): when
    /// not, a write does not decode the object to ask.
    const MAY_EXPIRE: bool = false;

    /// Whether objects of this Kind own dependents (objects naming them in a controller owner
    /// reference) that the garbage collector deletes or releases when they go: a delete's
    /// `propagationPolicy` then adds the `foregroundDeletion` or `orphan` finalizer.
    const OWNS_DEPENDENTS: bool = false;
}

/// Checks a list of environment-style names for uniqueness, naming each repeat.
pub(crate) fn duplicates<'a>(field: &str, names: impl Iterator<Item = &'a str>) -> Vec<FieldError> {
    let mut seen = std::collections::HashSet::new();
    names
        .enumerate()
        .filter(|(_, name)| !seen.insert(*name))
        .map(|(at, name)| FieldError::duplicate(format!("{field}[{at}]"), name))
        .collect()
}

/// A Kubernetes-shaped condition: `kubectl wait --for=condition=X` reads `type` and `status`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, serde::Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    /// The condition's name, such as `Ready` or `Scheduled`.
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// A CamelCase word for why the condition last changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// A human-readable account of the last change.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// When the condition last changed status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<String>,
    /// The `metadata.generation` the condition was computed from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

/// The condition types Kayra's loops and nodes give meaning to, as `kubectl wait
/// --for=condition=<type>` names them. A condition's `type` stays a string on the wire, where a
/// client may write others.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, serde::Deserialize)]
pub enum ConditionType {
    /// An Application's process is ready to serve; a Node's agent is ready.
    Ready,
    /// An Application is placed on a node (or why not yet).
    Scheduled,
    /// A pinned Application's node has been lost.
    NodeLost,
    /// An ApplicationSet's Applications are what its template asks for.
    Converged,
    /// An Application's processes are frozen (`spec.frozen`); the reason says how the node
    /// holds them.
    Frozen,
    /// An ApplicationSet's rollout is moving (`False` with reason `Frozen` while the set is
    /// frozen).
    Progressing,
}

impl ConditionType {
    /// The word on the wire.
    pub const fn as_str(self) -> &'static str {
        match self {
            ConditionType::Ready => "Ready",
            ConditionType::Scheduled => "Scheduled",
            ConditionType::NodeLost => "NodeLost",
            ConditionType::Converged => "Converged",
            ConditionType::Frozen => "Frozen",
            ConditionType::Progressing => "Progressing",
        }
    }
}

/// Checks conditions: a type each, a known status, no type twice.
pub(crate) fn validate_conditions(field: &str, conditions: &[Condition]) -> Vec<FieldError> {
    let mut errors = duplicates(field, conditions.iter().map(|c| c.type_.as_str()));
    for (at, condition) in conditions.iter().enumerate() {
        if condition.type_.is_empty() {
            errors.push(FieldError::required(format!("{field}[{at}].type")));
        }
        if !matches!(condition.status.as_str(), "True" | "False" | "Unknown") {
            errors.push(FieldError::not_supported(
                format!("{field}[{at}].status"),
                &condition.status,
                &["True", "False", "Unknown"],
            ));
        }
    }
    errors
}
