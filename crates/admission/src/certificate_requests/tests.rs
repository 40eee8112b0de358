//! Certificate requests' admission, table-driven.

use kayra_registry::{Operation, Part, Refusal};
use serde_json::{Value, json};

use super::CertificateRequests;
use crate::fixture::{caller, object};
use crate::{Mutating, Validating, Write};

fn write<'a>(
    caller: &'a kayra_authz::Caller,
    operation: Operation,
    part: Part,
    object: &'a kayra_registry::Object,
    old: Option<&'a kayra_registry::Object>,
) -> Write<'a> {
    Write {
        caller,
        operation,
        part,
        dry_run: false,
        api: "certificates.k8s.io",
        resource: "certificatesigningrequests",
        namespace: None,
        name: "node-csr-a",
        object,
        old,
    }
}

#[test]
fn the_requester_is_stamped_whatever_the_client_sent() {
    let bootstrapper = caller("system:bootstrap:abcdef", &["system:bootstrappers"]);
    let sent = object(json!({"spec": {
        "request": "eA==", "signerName": "kubernetes.io/kube-apiserver-client-kubelet",
        "username": "admin", "uid": "42", "groups": ["system:masters"], "extra": {"a": ["b"]}
    }}));
    let stamped = CertificateRequests
        .mutate(&write(&bootstrapper, Operation::Create, Part::Main, &sent, None))
        .unwrap()
        .unwrap();
    assert_eq!(stamped["spec"]["username"], "system:bootstrap:abcdef");
    assert_eq!(stamped["spec"]["groups"], json!(["system:bootstrappers", "system:authenticated"]));
    assert!(stamped["spec"].get("uid").is_none() && stamped["spec"].get("extra").is_none());
    assert_eq!(stamped["spec"]["request"], "eA==");
    // Other resources are not this plugin's concern.
    let other = Write {
        resource: "nodes",
        api: "",
        ..write(&bootstrapper, Operation::Create, Part::Main, &sent, None)
    };
    assert_eq!(CertificateRequests.mutate(&other).unwrap(), None);
}

fn with(conditions: Value) -> kayra_registry::Object {
    object(json!({"spec": {}, "status": {"conditions": conditions}}))
}

#[test]
fn each_subresource_writes_only_its_own_conditions() {
    let admin = caller("admin", &["system:masters"]);
    let approved = json!([{"type": "Approved", "status": "True"}]);
    let denied = json!([{"type": "Denied", "status": "True"}]);
    let failed = json!([{"type": "Failed", "status": "True"}]);
    let approved_failed =
        json!([{"type": "Approved", "status": "True"}, {"type": "Failed", "status": "True"}]);
    let cases: &[(Part, &Value, &Value, bool, &str)] = &[
        (Part::Approval, &json!([]), &approved, true, "approval approves"),
        (Part::Approval, &json!([]), &denied, true, "approval denies"),
        (Part::Approval, &json!([]), &failed, false, "approval may not report a failure"),
        (Part::Status, &approved, &approved_failed, true, "the signer reports a failure"),
        (Part::Status, &json!([]), &approved, false, "status may not approve"),
        (Part::Status, &approved, &json!([]), false, "status may not withdraw an approval"),
        (Part::Main, &json!([]), &approved, true, "the object's own writes keep the stored status anyway"),
    ];
    for (part, old, new, admitted, why) in cases {
        let (old, new) = (with((*old).clone()), with((*new).clone()));
        let decision =
            CertificateRequests.validate(&write(&admin, Operation::Update, *part, &new, Some(&old)));
        match (admitted, decision) {
            (true, Ok(())) | (false, Err(Refusal::Forbidden(_))) => {}
            (_, decision) => panic!("{why}: got {decision:?}"),
        }
    }
}

#[test]
fn a_new_condition_gets_its_times_and_an_unchanged_one_keeps_them() {
    let admin = caller("admin", &["system:masters"]);
    let old = with(
        json!([{"type": "Approved", "status": "True", "lastTransitionTime": "2020-01-01T00:00:00Z", "lastUpdateTime": "2020-01-01T00:00:00Z"}]),
    );
    let new = with(json!([{"type": "Approved", "status": "True"}, {"type": "Failed", "status": "True"}]));
    let stamped = CertificateRequests
        .mutate(&write(&admin, Operation::Update, Part::Status, &new, Some(&old)))
        .unwrap()
        .unwrap();
    let conditions = &stamped["status"]["conditions"];
    assert_eq!(conditions[0]["lastTransitionTime"], "2020-01-01T00:00:00Z");
    assert_ne!(conditions[0]["lastUpdateTime"], Value::Null);
    assert_ne!(conditions[1]["lastTransitionTime"], "2020-01-01T00:00:00Z");
    assert!(conditions[1]["lastTransitionTime"].as_str().is_some_and(|t| t.ends_with('Z')));
}
