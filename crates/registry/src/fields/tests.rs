//! Field selectors as kubectl sends them, unsupported fields named, and an exact name
//! recognised.

use serde_json::json;

use super::*;

const SUPPORTED: &[&str] = &[
    "status.phase",
    "spec.placement.nodeName",
    "involvedObject.kind",
    "involvedObject.name",
    "involvedObject.namespace",
    "involvedObject.uid",
];

fn check(selector: &str, object: &Value, expect: bool) {
    let parsed = FieldSelector::parse(selector, SUPPORTED).unwrap_or_else(|e| panic!("{selector:?}: {e}"));
    assert_eq!(parsed.matches(object.as_object().expect("an object")), expect, "{selector:?}");
    assert_eq!(FieldSelector::parse(&parsed.to_string(), SUPPORTED).unwrap(), parsed);
}

#[test]
fn selectors_kubectl_sends_match() {
    let app = json!({"metadata": {"name": "app1", "namespace": "default"}, "status": {"phase": "Running"},
                     "spec": {"placement": {"nodeName": "n1"}}, "involvedObject": {"uid": "u-1"}});
    check("metadata.name=app1", &app, true);
    check("metadata.name==app1", &app, true);
    check("metadata.name!=app1", &app, false);
    check("metadata.namespace=default,metadata.name=app1", &app, true);
    check("spec.placement.nodeName=n1,status.phase!=Succeeded,status.phase!=Failed", &app, true);
    check("status.phase=Pending", &app, false);
    check("involvedObject.uid=u-1", &app, true);
    check("spec.placement.nodeName=", &json!({"metadata": {"name": "x"}}), true);
    check("metadata.name=a\\,b", &json!({"metadata": {"name": "a,b"}}), true);
    check("", &app, true);
    check("metadata.name=é", &json!({"metadata": {"name": "é"}}), true);
    check("metadata.name!=\\é", &json!({"metadata": {"name": "x"}}), true);
}

#[test]
fn a_nodes_event_about_an_application_is_also_about_its_pod_there() {
    let pod_uid = kayra_api::view::placement_uid("app-uid", "n1");
    let event = |kind: &str, host: Option<&str>| {
        let mut event = json!({"metadata": {"name": "web.1", "namespace": "default"},
                               "involvedObject": {"kind": kind, "name": "web", "namespace": "default", "uid": "app-uid"},
                               "source": {"component": "kayra-agent"}});
        if let Some(host) = host {
            event["source"]["host"] = json!(host);
        }
        event
    };
    // kubectl describe pod: by name, namespace and the Pod's uid.
    let by_pod =
        format!("involvedObject.name=web,involvedObject.namespace=default,involvedObject.uid={pod_uid}");
    check(&by_pod, &event("Application", Some("n1")), true);
    check(&format!("involvedObject.uid!={pod_uid}"), &event("Application", Some("n1")), false);
    // kubectl describe application: by the Application's own uid, still.
    check(
        "involvedObject.kind=Application,involvedObject.uid=app-uid",
        &event("Application", Some("n1")),
        true,
    );
    // Not a Pod elsewhere, nor without a node, nor for another Kind.
    let elsewhere = kayra_api::view::placement_uid("app-uid", "n2");
    check(&format!("involvedObject.uid={elsewhere}"), &event("Application", Some("n1")), false);
    check(&by_pod, &event("Application", None), false);
    check(&by_pod, &event("Node", Some("n1")), false);
}

#[test]
fn unsupported_fields_are_named() {
    let error = FieldSelector::parse("status.bogus=x", &["status.phase"]).unwrap_err();
    assert_eq!(error.to_string(), "field label not supported: status.bogus");
    assert!(matches!(FieldSelector::parse("metadata.name", &[]), Err(FieldSelectorError::Malformed(_))));
    assert!(matches!(FieldSelector::parse("=x", &[]), Err(FieldSelectorError::Malformed(_))));
}

#[test]
fn an_exact_name_is_recognised() {
    let selector = FieldSelector::parse("metadata.name=web", &[]).unwrap();
    assert_eq!(selector.exact_name(), Some("web"));
    assert_eq!(FieldSelector::parse("metadata.name!=web", &[]).unwrap().exact_name(), None);
}
