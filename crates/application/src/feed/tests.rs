//! Which changes count, and which keys a change maps to (the object, its controlling owner,
//! the object a field names).

use serde_json::{Value, json};

use super::*;

fn object(value: Value) -> Object {
    match value {
        Value::Object(object) => object,
        _ => unreachable!("the tests pass objects"),
    }
}

#[test]
fn only_a_change_to_what_is_relevant_counts() {
    let relevant = Relevant {
        project: Arc::new(|node: &Object| node["status"]["addresses"].clone()),
        last: Arc::default(),
    };
    let node = |address: &str, heartbeat: &str| {
        object(json!({"metadata": {"name": "n1"}, "status": {
            "addresses": [{"type": "InternalIP", "address": address}],
            "conditions": [{"type": "Ready", "lastHeartbeatTime": heartbeat}]}}))
    };
    assert!(relevant.changed("/n1", &node("10.0.0.1", "t1")), "a new object counts");
    assert!(!relevant.changed("/n1", &node("10.0.0.1", "t2")), "a heartbeat does not");
    assert!(relevant.changed("/n1", &node("10.0.0.2", "t3")), "a new address does");
    relevant.forget("/n1");
    assert!(relevant.changed("/n1", &node("10.0.0.2", "t4")), "after it went, it is new again");
}

#[test]
fn changes_map_to_the_object_its_controlling_owner_or_the_object_a_field_names() {
    let child = object(json!({
        "metadata": {"namespace": "demo", "name": "web-0", "ownerReferences": [
            {"kind": "ApplicationSet", "name": "web", "controller": true},
            {"kind": "ApplicationSet", "name": "not-controlling"},
            {"kind": "Other", "name": "x", "controller": true},
        ]},
        "spec": {"placement": {"nodeName": "node-1"}},
    }));
    assert_eq!(own_key(&child), vec![Key::new("demo/web-0")]);
    assert_eq!(controller_owner("ApplicationSet")(&child), vec![Key::new("demo/web")]);
    assert_eq!(named_by("/spec/placement/nodeName")(&child), vec![Key::new("node-1")]);
    let orphan = object(
        json!({"metadata": {"namespace": "demo", "name": "alone"}, "spec": {"placement": {"nodeName": ""}}}),
    );
    assert!(controller_owner("ApplicationSet")(&orphan).is_empty());
    assert!(named_by("/spec/placement/nodeName")(&orphan).is_empty(), "an empty field names nothing");
}
