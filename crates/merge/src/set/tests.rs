//! Tests of field sets and their `FieldsV1` form.

use serde_json::{Value, json};

use super::FieldSet;
use crate::path::{PathElement, canonical, display};

fn f(name: &str) -> PathElement {
    PathElement::Field(name.to_owned())
}

fn k(key: Value) -> PathElement {
    PathElement::Key(canonical(&key))
}

#[test]
fn fields_v1_round_trips_kube_apiservers_example() {
    // What kube-apiserver writes for an apply of labels, finalizers, an atomic list, a set, a
    // map of maps and nested lists of type map.
    let written = json!({
        "f:metadata": {"f:finalizers": {"v:\"example.com/f\"": {}}, "f:labels": {"f:app": {}}},
        "f:spec": {
            "f:args": {},
            "f:config": {"f:db": {".": {}, "f:host": {}}},
            "f:containers": {"k:{\"name\":\"c\"}": {
                ".": {}, "f:image": {}, "f:name": {},
                "f:ports": {"k:{\"containerPort\":80,\"protocol\":\"TCP\"}": {".": {}, "f:containerPort": {}}},
            }},
            "f:replicas": {},
            "f:tags": {"v:\"x\"": {}, "v:\"y\"": {}},
        },
    });
    let set = FieldSet::from_fields_v1(&written).unwrap();
    assert!(
        set.has(&[f("spec"), f("containers"), k(json!({"name": "c"}))]),
        "an item with children is a member"
    );
    assert!(!set.has(&[f("spec"), f("config")]), "a node with children only is not");
    assert!(set.has(&[f("spec"), f("config"), f("db"), f("host")]));
    assert!(set.has(&[f("metadata"), f("finalizers"), PathElement::Value("\"example.com/f\"".to_owned())]));
    assert_eq!(set.to_fields_v1(), written);
    assert_eq!(set.paths().len(), 13);
}

#[test]
fn decoding_is_canonical_and_skips_unknown_elements() {
    // kube-apiserver escapes <, > and & inside keys' JSON and writes keys in any order.
    let written = json!({"f:spec": {
        "k:{\"protocol\":\"TCP\", \"containerPort\":80}": {},
        "k:{\"name\":\"x\\u0026y\"}": {},
        "z:unknown": {},
    }});
    let set = FieldSet::from_fields_v1(&written).unwrap();
    let keys: Vec<String> = set.paths().iter().map(|path| display(path)).collect();
    assert_eq!(keys, [".spec[containerPort=80,protocol=\"TCP\"]", ".spec[name=\"x&y\"]"]);
    assert_eq!(
        set.to_fields_v1(),
        json!({"f:spec": {"k:{\"containerPort\":80,\"protocol\":\"TCP\"}": {}, "k:{\"name\":\"x\\u0026y\"}": {}}})
    );
    for bad in [json!([]), json!({"f:a": 1}), json!({"k:[1]": {}}), json!({"i:x": {}})] {
        assert!(FieldSet::from_fields_v1(&bad).is_err(), "{bad} is refused");
    }
}

#[test]
fn set_arithmetic() {
    let set = |paths: &[&[&str]]| {
        let mut set = FieldSet::new();
        for path in paths {
            set.insert(&path.iter().map(|name| f(name)).collect::<Vec<_>>());
        }
        set
    };
    let a = set(&[&["spec", "replicas"], &["spec", "image"], &["metadata", "labels", "app"]]);
    let b = set(&[&["spec", "replicas"], &["spec", "args"]]);
    assert_eq!(
        a.union(&b),
        set(&[&["spec", "replicas"], &["spec", "image"], &["spec", "args"], &["metadata", "labels", "app"]])
    );
    assert_eq!(a.difference(&b), set(&[&["spec", "image"], &["metadata", "labels", "app"]]));
    assert_eq!(a.intersection(&b), set(&[&["spec", "replicas"]]));
    assert!(a.difference(&a).is_empty(), "nothing is left, not even empty nodes");
    assert_eq!(a.difference(&a).to_fields_v1(), json!({}));
    assert!(!set(&[&["spec"]]).has(&[f("spec"), f("replicas")]));
    assert_eq!(
        display(&[f("spec"), f("args"), PathElement::Index(3)]),
        ".spec.args[3]",
        "an index prints as kube-apiserver prints it"
    );
}
