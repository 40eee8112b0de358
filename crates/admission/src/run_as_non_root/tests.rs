//! Run as non-root, table-driven.

use kayra_registry::{Operation, Part, Refusal};
use serde_json::{Value, json};

use super::RunAsNonRoot;
use crate::Validating;
use crate::fixture::{object, user, write};

fn check(resource: &str, operation: Operation, part: Part, body: Value, expect: Result<(), &str>) {
    let writer = user("root");
    let object = object(body.clone());
    let write = crate::Write { operation, part, ..write(&writer, resource, Some("team"), "x", &object) };
    match (expect, RunAsNonRoot::new("example.com").validate(&write)) {
        (Ok(()), Ok(())) => {}
        (Err(text), Err(Refusal::Forbidden(message))) => {
            assert!(message.contains(text), "{body}: {message} lacks {text:?}")
        }
        (expect, decision) => {
            panic!("{resource} {operation:?} {body}: expected {expect:?}, got {decision:?}")
        }
    }
}

#[test]
fn root_is_refused_wherever_a_workload_asks_for_it() {
    let app = |user: Value| json!({"spec": {"command": ["x"], "securityContext": {"runAsUser": user}}});
    let set = |user: Value| json!({"spec": {"applications": [{"name": "a", "spec": {"command": ["x"]}}, {"name": "b", "spec": {"command": ["x"], "securityContext": {"runAsUser": user}}}]}});
    let (create, update) = (Operation::Create, Operation::Update);
    let cases = [
        (
            "applications",
            create,
            Part::Main,
            app(json!(0)),
            Err("spec.securityContext.runAsUser: running as root (0) is not allowed"),
        ),
        ("applications", update, Part::Main, app(json!(0)), Err("runAsUser")),
        ("applications", create, Part::Main, app(json!(1000)), Ok(())),
        ("applications", create, Part::Main, json!({"spec": {"command": ["x"]}}), Ok(())),
        (
            "applications",
            create,
            Part::Main,
            json!({"spec": {"command": ["x"], "securityContext": {"runAsGroup": 0}}}),
            Ok(()),
        ),
        ("applications", Operation::Delete, Part::Main, app(json!(0)), Ok(())),
        ("applications", update, Part::Status, app(json!(0)), Ok(())),
        (
            "applicationsets",
            create,
            Part::Main,
            set(json!(0)),
            Err("spec.applications[1].spec.securityContext.runAsUser"),
        ),
        ("applicationsets", create, Part::Main, set(json!(7)), Ok(())),
        ("secrets", create, Part::Main, app(json!(0)), Ok(())),
    ];
    for (resource, operation, part, body, expect) in cases {
        check(resource, operation, part, body, expect);
    }
}
