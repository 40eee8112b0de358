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

impl Kind for Event {
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
