//! Merge and JSON patches against a model: the stored result is what RFC 7386 and RFC 6902
//! say, and a patch that cannot apply changes nothing.

use std::sync::Arc;

use kayra_registry::{NoRules, PatchKind, RegistryError, Resource};
use proptest::prelude::*;
use serde_json::{Map, Value, json};

use super::{unadmitted, world};

fn things() -> Resource {
    Resource {
        group: "fleet.example.com".into(),
        version: "v1".into(),
        kind: "Thing".into(),
        plural: "things".into(),
        namespaced: true,
        status_subresource: false,
        field_labels: Vec::new(),
        strategy: Arc::new(NoRules),
    }
}

/// RFC 7386, written from the RFC's pseudo-code.
fn merge_model(target: &Value, patch: &Value) -> Value {
    let Value::Object(patch) = patch else { return patch.clone() };
    let mut result = match target {
        Value::Object(map) => map.clone(),
        _ => Map::new(),
    };
    for (key, value) in patch {
        if value.is_null() {
            result.remove(key);
        } else {
            let merged = merge_model(result.get(key).unwrap_or(&Value::Null), value);
            result.insert(key.clone(), merged);
        }
    }
    Value::Object(result)
}

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<i8>().prop_map(|n| json!(n)),
        "[xyz]".prop_map(Value::String),
        Just(json!([1, 2]))
    ]
}

fn tree() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(3, 12, 3, |inner| {
        proptest::collection::btree_map("[abc]", inner, 0..3)
            .prop_map(|map| Value::Object(map.into_iter().collect()))
    })
}

/// One JSON patch operation on a top-level key of `spec`.
fn operation() -> impl Strategy<Value = Value> {
    ("[abc]", 0..3u8, any::<i8>()).prop_map(|(key, op, n)| match op {
        0 => json!({"op": "add", "path": format!("/spec/{key}"), "value": n}),
        1 => json!({"op": "remove", "path": format!("/spec/{key}")}),
        _ => json!({"op": "replace", "path": format!("/spec/{key}"), "value": n}),
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn merge_patches_follow_rfc_7386(initial in proptest::collection::btree_map("[abc]", tree(), 0..3), patches in proptest::collection::vec(tree(), 1..4)) {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(async {
            let w = world().await;
            let spec = Value::Object(initial.into_iter().filter(|(_, v)| !v.is_null()).collect());
            let body = json!({"apiVersion": "fleet.example.com/v1", "kind": "Thing", "metadata": {"name": "t"}, "spec": spec});
            w.registry.create(&things(), Some("default"), body, unadmitted()).await.unwrap();
            let mut model = spec;
            for patch in patches {
                let document = json!({"spec": patch});
                let patched = w.registry.patch(&things(), Some("default"), "t", PatchKind::Merge, document.to_string().as_bytes(), unadmitted()).await.unwrap();
                model = merge_model(&json!({"spec": model}), &document)["spec"].clone();
                prop_assert_eq!(patched.get("spec").cloned().unwrap_or(Value::Null), model.clone());
            }
            Ok(())
        })?;
    }

    #[test]
    fn json_patches_apply_whole_or_not_at_all(operations in proptest::collection::vec(proptest::collection::vec(operation(), 1..4), 1..5)) {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(async {
            let w = world().await;
            let body = json!({"apiVersion": "fleet.example.com/v1", "kind": "Thing", "metadata": {"name": "t"}, "spec": {"a": 1}});
            w.registry.create(&things(), Some("default"), body, unadmitted()).await.unwrap();
            let mut model: Map<String, Value> = json!({"a": 1}).as_object().unwrap().clone();
            for patch in operations {
                let mut next = model.clone();
                let applies = patch.iter().all(|op| {
                    let key = op["path"].as_str().unwrap().trim_start_matches("/spec/").to_owned();
                    match op["op"].as_str().unwrap() {
                        "add" => { next.insert(key, op["value"].clone()); true }
                        "remove" => next.remove(&key).is_some(),
                        _ => next.contains_key(&key) && { next.insert(key, op["value"].clone()); true },
                    }
                });
                let result = w.registry.patch(&things(), Some("default"), "t", PatchKind::Json, Value::Array(patch).to_string().as_bytes(), unadmitted()).await;
                if applies {
                    model = next;
                    prop_assert_eq!(result.unwrap()["spec"].clone(), Value::Object(model.clone()));
                } else {
                    prop_assert!(matches!(result, Err(RegistryError::BadRequest(_))), "{:?}", result);
                    let stored = w.registry.get(&things(), Some("default"), "t").await.unwrap();
                    prop_assert_eq!(stored["spec"].clone(), Value::Object(model.clone()), "a failed patch changes nothing");
                }
            }
            Ok(())
        })?;
    }
}
