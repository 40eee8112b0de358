//! What the unit tests share: a toy Kind's schema with every list and map type (as in
//! kube-apiserver's own tests), and helpers to build objects and read their managers.

use serde_json::{Map, Value, json};

use crate::operation::Writer;
use crate::schema::Schema;

/// The toy Kind's OpenAPI definitions: `metadata` with Kubernetes' markers; in `spec` a scalar
/// `replicas` and `image`, an atomic list `args`, a set `tags`, a map of maps `config`, an
/// atomic map `selector`, and `containers`, a list of type map by `name` whose `ports` are a
/// list of type map by `containerPort` and `protocol` (default `TCP`); `status.conditions` by
/// `type`.
pub(crate) fn toy_definitions() -> Map<String, Value> {
    let strings = json!({"type": "object", "additionalProperties": {"type": "string"}});
    let definitions = json!({
        "Thing": {"type": "object", "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"allOf": [{"$ref": "#/components/schemas/Meta"}], "default": {}},
            "spec": {"$ref": "#/components/schemas/Spec"},
            "status": {"anyOf": [{"$ref": "#/components/schemas/Status"}, {"enum": [null], "nullable": true}]},
        }},
        "Meta": {"type": "object", "properties": {
            "name": {"type": "string"},
            "namespace": {"type": "string"},
            "uid": {"type": "string"},
            "resourceVersion": {"type": "string"},
            "labels": strings,
            "annotations": strings,
            "finalizers": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set"},
            "managedFields": {"type": "array", "items": {"type": "object"}, "x-kubernetes-list-type": "atomic"},
        }},
        "Spec": {"type": "object", "properties": {
            "replicas": {"type": "integer"},
            "image": {"type": "string"},
            "args": {"type": "array", "items": {"type": "string"}},
            "tags": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set"},
            "config": {"type": "object", "additionalProperties": strings},
            "selector": {"type": "object", "additionalProperties": {"type": "string"}, "x-kubernetes-map-type": "atomic"},
            "containers": {
                "type": "array",
                "items": {"$ref": "#/components/schemas/Container"},
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["name"],
            },
            "env": {
                "type": "array",
                "items": {"type": "object", "properties": {"name": {"type": "string", "default": ""}, "value": {"type": "string"}, "from": {"type": "string"}}},
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["name"],
            },
        }},
        "Container": {"type": "object", "required": ["name"], "properties": {
            "name": {"type": "string"},
            "image": {"type": "string"},
            "ports": {
                "type": "array",
                "items": {"type": "object", "properties": {
                    "containerPort": {"type": "integer"},
                    "protocol": {"type": "string", "default": "TCP"},
                    "name": {"type": "string"},
                }},
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["containerPort", "protocol"],
            },
        }},
        "Status": {"type": "object", "properties": {
            "phase": {"type": "string"},
            "conditions": {
                "type": "array",
                "items": {"type": "object", "properties": {"type": {"type": "string"}, "status": {"type": "string"}}},
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["type"],
            },
        }},
    });
    match definitions {
        Value::Object(definitions) => definitions,
        _ => unreachable!("an object literal"),
    }
}

/// The toy Kind's schema.
pub(crate) fn toy() -> Schema {
    Schema::from_openapi(&toy_definitions(), &json!({"$ref": "#/components/schemas/Thing"}))
        .expect("the toy schema reads")
}

/// The manager `name`, writing at `time`.
pub(crate) fn writer<'a>(name: &'a str, time: &'a str) -> Writer<'a> {
    Writer { manager: name, subresource: "", api_version: "example.com/v1", time }
}

/// An object of the toy Kind named `x`, with `fields` beside its envelope.
pub(crate) fn thing(fields: Value) -> Map<String, Value> {
    let mut object = json!({"apiVersion": "example.com/v1", "kind": "Thing", "metadata": {"name": "x"}});
    for (name, value) in fields.as_object().expect("fields are an object") {
        if name == "metadata" {
            for (field, value) in value.as_object().expect("metadata is an object") {
                object["metadata"][field] = value.clone();
            }
        } else {
            object[name] = value.clone();
        }
    }
    match object {
        Value::Object(object) => object,
        _ => unreachable!("an object literal"),
    }
}

/// The object without its managers, to compare with what a case expects.
pub(crate) fn without_managers(object: &Map<String, Value>) -> Map<String, Value> {
    let mut object = object.clone();
    if let Some(Value::Object(metadata)) = object.get_mut("metadata") {
        metadata.remove("managedFields");
    }
    object
}

/// Each manager of the object as `(manager, operation, fieldsV1)`, in stored order.
pub(crate) fn managers(object: &Map<String, Value>) -> Vec<(String, String, Value)> {
    let entries = object.get("metadata").and_then(|m| m.get("managedFields")).and_then(Value::as_array);
    entries
        .into_iter()
        .flatten()
        .map(|entry| {
            let mut name = entry["manager"].as_str().unwrap_or_default().to_owned();
            if let Some(subresource) = entry.get("subresource").and_then(Value::as_str) {
                name = format!("{name}/{subresource}");
            }
            (name, entry["operation"].as_str().unwrap_or_default().to_owned(), entry["fieldsV1"].clone())
        })
        .collect()
}
