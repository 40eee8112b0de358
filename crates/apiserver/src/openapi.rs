//! OpenAPI v3: a root listing one document per group-version, and each document with every
//! Kind's paths and schemas, as `kubectl explain`, `create` and `apply` read them. Schemas
//! come from the Kinds' types (their doc comments are the descriptions). Each path declares
//! its templated parameters (`{namespace}`, `{name}`) at the path item, as Kubernetes does;
//! each operation the query parameters it takes and its error answers (a `Status`), and only
//! the operations the Kind's verbs serve are listed. Every document must pass an OpenAPI
//! validator (`openapi-spec-validator`, in the end-to-end suite). There is no `/openapi/v2`:
//! kubectl asks for it only as protobuf and copes with a 404.

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
    kayra_api::openapi::mark_builtin_definitions(&mut schemas);
    for schema in schemas.values_mut() {
        unwrap_descriptions(schema);
    }
    schemas.insert(STATUS_SCHEMA.to_owned(), status_schema());
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

/// The name of the `Status` schema every error response refers to, as Kubernetes names it.
const STATUS_SCHEMA: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.Status";

/// `metav1.Status`, the body of every error.
fn status_schema() -> Value {
    let string = |description: &str| json!({"type": "string", "description": description});
    json!({
        "type": "object",
        "description": "Status is the answer to a request that did not return an object: every error, and some deletions.",
        "properties": {
            "apiVersion": string("v1"),
            "kind": string("Status"),
            "metadata": {"type": "object", "properties": {"resourceVersion": {"type": "string"}, "continue": {"type": "string"}}},
            "status": string("Success or Failure."),
            "message": string("What happened, for a person."),
            "reason": string("Why, in one CamelCase word a client can act on (NotFound, AlreadyExists, Conflict, Invalid, Forbidden, ...)."),
            "details": {
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "group": {"type": "string"},
                    "kind": {"type": "string"},
                    "uid": {"type": "string"},
                    "retryAfterSeconds": {"type": "integer", "format": "int32"},
                    "causes": {"type": "array", "items": {"type": "object", "properties": {
                        "reason": {"type": "string"}, "message": {"type": "string"}, "field": {"type": "string"},
                    }}},
                },
            },
            "code": {"type": "integer", "format": "int32", "description": "The HTTP status code."},
        },
    })
}

/// A query parameter: its name, JSON type and what it does.
type Query = (&'static str, &'static str, &'static str);

const LIST_QUERY: &[Query] = &[
    ("labelSelector", "string", "Only objects whose labels match this selector."),
    ("fieldSelector", "string", "Only objects whose fields match this selector."),
    ("limit", "integer", "At most this many objects; the rest through `continue`."),
    ("continue", "string", "The token of the previous page's metadata.continue."),
    ("resourceVersion", "string", "Read at or after this resource version (or watch from it)."),
    ("resourceVersionMatch", "string", "How resourceVersion applies to a list: NotOlderThan or Exact."),
    ("watch", "boolean", "Watch for changes instead of listing."),
    ("allowWatchBookmarks", "boolean", "Send BOOKMARK events on a watch."),
    ("sendInitialEvents", "boolean", "Begin a watch with the current objects as ADDED events."),
    ("timeoutSeconds", "integer", "End the list or watch after this many seconds."),
];
const CATALOG_LIST_QUERY: &[Query] = &[
    ("resourceVersion", "string", "Watch from this resource version."),
    ("watch", "boolean", "Watch for changes instead of listing."),
    ("timeoutSeconds", "integer", "End the watch after this many seconds."),
];
/// The catalog's writes: kubectl validates on the server only where `fieldValidation` is
/// declared. The catalog has no dry run (a `dryRun` is refused), so none is declared.
const CATALOG_WRITE_QUERY: &[Query] = &[
    ("fieldManager", "string", "The name of the writer."),
    ("fieldValidation", "string", "Unknown or duplicate fields: Ignore, Warn (the default) or Strict."),
];
const GET_QUERY: &[Query] = &[("resourceVersion", "string", "Read at or after this resource version.")];
const WRITE_QUERY: &[Query] = &[
    ("dryRun", "string", "All: check and answer, but store nothing."),
    ("fieldManager", "string", "The name of the writer."),
    ("fieldValidation", "string", "Unknown or duplicate fields: Ignore, Warn (the default) or Strict."),
];
const PATCH_QUERY: &[Query] = &[
    ("dryRun", "string", "All: check and answer, but store nothing."),
    ("fieldManager", "string", "The name of the writer."),
    ("fieldValidation", "string", "Unknown or duplicate fields: Ignore, Warn (the default) or Strict."),
    ("force", "boolean", "Take over conflicting fields (server-side apply)."),
];
const DELETE_QUERY: &[Query] = &[
    ("dryRun", "string", "All: check and answer, but delete nothing."),
    ("gracePeriodSeconds", "integer", "Seconds before the object is deleted; 0 deletes at once."),
    ("propagationPolicy", "string", "Orphan, Background or Foreground."),
];
const DELETE_COLLECTION_QUERY: &[Query] = &[
    ("labelSelector", "string", "Only objects whose labels match this selector."),
    ("fieldSelector", "string", "Only objects whose fields match this selector."),
    ("dryRun", "string", "All: check and answer, but delete nothing."),
    ("gracePeriodSeconds", "integer", "Seconds before each object is deleted; 0 deletes at once."),
    ("propagationPolicy", "string", "Orphan, Background or Foreground."),
];

fn query_parameters(query: &[Query]) -> Value {
    query
        .iter()
        .map(|(name, type_, description)| {
            json!({"name": name, "in": "query", "description": description, "schema": {"type": type_}})
        })
        .collect()
}

/// What an error answer means, per HTTP status code.
fn error_description(code: &str) -> &'static str {
    match code {
        "400" => "BadRequest: a malformed body, selector or query parameter.",
        "401" => "Unauthorized: no credential, or one that does not authenticate.",
        "403" => "Forbidden: RBAC or admission refuses it.",
        "404" => "NotFound: no such object (or namespace).",
        "409" => "AlreadyExists, or Conflict: the resourceVersion or a precondition is stale.",
        "410" => "Expired: the resourceVersion or continue token is too old.",
        "415" => "UnsupportedMediaType: a patch type this resource does not take.",
        "422" => "Invalid: the object fails validation; details.causes name the fields.",
        _ => "The request failed; the Status says why.",
    }
}

fn add_paths(paths: &mut Map<String, Value>, group: &str, version: &str, kind: &KindInfo, schema: &str) {
    let base = if group.is_empty() { format!("/api/{version}") } else { format!("/apis/{group}/{version}") };
    let collection = if kind.namespaced {
        format!("{base}/namespaces/{{namespace}}/{}", kind.plural)
    } else {
        format!("{base}/{}", kind.plural)
    };
    let item = format!("{collection}/{{name}}");
    let reference = json!({"$ref": format!("#/components/schemas/{schema}")});
    let free_form = json!({"type": "object"});
    let list_schema = json!({
        "type": "object",
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "items": {"type": "array", "items": reference.clone()},
        },
    });
    let serves = |verb: &str| kind.verbs.iter().any(|served| served.as_str() == verb);
    let operation = |action: &str,
                     id: &str,
                     sub: &str,
                     answer: (&str, &Value),
                     errors: &[&str],
                     query: &[Query]| {
        let mut responses = Map::new();
        responses.insert(
            answer.0.to_owned(),
            json!({"description": "OK", "content": {"application/json": {"schema": answer.1}}}),
        );
        for code in errors.iter().chain(&["401", "403"]) {
            responses.insert((*code).to_owned(), json!({"description": error_description(code), "content": {"application/json": {"schema": {"$ref": format!("#/components/schemas/{STATUS_SCHEMA}")}}}}));
        }
        let mut op = json!({
            "operationId": format!("{id}{}{}", kind.kind, camel(sub)),
            "x-kubernetes-action": action,
            "x-kubernetes-group-version-kind": gvk(kind),
            "responses": responses,
        });
        if !query.is_empty() {
            op["parameters"] = query_parameters(query);
        }
        op
    };
    let with_body = |mut op: Value, content: Value| {
        op["requestBody"] = json!({"required": true, "content": content});
        op
    };
    let json_body = |schema: &Value| json!({"application/json": {"schema": schema}});
    let patch_body = || {
        let mut types = Map::new();
        for media in ["application/json-patch+json", "application/merge-patch+json"] {
            types.insert(media.into(), json!({"schema": {"type": "object"}}));
        }
        if !kind.catalog {
            types.insert("application/apply-patch+yaml".into(), json!({"schema": {"type": "object"}}));
        }
        if kind.builtin {
            types.insert(
                "application/strategic-merge-patch+json".into(),
                json!({"schema": {"type": "object"}}),
            );
        }
        Value::Object(types)
    };
    let (list_query, get_query, write_query, patch_query) = if kind.catalog {
        (CATALOG_LIST_QUERY, &[][..], CATALOG_WRITE_QUERY, CATALOG_WRITE_QUERY)
    } else {
        (LIST_QUERY, GET_QUERY, WRITE_QUERY, PATCH_QUERY)
    };
    let namespace_parameter = json!({"name": "namespace", "in": "path", "required": true, "description": "The object's namespace.", "schema": {"type": "string"}});
    let name_parameter = json!({"name": "name", "in": "path", "required": true, "description": "The object's name.", "schema": {"type": "string"}});
    let path_item = |operations: Map<String, Value>, named: bool| -> Option<Value> {
        if operations.is_empty() {
            return None;
        }
        let mut parameters = Vec::new();
        if named {
            parameters.push(name_parameter.clone());
        }
        if kind.namespaced {
            parameters.push(namespace_parameter.clone());
        }
        let mut item = operations;
        if !parameters.is_empty() {
            item.insert("parameters".into(), Value::Array(parameters));
        }
        Some(Value::Object(item))
    };

    let mut operations = Map::new();
    if serves("list") || serves("watch") {
        operations.insert(
            "get".into(),
            operation("list", "list", "", ("200", &list_schema), &["400", "410"], list_query),
        );
    }
    if serves("create") {
        let op =
            operation("post", "create", "", ("201", &reference), &["400", "404", "409", "422"], write_query);
        operations.insert("post".into(), with_body(op, json_body(&reference)));
    }
    if serves("deletecollection") {
        operations.insert(
            "delete".into(),
            operation(
                "deletecollection",
                "deleteCollection",
                "",
                ("200", &list_schema),
                &["400"],
                DELETE_COLLECTION_QUERY,
            ),
        );
    }
    if let Some(entry) = path_item(operations, false) {
        paths.insert(collection.clone(), entry);
    }

    let mut operations = Map::new();
    if serves("get") {
        operations.insert(
            "get".into(),
            operation("get", "read", "", ("200", &reference), &["400", "404"], get_query),
        );
    }
    if serves("update") {
        let op =
            operation("put", "replace", "", ("200", &reference), &["400", "404", "409", "422"], write_query);
        operations.insert("put".into(), with_body(op, json_body(&reference)));
    }
    if serves("patch") {
        let op = operation(
            "patch",
            "patch",
            "",
            ("200", &reference),
            &["400", "404", "409", "415", "422"],
            patch_query,
        );
        operations.insert("patch".into(), with_body(op, patch_body()));
    } else {
        // kubectl learns that the server validates fields from a Kind's patch operation (its
        // `fieldValidation` parameter); without one it validates on the client from OpenAPI v2,
        // which Kayra does not serve, and refuses `kubectl create -f`. So every Kind lists the
        // operation, documented as answering 405 where the Kind is not patched.
        let status = json!({"$ref": format!("#/components/schemas/{STATUS_SCHEMA}")});
        let mut op = operation("patch", "patch", "", ("405", &status), &[], patch_query);
        op["description"] = json!(
            "Not served: answers 405 MethodNotAllowed. Listed so that kubectl finds its fieldValidation parameter."
        );
        op["responses"]["405"]["description"] = json!("MethodNotAllowed: this Kind is not patched.");
        operations.insert("patch".into(), with_body(op, patch_body()));
    }
    if serves("delete") {
        let delete_query = if kind.catalog { &[][..] } else { DELETE_QUERY };
        operations.insert(
            "delete".into(),
            operation("delete", "delete", "", ("200", &reference), &["400", "404", "409"], delete_query),
        );
    }
    if let Some(entry) = path_item(operations, true) {
        paths.insert(item.clone(), entry);
    }

    for sub in kind.subresources {
        // A status (or a certificate request's approval) is the object again; the catalog's
        // subresources answer shapes of their own.
        let shape = if !kind.catalog && sub.response.is_none() { &reference } else { &free_form };
        let has = |verb: &str| sub.verbs.iter().any(|served| served.as_str() == verb);
        let mut operations = Map::new();
        if has("get") {
            operations
                .insert("get".into(), operation("get", "read", sub.name, ("200", shape), &["404"], &[]));
        }
        if has("update") {
            let op = operation(
                "put",
                "replace",
                sub.name,
                ("200", shape),
                &["400", "404", "409", "422"],
                write_query,
            );
            operations.insert("put".into(), with_body(op, json_body(shape)));
        }
        if has("patch") {
            let op = operation(
                "patch",
                "patch",
                sub.name,
                ("200", shape),
                &["400", "404", "409", "415", "422"],
                patch_query,
            );
            operations.insert("patch".into(), with_body(op, patch_body()));
        }
        if let Some(entry) = path_item(operations, true) {
            paths.insert(format!("{item}/{}", sub.name), entry);
        }
    }

    if kind.namespaced && (serves("list") || serves("watch")) {
        let op =
            operation("list", "list", "ForAllNamespaces", ("200", &list_schema), &["400", "410"], list_query);
        paths.insert(format!("{base}/{}", kind.plural), json!({"get": op}));
    }
}

/// `openapi.json` → `OpenapiJson`: a subresource's name as part of an operation id.
fn camel(name: &str) -> String {
    name.split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|part| !part.is_empty())
        .map(|part| {
            let mut chars = part.chars();
            chars
                .next()
                .map(|first| first.to_ascii_uppercase().to_string() + chars.as_str())
                .unwrap_or_default()
        })
        .collect()
}
