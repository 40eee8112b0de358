//! CertificateSigningRequest: a node asking for a client certificate.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Condition, Kind, validate_conditions};
use crate::validation::{FieldError, is_dns_subdomain};

/// CertificateSigningRequest asks the cluster CA to sign a node's key. Approval and signing
/// are recorded in its status; the requester's identity is stamped on creation and immutable.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CertificateSigningRequest {
    /// APIVersion defines the versioned schema of this representation of an object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    /// Kind is a string value representing the REST resource this object represents.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Standard object's metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// The request.
    #[serde(default)]
    pub spec: CsrSpec,
    /// Approval and the signed certificate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<CsrStatus>,
}

/// CsrSpec is what is asked for and by whom.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CsrSpec {
    /// A PEM-encoded PKCS#10 certificate request.
    #[serde(default)]
    pub request: String,
    /// The node the certificate is for.
    #[serde(default)]
    pub node_name: String,
    /// What the certificate may be used for, such as `client auth`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub usages: Vec<String>,
    /// Who asked: stamped on creation, never changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub username: Option<String>,
    /// The requester's groups: stamped on creation, never changed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<String>,
}

/// CsrStatus records approval and the certificate.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CsrStatus {
    /// `Approved` or `Denied`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// The signed certificate, PEM-encoded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub certificate: Option<String>,
}

const USAGES: &[&str] = &["client auth", "digital signature", "key encipherment", "server auth"];

impl Kind for CertificateSigningRequest {
    fn validate(&self, old: Option<&Self>) -> Vec<FieldError> {
        let mut errors = Vec::new();
        let spec = &self.spec;
        if !spec.request.contains("-----BEGIN CERTIFICATE REQUEST-----") {
            errors.push(FieldError::invalid(
                "spec.request",
                "<request>",
                "must be a PEM-encoded PKCS#10 certificate request",
            ));
        }
        if !is_dns_subdomain(&spec.node_name) {
            errors.push(FieldError::invalid(
                "spec.nodeName",
                format!("\"{}\"", spec.node_name),
                "must be a DNS subdomain",
            ));
        }
        for (at, usage) in spec.usages.iter().enumerate() {
            if !USAGES.contains(&usage.as_str()) {
                errors.push(FieldError::not_supported(format!("spec.usages[{at}]"), usage, USAGES));
            }
        }
        if let Some(old) = old
            && (old.spec.request != spec.request
                || old.spec.username != spec.username
                || old.spec.groups != spec.groups
                || old.spec.node_name != spec.node_name)
        {
            errors.push(FieldError::forbidden("spec", "a certificate request is immutable once made"));
        }
        if let Some(status) = &self.status {
            errors.extend(validate_conditions("status.conditions", &status.conditions));
            let decided: Vec<&str> =
                status.conditions.iter().filter(|c| c.status == "True").map(|c| c.type_.as_str()).collect();
            if decided.contains(&"Approved") && decided.contains(&"Denied") {
                errors.push(FieldError::invalid(
                    "status.conditions",
                    "Approved and Denied",
                    "a request is approved or denied, not both",
                ));
            }
        }
        errors
    }
}
