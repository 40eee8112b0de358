//! Apply and update, case by case: kube-apiserver's own table of server-side apply (scalars,
//! atomic lists, sets, lists of type map, maps), then conflicts, status scope, the first apply
//! to an untracked object, what a request's `managedFields` do, and the bound on updaters.
//! The three laws are property-tested in `laws`.

mod laws;

use serde_json::{Map, Value, json};

use super::{BEFORE_FIRST_APPLY, Scope, Writer, apply, record_update};
use crate::error::MergeError;
use crate::tests::{managers, thing, toy, without_managers, writer};

const T1: &str = "2026-01-01T00:00:01Z";
const T2: &str = "2026-01-01T00:00:02Z";

type Object = Map<String, Value>;

fn applied(live: Option<&Object>, manager: &str, config: Value) -> Result<Object, MergeError> {
    apply(&toy(), live, &thing(config), &writer(manager, T2), Scope::Whole, false)
}

fn forced(live: Option<&Object>, manager: &str, config: Value) -> Object {
    apply(&toy(), live, &thing(config), &writer(manager, T2), Scope::Whole, true).expect("a forced apply")
}

/// `live` after `manager` merge-patches it with `patch`, recorded as an update.
fn updated(live: &Object, manager: &str, patch: Value) -> Object {
    let mut new = Value::Object(live.clone());
    merge_patch(&mut new, &patch);
    let Value::Object(mut new) = new else { unreachable!("an object patched") };
    record_update(&toy(), Some(live), &mut new, &writer(manager, T2), Scope::Whole, true);
    new
}

fn merge_patch(target: &mut Value, patch: &Value) {
    let Value::Object(patch) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = json!({});
    }
    let target = target.as_object_mut().expect("made an object above");
    for (name, value) in patch {
        if value.is_null() {
            target.remove(name);
        } else {
            merge_patch(target.entry(name.clone()).or_insert(Value::Null), value);
        }
    }
}

fn conflict_message(result: Result<Object, MergeError>) -> String {
    match result {
        Err(MergeError::Conflicts { message, .. }) => message,
        other => panic!("expected conflicts, got {other:?}"),
    }
}

fn fields(object: &Object, manager: &str) -> Value {
    managers(object)
        .into_iter()
        .find(|(name, _, _)| name == manager)
        .map(|(_, _, fields)| fields)
        .unwrap_or(Value::Null)
}

fn spec(object: &Object) -> &Value {
    &object["spec"]
}

#[test]
fn scalars_apply_prune_share_and_conflict() {
    // 1: a new object, as applied; the applier owns its fields.
    let a = applied(None, "A", json!({"metadata": {"labels": {"app": "x"}}, "spec": {"replicas": 3, "containers": [{"name": "c", "image": "i:1"}]}})).unwrap();
    assert_eq!(
        without_managers(&a),
        thing(
            json!({"metadata": {"labels": {"app": "x"}}, "spec": {"replicas": 3, "containers": [{"name": "c", "image": "i:1"}]}})
        )
    );
    assert_eq!(
        managers(&a),
        [(
            "A".to_owned(),
            "Apply".to_owned(),
            json!({"f:metadata": {"f:labels": {"f:app": {}}}, "f:spec": {"f:containers": {"k:{\"name\":\"c\"}": {".": {}, "f:image": {}, "f:name": {}}}, "f:replicas": {}}})
        )]
    );
    assert_eq!(a["metadata"]["managedFields"][0]["time"], T2);
    // 2: the same again changes nothing, the time included.
    let again = apply(&toy(), Some(&a), &thing(json!({"metadata": {"labels": {"app": "x"}}, "spec": {"replicas": 3, "containers": [{"name": "c", "image": "i:1"}]}})), &writer("A", "2026-01-02T00:00:00Z"), Scope::Whole, false).unwrap();
    assert_eq!(again, a);

    // 3: what the applier stops applying goes.
    let a = applied(None, "A", json!({"spec": {"replicas": 3, "image": "i"}})).unwrap();
    let a = applied(Some(&a), "A", json!({"spec": {"image": "i"}})).unwrap();
    assert_eq!(spec(&a), &json!({"image": "i"}));
    assert_eq!(fields(&a, "A"), json!({"f:spec": {"f:image": {}}}));
    // 4: an updater never conflicts; it takes what it changes.
    let u = updated(&a, "U", json!({"spec": {"replicas": 5}}));
    assert_eq!(fields(&u, "U"), json!({"f:spec": {"f:replicas": {}}}));
    // 5: changing the updater's field conflicts, naming it with its apiVersion; forced, the
    // applier takes it and the updater's entry goes.
    let message = conflict_message(applied(Some(&u), "A", json!({"spec": {"replicas": 3, "image": "i"}})));
    assert_eq!(
        message,
        "Apply failed with 1 conflict: conflict with \"U\" using example.com/v1: .spec.replicas"
    );
    let a = forced(Some(&u), "A", json!({"spec": {"replicas": 3, "image": "i"}}));
    assert_eq!(spec(&a), &json!({"replicas": 3, "image": "i"}));
    assert_eq!(managers(&a).len(), 1);
    assert_eq!(fields(&a, "A"), json!({"f:spec": {"f:image": {}, "f:replicas": {}}}));

    // 6: the same value is shared, and released without change.
    let a = applied(None, "A", json!({"spec": {"replicas": 3}})).unwrap();
    let b = applied(Some(&a), "B", json!({"spec": {"replicas": 3}})).unwrap();
    assert_eq!(
        (fields(&b, "A"), fields(&b, "B")),
        (json!({"f:spec": {"f:replicas": {}}}), json!({"f:spec": {"f:replicas": {}}}))
    );
    let released = applied(Some(&b), "A", json!({})).unwrap();
    assert_eq!(spec(&released), &json!({"replicas": 3}));
    assert_eq!(managers(&released).iter().map(|(name, _, _)| name.as_str()).collect::<Vec<_>>(), ["B"]);
    // 7: another value conflicts with an applier, named without an apiVersion.
    let message = conflict_message(applied(Some(&a), "B", json!({"spec": {"replicas": 4}})));
    assert_eq!(message, "Apply failed with 1 conflict: conflict with \"A\": .spec.replicas");

    // 13: an applier that stops applying a field an updater changed leaves the updater's value.
    let u = updated(&a, "U", json!({"spec": {"replicas": 4}}));
    let a = applied(Some(&u), "A", json!({"spec": {"image": "j"}})).unwrap();
    assert_eq!(spec(&a), &json!({"replicas": 4, "image": "j"}));
    assert_eq!(fields(&a, "U"), json!({"f:spec": {"f:replicas": {}}}));
}

#[test]
fn lists_of_type_map_merge_by_key() {
    // 8: each applier's items; an applier's empty list removes only its own.
    let a = applied(None, "A", json!({"spec": {"containers": [{"name": "a", "image": "1"}]}})).unwrap();
    let b = applied(Some(&a), "B", json!({"spec": {"containers": [{"name": "b", "image": "2"}]}})).unwrap();
    assert_eq!(spec(&b)["containers"], json!([{"name": "a", "image": "1"}, {"name": "b", "image": "2"}]));
    let a = applied(Some(&b), "A", json!({"spec": {"containers": []}})).unwrap();
    assert_eq!(spec(&a)["containers"], json!([{"name": "b", "image": "2"}]));
    assert_eq!(
        fields(&a, "B"),
        json!({"f:spec": {"f:containers": {"k:{\"name\":\"b\"}": {".": {}, "f:image": {}, "f:name": {}}}}})
    );
    assert_eq!(fields(&a, "A"), json!({"f:spec": {"f:containers": {}}}));

    // 9: an item goes whole when its applier drops it, with what an updater added inside it.
    let a = applied(None, "A", json!({"spec": {"containers": [{"name": "a", "image": "1"}]}})).unwrap();
    let u = updated(
        &a,
        "U",
        json!({"spec": {"containers": [{"name": "a", "image": "1", "ports": [{"containerPort": 80}]}]}}),
    );
    assert!(fields(&u, "U")["f:spec"]["f:containers"]["k:{\"name\":\"a\"}"]["f:ports"].is_object());
    let z = applied(Some(&u), "A", json!({"spec": {"containers": [{"name": "z"}]}})).unwrap();
    assert_eq!(spec(&z)["containers"], json!([{"name": "z"}]));
    assert_eq!(managers(&z).iter().map(|(name, _, _)| name.as_str()).collect::<Vec<_>>(), ["A"]);

    // Two appliers of fields of one item: each keeps its own.
    let a = applied(None, "A", json!({"spec": {"containers": [{"name": "c", "image": "1"}]}})).unwrap();
    let b = applied(
        Some(&a),
        "B",
        json!({"spec": {"containers": [{"name": "c", "ports": [{"containerPort": 80}]}]}}),
    )
    .unwrap();
    let a = applied(Some(&b), "A", json!({"spec": {"containers": [{"name": "c", "image": "2"}]}})).unwrap();
    assert_eq!(
        spec(&a)["containers"],
        json!([{"name": "c", "image": "2", "ports": [{"containerPort": 80}]}])
    );

    // 12: a key an item leaves out takes its default; a key without one is refused.
    let p = applied(
        None,
        "A",
        json!({"spec": {"containers": [{"name": "c", "ports": [{"containerPort": 80}]}]}}),
    )
    .unwrap();
    assert!(
        fields(&p, "A").to_string().contains("k:{\\\"containerPort\\\":80,\\\"protocol\\\":\\\"TCP\\\"}")
    );
    let refused = applied(None, "A", json!({"spec": {"containers": [{"image": "1"}]}}));
    assert_eq!(
        refused.unwrap_err(),
        MergeError::Invalid {
            field: "spec.containers[0]".to_owned(),
            message: "associative list with keys has an element that omits key field \"name\" (and doesn't have default value)".to_owned()
        }
    );
}

#[test]
fn sets_merge_item_by_item_and_atomic_lists_and_maps_whole() {
    // 10: sets.
    let a = applied(None, "A", json!({"spec": {"tags": ["x", "y"]}, "metadata": {"finalizers": ["a/f"]}}))
        .unwrap();
    let b = applied(Some(&a), "B", json!({"spec": {"tags": ["z"]}, "metadata": {"finalizers": ["b/f"]}}))
        .unwrap();
    let a = applied(Some(&b), "A", json!({"spec": {"tags": ["x"]}})).unwrap();
    assert_eq!(spec(&a)["tags"], json!(["x", "z"]));
    assert_eq!(a["metadata"]["finalizers"], json!(["b/f"]));
    assert_eq!(fields(&a, "A"), json!({"f:spec": {"f:tags": {"v:\"x\"": {}}}}));
    assert_eq!(
        applied(None, "A", json!({"spec": {"tags": ["x", "x"]}})).unwrap_err(),
        MergeError::Invalid {
            field: "spec.tags[1]".to_owned(),
            message: "duplicate entries for value \"x\"".to_owned(),
        }
    );

    // 11: an atomic list is one field: a different value conflicts; forced, it is replaced.
    let a = applied(None, "A", json!({"spec": {"args": ["1", "2"], "selector": {"k": "v"}}})).unwrap();
    let message =
        conflict_message(applied(Some(&a), "B", json!({"spec": {"args": ["3"], "selector": {"j": "w"}}})));
    assert_eq!(
        message,
        "Apply failed with 2 conflicts: conflicts with \"A\":\n- .spec.args\n- .spec.selector"
    );
    let b = forced(Some(&a), "B", json!({"spec": {"args": ["3"]}}));
    assert_eq!(spec(&b)["args"], json!(["3"]));
    assert_eq!(fields(&b, "A"), json!({"f:spec": {"f:selector": {}}}));

    // Maps: labels and a map of maps merge key by key.
    let a = applied(
        None,
        "A",
        json!({"metadata": {"labels": {"a": "1"}}, "spec": {"config": {"db": {"host": "h"}}}}),
    )
    .unwrap();
    let b = applied(Some(&a), "B", json!({"metadata": {"labels": {"b": "2"}}, "spec": {"config": {"db": {"port": "5"}, "cache": {"size": "1"}}}})).unwrap();
    assert_eq!(b["metadata"]["labels"], json!({"a": "1", "b": "2"}));
    assert_eq!(spec(&b)["config"], json!({"db": {"host": "h", "port": "5"}, "cache": {"size": "1"}}));
    let a = applied(Some(&b), "A", json!({})).unwrap();
    assert_eq!(a["metadata"]["labels"], json!({"b": "2"}));
    assert_eq!(spec(&a)["config"], json!({"db": {"port": "5"}, "cache": {"size": "1"}}), "db is B's too");
}

#[test]
fn conflicts_with_several_managers_are_grouped() {
    let a = applied(None, "A", json!({"spec": {"replicas": 1, "image": "i"}})).unwrap();
    let u = updated(&a, "U", json!({"spec": {"tags": ["t"]}}));
    let message = conflict_message(applied(
        Some(&u),
        "B",
        json!({"spec": {"replicas": 2, "image": "j", "tags": ["s"]}}),
    ));
    // Adding a set item is no conflict; the updater's `t` stays.
    assert_eq!(
        message,
        "Apply failed with 2 conflicts: conflicts with \"A\":\n- .spec.image\n- .spec.replicas"
    );
    let Err(MergeError::Conflicts { conflicts, .. }) =
        applied(Some(&u), "B", json!({"spec": {"replicas": 2}}))
    else {
        panic!("a conflict")
    };
    assert_eq!((conflicts[0].manager.as_str(), conflicts[0].field.as_str()), ("\"A\"", ".spec.replicas"));
}

#[test]
fn a_write_of_one_part_owns_and_conflicts_only_there() {
    let schema = toy();
    // An applier of the object never owns its status, and never conflicts with its writer.
    let config = thing(json!({"spec": {"replicas": 1}, "status": {"phase": "Mine"}}));
    let a = apply(&schema, None, &config, &writer("A", T1), Scope::AllButStatus, false).unwrap();
    assert!(a.get("status").is_none(), "an apply of the object sets no status");
    let mut with_status = a.clone();
    with_status.insert(
        "status".into(),
        json!({"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}),
    );
    let status_writer = Writer { subresource: "status", ..writer("node", T1) };
    record_update(&schema, Some(&a), &mut with_status, &status_writer, Scope::OnlyStatus, false);
    assert_eq!(
        fields(&with_status, "node/status"),
        json!({"f:status": {".": {}, "f:conditions": {".": {}, "k:{\"type\":\"Ready\"}": {".": {}, "f:status": {}, "f:type": {}}}, "f:phase": {}}})
    );
    let again =
        apply(&schema, Some(&with_status), &config, &writer("A", T2), Scope::AllButStatus, false).unwrap();
    assert_eq!(again, with_status, "the status stays, and nothing changed");
}

#[test]
fn the_first_apply_to_an_untracked_object_conflicts_with_what_it_holds() {
    // 15: an object written before managers were kept (or with them cleared).
    let untracked = thing(json!({"spec": {"replicas": 3, "image": "i"}}));
    let message = conflict_message(applied(Some(&untracked), "A", json!({"spec": {"replicas": 4}})));
    assert_eq!(
        message,
        format!(
            "Apply failed with 1 conflict: conflict with \"{BEFORE_FIRST_APPLY}\" using example.com/v1: .spec.replicas"
        )
    );
    let a = applied(Some(&untracked), "A", json!({"spec": {"replicas": 3}})).unwrap();
    assert_eq!(fields(&a, BEFORE_FIRST_APPLY), json!({"f:spec": {"f:image": {}, "f:replicas": {}}}));
    assert_eq!(fields(&a, "A"), json!({"f:spec": {"f:replicas": {}}}));
    // An update of an untracked object stays untracked.
    let mut new = untracked.clone();
    new["spec"]["replicas"] = json!(5);
    record_update(&toy(), Some(&untracked), &mut new, &writer("U", T1), Scope::Whole, true);
    assert!(managers(&new).is_empty());
}

#[test]
fn a_create_owns_everything_it_brings() {
    let mut created = thing(json!({"metadata": {"labels": {"app": "x"}}, "spec": {"replicas": 1}}));
    record_update(&toy(), None, &mut created, &writer("kubectl-create", T1), Scope::Whole, true);
    assert_eq!(
        managers(&created),
        [(
            "kubectl-create".to_owned(),
            "Update".to_owned(),
            json!({"f:metadata": {"f:labels": {".": {}, "f:app": {}}}, "f:spec": {".": {}, "f:replicas": {}}})
        )]
    );
    // A write that changes nothing keeps the managers, their time included.
    let mut same = created.clone();
    record_update(&toy(), Some(&created), &mut same, &writer("other", T2), Scope::Whole, true);
    assert_eq!(same, created);
}

#[test]
fn what_a_request_sends_as_managed_fields() {
    let schema = toy();
    let a = applied(None, "A", json!({"spec": {"replicas": 1}})).unwrap();
    let sent = |managed: Value, honour: bool| {
        let mut new = a.clone();
        new["metadata"]["managedFields"] = managed;
        record_update(&schema, Some(&a), &mut new, &writer("U", T2), Scope::Whole, honour);
        managers(&new)
    };
    // Cleared by `[]` and `[{}]`; an untracked object then stays so.
    assert!(sent(json!([]), true).is_empty());
    assert!(sent(json!([{}]), true).is_empty());
    // A valid list replaces the live one (what kubectl's migration from client-side apply sends).
    let replaced = sent(
        json!([{"manager": "kubectl", "operation": "Apply", "apiVersion": "example.com/v1", "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:replicas": {}}}}]),
        true,
    );
    assert_eq!(replaced, [("kubectl".to_owned(), "Apply".to_owned(), json!({"f:spec": {"f:replicas": {}}}))]);
    // An invalid one, or any through a subresource, leaves the live ones.
    let kept = [("A".to_owned(), "Apply".to_owned(), json!({"f:spec": {"f:replicas": {}}}))];
    assert_eq!(sent(json!([{"manager": "x", "operation": "Delete", "apiVersion": "v1"}]), true), kept);
    assert_eq!(sent(json!([]), false), kept);
    // An apply may not send them at all.
    let mut config = thing(json!({"spec": {}}));
    config["metadata"]["managedFields"] = json!([]);
    let refused = apply(&schema, Some(&a), &config, &writer("A", T2), Scope::Whole, false);
    assert_eq!(
        refused.unwrap_err(),
        MergeError::ManagedFields("metadata.managedFields must be nil".to_owned())
    );
}

#[test]
fn the_oldest_updaters_are_folded_beyond_ten() {
    let schema = toy();
    let mut object = applied(None, "applier", json!({"spec": {"replicas": 1}})).unwrap();
    for i in 0..20 {
        let mut new = object.clone();
        new["metadata"]["labels"][format!("l{i}")] = json!("x");
        let time = format!("2026-01-01T00:00:{i:02}Z");
        record_update(
            &schema,
            Some(&object),
            &mut new,
            &writer(&format!("u{i:02}"), &time),
            Scope::Whole,
            true,
        );
        object = new;
    }
    let names: Vec<String> = managers(&object).into_iter().map(|(name, _, _)| name).collect();
    assert_eq!(names.len(), 11, "{names:?}");
    assert_eq!(names[0], "applier");
    assert_eq!(names[1], "ancient-changes");
    assert_eq!(names[10], "u19");
}

#[test]
fn kubectl_moving_from_client_side_apply_takes_what_it_applied_there() {
    // 14: made by client-side apply, whose configuration the annotation holds.
    let last = r#"{"apiVersion":"example.com/v1","kind":"Thing","metadata":{"annotations":{},"name":"x"},"spec":{"image":"i","replicas":1}}"#;
    let mut live = thing(json!({
        "metadata": {"annotations": {"kubectl.kubernetes.io/last-applied-configuration": format!("{last}\n")}},
        "spec": {"image": "i", "replicas": 1},
    }));
    record_update(&toy(), None, &mut live, &writer("kubectl-client-side-apply", T1), Scope::Whole, true);
    let scaled = updated(&live, "kubectl-client-side-apply", json!({"spec": {"replicas": 5}}));
    let config = json!({"spec": {"image": "j", "replicas": 1}});
    // Another manager conflicts as anywhere.
    let other = conflict_message(applied(Some(&scaled), "x", config.clone()));
    assert!(other.starts_with("Apply failed with 2 conflicts"), "{other}");
    // kubectl takes the image it applied client-side; the replicas changed since still conflict.
    let message = conflict_message(applied(Some(&scaled), "kubectl", config));
    assert_eq!(
        message,
        "Apply failed with 1 conflict: conflict with \"kubectl-client-side-apply\" using example.com/v1: .spec.replicas"
    );
    let moved = applied(Some(&scaled), "kubectl", json!({"spec": {"image": "j"}})).unwrap();
    assert_eq!(spec(&moved), &json!({"image": "j", "replicas": 5}));
    assert_eq!(fields(&moved, "kubectl"), json!({"f:spec": {"f:image": {}}}));
    // The annotation now holds what was applied, as kubectl writes it.
    assert_eq!(
        moved["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"],
        "{\"apiVersion\":\"example.com/v1\",\"kind\":\"Thing\",\"metadata\":{\"name\":\"x\"},\"spec\":{\"image\":\"j\"}}\n"
    );
}
