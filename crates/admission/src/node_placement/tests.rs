//! Node placement, table-driven over a fleet of two nodes: `n1` offering 2 cores and 1Gi with
//! 1 core and 768Mi taken, `n2` reporting nothing yet.

use std::sync::Arc;

use kayra_registry::{Operation, Part, Refusal};
use serde_json::{Value, json};

use super::{NodePlacement, format_quantity};
use crate::Validating;
use crate::fixture::{caller, object, user, write};
use crate::ports::{Fleet, Resources};

const MI: f64 = 1024.0 * 1024.0;
const SCHEDULED_BY: &str = "fleet.example.com/scheduled-by";

struct TwoNodes;

impl Fleet for TwoNodes {
    fn allocatable(&self, node: &str) -> Option<Resources> {
        match node {
            "n1" => Some(Resources { cpu: Some(2.0), memory: Some(1024.0 * MI) }),
            "n2" => Some(Resources::default()),
            _ => None,
        }
    }

    fn requested_on(&self, node: &str, _namespace: &str, _name: &str) -> Resources {
        match node {
            "n1" => Resources { cpu: Some(1.0), memory: Some(768.0 * MI) },
            _ => Resources::default(),
        }
    }

    fn members(&self, _namespace: &str, _service: &str) -> Vec<String> {
        Vec::new()
    }

    fn secret_users(&self, _namespace: &str, _secret: &str) -> Vec<String> {
        Vec::new()
    }
}

/// An Application `web` in `a`: bound to `node` (or none), asking `memory`, marked by the
/// scheduler when `scheduled`.
fn app(node: Option<&str>, memory: Option<&str>, scheduled: bool) -> Value {
    let mut app = json!({"metadata": {"name": "web", "namespace": "a"}, "spec": {"command": ["/bin/true"]}});
    if let Some(node) = node {
        app["spec"]["placement"] = json!({"nodeName": node});
    }
    if let Some(memory) = memory {
        app["spec"]["resources"] = json!({"requests": {"memory": memory, "cpu": "250m"}});
    }
    if scheduled {
        app["metadata"]["annotations"] = json!({SCHEDULED_BY: "kayra-scheduler"});
    }
    app
}

fn check(who: &str, object: Value, old: Option<Value>, expect: Result<(), &str>, why: &str) {
    let writer = match who {
        "scheduler" => caller("system:kayra:scheduler", &["system:masters"]),
        "impostor" => caller("system:kayra:scheduler", &[]),
        other => user(other),
    };
    let object = object_of(object);
    let old = old.map(object_of);
    let write = crate::Write {
        operation: if old.is_some() { Operation::Update } else { Operation::Create },
        old: old.as_ref(),
        ..write(&writer, "applications", Some("a"), "web", &object)
    };
    let decision = NodePlacement::new("example.com", Arc::new(TwoNodes)).validate(&write);
    match (expect, decision) {
        (Ok(()), Ok(())) => {}
        (Err(text), Err(Refusal::Forbidden(message))) => {
            assert!(message.contains(text), "{why}: {message} lacks {text:?}")
        }
        (Err(text), Err(Refusal::Invalid(causes))) => {
            let said = format!("{causes:?}");
            assert!(said.contains(text), "{why}: {said} lacks {text:?}")
        }
        (expect, decision) => panic!("{why}: expected {expect:?}, got {decision:?}"),
    }
}

fn object_of(value: Value) -> kayra_registry::Object {
    object(value)
}

#[test]
fn a_binding_names_a_node_that_exists() {
    check("alice", app(Some("n1"), None, false), None, Ok(()), "a pin to an existing node");
    check("alice", app(None, None, false), None, Ok(()), "no pin: the scheduler places it");
    check(
        "alice",
        app(Some("n9"), None, false),
        None,
        Err("spec.placement.nodeName"),
        "a pin to a node that does not exist is invalid",
    );
    check(
        "alice",
        app(Some("n9"), None, false),
        Some(app(Some("n1"), None, false)),
        Err("Not found: \\\"n9\\\""),
        "re-pinning to a missing node is invalid",
    );
    check(
        "alice",
        json!({"metadata": {"name": "web", "namespace": "a", "labels": {"x": "y"}}, "spec": {"placement": {"nodeName": "gone"}}}),
        Some(app(Some("gone"), None, false)),
        Ok(()),
        "an Application whose node was deleted can still be written when its binding does not change",
    );
    check(
        "scheduler",
        app(Some("n9"), None, true),
        Some(app(None, None, false)),
        Err("n9"),
        "the scheduler too",
    );
}

#[test]
fn a_pin_that_would_overcommit_its_node_is_refused_saying_by_how_much() {
    check("alice", app(Some("n1"), Some("256Mi"), false), None, Ok(()), "768Mi + 256Mi fits 1Gi exactly");
    check(
        "alice",
        app(Some("n1"), Some("512Mi"), false),
        None,
        Err("would exceed node \"n1\"'s allocatable memory by 256Mi"),
        "768Mi + 512Mi is 256Mi over",
    );
    check(
        "alice",
        app(Some("n1"), Some("512Mi"), false),
        Some(app(Some("n1"), Some("512Mi"), false)),
        Ok(()),
        "an unchanged binding asking no more is not checked again",
    );
    check(
        "alice",
        app(Some("n2"), Some("64Gi"), false),
        None,
        Ok(()),
        "a node reporting no allocatable is not limited by it",
    );
    let mut finished = app(Some("n1"), Some("4Gi"), false);
    finished["status"] = json!({"phase": "Succeeded"});
    check("alice", finished, None, Ok(()), "a finished Application asks nothing of its node");
    let mut cpu = app(Some("n1"), None, false);
    cpu["spec"]["resources"] = json!({"requests": {"cpu": "1500m"}});
    check("alice", cpu, None, Err("allocatable cpu by 500m"), "cpu is counted as memory is");
}

#[test]
fn only_the_scheduler_marks_and_moves_what_it_placed() {
    check(
        "scheduler",
        app(Some("n1"), None, true),
        Some(app(None, None, false)),
        Ok(()),
        "the scheduler binds and marks",
    );
    check(
        "root",
        app(Some("n1"), None, true),
        Some(app(None, None, false)),
        Err("only the scheduler marks"),
        "system:masters is not the scheduler",
    );
    check(
        "impostor",
        app(Some("n1"), None, true),
        None,
        Err("only the scheduler marks"),
        "a controller-looking name outside system:masters is not the scheduler",
    );
    check(
        "alice",
        app(Some("n2"), None, true),
        Some(app(Some("n1"), None, true)),
        Err("may not move application \"web\", which the scheduler placed on node \"n1\""),
        "a client may not move a scheduler-placed Application",
    );
    check(
        "alice",
        app(None, None, false),
        Some(app(Some("n1"), None, true)),
        Ok(()),
        "a client may clear the binding with the annotation: a new placement",
    );
    check(
        "alice",
        app(Some("n1"), None, false),
        Some(app(Some("n1"), None, true)),
        Err("only the scheduler marks"),
        "dropping the annotation alone would pin it where the scheduler put it",
    );
    check(
        "alice",
        app(None, None, true),
        Some(app(Some("n1"), None, true)),
        Err("remove it with the binding"),
        "clearing the binding keeps no annotation",
    );
    check(
        "alice",
        app(Some("n2"), None, false),
        Some(app(Some("n1"), None, false)),
        Ok(()),
        "an author may re-pin what they pinned",
    );
    check(
        "scheduler",
        app(Some("n2"), None, true),
        Some(app(Some("n1"), None, true)),
        Ok(()),
        "the scheduler may move what it placed",
    );
}

/// An eviction's or a lost node's unbinding is written as a binding (so that it leaves
/// `generation`, as the binding did): placement decides it as a write of the object, and a
/// cleared binding with its mark gone is what it accepts.
#[test]
fn an_unbinding_written_as_a_binding_is_decided_as_a_write_of_the_object() {
    let plugin = NodePlacement::new("example.com", Arc::new(TwoNodes));
    let placed = object_of(app(Some("n1"), None, true));
    let cases = [
        ("system:kayra:eviction", app(None, None, false), Ok(()), "the control plane unbinds"),
        ("alice", app(None, None, false), Ok(()), "so may a client, asking for a new placement"),
        ("alice", app(Some("n2"), None, true), Err("may not move"), "a binding write is still decided"),
        ("system:kayra:eviction", app(None, None, true), Err("remove it with the binding"), "no mark left"),
    ];
    for (who, object, expect, why) in cases {
        let writer =
            if who.starts_with("system:kayra:") { caller(who, &["system:masters"]) } else { user(who) };
        let object = object_of(object);
        let write = crate::Write {
            operation: Operation::Update,
            part: Part::Binding,
            old: Some(&placed),
            ..write(&writer, "applications", Some("a"), "web", &object)
        };
        match (expect, plugin.validate(&write)) {
            (Ok(()), Ok(())) => {}
            (Err(text), Err(Refusal::Forbidden(message))) => {
                assert!(message.contains(text), "{why}: {message}")
            }
            (Err(text), Err(Refusal::Invalid(causes))) => {
                assert!(format!("{causes:?}").contains(text), "{why}: {causes:?}")
            }
            (expect, decision) => panic!("{why}: expected {expect:?}, got {decision:?}"),
        }
    }
}

#[test]
fn other_writes_are_not_this_plugins_concern() {
    let object = object_of(app(Some("n9"), None, true));
    let alice = user("alice");
    for (resource, part, operation) in [
        ("applicationsets", Part::Main, Operation::Create),
        ("applications", Part::Status, Operation::Update),
        ("applications", Part::Main, Operation::Delete),
    ] {
        let write = crate::Write { part, operation, ..write(&alice, resource, Some("a"), "web", &object) };
        let decision = NodePlacement::new("example.com", Arc::new(TwoNodes)).validate(&write);
        assert_eq!(decision, Ok(()), "{resource} {part:?} {operation:?}");
    }
}

#[test]
fn excess_is_written_as_kubernetes_writes_quantities() {
    assert_eq!(format_quantity("memory", 256.0 * MI), "256Mi");
    assert_eq!(format_quantity("memory", 1536.0), "1536");
    assert_eq!(format_quantity("memory", 2048.0), "2Ki");
    assert_eq!(format_quantity("cpu", 0.5), "500m");
    assert_eq!(format_quantity("cpu", 2.0), "2");
}

/// `who`'s write of `object` over `old` through this plugin's mutation, then its validation:
/// the annotations stored, or the refusal.
fn admit(who: &str, object: Value, old: Option<Value>) -> Result<Option<Value>, Refusal> {
    let writer = user(who);
    let object = object_of(object);
    let old = old.map(object_of);
    let write = crate::Write {
        operation: if old.is_some() { Operation::Update } else { Operation::Create },
        old: old.as_ref(),
        ..write(&writer, "applications", Some("a"), "web", &object)
    };
    let plugin = NodePlacement::new("example.com", Arc::new(TwoNodes));
    let mutated = crate::Mutating::mutate(&plugin, &write)?.unwrap_or_else(|| object.clone());
    plugin.validate(&crate::Write { object: &mutated, ..write })?;
    Ok(mutated.get("metadata").and_then(|m| m.get("annotations")).cloned())
}

#[test]
fn clearing_the_binding_of_a_scheduler_placed_application_alone_drops_its_annotation() {
    let marked = Some(json!({SCHEDULED_BY: "kayra-scheduler"}));
    let cases = [
        (
            "nodeName cleared alone: a new placement",
            app(None, None, true),
            Some(app(Some("n1"), None, true)),
            Ok(Some(json!({}))),
        ),
        ("both cleared", app(None, None, false), Some(app(Some("n1"), None, true)), Ok(None)),
        ("still bound", app(Some("n1"), None, true), Some(app(Some("n1"), None, true)), Ok(marked)),
        ("a pin cleared", app(None, None, false), Some(app(Some("n1"), None, false)), Ok(None)),
    ];
    for (case, object, old, expected) in cases {
        assert_eq!(admit("alice", object, old), expected, "{case}");
    }
    let created = admit("alice", app(None, None, true), None);
    assert!(matches!(created, Err(Refusal::Invalid(_))), "a new Application is not marked: {created:?}");
    let marked_later = admit("alice", app(Some("n1"), None, true), Some(app(Some("n1"), None, false)));
    assert!(
        matches!(marked_later, Err(Refusal::Forbidden(_))),
        "nor marked later by a client: {marked_later:?}"
    );
}
