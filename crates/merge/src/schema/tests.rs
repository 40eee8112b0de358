//! Tests of reading a schema from OpenAPI.

use serde_json::json;

use super::{ListKind, Schema, Type, UNTYPED};
use crate::error::MergeError;
use crate::tests::{toy, toy_definitions};

#[test]
fn markers_and_references_are_read() {
    let schema = toy();
    let root = schema.root();
    let (spec, declared) = schema.entry(root, "spec");
    assert!(declared);
    let list = |name: &str| match schema.get(schema.entry(spec, name).0) {
        Type::List(list) => list.kind.clone(),
        other => panic!("{name} is {other:?}"),
    };
    assert_eq!(list("args"), ListKind::Atomic, "a list that says nothing is atomic");
    assert_eq!(list("tags"), ListKind::Set);
    assert_eq!(list("containers"), ListKind::Map(vec!["name".to_owned()]));
    let (selector, _) = schema.entry(spec, "selector");
    assert!(schema.map(selector).is_some_and(|map| map.atomic));
    let (config, _) = schema.entry(spec, "config");
    let (db, declared) = schema.entry(config, "db");
    assert!(!declared, "a map's keys are not declared fields");
    assert!(schema.map(db).is_some_and(|map| map.other.is_some()));
    // `allOf` around a reference and `anyOf` with null (an optional field) both resolve.
    assert!(
        schema.map(schema.entry(root, "metadata").0).is_some_and(|meta| meta.fields.contains_key("labels"))
    );
    assert!(
        schema.map(schema.entry(root, "status").0).is_some_and(|status| status.fields.contains_key("phase"))
    );
    assert_eq!(schema.entry(root, "bogus").0, UNTYPED, "an undeclared field is untyped");
    assert!(!schema.declares(root, "bogus") && schema.declares(config, "anything"));
    // A key's default is where the list reads it.
    let (containers, _) = schema.entry(spec, "containers");
    let Type::List(containers) = schema.get(containers) else { panic!("containers is a list") };
    let (ports, _) = schema.entry(containers.items, "ports");
    let Type::List(ports) = schema.get(ports) else { panic!("ports is a list") };
    let port = schema.map(ports.items).unwrap();
    assert_eq!(port.fields["protocol"].default, Some(json!("TCP")));
}

#[test]
fn a_schema_that_refers_to_itself_resolves() {
    let definitions = json!({"Node": {"type": "object", "properties": {
        "value": {"type": "string"},
        "children": {"type": "array", "items": {"$ref": "#/components/schemas/Node"}, "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["value"]},
    }}});
    let schema =
        Schema::from_openapi(definitions.as_object().unwrap(), &json!({"$ref": "#/definitions/Node"}))
            .unwrap();
    let (children, _) = schema.entry(schema.root(), "children");
    let Type::List(list) = schema.get(children) else { panic!("children is a list") };
    assert_eq!(list.items, schema.root());
}

#[test]
fn unreadable_schemas_are_refused() {
    let missing = Schema::from_openapi(&toy_definitions(), &json!({"$ref": "#/components/schemas/Nope"}));
    assert_eq!(missing.unwrap_err(), MergeError::MissingDefinition("#/components/schemas/Nope".to_owned()));
    let keyless = json!({"type": "array", "x-kubernetes-list-type": "map", "items": {"type": "object"}});
    assert_eq!(Schema::from_openapi(&toy_definitions(), &keyless).unwrap_err(), MergeError::MapWithoutKeys);
    let untyped = Schema::untyped();
    assert_eq!(untyped.get(untyped.root()), &Type::Untyped);
    let overridden =
        json!({"allOf": [{"$ref": "#/components/schemas/Spec"}], "x-kubernetes-map-type": "atomic"});
    let schema = Schema::from_openapi(&toy_definitions(), &overridden).unwrap();
    assert!(schema.map(schema.root()).is_some_and(|map| map.atomic), "the map type around a reference wins");
}
