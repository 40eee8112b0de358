//! The CertificateSigningRequest's own rules, table by table.

use k8s_openapi::ByteString;
use k8s_openapi::api::certificates::v1::{
    CertificateSigningRequest, CertificateSigningRequestCondition, CertificateSigningRequestSpec,
    CertificateSigningRequestStatus,
};

use super::*;

/// One request for every test, so that two objects made from it have the same spec.
fn request_pem() -> Vec<u8> {
    static PEM: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    PEM.get_or_init(make_request_pem).clone()
}

fn make_request_pem() -> Vec<u8> {
    let key = kayra_pki::generate_key().unwrap();
    let subject = kayra_pki::Subject {
        common_name: "system:node:n1".into(),
        organizations: vec!["system:nodes".into()],
    };
    kayra_pki::certificate_request(&key, &subject).unwrap().into_bytes()
}

fn csr() -> CertificateSigningRequest {
    CertificateSigningRequest {
        spec: CertificateSigningRequestSpec {
            request: ByteString(request_pem()),
            signer_name: KUBELET_CLIENT_SIGNER.into(),
            usages: Some(vec!["digital signature".into(), "client auth".into()]),
            ..Default::default()
        },
        ..Default::default()
    }
}

fn with_conditions(mut csr: CertificateSigningRequest, types: &[(&str, &str)]) -> CertificateSigningRequest {
    let conditions = types
        .iter()
        .map(|(type_, status)| CertificateSigningRequestCondition {
            type_: (*type_).into(),
            status: (*status).into(),
            ..Default::default()
        })
        .collect();
    csr.status.get_or_insert_with(CertificateSigningRequestStatus::default).conditions = Some(conditions);
    csr
}

fn fields(errors: Vec<FieldError>) -> Vec<String> {
    errors.into_iter().map(|error| error.field).collect()
}

#[test]
fn a_new_request_needs_a_parsable_request_a_signer_and_known_usages() {
    let check = |change: &dyn Fn(&mut CertificateSigningRequest), expect: &[&str]| {
        let mut object = csr();
        change(&mut object);
        assert_eq!(fields(object.validate(None)), expect);
    };
    check(&|_| {}, &[]);
    check(&|c| c.spec.signer_name = CLIENT_SIGNER.into(), &[]);
    check(&|c| c.spec.expiration_seconds = Some(600), &[]);
    check(&|c| c.spec.request = ByteString(Vec::new()), &["spec.request"]);
    check(
        &|c| {
            c.spec.request = ByteString(
                b"-----BEGIN CERTIFICATE REQUEST-----\nMIIB\n-----END CERTIFICATE REQUEST-----\n".to_vec(),
            )
        },
        &["spec.request"],
    );
    check(&|c| c.spec.request = ByteString(b"hello".to_vec()), &["spec.request"]);
    check(&|c| c.spec.signer_name = String::new(), &["spec.signerName"]);
    check(&|c| c.spec.signer_name = "no-path".into(), &["spec.signerName"]);
    check(&|c| c.spec.usages = None, &["spec.usages"]);
    check(&|c| c.spec.usages = Some(vec!["client auth".into(), "flying".into()]), &["spec.usages[1]"]);
    check(&|c| c.spec.usages = Some(vec!["client auth".into(), "client auth".into()]), &["spec.usages[1]"]);
    check(&|c| c.spec.expiration_seconds = Some(599), &["spec.expirationSeconds"]);
}

#[test]
fn the_spec_never_changes() {
    let old = csr();
    let check = |change: &dyn Fn(&mut CertificateSigningRequest), expect: &[&str]| {
        let mut object = old.clone();
        change(&mut object);
        assert_eq!(fields(object.validate(Some(&old))), expect);
    };
    check(&|_| {}, &[]);
    check(&|c| c.spec.username = Some("someone-else".into()), &["spec"]);
    check(&|c| c.spec.groups = Some(vec!["system:masters".into()]), &["spec"]);
    check(&|c| c.spec.usages = Some(vec!["client auth".into()]), &["spec"]);
    check(&|c| c.spec.expiration_seconds = Some(3600), &["spec"]);
}

#[test]
fn a_decision_is_made_once_and_never_flips() {
    let check = |old: &[(&str, &str)], new: &[(&str, &str)], expect: &[&str]| {
        let old = with_conditions(csr(), old);
        let new = with_conditions(csr(), new);
        assert_eq!(fields(new.validate(Some(&old))), expect, "{new:?}");
    };
    check(&[], &[("Approved", "True")], &[]);
    check(&[], &[("Denied", "True")], &[]);
    check(&[("Approved", "True")], &[("Approved", "True"), ("Failed", "True")], &[]);
    check(&[], &[("Approved", "True"), ("Denied", "True")], &["status.conditions"]);
    check(&[("Approved", "True")], &[("Denied", "True")], &["status.conditions"]);
    check(&[("Denied", "True")], &[], &["status.conditions"]);
    check(
        &[("Approved", "True")],
        &[("Approved", "True"), ("Approved", "True")],
        &["status.conditions[1].type"],
    );
    check(&[], &[("Approved", "Maybe")], &["status.conditions[0].status"]);
}

#[test]
fn an_issued_certificate_stays_issued() {
    let issue = |pem: &[u8]| {
        let mut object = with_conditions(csr(), &[("Approved", "True")]);
        object.status.as_mut().unwrap().certificate = Some(ByteString(pem.to_vec()));
        object
    };
    let pending = with_conditions(csr(), &[("Approved", "True")]);
    let issued = issue(b"-----BEGIN CERTIFICATE-----\nA\n-----END CERTIFICATE-----\n");
    assert!(issued.validate(Some(&pending)).is_empty());
    assert_eq!(fields(pending.validate(Some(&issued))), ["status.certificate"]);
    let other = issue(b"-----BEGIN CERTIFICATE-----\nB\n-----END CERTIFICATE-----\n");
    assert_eq!(fields(other.validate(Some(&issued))), ["status.certificate"]);
    assert_eq!(fields(issue(b"not pem").validate(None)), ["status.certificate"]);
}
