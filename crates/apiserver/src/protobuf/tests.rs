//! The protobuf bodies stock kubectl sends (drain's Eviction, create namespace, auth can-i,
//! certificate approve) decode, and garbage is an error, not a panic.

use super::*;

fn bytes_field(number: u8, payload: &[u8]) -> Vec<u8> {
    let mut out = vec![(number << 3) | 2, payload.len() as u8];
    out.extend_from_slice(payload);
    out
}

#[test]
fn kubectl_drain_eviction_decodes() {
    let type_meta = [bytes_field(1, b"policy/v1"), bytes_field(2, b"Eviction")].concat();
    let meta = [bytes_field(1, b"web"), bytes_field(3, b"default")].concat();
    let options = [vec![0x08, 30], bytes_field(5, b"All")].concat();
    let raw = [bytes_field(1, &meta), bytes_field(2, &options)].concat();
    let body = [MAGIC.to_vec(), bytes_field(1, &type_meta), bytes_field(2, &raw)].concat();
    let eviction = decode(&body).expect("an Eviction decodes");
    assert_eq!(eviction["metadata"]["name"], "web");
    assert_eq!(eviction["metadata"]["namespace"], "default");
    assert_eq!(eviction["deleteOptions"], json!({"gracePeriodSeconds": 30, "dryRun": ["All"]}));
}

#[test]
fn kubectl_create_namespace_decodes() {
    let type_meta = [bytes_field(1, b"v1"), bytes_field(2, b"Namespace")].concat();
    let label = [bytes_field(1, b"team"), bytes_field(2, b"z")].concat();
    let meta = [bytes_field(1, b"team-z"), bytes_field(11, &label)].concat();
    let raw = [bytes_field(1, &meta), bytes_field(2, &[]), bytes_field(3, &[])].concat();
    let body = [
        MAGIC.to_vec(),
        bytes_field(1, &type_meta),
        bytes_field(2, &raw),
        bytes_field(4, b"application/vnd.kubernetes.protobuf"),
    ]
    .concat();
    let object = decode(&body).unwrap();
    assert_eq!(object["metadata"], json!({"name": "team-z", "labels": {"team": "z"}}));
    assert_eq!(object["kind"], "Namespace");
}

#[test]
fn kubectl_auth_can_i_decodes() {
    let type_meta =
        [bytes_field(1, b"authorization.k8s.io/v1"), bytes_field(2, b"SelfSubjectAccessReview")].concat();
    let attributes = [
        bytes_field(1, b"other"),
        bytes_field(2, b"list"),
        bytes_field(3, b"fleet.example.com"),
        bytes_field(5, b"applications"),
        bytes_field(6, b"status"),
    ]
    .concat();
    let spec = bytes_field(1, &attributes);
    let raw = [bytes_field(1, &[]), bytes_field(2, &spec)].concat();
    let body = [MAGIC.to_vec(), bytes_field(1, &type_meta), bytes_field(2, &raw)].concat();
    let review = decode(&body).unwrap();
    assert_eq!(
        review["spec"]["resourceAttributes"],
        json!({"namespace": "other", "verb": "list", "group": "fleet.example.com", "resource": "applications", "subresource": "status"})
    );
}

#[test]
fn kubectl_certificate_approve_decodes() {
    let type_meta =
        [bytes_field(1, b"certificates.k8s.io/v1"), bytes_field(2, b"CertificateSigningRequest")].concat();
    let meta = [bytes_field(1, b"jane"), bytes_field(6, b"42")].concat();
    let spec = [
        bytes_field(1, b"PEM"),
        bytes_field(5, b"client auth"),
        bytes_field(7, b"a.b/c"),
        vec![8 << 3, 0x90, 0x1c],
    ]
    .concat();
    // 2026-01-01T00:00:00Z is 1767225600 seconds.
    let mut time = vec![1 << 3];
    let mut seconds = 1_767_225_600u64;
    while seconds >= 0x80 {
        time.push((seconds as u8) | 0x80);
        seconds >>= 7;
    }
    time.push(seconds as u8);
    let condition = [
        bytes_field(1, b"Approved"),
        bytes_field(2, b"KubectlApprove"),
        bytes_field(3, b"approved by kubectl"),
        bytes_field(4, &time),
        bytes_field(5, &[]),
        bytes_field(6, b"True"),
    ]
    .concat();
    let status = bytes_field(1, &condition);
    let raw = [bytes_field(1, &meta), bytes_field(2, &spec), bytes_field(3, &status)].concat();
    let body = [MAGIC.to_vec(), bytes_field(1, &type_meta), bytes_field(2, &raw)].concat();
    let csr = decode(&body).unwrap();
    assert_eq!(csr["metadata"], json!({"name": "jane", "resourceVersion": "42"}));
    assert_eq!(
        csr["spec"],
        json!({"request": "UEVN", "usages": ["client auth"], "signerName": "a.b/c", "expirationSeconds": 3600})
    );
    assert_eq!(
        csr["status"]["conditions"],
        json!([{"type": "Approved", "reason": "KubectlApprove", "message": "approved by kubectl", "lastUpdateTime": "2026-01-01T00:00:00Z", "status": "True"}])
    );
}

#[test]
fn garbage_is_an_error_not_a_panic() {
    for body in [&b""[..], b"k8s", b"k8s\0\x0a\xff", b"k8s\0\x0a\x05ab", b"k8s\0\x0f", b"json"] {
        assert!(decode(body).is_err(), "{body:?}");
    }
}
