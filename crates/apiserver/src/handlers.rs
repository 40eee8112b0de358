//! Serving resources: list, watch, get, create, update, patch and delete on every Kind, with
//! Kubernetes' query parameters, tables, field validation and patch types.
//!
//! Lists are streamed as they are encoded, never held whole as one response. Watch events in
//! JSON carry the watch cache's encoding of each object version, shared by every watcher; a
//! watch whose client has not taken pending events for the stall timeout is ended by dropping
//! its connection, so a client that stops reading holds a bounded part of the server.

use std::collections::HashMap;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use kayra_api::scheme::KindInfo;
use kayra_api::verb::Verb;
use kayra_registry::{
    Admit, DeleteOptions, Deleted, ListOptions, Object, Part, PatchKind, RegistryError, WatchEvent,
    WatchOptions, WriteOptions,
};
use serde_json::{Value, json};

use kayra_registry::fields::FieldSelector;

use crate::error::ApiError;
use crate::media::{self, Output};
use crate::routes::ResourcePath;
use crate::serve::Disconnect;
use crate::state::ApiState;
use crate::{protobuf, table};
use kayra_authn::Identity;

/// How often an idle watch that asked for bookmarks gets one.
const BOOKMARK_EVERY: Duration = Duration::from_secs(30);

/// The longest a watch runs before the server ends it (clients then watch again).
const MAX_WATCH: Duration = Duration::from_secs(30 * 60);

/// How many events a watch queues for its response body; past them it waits for the client.
const WATCH_QUEUE: usize = 16;

/// About how many bytes of a list are encoded at a time.
const LIST_CHUNK: usize = 64 << 10;

type Query = HashMap<String, String>;

/// Serves one request to a resource path; `disconnect` drops its connection (a watch whose
/// client stopped reading).
#[allow(clippy::too_many_arguments)]
pub(crate) async fn serve(
    state: Arc<ApiState>,
    identity: &Identity,
    method: &Method,
    path: ResourcePath<'_>,
    query: &Query,
    headers: &HeaderMap,
    body: Bytes,
    disconnect: Option<Disconnect>,
) -> Result<Response, ApiError> {
    let kind = path.kind;
    // A subresource the Kind does not have is no resource at all: 404 before any decision, so
    // that `namespaces/a/nodes` is not mistaken for something a grant could reach.
    let served = match path.subresource.as_deref() {
        None => kind.verbs,
        Some(sub) => {
            kind.subresource(sub)
                .ok_or_else(|| {
                    ApiError::NotFound("the server could not find the requested resource".to_owned())
                })?
                .verbs
        }
    };
    // A named object takes a POST only at a subresource that creates something there (an
    // Eviction), as in Kubernetes.
    let verb = match (method, &path.name, &path.subresource) {
        (&Method::POST, Some(_), Some(_)) => Verb::Create,
        _ => verb(method, path.name.is_some(), query)?,
    };
    // A Kind and each of its subresources serve the verbs discovery advertises for them
    // (namespaces are not deleted as a collection, views are read-only, reviews are created,
    // a status is read, replaced and patched); the rest are not allowed.
    if !served.contains(&verb) {
        return Err(ApiError::MethodNotAllowed);
    }
    let verb = verb.as_str();
    // Namespaces a caller may not read are still listed to it when it holds a binding in
    // them, and all of them when it may read some namespaced resource everywhere.
    let visible = match authorize(&state, identity, verb, kind, &path, query) {
        Ok(()) => None,
        Err(denied) => match namespace_view(&state, identity, verb, kind, &path) {
            NamespaceView::All => None,
            NamespaceView::Bound(visible) => Some((visible, denied)),
            NamespaceView::Denied => return Err(denied),
        },
    };
    if path.subresource.as_deref() == Some("log") {
        return crate::logs::serve(&state, &path, query).await;
    }
    if path.subresource.as_deref() == Some("eviction") {
        return crate::eviction::serve(&state, &path, dry_run(query)?, headers, &body).await;
    }
    if path.subresource.as_deref() == Some("binding") {
        return crate::binding::serve(&state, identity, &path, dry_run(query)?, headers, &body).await;
    }
    if path.subresource.as_deref() == Some("scale") {
        return crate::scale::serve(&state, identity, verb, &path, dry_run(query)?, headers, &body).await;
    }
    if kind.review {
        return review(&state, identity, kind, verb, headers, &body);
    }
    if let Some((source, project)) = kind.view_of {
        return view(&state, kind, source, project, verb, &path, query, headers, disconnect).await;
    }
    let part = match path.subresource.as_deref() {
        None => Part::Main,
        Some("approval") => Part::Approval,
        Some(_) => Part::Status,
    };
    let namespace = path.namespace.as_deref();
    let resource = state.resource(kind);
    let registry = &state.registry;
    let invalid = |error: RegistryError| relabel(error, kind);
    match verb {
        "list" => {
            let output = media::output(headers).ok_or(ApiError::NotAcceptable)?;
            let options = ListOptions {
                label_selector: query.get("labelSelector").cloned(),
                field_selector: query.get("fieldSelector").cloned(),
                limit: query
                    .get("limit")
                    .map(|l| l.parse::<usize>())
                    .transpose()
                    .map_err(|_| ApiError::BadRequest("limit must be a number".into()))?,
                continue_token: query.get("continue").cloned(),
                resource_version: query.get("resourceVersion").cloned(),
                resource_version_match: query.get("resourceVersionMatch").cloned(),
            };
            if output == Output::Json && visible.is_none() {
                let list = registry.list_json(resource, namespace, &options).await?;
                let mut metadata = json!({"resourceVersion": list.resource_version});
                if let Some(token) = &list.continue_token {
                    metadata["continue"] = json!(token);
                }
                if let Some(remaining) = list.remaining_item_count {
                    metadata["remainingItemCount"] = json!(remaining);
                }
                return Ok(list_response(kind, metadata, list.items));
            }
            let list = match &visible {
                None => registry.list(resource, namespace, &options).await?,
                // Only the visible namespaces, all in one page: a continue token would carry
                // the name of the last namespace read, visible or not.
                Some((visible, _)) => {
                    let everything = ListOptions { limit: None, continue_token: None, ..options.clone() };
                    let mut list = registry.list(resource, namespace, &everything).await?;
                    list.items.retain(|item| visible.contains(kayra_registry::meta_str(item, "name")));
                    list.continue_token = None;
                    list.remaining_item_count = None;
                    list
                }
            };
            let mut metadata = json!({"resourceVersion": list.resource_version});
            if let Some(token) = &list.continue_token {
                metadata["continue"] = json!(token);
            }
            if let Some(remaining) = list.remaining_item_count {
                metadata["remainingItemCount"] = json!(remaining);
            }
            let body = match output {
                Output::Table(version) => table::render(
                    kind,
                    &list.items,
                    metadata,
                    version,
                    query.get("includeObject").map(String::as_str),
                    true,
                ),
                Output::Json => {
                    let items = list.items.iter().map(|item| Bytes::from(encode(item))).collect();
                    return Ok(list_response(kind, metadata, items));
                }
            };
            Ok(json_response(StatusCode::OK, &body, &[]))
        }
        "watch" => {
            let resource = state.resource(kind).clone();
            watch(state.clone(), kind, resource, None, namespace, query, headers, disconnect).await
        }
        "get" => {
            let output = media::output(headers).ok_or(ApiError::NotAcceptable)?;
            let name = path.name.as_deref().expect("get has a name");
            if let Some((visible, denied)) = visible
                && !visible.contains(name)
            {
                return Err(denied);
            }
            registry.not_older_than(query.get("resourceVersion").map(String::as_str)).await?;
            let object = registry.get(resource, namespace, name).await?;
            Ok(json_response(StatusCode::OK, &render_one(kind, object, output, query), &[]))
        }
        "create" => {
            let options = write_options(&state, identity, query, part)?;
            let (object, warnings) = decode_body(kind, headers, &body, query)?;
            placement_current(&state, resource, part, Some(&object)).await;
            let created = registry.create(resource, namespace, object, options).await.map_err(invalid)?;
            Ok(json_response(StatusCode::CREATED, &Value::Object(created), &warnings))
        }
        "update" => {
            let options = write_options(&state, identity, query, part)?;
            let name = path.name.as_deref().expect("update has a name");
            let (object, warnings) = decode_body(kind, headers, &body, query)?;
            placement_current(&state, resource, part, Some(&object)).await;
            let updated =
                registry.update(resource, namespace, name, object, options).await.map_err(invalid)?;
            Ok(json_response(StatusCode::OK, &Value::Object(updated), &warnings))
        }
        "patch" => {
            placement_current(&state, resource, part, None).await;
            let options = write_options(&state, identity, query, part)?;
            let name = path.name.as_deref().expect("patch has a name");
            let (patch_kind, patch) = patch_body(kind, headers, &body)?;
            let warnings = patch_warnings(&state, kind, namespace, name, patch_kind, &patch, query).await?;
            let patched = registry
                .patch(resource, namespace, name, patch_kind, &patch, options)
                .await
                .map_err(invalid)?;
            Ok(json_response(StatusCode::OK, &Value::Object(patched), &warnings))
        }
        "delete" => {
            let name = path.name.as_deref().expect("delete has a name");
            let options = delete_options(&state, identity, query, &body)?;
            state.control().references_current(resource).await;
            let (code, object) = match registry.delete(resource, namespace, name, &options).await? {
                Deleted::Gone(object) => (StatusCode::OK, object),
                Deleted::Pending(object) => (StatusCode::OK, object),
            };
            Ok(json_response(code, &Value::Object(object), &[]))
        }
        "deletecollection" => {
            let options = delete_options(&state, identity, query, &body)?;
            let selection = ListOptions {
                label_selector: query.get("labelSelector").cloned(),
                field_selector: query.get("fieldSelector").cloned(),
                ..ListOptions::default()
            };
            let mut items = Vec::new();
            let mut selection = selection;
            let resource_version = loop {
                let page = registry.list(resource, namespace, &selection).await?;
                items.extend(page.items);
                match page.continue_token {
                    Some(token) => selection.continue_token = Some(token),
                    None => break page.resource_version,
                }
            };
            state.control().references_current(resource).await;
            let mut deleted = Vec::with_capacity(items.len());
            for item in items {
                let item_namespace =
                    Some(kayra_registry::meta_str(&item, "namespace")).filter(|n| !n.is_empty());
                let name = kayra_registry::meta_str(&item, "name").to_owned();
                match registry.delete(resource, item_namespace, &name, &options).await {
                    Ok(Deleted::Gone(object) | Deleted::Pending(object)) => {
                        deleted.push(Value::Object(object))
                    }
                    Err(RegistryError::NotFound { .. }) => {}
                    Err(error) => return Err(error.into()),
                }
            }
            let body = json!({
                "apiVersion": kind.api_version(), "kind": format!("{}List", kind.kind),
                "metadata": {"resourceVersion": resource_version}, "items": deleted,
            });
            Ok(json_response(StatusCode::OK, &body, &[]))
        }
        _ => Err(ApiError::MethodNotAllowed),
    }
}

/// A read-only view (Pods of Applications): reads of the source Kind, each object projected
/// into the view's shape, with the view's field selectors applied to the projection.
#[allow(clippy::too_many_arguments)]
async fn view(
    state: &Arc<ApiState>,
    kind: &KindInfo,
    source: &str,
    project: fn(&Value) -> Value,
    verb: &str,
    path: &ResourcePath<'_>,
    query: &Query,
    headers: &HeaderMap,
    disconnect: Option<Disconnect>,
) -> Result<Response, ApiError> {
    let source_kind = state
        .scheme
        .find(&format!("fleet.{}", state.scheme.domain()), "v1", source)
        .ok_or_else(|| ApiError::Internal(format!("the view's source {source} is not served")))?;
    let resource = state.resource(source_kind);
    let namespace = path.namespace.as_deref();
    let output = media::output(headers).ok_or(ApiError::NotAcceptable)?;
    let fields = FieldSelector::parse(
        query.get("fieldSelector").map(String::as_str).unwrap_or_default(),
        kind.field_labels,
    )
    .map_err(|error| ApiError::BadRequest(error.to_string()))?;
    let as_view = |object: &Object| -> Object {
        match project(&Value::Object(object.clone())) {
            Value::Object(map) => map,
            _ => Object::new(),
        }
    };
    match verb {
        "get" => {
            let name = path.name.as_deref().expect("get has a name");
            let object =
                state.registry.get(resource, namespace, name).await.map_err(|error| match error {
                    RegistryError::NotFound { .. } => ApiError::Registry(RegistryError::NotFound {
                        resource: kind.plural.to_owned(),
                        name: name.to_owned(),
                    }),
                    other => ApiError::Registry(other),
                })?;
            Ok(json_response(StatusCode::OK, &render_one(kind, as_view(&object), output, query), &[]))
        }
        "list" => {
            let options = ListOptions {
                label_selector: query.get("labelSelector").cloned(),
                field_selector: None,
                // With a field selector the projection is filtered here, so every page is read.
                limit: if fields.is_empty() { query.get("limit").and_then(|l| l.parse().ok()) } else { None },
                continue_token: query.get("continue").cloned(),
                resource_version: query.get("resourceVersion").cloned(),
                resource_version_match: query.get("resourceVersionMatch").cloned(),
            };
            let list = state.registry.list(resource, namespace, &options).await?;
            let items: Vec<Object> = list
                .items
                .iter()
                .map(as_view)
                .filter(|item| fields.matches(&Value::Object(item.clone())))
                .collect();
            let mut metadata = json!({"resourceVersion": list.resource_version});
            if let Some(token) = &list.continue_token {
                metadata["continue"] = json!(token);
            }
            let body = match output {
                Output::Table(version) => table::render(
                    kind,
                    &items,
                    metadata,
                    version,
                    query.get("includeObject").map(String::as_str),
                    true,
                ),
                Output::Json => {
                    json!({"apiVersion": kind.api_version(), "kind": format!("{}List", kind.kind), "metadata": metadata, "items": items})
                }
            };
            Ok(json_response(StatusCode::OK, &body, &[]))
        }
        "watch" => {
            let mut query = query.clone();
            query.remove("fieldSelector");
            let projection = Projection { project, fields };
            watch(
                state.clone(),
                kind,
                resource.clone(),
                Some(projection),
                namespace,
                &query,
                headers,
                disconnect,
            )
            .await
        }
        _ => Err(ApiError::MethodNotAllowed),
    }
}

/// A review: the caller asks about itself and is answered at once; nothing is stored.
fn review(
    state: &ApiState,
    identity: &Identity,
    kind: &KindInfo,
    verb: &str,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<Response, ApiError> {
    if verb != "create" {
        return Err(ApiError::MethodNotAllowed);
    }
    let (mut object, _) = decode_body(kind, headers, body, &Query::new())?;
    object["metadata"] =
        json!({"creationTimestamp": jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string()});
    let text =
        |value: &Value, field: &str| value.get(field).and_then(Value::as_str).unwrap_or_default().to_owned();
    match kind.kind {
        "SelfSubjectAccessReview" => {
            let spec = object.get("spec").cloned().unwrap_or_else(|| json!({}));
            let action = match (spec.get("resourceAttributes"), spec.get("nonResourceAttributes")) {
                (Some(attributes), _) => {
                    let resource = match text(attributes, "subresource").as_str() {
                        "" => text(attributes, "resource"),
                        sub => format!("{}/{sub}", text(attributes, "resource")),
                    };
                    let optional = |field: &str| Some(text(attributes, field)).filter(|v| !v.is_empty());
                    kayra_authz::Action::Resource {
                        verb: text(attributes, "verb"),
                        api: text(attributes, "group"),
                        resource,
                        namespace: optional("namespace"),
                        name: optional("name"),
                    }
                }
                (None, Some(attributes)) => kayra_authz::Action::NonResource {
                    verb: text(attributes, "verb"),
                    path: text(attributes, "path"),
                },
                (None, None) => {
                    return Err(ApiError::BadRequest(
                        "spec.resourceAttributes or spec.nonResourceAttributes is required".to_owned(),
                    ));
                }
            };
            // As Kubernetes answers: a grant says what allowed it; a plain denial (no rule
            // allows it) has no reason, so that `kubectl auth can-i` prints a bare `no`.
            object["status"] = if state.allows(identity, &action) {
                json!({"allowed": true, "reason": "allowed by RBAC"})
            } else {
                json!({"allowed": false})
            };
        }
        "SelfSubjectRulesReview" => {
            let namespace =
                object.pointer("/spec/namespace").and_then(Value::as_str).filter(|n| !n.is_empty());
            let rules = state.rbac().rules_for(&crate::state::caller(identity), namespace);
            let resource_rules: Vec<Value> = rules
                .iter()
                .filter(|rule| !rule.resources.is_empty())
                .map(|rule| {
                    json!({"verbs": rule.verbs, "apiGroups": rule.apis, "resources": rule.resources, "resourceNames": rule.resource_names})
                })
                .collect();
            let non_resource_rules: Vec<Value> = rules
                .iter()
                .filter(|rule| !rule.non_resource_urls.is_empty())
                .map(|rule| json!({"verbs": rule.verbs, "nonResourceURLs": rule.non_resource_urls}))
                .collect();
            object["status"] = json!({
                "resourceRules": resource_rules,
                "nonResourceRules": non_resource_rules,
                "incomplete": false,
            });
        }
        _ => {
            object["status"] = json!({"userInfo": {"username": identity.user, "uid": identity.uid, "groups": identity.groups}});
        }
    }
    Ok(json_response(StatusCode::CREATED, &object, &[]))
}

/// How a view's watch turns the source's events into its own.
struct Projection {
    project: fn(&Value) -> Value,
    fields: FieldSelector,
}

/// Whether a list asks to watch: `watch` takes every spelling of a Go boolean.
pub(crate) fn watching(query: &Query) -> Result<bool, ApiError> {
    match query.get("watch").map(String::as_str) {
        None | Some("" | "0" | "f" | "F" | "false" | "FALSE" | "False") => Ok(false),
        Some("1" | "t" | "T" | "true" | "TRUE" | "True") => Ok(true),
        Some(other) => Err(ApiError::BadRequest(format!("watch: {other:?} is not a boolean"))),
    }
}

/// The Kubernetes verb of a request on a collection, or on one object when `named`.
pub(crate) fn verb(method: &Method, named: bool, query: &Query) -> Result<Verb, ApiError> {
    Ok(match (method, named) {
        (&Method::GET, false) if watching(query)? => Verb::Watch,
        (&Method::GET, false) => Verb::List,
        (&Method::GET, true) => Verb::Get,
        (&Method::POST, false) => Verb::Create,
        (&Method::PUT, true) => Verb::Update,
        (&Method::PATCH, true) => Verb::Patch,
        (&Method::DELETE, true) => Verb::Delete,
        (&Method::DELETE, false) => Verb::DeleteCollection,
        _ => return Err(ApiError::MethodNotAllowed),
    })
}

/// The RBAC decision for a resource request; a refusal names what was refused, as Kubernetes
/// does.
/// What a caller that RBAC does not let read namespaces sees of them.
enum NamespaceView {
    /// Every namespace (list, watch, get): it may list some namespaced resource everywhere.
    All,
    /// The namespaces it holds a binding in (list, get).
    Bound(std::collections::HashSet<String>),
    /// Nothing: not a namespace read, or a watch without the cluster-wide grant.
    Denied,
}

fn namespace_view(
    state: &ApiState,
    identity: &Identity,
    verb: &str,
    kind: &KindInfo,
    path: &ResourcePath<'_>,
) -> NamespaceView {
    let namespace_read = kind.group.is_empty()
        && kind.plural == "namespaces"
        && path.subresource.is_none()
        && matches!(verb, "list" | "get" | "watch");
    if !namespace_read {
        return NamespaceView::Denied;
    }
    let rbac = state.rbac();
    let caller = crate::state::caller(identity);
    let sees_all =
        state.scheme.kinds().iter().filter(|other| other.namespaced && other.stored()).any(|other| {
            let everywhere = kayra_authz::Action::Resource {
                verb: "list".to_owned(),
                api: other.group.clone(),
                resource: other.plural.to_owned(),
                namespace: None,
                name: None,
            };
            rbac.allows(&caller, &everywhere)
        });
    match (sees_all, verb) {
        (true, _) => NamespaceView::All,
        (false, "watch") => NamespaceView::Denied,
        (false, _) => NamespaceView::Bound(rbac.bound_namespaces(&caller)),
    }
}

fn authorize(
    state: &ApiState,
    identity: &Identity,
    verb: &str,
    kind: &KindInfo,
    path: &ResourcePath<'_>,
    query: &Query,
) -> Result<(), ApiError> {
    let resource = match &path.subresource {
        Some(sub) => format!("{}/{sub}", kind.plural),
        None => kind.plural.to_owned(),
    };
    // As Kubernetes reads a request: a list or watch whose field selector requires one
    // `metadata.name` is about that object, for grants by resource name and for a node's
    // confinement to its own Node.
    let name = match verb {
        "list" | "watch" => query.get("fieldSelector").and_then(|selector| selected_name(selector)),
        _ => path.name.clone(),
    };
    let action = kayra_authz::Action::Resource {
        verb: verb.to_owned(),
        api: kind.group.clone(),
        resource: resource.clone(),
        namespace: path.namespace.clone(),
        name,
    };
    if state.allows(identity, &action) {
        return Ok(());
    }
    Err(ApiError::Forbidden(action.refusal(&identity.user)))
}

/// The one name a field selector requires (`metadata.name=x` or `metadata.name==x` among
/// its terms), if any.
pub(crate) fn selected_name(selector: &str) -> Option<String> {
    selector.split(',').find_map(|term| {
        let value = term.trim().strip_prefix("metadata.name")?.trim_start();
        let value = value.strip_prefix("==").or_else(|| value.strip_prefix('='))?;
        Some(value.trim().to_owned()).filter(|value| !value.is_empty())
    })
}

/// Names an Invalid error by `Kind.group`, as Kubernetes does.
fn relabel(error: RegistryError, kind: &KindInfo) -> ApiError {
    match error {
        RegistryError::Invalid { kind: k, name, causes } if !kind.group.is_empty() => {
            ApiError::Registry(RegistryError::Invalid { kind: format!("{k}.{}", kind.group), name, causes })
        }
        other => ApiError::Registry(other),
    }
}

fn dry_run(query: &Query) -> Result<bool, ApiError> {
    match query.get("dryRun").map(String::as_str) {
        None | Some("") => Ok(false),
        Some("All") => Ok(true),
        Some(other) => Err(ApiError::BadRequest(format!(
            "dryRun: Unsupported value: \"{other}\": supported values: \"All\""
        ))),
    }
}

/// A write's options: every write, to the object or a subresource, passes the writer's
/// admission.
fn write_options(
    state: &ApiState,
    identity: &Identity,
    query: &Query,
    part: Part,
) -> Result<WriteOptions, ApiError> {
    Ok(WriteOptions { dry_run: dry_run(query)?, part, admit: Admit::by(state.admission(identity)) })
}

/// Waits, before a write placement admission decides, until what it decides on is current.
async fn placement_current(
    state: &ApiState,
    resource: &kayra_registry::Resource,
    part: Part,
    object: Option<&Value>,
) {
    state.control().placement_current(resource, part, object).await;
}

/// `fieldValidation`: `Strict`, `Warn` (the default) or `Ignore`.
#[derive(Clone, Copy, PartialEq, Eq)]
enum FieldValidation {
    Strict,
    Warn,
    Ignore,
}

fn field_validation(query: &Query) -> Result<FieldValidation, ApiError> {
    match query.get("fieldValidation").map(String::as_str) {
        None | Some("") | Some("Warn") => Ok(FieldValidation::Warn),
        Some("Strict") => Ok(FieldValidation::Strict),
        Some("Ignore") => Ok(FieldValidation::Ignore),
        Some(other) => Err(ApiError::BadRequest(format!(
            "fieldValidation: Unsupported value: \"{other}\": supported values: \"Ignore\", \"Strict\", \"Warn\""
        ))),
    }
}

/// Applies `fieldValidation` to the unknown fields of an object: an error (Strict), warnings
/// (Warn) or nothing (Ignore).
fn unknown_fields(
    kind: &KindInfo,
    unknown: &[String],
    validation: FieldValidation,
) -> Result<Vec<String>, ApiError> {
    match validation {
        FieldValidation::Ignore => Ok(Vec::new()),
        _ if unknown.is_empty() => Ok(Vec::new()),
        FieldValidation::Strict => {
            let fields =
                unknown.iter().map(|f| format!("unknown field \"{f}\"")).collect::<Vec<_>>().join(", ");
            Err(ApiError::BadRequest(format!(
                "{} in version \"{}\" cannot be handled as a {}: strict decoding error: {fields}",
                kind.kind, kind.version, kind.kind
            )))
        }
        FieldValidation::Warn => Ok(unknown.iter().map(|f| format!("unknown field \"{f}\"")).collect()),
    }
}

fn cannot_handle(kind: &KindInfo, error: &str) -> ApiError {
    ApiError::BadRequest(format!(
        "{} in version \"{}\" cannot be handled as a {}: {error}",
        kind.kind, kind.version, kind.kind
    ))
}

/// Decodes a create or update body (JSON, or protobuf where kubectl sends it), checking its
/// fields; answers the object and any warnings.
fn decode_body(
    kind: &KindInfo,
    headers: &HeaderMap,
    body: &[u8],
    query: &Query,
) -> Result<(Value, Vec<String>), ApiError> {
    let object: Value = match media::body(headers) {
        media::Body::Json => serde_json::from_slice(body).map_err(|e| cannot_handle(kind, &e.to_string()))?,
        media::Body::Protobuf => protobuf::decode(body).map_err(|e| cannot_handle(kind, &e))?,
        other => {
            return Err(ApiError::UnsupportedMediaType(format!(
                "the body of the request was in an unknown format ({other:?}) - accepted media types include: application/json, application/vnd.kubernetes.protobuf"
            )));
        }
    };
    if !object.is_object() {
        return Err(cannot_handle(kind, "the body is not a JSON object"));
    }
    let unknown = kind.behaviour.unknown_fields(&object).map_err(|e| cannot_handle(kind, &e))?;
    let warnings = unknown_fields(kind, &unknown, field_validation(query)?)?;
    Ok((object, warnings))
}

/// The patch format of a PATCH, turned into one the registry applies.
pub(crate) fn patch_body(
    kind: &KindInfo,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<(PatchKind, Vec<u8>), ApiError> {
    let accepted = if kind.builtin {
        "application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json"
    } else {
        "application/json-patch+json, application/merge-patch+json"
    };
    match media::body(headers) {
        media::Body::MergePatch => Ok((PatchKind::Merge, body.to_vec())),
        media::Body::JsonPatch => Ok((PatchKind::Json, body.to_vec())),
        media::Body::StrategicMergePatch if kind.builtin => {
            let patch: Value = serde_json::from_slice(body)
                .map_err(|e| ApiError::BadRequest(format!("the patch is not valid JSON: {e}")))?;
            Ok((PatchKind::Merge, serde_json::to_vec(&strip_directives(patch)).expect("JSON serialises")))
        }
        _ => Err(ApiError::UnsupportedMediaType(format!(
            "the body of the request was in an unknown format - accepted media types include: {accepted}"
        ))),
    }
}

/// A strategic merge patch on the builtin-shaped Kinds, as a merge patch: their fields are
/// maps and scalars, so dropping the `$`-directives leaves the same change.
fn strip_directives(value: Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.into_iter()
                .filter(|(k, _)| !k.starts_with('$'))
                .map(|(k, v)| (k, strip_directives(v)))
                .collect(),
        ),
        other => other,
    }
}

/// Field validation for a patch: the patch applied to the current object must not introduce
/// fields the Kind does not have.
async fn patch_warnings(
    state: &ApiState,
    kind: &KindInfo,
    namespace: Option<&str>,
    name: &str,
    patch_kind: PatchKind,
    patch: &[u8],
    query: &Query,
) -> Result<Vec<String>, ApiError> {
    let validation = field_validation(query)?;
    if validation == FieldValidation::Ignore {
        return Ok(Vec::new());
    }
    let Ok(current) = state.registry.get(state.resource(kind), namespace, name).await else {
        return Ok(Vec::new());
    };
    let mut document = Value::Object(current);
    let applied = match patch_kind {
        PatchKind::Merge => {
            serde_json::from_slice::<Value>(patch).map(|p| json_patch::merge(&mut document, &p)).is_ok()
        }
        PatchKind::Json => serde_json::from_slice::<json_patch::Patch>(patch)
            .ok()
            .is_some_and(|p| json_patch::patch(&mut document, &p).is_ok()),
    };
    if !applied {
        return Ok(Vec::new());
    }
    match kind.behaviour.normalize(&document) {
        Ok((_, unknown)) => unknown_fields(kind, &unknown, validation),
        Err(_) => Ok(Vec::new()),
    }
}

/// A delete's options, from the query and the `DeleteOptions` body; every delete passes the
/// deleter's admission.
fn delete_options(
    state: &ApiState,
    identity: &Identity,
    query: &Query,
    body: &[u8],
) -> Result<DeleteOptions, ApiError> {
    let body: Value = if body.iter().all(u8::is_ascii_whitespace) {
        json!({})
    } else {
        serde_json::from_slice(body)
            .map_err(|e| ApiError::BadRequest(format!("the DeleteOptions body is not valid JSON: {e}")))?
    };
    let text = |value: Option<&Value>| value.and_then(Value::as_str).map(str::to_owned);
    let dry_run_body =
        body.get("dryRun").and_then(Value::as_array).is_some_and(|list| list.iter().any(|v| v == "All"));
    let grace =
        match (body.get("gracePeriodSeconds").and_then(Value::as_i64), query.get("gracePeriodSeconds")) {
            (Some(seconds), _) => Some(seconds),
            (None, Some(text)) => Some(
                text.parse()
                    .map_err(|_| ApiError::BadRequest("gracePeriodSeconds must be a number".into()))?,
            ),
            (None, None) => None,
        };
    let policy = text(body.get("propagationPolicy")).or_else(|| query.get("propagationPolicy").cloned());
    // The deprecated `orphanDependents` says the same as a policy, and may not contradict one.
    let orphan = match (body.get("orphanDependents").and_then(Value::as_bool), query.get("orphanDependents"))
    {
        (Some(orphan), _) => Some(orphan),
        (None, Some(text)) => Some(text == "true"),
        (None, None) => None,
    };
    let propagation_policy = match (policy, orphan) {
        (Some(_), Some(_)) => {
            return Err(ApiError::BadRequest(
                "orphanDependents and propagationPolicy may not both be set; use propagationPolicy".into(),
            ));
        }
        (Some(policy), None) => Some(policy),
        (None, Some(true)) => Some("Orphan".to_owned()),
        (None, Some(false)) => Some("Background".to_owned()),
        (None, None) => None,
    };
    Ok(DeleteOptions {
        uid: text(body.pointer("/preconditions/uid")),
        resource_version: text(body.pointer("/preconditions/resourceVersion")),
        propagation_policy,
        grace_period_seconds: grace,
        dry_run: dry_run_body || dry_run(query)?,
        admit: Admit::by(state.admission(identity)),
    })
}

fn render_one(kind: &KindInfo, object: Object, output: Output, query: &Query) -> Value {
    match output {
        Output::Json => Value::Object(object),
        Output::Table(version) => {
            let metadata = json!({"resourceVersion": object.get("metadata").and_then(|m| m.get("resourceVersion")).cloned().unwrap_or(Value::Null)});
            table::render(
                kind,
                &[object],
                metadata,
                version,
                query.get("includeObject").map(String::as_str),
                true,
            )
        }
    }
}

/// A JSON response with `Warning` headers.
pub(crate) fn json_response(code: StatusCode, body: &Value, warnings: &[String]) -> Response {
    let mut response = (code, axum::Json(body)).into_response();
    for warning in warnings {
        let text = format!("299 - \"{}\"", warning.replace('"', "\\\""));
        if let Ok(value) = HeaderValue::from_str(&text) {
            response.headers_mut().append(header::WARNING, value);
        }
    }
    response
}

/// An object's JSON, as `serde_json` writes it.
fn encode(object: &Object) -> Vec<u8> {
    serde_json::to_vec(object).expect("a JSON map always serializes")
}

/// A list of `items` (each an object's JSON) as the client takes it: the envelope with
/// `metadata` first, then the items gathered into chunks, so that the whole response is never
/// held at once beside its items.
fn list_response(kind: &KindInfo, metadata: Value, items: Vec<Bytes>) -> Response {
    let head = format!(
        "{{\"apiVersion\":{},\"kind\":{},\"metadata\":{},\"items\":[",
        Value::String(kind.api_version()),
        Value::String(format!("{}List", kind.kind)),
        metadata
    );
    let mut head = Some(Bytes::from(head));
    let mut items = items.into_iter();
    let (mut first, mut ended) = (true, false);
    let chunks = futures_util::stream::poll_fn(move |_| {
        if let Some(head) = head.take() {
            return Poll::Ready(Some(Ok::<_, std::io::Error>(head)));
        }
        if ended {
            return Poll::Ready(None);
        }
        let mut chunk = Vec::with_capacity(LIST_CHUNK + (LIST_CHUNK >> 2));
        while chunk.len() < LIST_CHUNK {
            let Some(item) = items.next() else {
                chunk.extend_from_slice(b"]}");
                ended = true;
                break;
            };
            if !first {
                chunk.push(b',');
            }
            first = false;
            chunk.extend_from_slice(&item);
        }
        Poll::Ready(Some(Ok(Bytes::from(chunk))))
    });
    stream_response(Body::from_stream(chunks))
}

/// The opening of a JSON watch event of each type, before the object's bytes.
fn event_head(event: &WatchEvent) -> Bytes {
    Bytes::from_static(match event {
        WatchEvent::Added(_) => b"{\"type\":\"ADDED\",\"object\":",
        WatchEvent::Modified(_) => b"{\"type\":\"MODIFIED\",\"object\":",
        WatchEvent::Deleted(_) => b"{\"type\":\"DELETED\",\"object\":",
    })
}

/// A chunked stream of `WatchEvent`s, one JSON document per line. In JSON, an event is its
/// opening, the watch cache's shared encoding of the object, and its close, written without
/// copying. A watch whose client has not taken what is pending for the stall timeout ends,
/// dropping its connection; the client watches again from the last revision it saw.
#[allow(clippy::too_many_arguments)]
async fn watch(
    state: Arc<ApiState>,
    kind: &KindInfo,
    resource: kayra_registry::Resource,
    projection: Option<Projection>,
    namespace: Option<&str>,
    query: &Query,
    headers: &HeaderMap,
    disconnect: Option<Disconnect>,
) -> Result<Response, ApiError> {
    let output = media::output(headers).ok_or(ApiError::NotAcceptable)?;
    if query.get("sendInitialEvents").is_some_and(|v| v == "true") {
        return Err(ApiError::BadRequest(
            "sendInitialEvents is not supported by this server; list, then watch".to_owned(),
        ));
    }
    let options = WatchOptions {
        namespace: namespace.map(str::to_owned),
        label_selector: query.get("labelSelector").cloned(),
        field_selector: query.get("fieldSelector").cloned(),
        resource_version: query.get("resourceVersion").cloned(),
    };
    let timeout = match query.get("timeoutSeconds") {
        Some(seconds) => Duration::from_secs(
            seconds.parse().map_err(|_| ApiError::BadRequest("timeoutSeconds must be a number".into()))?,
        ),
        None => MAX_WATCH,
    }
    .min(MAX_WATCH);
    let bookmarks = query.get("allowWatchBookmarks").is_some_and(|v| v == "true");
    let include = query.get("includeObject").cloned();
    let mut stream = match state.registry.watch(&resource, &options).await {
        Ok(stream) => stream,
        Err(RegistryError::Expired { message, .. }) => {
            // A watch from a revision that is gone answers with one ERROR event, as Kubernetes does.
            let (_, status) =
                ApiError::Registry(RegistryError::Expired { message, continue_from: None }).to_status();
            let line = format!("{}\n", json!({"type": "ERROR", "object": status}));
            return Ok(stream_response(Body::from(line)));
        }
        Err(error) => return Err(error.into()),
    };
    let kind = kind.clone();
    let stall = state.watch_stall;
    // Plain JSON of the stored objects: the cache's encoding is the event's object.
    let shared = projection.is_none() && output == Output::Json;
    let (sender, receiver) = tokio::sync::mpsc::channel::<Frames>(WATCH_QUEUE);
    tokio::spawn(async move {
        let deadline = tokio::time::sleep(timeout);
        tokio::pin!(deadline);
        let mut ticker = tokio::time::interval(BOOKMARK_EVERY);
        ticker.tick().await;
        let mut first = true;
        'events: loop {
            let next = async {
                if shared {
                    stream.next_json().await.map(|(event, json)| (event, Some(json)))
                } else {
                    stream.next().await.map(|event| (event, None))
                }
            };
            let line = tokio::select! {
                () = &mut deadline => break,
                () = sender.closed() => break,
                _ = ticker.tick(), if bookmarks => {
                    json!({"type": "BOOKMARK", "object": {"kind": kind.kind, "apiVersion": kind.api_version(),
                           "metadata": {"resourceVersion": stream.revision().to_string()}}})
                }
                event = next => match event {
                    Ok((event, Some(json))) => {
                        let frames = vec![event_head(&event), json, Bytes::from_static(b"}\n")];
                        if !deliver(&sender, frames, stall, disconnect.as_ref()).await {
                            break 'events;
                        }
                        continue;
                    }
                    Ok((event, None)) => {
                        let mut shown = event.object().clone();
                        if let Some(projection) = &projection {
                            match (projection.project)(&Value::Object(shown)) {
                                Value::Object(map) if projection.fields.matches(&Value::Object(map.clone())) => shown = map,
                                _ => continue,
                            }
                        }
                        let object = match output {
                            Output::Json => serde_json::to_vec(&shown),
                            Output::Table(version) => {
                                let rv = json!({"resourceVersion": shown.get("metadata").and_then(|m| m.get("resourceVersion")).cloned().unwrap_or(Value::Null)});
                                serde_json::to_vec(&table::render(&kind, &[shown], rv, version, include.as_deref(), first))
                            }
                        };
                        first = false;
                        let object = Bytes::from(object.expect("JSON values always serialize"));
                        let frames = vec![event_head(&event), object, Bytes::from_static(b"}\n")];
                        if !deliver(&sender, frames, stall, disconnect.as_ref()).await {
                            break 'events;
                        }
                        continue;
                    }
                    Err(error) => {
                        let (_, status) = ApiError::Registry(error).to_status();
                        let line = format!("{}\n", json!({"type": "ERROR", "object": status}));
                        deliver(&sender, vec![Bytes::from(line)], stall, disconnect.as_ref()).await;
                        break;
                    }
                },
            };
            if !deliver(&sender, vec![Bytes::from(format!("{line}\n"))], stall, disconnect.as_ref()).await {
                break;
            }
        }
    });
    let body = Body::from_stream(frames_stream(receiver));
    Ok(stream_response(body))
}

/// One watch event (or bookmark, or error) as the pieces its line is written from.
type Frames = Vec<Bytes>;

/// Hands one event's `frames` to the response body; false when the client is gone, or has not
/// taken what is pending within `stall`. Then the watch ends: over HTTP/1.1 its connection is
/// dropped (the socket is full, so not even the end of the body could reach the client); over
/// HTTP/2 the stream ends after the whole events already queued, and the connection, shared
/// with the client's other requests, stays (HTTP/2 pings drop it if the client reads nothing).
async fn deliver(
    sender: &tokio::sync::mpsc::Sender<Frames>,
    frames: Frames,
    stall: Duration,
    disconnect: Option<&Disconnect>,
) -> bool {
    match tokio::time::timeout(stall, sender.send(frames)).await {
        Ok(sent) => sent.is_ok(),
        Err(_) => {
            tracing::info!(
                stall_seconds = stall.as_secs_f64(),
                "a watch's client stopped reading; dropping it"
            );
            if let Some(disconnect) = disconnect {
                disconnect.now();
            }
            false
        }
    }
}

fn stream_response(body: Body) -> Response {
    let mut response = Response::new(body);
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache, private"));
    response
}

/// A receiver of events as a stream of their frames, without another dependency.
fn frames_stream(
    mut receiver: tokio::sync::mpsc::Receiver<Frames>,
) -> impl futures_util::Stream<Item = Result<Bytes, std::io::Error>> {
    let mut current = std::collections::VecDeque::new();
    futures_util::stream::poll_fn(move |cx| {
        loop {
            if let Some(frame) = current.pop_front() {
                return Poll::Ready(Some(Ok(frame)));
            }
            match std::task::ready!(receiver.poll_recv(cx)) {
                Some(frames) => current.extend(frames),
                None => return Poll::Ready(None),
            }
        }
    })
}
