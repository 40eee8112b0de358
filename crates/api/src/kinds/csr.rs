//! CertificateSigningRequest (`certificates.k8s.io/v1`) in its builtin Kubernetes shape: a
//! client asking the cluster's CA for a certificate, approved or denied through the `approval`
//! subresource and answered by a signer through `status`.
//!
//! What the shape alone decides lives here: a request that parses, a signer, known usages, a
//! sensible duration, a spec that never changes, and a decision (Approved or Denied) that never
//! flips. Who asked is stamped by admission, and which part of the status each subresource may
//! write is admission's too (`kayra_admission::certificate_requests`).

use k8s_openapi::api::certificates::v1::{CertificateSigningRequest, CertificateSigningRequestCondition};
use serde_json::Value;

use super::Kind;
use crate::scheme::{APPROVAL, KindInfo, NameRule, STATUS, typed};
use crate::table::{AGE, Column, human_duration, text};
use crate::validation::FieldError;

/// The signer of node client certificates, as kubelet asks for its own.
pub const KUBELET_CLIENT_SIGNER: &str = "kubernetes.io/kube-apiserver-client-kubelet";

/// The signer of client certificates for the API, which a person approves.
pub const CLIENT_SIGNER: &str = "kubernetes.io/kube-apiserver-client";

/// The shortest certificate a request may ask for, as Kubernetes allows.
pub const MIN_EXPIRATION_SECONDS: i32 = 600;

/// Every key usage Kubernetes knows.
pub const USAGES: &[&str] = &[
    "signing",
    "digital signature",
    "content commitment",
    "key encipherment",
    "key agreement",
    "data encipherment",
    "cert sign",
    "crl sign",
    "encipher only",
    "decipher only",
    "any",
    "server auth",
    "client auth",
    "code signing",
    "email protection",
    "s/mime",
    "ipsec end system",
    "ipsec tunnel",
    "ipsec user",
    "timestamping",
    "ocsp signing",
    "microsoft sgc",
    "netscape sgc",
];

/// The condition types that decide a request: once one is `True`, it stays.
pub const DECISIONS: &[&str] = &["Approved", "Denied"];

/// The condition types a request's status may carry.
pub const CONDITION_TYPES: &[&str] = &["Approved", "Denied", "Failed"];

/// The request's conditions, empty when it has none.
pub fn conditions(csr: &CertificateSigningRequest) -> &[CertificateSigningRequestCondition] {
    csr.status.as_ref().and_then(|status| status.conditions.as_deref()).unwrap_or_default()
}

/// Whether the request carries condition `type_` with status `True`.
pub fn has_condition(csr: &CertificateSigningRequest, type_: &str) -> bool {
    conditions(csr).iter().any(|c| c.type_ == type_ && c.status == "True")
}

/// The signed certificate, when the signer has written one.
pub fn certificate(csr: &CertificateSigningRequest) -> Option<&[u8]> {
    csr.status
        .as_ref()
        .and_then(|status| status.certificate.as_ref())
        .map(|c| c.0.as_slice())
        .filter(|c| !c.is_empty())
}

/// Why `request` (PEM bytes) is not a PKCS#10 certificate request, if it is not.
pub fn request_problem(request: &[u8]) -> Option<String> {
    use x509_parser::prelude::FromDer;
    let (_, pem) = match x509_parser::pem::parse_x509_pem(request) {
        Ok(parsed) => parsed,
        Err(_) => return Some("PEM block type must be CERTIFICATE REQUEST".to_owned()),
    };
    if pem.label != "CERTIFICATE REQUEST" {
        return Some("PEM block type must be CERTIFICATE REQUEST".to_owned());
    }
    match x509_parser::certification_request::X509CertificationRequest::from_der(&pem.contents) {
        Ok(_) => None,
        Err(error) => Some(format!("the request does not parse: {error}")),
    }
}

impl Kind for CertificateSigningRequest {
    fn validate(&self, old: Option<&Self>) -> Vec<FieldError> {
        let mut errors = Vec::new();
        let spec = &self.spec;
        if spec.request.0.is_empty() {
            errors.push(FieldError::required("spec.request"));
        } else if let Some(problem) = request_problem(&spec.request.0) {
            errors.push(FieldError::invalid("spec.request", "<request>", &problem));
        }
        if spec.signer_name.is_empty() {
            errors.push(FieldError::required("spec.signerName"));
        } else if !signer_name_is_valid(&spec.signer_name) {
            errors.push(FieldError::invalid(
                "spec.signerName",
                format!("\"{}\"", spec.signer_name),
                "must be a fully qualified domain and path of the form 'example.com/signer-name'",
            ));
        }
        let usages = spec.usages.as_deref().unwrap_or_default();
        if usages.is_empty() {
            errors.push(FieldError::required("spec.usages"));
        }
        errors.extend(super::duplicates("spec.usages", usages.iter().map(String::as_str)));
        for (at, usage) in usages.iter().enumerate() {
            if !USAGES.contains(&usage.as_str()) {
                errors.push(FieldError::not_supported(format!("spec.usages[{at}]"), usage, USAGES));
            }
        }
        if let Some(seconds) = spec.expiration_seconds.filter(|s| *s < MIN_EXPIRATION_SECONDS) {
            errors.push(FieldError::invalid(
                "spec.expirationSeconds",
                seconds,
                &format!(
                    "may not specify a duration less than {MIN_EXPIRATION_SECONDS} seconds (10 minutes)"
                ),
            ));
        }
        errors.extend(validate_status(self));
        if let Some(old) = old {
            if old.spec != self.spec {
                errors.push(FieldError::forbidden("spec", "field is immutable"));
            }
            errors.extend(validate_status_change(old, self));
        }
        errors
    }
}

/// `<domain>/<path>`: a DNS subdomain, a slash, and a non-empty path.
fn signer_name_is_valid(name: &str) -> bool {
    match name.split_once('/') {
        Some((domain, path)) => {
            crate::validation::is_dns_subdomain(domain) && !path.is_empty() && name.len() <= 571
        }
        None => false,
    }
}

fn validate_status(csr: &CertificateSigningRequest) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let conditions = conditions(csr);
    for (at, condition) in conditions.iter().enumerate() {
        let field = format!("status.conditions[{at}]");
        if condition.type_.is_empty() {
            errors.push(FieldError::required(format!("{field}.type")));
        }
        if !matches!(condition.status.as_str(), "True" | "False" | "Unknown") {
            errors.push(FieldError::not_supported(
                format!("{field}.status"),
                &condition.status,
                &["True", "False", "Unknown"],
            ));
        }
        let repeated = conditions[..at].iter().any(|earlier| earlier.type_ == condition.type_);
        if repeated && CONDITION_TYPES.contains(&condition.type_.as_str()) {
            errors.push(FieldError::duplicate(format!("{field}.type"), &condition.type_));
        }
    }
    if has_condition(csr, "Approved") && has_condition(csr, "Denied") {
        errors.push(FieldError::invalid(
            "status.conditions",
            "Approved and Denied",
            "Approved and Denied conditions are mutually exclusive",
        ));
    }
    if let Some(certificate) = certificate(csr)
        && !certificate.starts_with(b"-----BEGIN CERTIFICATE-----")
    {
        errors.push(FieldError::invalid(
            "status.certificate",
            "<certificate>",
            "must be PEM-encoded certificates",
        ));
    }
    errors
}

/// A decision, once made, stays made, and a certificate once issued stays issued.
fn validate_status_change(
    old: &CertificateSigningRequest,
    new: &CertificateSigningRequest,
) -> Vec<FieldError> {
    let mut errors = Vec::new();
    for decision in DECISIONS.iter().chain(&["Failed"]) {
        if has_condition(old, decision) && !has_condition(new, decision) {
            errors.push(FieldError::forbidden(
                "status.conditions",
                &format!("updates may not remove a condition of type \"{decision}\""),
            ));
        }
    }
    if let Some(issued) = certificate(old)
        && certificate(new) != Some(issued)
    {
        errors.push(FieldError::forbidden(
            "status.certificate",
            "updates may not modify existing certificate content",
        ));
    }
    errors
}

/// Certificate requests as served: `approval` writes only the decision, `status` is the
/// signer's.
pub(crate) fn kind_info() -> KindInfo {
    KindInfo {
        short_names: &["csr"],
        // `approval` writes only the Approved and Denied conditions (kubectl
        // certificate approve|deny); `status` is the signer's: the certificate and Failed.
        subresources: &[APPROVAL, STATUS],
        field_labels: &["spec.signerName"],
        columns: &[
            AGE,
            Column {
                name: "SignerName",
                type_: "string",
                format: "",
                description: "The signer the request is for",
                priority: 0,
                cell: |o, _| Value::String(text(o, "spec.signerName")),
            },
            Column {
                name: "Requestor",
                type_: "string",
                format: "",
                description: "Who asked",
                priority: 0,
                cell: |o, _| Value::String(text(o, "spec.username")),
            },
            Column {
                name: "RequestedDuration",
                type_: "string",
                format: "",
                description: "How long the certificate is asked to be valid",
                priority: 0,
                cell: |o, _| match o.pointer("/spec/expirationSeconds").and_then(Value::as_i64) {
                    Some(seconds) => Value::String(human_duration(seconds)),
                    None => Value::String("<none>".into()),
                },
            },
            Column {
                name: "Condition",
                type_: "string",
                format: "",
                description: "Approved, Denied, Failed or Pending, and Issued once signed",
                priority: 0,
                cell: csr_condition,
            },
        ],
        builtin: true,
        ..KindInfo::v1(
            "certificates.k8s.io",
            "CertificateSigningRequest",
            "certificatesigningrequests",
            "certificatesigningrequest",
            false,
            NameRule::Subdomain,
            typed::<CertificateSigningRequest>(),
        )
    }
}

fn csr_condition(object: &Value, _: jiff::Timestamp) -> Value {
    let decided: Vec<String> = object
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .map(|conditions| {
            conditions
                .iter()
                .filter(|c| c.get("status").and_then(Value::as_str) == Some("True"))
                .filter_map(|c| c.get("type").and_then(Value::as_str).map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    let issued = object.pointer("/status/certificate").and_then(Value::as_str).is_some_and(|c| !c.is_empty());
    let mut condition = if decided.is_empty() { "Pending".to_owned() } else { decided.join(",") };
    if issued {
        condition.push_str(",Issued");
    }
    Value::String(condition)
}

#[cfg(test)]
mod tests;
