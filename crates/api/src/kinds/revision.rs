//! Revision: one past spec state of an object, as its Kind's history keeps it, and the
//! RollbackRequest that restores one. Neither is stored as an object of its own: the history
//! lives beside the object it belongs to, and `GET .../<resource>/<name>/history` answers a core
//! `v1` List of Revisions, printed as REVISION, GENERATION, AGE, USER, CHANGE-CAUSE.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::table::{Column, age_of, text, text_or_none};
use crate::validation::FieldError;

/// The annotation whose value a write's history entry records as its change cause, as
/// `kubectl rollout history` shows it.
pub const CHANGE_CAUSE_ANNOTATION: &str = "kubernetes.io/change-cause";

/// The Kind of one entry of a history.
pub const REVISION_KIND: &str = "Revision";

/// Revision is one past spec state of an object: what its author wrote, when, and at which
/// resourceVersion and generation. `metadata.name` is `<object>-<revision>`; its
/// `creationTimestamp` is the time of the write.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Revision {
    /// APIVersion: the object's own (`fleet.<domain>/v1`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    /// Kind: `Revision`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// The entry's name, namespace and time.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// The resourceVersion of the write that stored this state: what a rollback's
    /// `toRevision` names.
    pub revision: String,
    /// The object's `metadata.generation` after that write.
    pub generation: i64,
    /// Who wrote it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// The object's `kubernetes.io/change-cause` annotation at that write, when it had one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub change_cause: Option<String>,
    /// The state itself: every field of the object but `apiVersion`, `kind`, `metadata` and
    /// `status` (for these Kinds, `spec`).
    #[serde(default)]
    pub state: Map<String, Value>,
}

/// RollbackRequest asks for the spec state of one revision of the object's history to be
/// written again (`POST .../<resource>/<name>/rollback`): the current status stays, the write
/// gets a new resourceVersion, `generation` moves if the spec differs, and the write is admitted
/// as an update of the object would be.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RollbackRequest {
    /// The revision to restore, as the history lists it (its resourceVersion); `"0"` or absent
    /// restores the most recent one whose spec differs from the current spec. A number is
    /// accepted too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to_revision: Option<Value>,
}

impl RollbackRequest {
    /// The revision asked for; `None` for the previous one. A value that is not a whole
    /// number, as a string or a number, is refused naming `toRevision`.
    pub fn revision(&self) -> Result<Option<u64>, FieldError> {
        let invalid = |value: &Value| {
            FieldError::invalid(
                "toRevision",
                value,
                "must be a resourceVersion the history lists, or 0 for the previous revision",
            )
        };
        let number = match &self.to_revision {
            None | Some(Value::Null) => return Ok(None),
            Some(Value::String(text)) if text.is_empty() => return Ok(None),
            Some(value @ Value::String(text)) => text.parse::<u64>().map_err(|_| invalid(value))?,
            Some(value @ Value::Number(number)) => number.as_u64().ok_or_else(|| invalid(value))?,
            Some(other) => return Err(invalid(other)),
        };
        Ok((number != 0).then_some(number))
    }
}

/// The columns of a history's table, in `kubectl rollout history`'s words.
pub const COLUMNS: &[Column] = &[
    Column {
        name: "Revision",
        type_: "string",
        format: "name",
        description: "The resourceVersion of the write that stored this state; what a rollback names",
        priority: 0,
        cell: |o, _| Value::String(text(o, "revision")),
    },
    Column {
        name: "Generation",
        type_: "integer",
        format: "",
        description: "The object's generation after that write",
        priority: 0,
        cell: |o, _| o.get("generation").cloned().unwrap_or(Value::from(0)),
    },
    Column {
        name: "Age",
        type_: "string",
        format: "",
        description: "Time since the write",
        priority: 0,
        cell: |o, now| Value::String(age_of(&text(o, "metadata.creationTimestamp"), now)),
    },
    Column {
        name: "User",
        type_: "string",
        format: "",
        description: "Who wrote it",
        priority: 0,
        cell: |o, _| text_or_none(o, "user"),
    },
    Column {
        name: "Change-Cause",
        type_: "string",
        format: "",
        description: "The kubernetes.io/change-cause annotation at that write",
        priority: 0,
        cell: |o, _| text_or_none(o, "changeCause"),
    },
];

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_rollback_names_a_revision_as_text_or_number_and_zero_or_nothing_is_the_previous_one() {
        let request = |value: Value| RollbackRequest { to_revision: Some(value) };
        assert_eq!(RollbackRequest::default().revision(), Ok(None));
        assert_eq!(request(json!("0")).revision(), Ok(None));
        assert_eq!(request(json!(0)).revision(), Ok(None));
        assert_eq!(request(json!("")).revision(), Ok(None));
        assert_eq!(request(json!("42")).revision(), Ok(Some(42)));
        assert_eq!(request(json!(42)).revision(), Ok(Some(42)));
        for bad in [json!("abc"), json!(-1), json!(1.5), json!(["1"])] {
            let error = request(bad.clone()).revision().unwrap_err();
            assert_eq!(error.field, "toRevision", "{bad}");
        }
    }
}
