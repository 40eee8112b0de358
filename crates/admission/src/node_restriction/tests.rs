//! Node restriction, table-driven.

use kayra_authz::NODES;
use kayra_registry::{Operation, Part, Refusal};
use serde_json::{Value, json};

use super::NodeRestriction;
use crate::Validating;
use crate::fixture::{caller, object, user, write};

/// One write to a Node: who, which Node, how, the new object and the stored one.
struct Case {
    who: &'static str,
    node: &'static str,
    operation: Operation,
    part: Part,
    object: Value,
    old: Option<Value>,
}

fn check(case: Case, expect: Result<(), &str>, why: &str) {
    let writer = match case.who {
        "n1" => caller("system:node:n1", &[NODES]),
        "impostor" => caller("system:node:n1", &[]),
        other => user(other),
    };
    let object = object(case.object);
    let old = case.old.map(crate::fixture::object);
    let write = crate::Write {
        operation: case.operation,
        part: case.part,
        old: old.as_ref(),
        ..write(&writer, "nodes", None, case.node, &object)
    };
    let decision = NodeRestriction::new("example.com").validate(&write);
    match (expect, decision) {
        (Ok(()), Ok(())) => {}
        (Err(text), Err(Refusal::Forbidden(message))) => {
            assert!(message.contains(text), "{why}: {message} lacks {text:?}")
        }
        (expect, decision) => panic!("{why}: expected {expect:?}, got {decision:?}"),
    }
}

fn create(who: &'static str, node: &'static str, object: Value) -> Case {
    Case { who, node, operation: Operation::Create, part: Part::Main, object, old: None }
}

fn update(who: &'static str, object: Value, old: Value) -> Case {
    Case { who, node: "n1", operation: Operation::Update, part: Part::Main, object, old: Some(old) }
}

#[test]
fn a_node_writes_only_its_own_node() {
    let labelled = json!({"metadata": {"labels": {"gpu": "yes"}}});
    let schedulable = json!({"spec": {"unschedulable": false}});
    let cordoned = json!({"spec": {"unschedulable": true}, "metadata": {"labels": {"zone": "a"}}});
    let ready = json!({"spec": {"unschedulable": true}, "metadata": {"labels": {"zone": "a"}}, "status": {"phase": "Ready"}});
    let delete = |node| Case {
        who: "n1",
        node,
        operation: Operation::Delete,
        part: Part::Main,
        object: json!({}),
        old: Some(json!({})),
    };
    let status = Case { part: Part::Status, ..update("n1", ready.clone(), cordoned.clone()) };
    let cases: Vec<(Case, Result<(), &str>, &str)> = vec![
        (create("n1", "n1", json!({})), Ok(()), "its own Node"),
        (create("n1", "n2", json!({})), Err("only its own Node object"), "another Node"),
        (
            create("n1", "n1", labelled.clone()),
            Err("may not set its own labels"),
            "no labels of its own choosing",
        ),
        (
            create("n1", "n1", schedulable.clone()),
            Err("may not set its own spec"),
            "no spec of its own choosing",
        ),
        (update("n1", schedulable, cordoned.clone()), Err("spec"), "a node may not uncordon itself"),
        (update("n1", cordoned.clone(), cordoned.clone()), Ok(()), "spec and labels as stored"),
        (status, Ok(()), "its own status"),
        (delete("n1"), Ok(()), "deleting its own Node"),
        (delete("n2"), Err("may not write node \"n2\""), "deleting another Node"),
        (create("root", "n2", labelled.clone()), Ok(()), "an administrator is not a node"),
        (create("impostor", "n2", labelled), Ok(()), "the name alone is not a node: RBAC decides"),
    ];
    for (case, expect, why) in cases {
        check(case, expect, why);
    }
}

/// One write by node n1 to Application `web`: how, the new object and the stored one.
fn application_write(
    operation: Operation,
    part: Part,
    object: Value,
    old: Option<Value>,
) -> Result<(), Refusal> {
    let writer = caller("system:node:n1", &[NODES]);
    let object = object_of(object);
    let old = old.map(object_of);
    let write = crate::Write {
        operation,
        part,
        api: "fleet.example.com",
        old: old.as_ref(),
        ..write(&writer, "applications", Some("demo"), "web", &object)
    };
    NodeRestriction::new("example.com").validate(&write)
}

fn object_of(value: Value) -> kayra_registry::Object {
    object(value)
}

#[test]
fn a_node_writes_only_the_status_of_applications_bound_to_it() {
    let on = |node: &str| json!({"spec": {"placement": {"nodeName": node}}, "status": {"phase": "Running"}});
    let refused = |outcome: Result<(), Refusal>, text: &str, why: &str| match outcome {
        Err(Refusal::Forbidden(message)) => {
            assert!(message.contains(text), "{why}: {message} lacks {text:?}")
        }
        other => panic!("{why}: expected a refusal, got {other:?}"),
    };
    assert_eq!(
        application_write(Operation::Update, Part::Status, on("n1"), Some(on("n1"))),
        Ok(()),
        "its own"
    );
    refused(
        application_write(Operation::Update, Part::Status, on("n2"), Some(on("n2"))),
        "not bound to it",
        "another node's",
    );
    refused(
        application_write(Operation::Update, Part::Status, on("n1"), Some(json!({"spec": {}}))),
        "not bound to it",
        "an unplaced one",
    );
    refused(
        application_write(Operation::Update, Part::Main, on("n1"), Some(on("n1"))),
        "only write the status",
        "its spec",
    );
    refused(
        application_write(Operation::Create, Part::Main, on("n1"), None),
        "only write the status",
        "a new one",
    );
    refused(
        application_write(Operation::Delete, Part::Main, on("n1"), Some(on("n1"))),
        "only write the status",
        "a deletion",
    );
    let other_user = user("alice");
    let object = object_of(on("n2"));
    let write = crate::Write {
        api: "fleet.example.com",
        ..write(&other_user, "applications", Some("demo"), "web", &object)
    };
    assert_eq!(
        NodeRestriction::new("example.com").validate(&write),
        Ok(()),
        "not a node: not this plugin's concern"
    );
}

#[test]
fn a_node_writes_only_its_own_lease() {
    let lease = object(json!({"spec": {"holderIdentity": "n1", "leaseDurationSeconds": 40}}));
    let check = |who: &str, namespace: &str, name: &str, operation: Operation, expect: Result<(), &str>| {
        let writer = match who {
            "n1" => caller("system:node:n1", &[NODES]),
            other => user(other),
        };
        let write = crate::Write {
            api: "coordination.k8s.io",
            operation,
            ..write(&writer, "leases", Some(namespace), name, &lease)
        };
        let decision = NodeRestriction::new("example.com").validate(&write);
        let why = format!("{who} {operation:?} {namespace}/{name}");
        match (expect, decision) {
            (Ok(()), Ok(())) => {}
            (Err(text), Err(Refusal::Forbidden(message))) => {
                assert!(message.contains(text), "{why}: {message} lacks {text:?}")
            }
            (expect, decision) => panic!("{why}: expected {expect:?}, got {decision:?}"),
        }
    };
    for operation in [Operation::Create, Operation::Update, Operation::Delete] {
        check("n1", "kube-node-lease", "n1", operation, Ok(()));
        check("n1", "kube-node-lease", "n2", operation, Err("may not write lease \"kube-node-lease/n2\""));
        check("n1", "default", "n1", operation, Err("only its own lease \"kube-node-lease/n1\""));
        check("root", "kube-node-lease", "n2", operation, Ok(()));
    }
}
