//! Child ownership, table-driven: who may create, change and mark a set's children.

use kayra_registry::{Operation, Part, Refusal};
use serde_json::{Value, json};

use super::ChildOwnership;
use crate::fixture::{caller, object, user, write};
use crate::{Mutating, Validating};

const SET: &str = "fleet.example.com/application-set";
const COMPONENT: &str = "fleet.example.com/component";
const HASH: &str = "fleet.example.com/appset-spec-hash";

/// An Application `web-0` in `a`, with argv `arg`; owned by set `web` with its marks when `owned`.
fn app(arg: &str, owned: bool) -> Value {
    let mut app = json!({"metadata": {"name": "web-0", "namespace": "a", "labels": {"team": "x"}},
                         "spec": {"command": ["/bin/sleep", arg]}});
    if owned {
        app["metadata"]["ownerReferences"] = json!([{"apiVersion": "fleet.example.com/v1", "kind": "ApplicationSet",
            "name": "web", "uid": "u1", "controller": true, "blockOwnerDeletion": true}]);
        app["metadata"]["labels"][SET] = json!("web");
        app["metadata"]["labels"][COMPONENT] = json!("server");
        app["metadata"]["annotations"] = json!({HASH: "h1"});
    }
    app
}

fn writer(who: &str) -> kayra_authz::Caller {
    match who {
        "appset" => caller("system:kayra:appset", &["system:masters"]),
        "impostor" => caller("system:kayra:appset", &[]),
        other => user(other),
    }
}

/// Runs the mutating then the validating side, as the chain does; answers what would be stored.
fn check(
    who: &str,
    resource: &str,
    part: Part,
    object: Value,
    old: Option<Value>,
    expect: Result<(), &str>,
    why: &str,
) -> Option<Value> {
    let caller = writer(who);
    let object = crate::fixture::object(object);
    let old = old.map(crate::fixture::object);
    let base = crate::Write {
        operation: if old.is_some() { Operation::Update } else { Operation::Create },
        part,
        old: old.as_ref(),
        ..write(&caller, resource, Some("a"), "web-0", &object)
    };
    let plugin = ChildOwnership::new("example.com");
    let mutated = plugin.mutate(&base).expect("the mutating side never refuses");
    let stored = mutated.clone().unwrap_or_else(|| object.clone());
    let decision = plugin.validate(&crate::Write { object: &stored, ..base });
    match (expect, decision) {
        (Ok(()), Ok(())) => {}
        (Err(text), Err(Refusal::Forbidden(message))) => {
            assert!(message.contains(text), "{why}: {message} lacks {text:?}")
        }
        (expect, decision) => panic!("{why}: expected {expect:?}, got {decision:?}"),
    }
    mutated.map(Value::Object)
}

/// Who writes, the resource, the part, the object, what it replaces, the answer, and why.
type Row = (&'static str, &'static str, Part, Value, Option<Value>, Result<(), &'static str>, &'static str);

#[test]
fn clients_cannot_claim_a_set_or_change_what_it_renders() {
    use Part::{Main, Status};
    let with = |mut value: Value, pointer: &str, field: Value| {
        *value.pointer_mut(pointer).expect("the field's parent exists") = field;
        value
    };
    let frozen = |mut value: Value| {
        value["spec"]["frozen"] = json!(true);
        value
    };
    let mut only_label = app("1", false);
    only_label["metadata"]["labels"][SET] = json!("web");
    let mut only_hash = app("1", false);
    only_hash["metadata"]["annotations"] = json!({HASH: "h"});
    let table: Vec<Row> = vec![
        ("alice", "applications", Main, app("1", false), None, Ok(()), "a plain create"),
        (
            "alice",
            "applications",
            Main,
            app("1", true),
            None,
            Err("as a child of ApplicationSet \"web\""),
            "claims the set",
        ),
        (
            "alice",
            "services",
            Main,
            app("1", true),
            None,
            Err("may not create service \"web-0\""),
            "a Service too",
        ),
        (
            "alice",
            "applications",
            Main,
            only_label,
            None,
            Err("ApplicationSet \"web\""),
            "the set label alone",
        ),
        ("alice", "applications", Main, only_hash, None, Err("an ApplicationSet"), "the hash alone"),
        ("appset", "applications", Main, app("1", true), None, Ok(()), "the set loop creates children"),
        (
            "impostor",
            "applications",
            Main,
            app("1", true),
            None,
            Err("may not create"),
            "a name is not enough",
        ),
        (
            "alice",
            "applications",
            Main,
            app("2", true),
            Some(app("1", true)),
            Err("application \"web-0\" is managed by ApplicationSet \"web\"; change the set instead"),
            "spec change of a child",
        ),
        (
            "appset",
            "applications",
            Main,
            app("2", true),
            Some(app("1", true)),
            Ok(()),
            "the set rolls its children",
        ),
        ("alice", "applications", Main, app("2", false), Some(app("1", false)), Ok(()), "a plain update"),
        (
            "alice",
            "applications",
            Part::Door("freeze"),
            frozen(app("1", true)),
            Some(app("1", true)),
            Err(
                "its Applications are frozen and thawed with it: POST .../applicationsets/web/freeze instead",
            ),
            "a child's freeze is the set's",
        ),
        (
            "appset",
            "applications",
            Part::Door("freeze"),
            frozen(app("1", true)),
            Some(app("1", true)),
            Ok(()),
            "the set freezes its children",
        ),
        (
            "alice",
            "applications",
            Part::Door("freeze"),
            frozen(app("1", false)),
            Some(app("1", false)),
            Ok(()),
            "an Application of no set",
        ),
        (
            "alice",
            "applications",
            Main,
            with(app("1", true), "/metadata/labels/team", json!("y")),
            Some(app("1", true)),
            Ok(()),
            "other labels stay writable",
        ),
        (
            "alice",
            "applications",
            Status,
            app("2", true),
            Some(app("1", true)),
            Ok(()),
            "status writes are not decided here",
        ),
        (
            "alice",
            "services",
            Main,
            with(app("2", true), "/metadata/labels/team", json!("y")),
            Some(app("1", true)),
            Ok(()),
            "a rendered Service's spec is the set loop's to converge",
        ),
    ];
    for (who, resource, part, object, old, expect, why) in table {
        check(who, resource, part, object, old, expect, why);
    }
}

#[test]
fn updates_keep_the_reserved_marks_as_stored() {
    // A client dropping every mark (kubectl apply of a bare manifest) gets them back.
    let mut bare = app("1", false);
    bare["metadata"]["labels"]["team"] = json!("y");
    let kept =
        check("alice", "applications", Part::Main, bare, Some(app("1", true)), Ok(()), "marks dropped")
            .expect("the marks are put back");
    let mut expected = app("1", true);
    expected["metadata"]["labels"]["team"] = json!("y");
    assert_eq!(kept, expected);
    // A client adding marks to an object no set owns loses them.
    let stripped = check(
        "alice",
        "applications",
        Part::Main,
        app("1", true),
        Some(app("1", false)),
        Ok(()),
        "marks added",
    )
    .expect("the marks are taken away");
    assert_eq!(stripped, app("1", false));
    // Changing the marks' values changes nothing either.
    let mut moved = app("1", true);
    moved["metadata"]["labels"][SET] = json!("other");
    moved["metadata"]["ownerReferences"][0]["uid"] = json!("u2");
    moved["metadata"]["annotations"][HASH] = json!("forged");
    let restored =
        check("alice", "applications", Part::Main, moved, Some(app("1", true)), Ok(()), "marks moved")
            .expect("the stored marks win");
    assert_eq!(restored, app("1", true));
    // A write that leaves them as they are is not touched, nor is the control plane's.
    assert_eq!(
        check("alice", "applications", Part::Main, app("1", true), Some(app("1", true)), Ok(()), "same"),
        None
    );
    assert_eq!(
        check("appset", "applications", Part::Main, app("1", false), Some(app("1", true)), Ok(()), "release"),
        None
    );
}

#[test]
fn the_controlling_set_is_read_from_the_controller_reference() {
    let owned = object(app("1", true));
    assert_eq!(super::controlling_set(&owned), Some("web"));
    let mut not_controller = app("1", true);
    not_controller["metadata"]["ownerReferences"][0]["controller"] = json!(false);
    assert_eq!(super::controlling_set(&object(not_controller)), None);
    assert_eq!(super::controlling_set(&object(app("1", false))), None);
}
