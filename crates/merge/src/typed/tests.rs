//! Tests of the walks: the paths an applied value sets, what a write changed, merge order.

use serde_json::{Value, json};

use super::{Comparison, compare, field_set, merge};
use crate::set::FieldSet;
use crate::tests::toy;

/// The configuration of kube-apiserver's worked example (its own envelope left out).
fn example() -> Value {
    json!({
        "metadata": {"labels": {"app": "x"}, "finalizers": ["example.com/f"]},
        "spec": {
            "replicas": 3, "args": ["--a", "--b"], "tags": ["x", "y"], "config": {"db": {"host": "h"}},
            "containers": [{"name": "c", "image": "i:1", "ports": [{"containerPort": 80}]}],
        },
    })
}

#[test]
fn an_applied_value_owns_its_leaves_items_and_map_entries() {
    let schema = toy();
    let mut set = FieldSet::new();
    field_set(&schema, schema.root(), &example(), &mut Vec::new(), &mut set);
    // Byte for byte what kube-apiserver records for this apply.
    assert_eq!(
        set.to_fields_v1(),
        json!({
            "f:metadata": {"f:finalizers": {"v:\"example.com/f\"": {}}, "f:labels": {"f:app": {}}},
            "f:spec": {
                "f:args": {}, "f:config": {"f:db": {".": {}, "f:host": {}}},
                "f:containers": {"k:{\"name\":\"c\"}": {
                    ".": {}, "f:image": {}, "f:name": {},
                    "f:ports": {"k:{\"containerPort\":80,\"protocol\":\"TCP\"}": {".": {}, "f:containerPort": {}}},
                }},
                "f:replicas": {}, "f:tags": {"v:\"x\"": {}, "v:\"y\"": {}},
            },
        })
    );
    let mut empty = FieldSet::new();
    field_set(&schema, schema.root(), &json!({"spec": {}}), &mut Vec::new(), &mut empty);
    assert_eq!(empty.to_fields_v1(), json!({"f:spec": {}}), "an empty map is owned as such");
}

#[test]
fn a_created_value_adds_every_container_it_brings() {
    let schema = toy();
    let mut comparison = Comparison::default();
    compare(&schema, schema.root(), None, Some(&example()), &mut Vec::new(), &mut comparison);
    assert!(comparison.modified.is_empty() && comparison.removed.is_empty());
    assert_eq!(
        comparison.added.to_fields_v1()["f:spec"],
        json!({
            ".": {}, "f:args": {},
            "f:config": {".": {}, "f:db": {".": {}, "f:host": {}}},
            "f:containers": {".": {}, "k:{\"name\":\"c\"}": {
                ".": {}, "f:image": {}, "f:name": {},
                "f:ports": {".": {}, "k:{\"containerPort\":80,\"protocol\":\"TCP\"}": {".": {}, "f:containerPort": {}}},
            }},
            "f:replicas": {}, "f:tags": {".": {}, "v:\"x\"": {}, "v:\"y\"": {}},
        })
    );
}

#[test]
fn a_change_names_what_changed_and_what_went_with_everything_under_it() {
    let schema = toy();
    let old = example();
    let mut new = example();
    new["spec"]["replicas"] = json!(4);
    new["spec"]["args"] = json!(["--c"]);
    new["spec"]["tags"] = json!(["y", "z"]);
    new["spec"]["containers"] = json!([]);
    let mut comparison = Comparison::default();
    compare(&schema, schema.root(), Some(&old), Some(&new), &mut Vec::new(), &mut comparison);
    assert_eq!(comparison.modified.to_fields_v1(), json!({"f:spec": {"f:args": {}, "f:replicas": {}}}));
    assert_eq!(comparison.added.to_fields_v1(), json!({"f:spec": {"f:tags": {"v:\"z\"": {}}}}));
    assert_eq!(
        comparison.removed.to_fields_v1(),
        json!({"f:spec": {
            "f:containers": {"k:{\"name\":\"c\"}": {
                ".": {}, "f:image": {}, "f:name": {},
                "f:ports": {".": {}, "k:{\"containerPort\":80,\"protocol\":\"TCP\"}": {".": {}, "f:containerPort": {}}},
            }},
            "f:tags": {"v:\"x\"": {}},
        }})
    );
}

#[test]
fn merged_items_follow_the_configuration_and_live_items_keep_their_place() {
    let schema = toy();
    let check = |live: Value, config: Value, expected: Value| {
        let live = json!({"spec": {"tags": live.clone(), "containers": names(&live)}});
        let config_object = json!({"spec": {"tags": config.clone(), "containers": names(&config)}});
        let merged = merge(&schema, schema.root(), Some(live), &config_object);
        assert_eq!(merged["spec"]["tags"], expected, "set: {config}");
        assert_eq!(merged["spec"]["containers"], names(&expected), "list of type map: {config}");
        let again = merge(&schema, schema.root(), Some(merged.clone()), &config_object);
        assert_eq!(again, merged, "merging the same configuration again changes nothing");
    };
    check(json!(["a", "b", "c"]), json!(["a", "c"]), json!(["a", "b", "c"]));
    check(json!(["a", "b"]), json!(["x"]), json!(["a", "b", "x"]));
    check(json!(["a", "b", "c"]), json!(["c", "x", "a"]), json!(["c", "x", "a", "b"]));
    check(json!([]), json!(["q", "p"]), json!(["q", "p"]));
}

/// A list of containers named as `names` holds.
fn names(names: &Value) -> Value {
    Value::Array(names.as_array().unwrap().iter().map(|name| json!({"name": name})).collect())
}

#[test]
fn a_list_whose_keys_repeat_is_merged_whole() {
    let schema = toy();
    // Two whole imports, each without a name: they cannot be told apart.
    let live = json!({"spec": {"env": [{"name": "A", "value": "1"}, {"from": "s1"}, {"from": "s2"}]}});
    let config = json!({"spec": {"env": [{"from": "s3"}, {"from": "s4"}]}});
    let merged = merge(&schema, schema.root(), Some(live.clone()), &config);
    assert_eq!(merged["spec"]["env"], config["spec"]["env"]);
    let mut set = FieldSet::new();
    field_set(&schema, schema.root(), &config, &mut Vec::new(), &mut set);
    assert_eq!(set.to_fields_v1(), json!({"f:spec": {"f:env": {}}}), "owned as one leaf");
    let mut comparison = Comparison::default();
    compare(&schema, schema.root(), Some(&live), Some(&merged), &mut Vec::new(), &mut comparison);
    assert_eq!(comparison.modified.to_fields_v1(), json!({"f:spec": {"f:env": {}}}));
}
