//! The three laws of apply, over generated configurations of the toy Kind (every list and map
//! type): applying a configuration twice is applying it once; two managers whose fields are
//! disjoint reach the same object in either order; and a field another manager also applies
//! stays when one applier stops applying it.

use proptest::prelude::*;
use serde_json::{Map, Value, json};

use crate::operation::{Scope, apply, record_update};
use crate::path::canonical;
use crate::tests::{thing, toy, writer};

type Object = Map<String, Value>;

/// A configuration from one side's vocabulary: names starting with `side`, and the scalar and
/// atomic fields only that side sets (`a`: `replicas`, `args`; `b`: `image`, `selector`;
/// any other side none).
fn config(side: &'static str) -> impl Strategy<Value = Value> {
    let name = move |n: u8| format!("{side}{n}");
    let labels = prop::collection::btree_map(0u8..4, 0u8..3, 0..4).prop_map(move |labels| {
        labels.into_iter().map(|(k, v)| (name(k), json!(format!("v{v}")))).collect::<Map<_, _>>()
    });
    let tags = prop::collection::btree_set(0u8..5, 0..4)
        .prop_map(move |tags| tags.into_iter().map(name).collect::<Vec<_>>());
    let port = (80i64..83, prop::option::of(prop::sample::select(vec!["UDP", "TCP"]))).prop_map(
        |(port, protocol)| match protocol {
            Some(protocol) => json!({"containerPort": port, "protocol": protocol}),
            None => json!({"containerPort": port}),
        },
    );
    let container = (prop::option::of(0u8..3), prop::collection::vec(port, 0..3))
        .prop_map(|(image, ports)| (image, ports));
    let containers = prop::collection::btree_map(0u8..3, container, 0..3).prop_map(move |containers| {
        containers
            .into_iter()
            .map(|(n, (image, ports))| {
                let mut item = json!({"name": name(n)});
                if let Some(image) = image {
                    item["image"] = json!(format!("i{image}"));
                }
                // Ports are a list of type map: keep one item per key.
                let mut seen = std::collections::BTreeSet::new();
                let ports: Vec<Value> = ports
                    .into_iter()
                    .filter(|port| {
                        let protocol =
                            port.get("protocol").and_then(Value::as_str).unwrap_or("TCP").to_owned();
                        seen.insert((port["containerPort"].as_i64(), protocol))
                    })
                    .collect();
                if !ports.is_empty() {
                    item["ports"] = Value::Array(ports);
                }
                item
            })
            .collect::<Vec<_>>()
    });
    let config_map =
        prop::collection::btree_map(0u8..2, prop::collection::btree_map(0u8..2, 0u8..2, 1..3), 0..2)
            .prop_map(move |config| {
                config
                    .into_iter()
                    .map(|(k, inner)| {
                        let inner: Map<_, _> = inner
                            .into_iter()
                            .map(|(ik, iv)| (format!("k{ik}"), json!(format!("v{iv}"))))
                            .collect();
                        (name(k), Value::Object(inner))
                    })
                    .collect::<Map<_, _>>()
            });
    let scalar = prop::option::of(0u8..4);
    (labels, tags, containers, config_map, scalar).prop_map(
        move |(labels, tags, containers, config_map, scalar)| {
            let mut spec = Map::new();
            if !tags.is_empty() {
                spec.insert("tags".into(), json!(tags));
            }
            if !containers.is_empty() {
                spec.insert("containers".into(), json!(containers));
            }
            if !config_map.is_empty() {
                spec.insert("config".into(), Value::Object(config_map));
            }
            if let Some(scalar) = scalar {
                match side {
                    "a" => {
                        spec.insert("replicas".into(), json!(scalar));
                        spec.insert("args".into(), json!([format!("--{scalar}")]));
                    }
                    "b" => {
                        spec.insert("image".into(), json!(format!("img{scalar}")));
                        spec.insert("selector".into(), json!({"k": format!("{scalar}")}));
                    }
                    _ => {}
                }
            }
            let mut config = json!({"spec": spec});
            if !labels.is_empty() {
                config["metadata"] = json!({"labels": labels});
            }
            config
        },
    )
}

fn apply_as(
    live: Option<&Object>,
    manager: &str,
    config: &Value,
    time: &str,
    force: bool,
) -> Result<Object, String> {
    apply(&toy(), live, &thing(config.clone()), &writer(manager, time), Scope::Whole, force)
        .map_err(|error| error.to_string())
}

/// The object with its sets and lists of type map in one order, to compare what two orders of
/// writes reach: the order of such a list's items is not what the laws are about.
fn ordered(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(map.iter().map(|(k, v)| (k.clone(), ordered(v))).collect()),
        Value::Array(items) => {
            let mut items: Vec<Value> = items.iter().map(ordered).collect();
            items.sort_by_key(canonical);
            Value::Array(items)
        }
        other => other.clone(),
    }
}

/// Keeps the items of `config` (labels, tags, containers, config entries) whose bit in `mask`
/// is set, counting them in that order.
fn pick(config: &Value, mask: u64) -> Value {
    let mut bit = 0;
    let mut keep = || {
        let kept = mask & (1 << (bit % 64)) != 0;
        bit += 1;
        kept
    };
    let mut picked = json!({"spec": {}});
    if let Some(labels) = config.pointer("/metadata/labels").and_then(Value::as_object) {
        let labels: Map<_, _> =
            labels.iter().filter(|_| keep()).map(|(k, v)| (k.clone(), v.clone())).collect();
        if !labels.is_empty() {
            picked["metadata"] = json!({"labels": labels});
        }
    }
    for list in ["tags", "containers"] {
        if let Some(items) = config["spec"].get(list).and_then(Value::as_array) {
            let items: Vec<Value> = items.iter().filter(|_| keep()).cloned().collect();
            if !items.is_empty() {
                picked["spec"][list] = Value::Array(items);
            }
        }
    }
    if let Some(entries) = config["spec"].get("config").and_then(Value::as_object) {
        let entries: Map<_, _> =
            entries.iter().filter(|_| keep()).map(|(k, v)| (k.clone(), v.clone())).collect();
        if !entries.is_empty() {
            picked["spec"]["config"] = Value::Object(entries);
        }
    }
    picked
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Applying a configuration again changes nothing: not the object, not its managers, not
    /// their times.
    #[test]
    fn apply_is_idempotent(base in config("b"), applied in config("a")) {
        let live = apply_as(None, "base", &base, "2026-01-01T00:00:00Z", false).unwrap();
        let once = apply_as(Some(&live), "A", &applied, "2026-01-01T00:00:01Z", true).unwrap();
        let twice = apply_as(Some(&once), "A", &applied, "2026-01-01T00:00:02Z", false).unwrap();
        prop_assert_eq!(twice, once);
    }

    /// Two appliers of disjoint fields reach the same object, and the same managers, in
    /// either order, onto the same live object.
    #[test]
    fn disjoint_appliers_compose_in_either_order(base in config("c"), a in config("a"), b in config("b")) {
        let live = apply_as(None, "C", &base, "2026-01-01T00:00:00Z", false).unwrap();
        let time = "2026-01-01T00:00:01Z";
        let a_then_b = apply_as(Some(&apply_as(Some(&live), "A", &a, time, false).unwrap()), "B", &b, time, false).unwrap();
        let b_then_a = apply_as(Some(&apply_as(Some(&live), "B", &b, time, false).unwrap()), "A", &a, time, false).unwrap();
        prop_assert_eq!(ordered(&Value::Object(a_then_b)), ordered(&Value::Object(b_then_a)));
    }

    /// A field another manager also applies (with the same value) stays when an applier stops
    /// applying it: the other's configuration still holds, and applying it again changes
    /// nothing.
    #[test]
    fn removing_a_field_another_manager_owns_keeps_it(a in config("a"), own in config("b"), shared in any::<u64>(), kept in any::<u64>()) {
        let time = "2026-01-01T00:00:01Z";
        let first = apply_as(None, "A", &a, time, false).unwrap();
        // B applies some of A's items, as they are, and its own fields.
        let mut b = own.clone();
        let from_a = pick(&a, shared);
        if let Some(labels) = from_a.pointer("/metadata/labels") {
            for (k, v) in labels.as_object().unwrap() {
                b["metadata"]["labels"][k] = v.clone();
            }
        }
        for (k, v) in from_a["spec"].as_object().unwrap() {
            match (b["spec"].get_mut(k), v) {
                (Some(Value::Array(mine)), Value::Array(theirs)) => mine.extend(theirs.iter().cloned()),
                (Some(Value::Object(mine)), Value::Object(theirs)) => mine.extend(theirs.clone()),
                _ => b["spec"][k] = v.clone(),
            }
        }
        let both = apply_as(Some(&first), "B", &b, time, false).unwrap();
        // A stops applying some of its items.
        let a_less = pick(&a, kept);
        let after = apply_as(Some(&both), "A", &a_less, time, false).unwrap();
        let b_again = apply_as(Some(&after), "B", &b, "2026-01-01T00:00:02Z", false).unwrap();
        prop_assert_eq!(b_again, after);
    }

    /// Recording an update on the stored managers, decoding only those it touches, is
    /// recording it on all of them decoded (what a request that sends them in another order
    /// gets).
    #[test]
    fn recording_an_update_decodes_only_what_it_must_and_agrees(a in config("a"), b in config("b"), written in config("a")) {
        let live = apply_as(None, "A", &a, "2026-01-01T00:00:00Z", false).unwrap();
        let live = apply_as(Some(&live), "B", &b, "2026-01-01T00:00:01Z", false).unwrap();
        let mut new = live.clone();
        let written = thing(written);
        new.insert("spec".to_owned(), written.get("spec").cloned().unwrap_or(json!({})));
        new["metadata"]["labels"] = written["metadata"].get("labels").cloned().unwrap_or(json!({}));
        let mut reordered = new.clone();
        if let Some(Value::Array(entries)) = reordered["metadata"].get_mut("managedFields") {
            entries.reverse();
        }
        let writer = writer("U", "2026-01-01T00:00:02Z");
        record_update(&toy(), Some(&live), &mut new, &writer, Scope::Whole, true);
        record_update(&toy(), Some(&live), &mut reordered, &writer, Scope::Whole, true);
        prop_assert_eq!(new, reordered);
    }
}
