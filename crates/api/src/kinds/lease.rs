//! `coordination.k8s.io/v1` Lease in its builtin Kubernetes shape: the heartbeat a node renews
//! in `kube-node-lease` (as kubelet's), cheaper to write than the node's whole status, and
//! what node liveness reads. Its validation and how the scheme serves it.

use k8s_openapi::api::coordination::v1::Lease;
use serde_json::Value;

use super::Kind;
use crate::scheme::{KindInfo, NameRule, typed};
use crate::table::{Column, text_or_none};
use crate::validation::FieldError;

/// The API group of Leases.
pub const GROUP: &str = "coordination.k8s.io";

/// The namespace node Leases live in, created at bootstrap (kubelet's).
pub const NODE_LEASE_NAMESPACE: &str = "kube-node-lease";

impl Kind for Lease {
    fn validate(&self, _old: Option<&Self>) -> Vec<FieldError> {
        let mut errors = Vec::new();
        let Some(spec) = self.spec.as_ref() else { return errors };
        if let Some(duration) = spec.lease_duration_seconds.filter(|seconds| *seconds <= 0) {
            errors.push(FieldError::invalid("spec.leaseDurationSeconds", duration, "must be greater than 0"));
        }
        if let Some(transitions) = spec.lease_transitions.filter(|count| *count < 0) {
            errors.push(FieldError::invalid(
                "spec.leaseTransitions",
                transitions,
                "must be greater than or equal to 0",
            ));
        }
        if spec.holder_identity.as_deref().is_some_and(crate::validation::has_control_breaks) {
            errors.push(FieldError::invalid(
                "spec.holderIdentity",
                "<value>",
                "must not contain a NUL, CR or LF",
            ));
        }
        errors
    }
}

/// Leases as served: namespaced, with kubectl's `Holder` column.
pub(crate) fn kind_info() -> KindInfo {
    KindInfo {
        columns: &[Column {
            name: "Holder",
            type_: "string",
            format: "",
            description: "Who holds the lease",
            priority: 0,
            cell: |o, _| text_or_none(o, "spec.holderIdentity"),
        }],
        builtin: true,
        ..KindInfo::v1(GROUP, "Lease", "leases", "lease", true, NameRule::Subdomain, typed::<Lease>())
    }
}

/// The renew time a stored Lease carries, if any.
pub fn renew_time(lease: &Value) -> Option<jiff::Timestamp> {
    lease.pointer("/spec/renewTime").and_then(Value::as_str).and_then(|time| time.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(spec: serde_json::Value, expect: &[&str]) {
        let lease: Lease =
            serde_json::from_value(serde_json::json!({"metadata": {"name": "node-1"}, "spec": spec}))
                .expect("a Lease");
        let fields: Vec<String> = lease.validate(None).into_iter().map(|error| error.field).collect();
        assert_eq!(fields, expect, "{spec}");
    }

    #[test]
    fn a_lease_names_what_is_wrong_with_it() {
        check(serde_json::json!({"holderIdentity": "node-1", "leaseDurationSeconds": 40}), &[]);
        check(serde_json::json!({}), &[]);
        check(serde_json::json!({"leaseDurationSeconds": 0}), &["spec.leaseDurationSeconds"]);
        check(serde_json::json!({"leaseTransitions": -1}), &["spec.leaseTransitions"]);
        check(serde_json::json!({"holderIdentity": "a\nb"}), &["spec.holderIdentity"]);
    }

    #[test]
    fn a_renew_time_is_read_when_it_parses() {
        let at = |time: &str| renew_time(&serde_json::json!({"spec": {"renewTime": time}}));
        assert_eq!(at("2026-01-01T00:00:00.000000Z"), "2026-01-01T00:00:00Z".parse().ok());
        assert_eq!(at("yesterday"), None);
        assert_eq!(renew_time(&serde_json::json!({"spec": {}})), None);
    }
}
