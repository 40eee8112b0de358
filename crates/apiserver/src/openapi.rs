//! OpenAPI v3: a root listing one document per group-version, and each document with every
//! Kind's paths and schemas, as `kubectl explain`, `create` and `apply` read them. Schemas
//! come from the Kinds' types (their doc comments are the descriptions). There is no
//! `/openapi/v2`: kubectl asks for it only as protobuf and copes with a 404.

use std::collections::BTreeMap;

use kayra_api::scheme::{KindInfo, Scheme};
use serde_json::{Map, Value, json};

/// Every document, built once: the path key (`api/v1`, `apis/<g>/<v>`) to its JSON and hash.
#[derive(Debug)]
pub(crate) struct Documents {
    documents: BTreeMap<String, (Vec<u8>, String)>,
}

impl Documents {
    /// Builds every group-version's document.
    pub(crate) fn build(scheme: &Scheme) -> Documents {
        let mut documents = BTreeMap::new();
        for (group, version, kinds) in scheme.group_versions() {
            let key =
                if group.is_empty() { format!("api/{version}") } else { format!("apis/{group}/{version}") };
            let bytes = serde_json::to_vec(&document(&group, version, &kinds)).expect("JSON serialises");
            let digest = ring::digest::digest(&ring::digest::SHA256, &bytes);
            let hash: String = digest.as_ref()[..16].iter().map(|b| format!("{b:02X}")).collect();
            documents.insert(key, (bytes, hash));
        }
        Documents { documents }
    }

    /// The root document.
    pub(crate) fn root(&self) -> Value {
        let paths: Map<String, Value> = self
            .documents
            .iter()
            .map(|(key, (_, hash))| {
                (key.clone(), json!({"serverRelativeURL": format!("/openapi/v3/{key}?hash={hash}")}))
            })
            .collect();
        json!({"paths": paths})
    }

    /// One group-version's document, as bytes.
    pub(crate) fn get(&self, group: &str, version: &str) -> Option<&[u8]> {
        let key = if group.is_empty() { format!("api/{version}") } else { format!("apis/{group}/{version}") };
        self.documents.get(&key).map(|(bytes, _)| bytes.as_slice())
    }
}

fn gvk(kind: &KindInfo) -> Value {
    json!({"group": kind.group, "version": kind.version, "kind": kind.kind})
}

fn document(group: &str, version: &str, kinds: &[&KindInfo]) -> Value {
    let mut generator = schemars::generate::SchemaSettings::openapi3().into_generator();
    let mut paths = Map::new();
    let mut kind_schemas = Vec::new();
    for kind in kinds {
        let reference = kind.behaviour.schema(&mut generator).to_value();
        let name = reference
            .get("$ref")
            .and_then(Value::as_str)
            .and_then(|r| r.rsplit('/').next())
            .map(str::to_owned)
            .unwrap_or_else(|| kind.kind.to_owned());
        kind_schemas.push((name.clone(), kind));
        add_paths(&mut paths, group, version, kind, &name);
    }
    let mut schemas: Map<String, Value> = generator.take_definitions(true).into_iter().collect();
    for schema in schemas.values_mut() {
        unwrap_descriptions(schema);
    }
    for (name, kind) in kind_schemas {
        if let Some(schema) = schemas.get_mut(&name).and_then(Value::as_object_mut) {
            schema.insert("x-kubernetes-group-version-kind".into(), json!([gvk(kind)]));
        }
    }
    json!({
        "openapi": "3.0.0",
        "info": {"title": "Kayra", "version": env!("CARGO_PKG_VERSION")},
        "paths": paths,
        "components": {"schemas": schemas},
    })
}

/// Doc comments wrap at the source's width; descriptions read better as paragraphs, the way
/// `kubectl explain` re-wraps them.
fn unwrap_descriptions(value: &mut Value) {
    match value {
        Value::Object(map) => {
            for (key, inner) in map.iter_mut() {
                match inner {
                    Value::String(text) if key == "description" => *text = paragraphs(text),
                    other => unwrap_descriptions(other),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(unwrap_descriptions),
        _ => {}
    }
}

fn paragraphs(text: &str) -> String {
    text.split("\n\n")
        .map(|p| p.split('\n').map(str::trim).collect::<Vec<_>>().join(" "))
        .collect::<Vec<_>>()
        .join("\n\n")
}

fn add_paths(paths: &mut Map<String, Value>, group: &str, version: &str, kind: &KindInfo, schema: &str) {
    let base = if group.is_empty() { format!("/api/{version}") } else { format!("/apis/{group}/{version}") };
    let collection = if kind.namespaced {
        format!("{base}/namespaces/{{namespace}}/{}", kind.plural)
    } else {
        format!("{base}/{}", kind.plural)
    };
    let reference = json!({"$ref": format!("#/components/schemas/{schema}")});
    let ok = |description: &str| json!({"description": description, "content": {"application/json": {"schema": reference.clone()}}});
    let operation = |action: &str, id: &str, extra: Value| {
        let mut op = json!({
            "operationId": format!("{id}{}", kind.kind),
            "x-kubernetes-action": action,
            "x-kubernetes-group-version-kind": gvk(kind),
            "responses": {"200": ok("OK")},
        });
        if let (Some(op), Some(extra)) = (op.as_object_mut(), extra.as_object()) {
            op.extend(extra.clone());
        }
        op
    };
    let query = |names: &[&str]| -> Vec<Value> {
        names.iter().map(|n| json!({"name": n, "in": "query", "schema": {"type": if *n == "force" { "boolean" } else { "string" }}})).collect()
    };
    let mut patch_types = Map::new();
    for media in ["application/json-patch+json", "application/merge-patch+json"] {
        patch_types.insert(media.into(), json!({"schema": {"type": "object"}}));
    }
    if kind.builtin {
        patch_types
            .insert("application/strategic-merge-patch+json".into(), json!({"schema": {"type": "object"}}));
    }
    let body = json!({"requestBody": {"required": true, "content": {"application/json": {"schema": reference.clone()}}}});
    let write_params = query(&["dryRun", "fieldManager", "fieldValidation"]);
    let with_params = |extra: &Value, params: &[Value]| {
        let mut extra = extra.clone();
        extra["parameters"] = Value::Array(params.to_vec());
        extra
    };
    paths.insert(
        collection.clone(),
        json!({
            "get": operation("list", "list", json!({})),
            "post": operation("post", "create", with_params(&body, &write_params)),
        }),
    );
    let item = format!("{collection}/{{name}}");
    let patch = json!({"requestBody": {"required": true, "content": patch_types}});
    paths.insert(item.clone(), json!({
        "get": operation("get", "read", json!({})),
        "put": operation("put", "replace", with_params(&body, &write_params)),
        "patch": operation("patch", "patch", with_params(&patch, &query(&["dryRun", "fieldManager", "fieldValidation", "force"]))),
        "delete": operation("delete", "delete", json!({})),
    }));
    if kind.has_status() {
        paths.insert(format!("{item}/status"), json!({
            "get": operation("get", "readStatus", json!({})),
            "put": operation("put", "replaceStatus", with_params(&body, &write_params)),
            "patch": operation("patch", "patchStatus", with_params(&patch, &query(&["dryRun", "fieldManager", "fieldValidation", "force"]))),
        }));
    }
    if kind.namespaced {
        paths.insert(
            format!("{base}/{}", kind.plural),
            json!({"get": operation("list", "listForAllNamespaces", json!({}))}),
        );
    }
}
