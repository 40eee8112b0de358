//! The API catalog over HTTP: `catalog.<domain>/v1` registrations (with their `sync`, `status`
//! and `openapi.json`) and namespaced subscriptions, in the flat snake_case JSON the catalog's
//! users write, with `apiVersion`, `kind` and `metadata` added to what is returned. Every
//! request is decided by RBAC like any other resource request; the stored OpenAPI documents are
//! readable by every authenticated caller through the bootstrap `system:basic-user` role.

use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::Response;
use kayra_api::verb::Verb;
use kayra_application::permitted::Permitted;
use kayra_catalog::{Catalog, CatalogError, Stored, Subscription, SyncRequest};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use std::collections::HashMap;
use std::sync::Arc;

use kayra_api::scheme::KindInfo;
use kayra_registry::Object;

use crate::error::ApiError;
use crate::handlers::respond::json_response;
use crate::media::{self, Output};
use crate::state::ApiState;
use crate::table;

/// Serves one catalog request, as its permit allows.
pub(crate) async fn serve(
    state: &ApiState,
    permitted: &Permitted,
    query: &HashMap<String, String>,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<Response, ApiError> {
    let catalog = state
        .catalog
        .as_deref()
        .ok_or_else(|| ApiError::NotFound("this instance serves no API catalog".to_owned()))?;
    let target = permitted.kind_target().filter(|target| target.kind.catalog).ok_or_else(|| {
        ApiError::Forbidden("the request was not authorized for the API catalog".to_owned())
    })?;
    let kind = &target.kind;
    // A dry run the catalog cannot do must not become a real write.
    if query.get("dryRun").is_some_and(|dry_run| !dry_run.is_empty()) {
        return Err(ApiError::BadRequest(
            "dryRun: the API catalog does not support dry runs; send the request without it".to_owned(),
        ));
    }
    let verb = match permitted.request().verb {
        Verb::Watch => Verb::List,
        verb => verb,
    };
    let output = media::output(headers).ok_or(ApiError::NotAcceptable)?;
    let list = |kind_name: &str, items: Vec<Value>, revision: u64| match output {
        Output::Table(version) => {
            let objects: Vec<Object> = items
                .into_iter()
                .filter_map(|item| match item {
                    Value::Object(object) => Some(object),
                    _ => None,
                })
                .collect();
            let metadata = json!({"resourceVersion": revision.to_string()});
            json_response(StatusCode::OK, &table::render(kind, &objects, metadata, version, None, true), &[])
        }
        Output::Json => json_response(
            StatusCode::OK,
            &json!({"apiVersion": kind.api_version(), "kind": kind_name,
                    "metadata": {"resourceVersion": revision.to_string()}, "items": items}),
            &[],
        ),
    };
    let api_version = catalog.api_version();
    let name = target.name.as_deref();
    match (kind.plural, target.namespace.as_deref(), name, target.subresource.as_deref(), verb) {
        (plural, namespace, None, None, Verb::List) if permitted.request().verb == Verb::Watch => {
            let shared = state.catalog.clone().expect("the catalog is served");
            watch(shared, kind, plural, namespace, query, output).await
        }
        ("apiregistrations", _, None, None, Verb::List) => {
            let (items, revision) = catalog.snapshot("apiregistrations").await?;
            Ok(list("ApiRegistrationList", items, revision))
        }
        ("apiregistrations", _, None, None, Verb::Create) => {
            let registration: kayra_catalog::ApiRegistration = decode_named(body, "name")?;
            let created = catalog.create_registration(registration).await?;
            Ok(one(StatusCode::CREATED, &api_version, "ApiRegistration", &created))
        }
        ("apiregistrations", _, Some(name), None, Verb::Get) => {
            Ok(one(StatusCode::OK, &api_version, "ApiRegistration", &catalog.registration(name).await?))
        }
        ("apiregistrations", _, Some(name), None, Verb::Update) => {
            let changes: serde_json::Map<String, Value> = decode_named(body, "name")?;
            let updated = catalog.update_registration(name, &changes).await?;
            Ok(one(StatusCode::OK, &api_version, "ApiRegistration", &updated))
        }
        ("apiregistrations", _, Some(name), None, Verb::Delete) => {
            let deleted = catalog.delete_registration(name).await?;
            Ok(one(StatusCode::OK, &api_version, "ApiRegistration", &deleted))
        }
        ("apiregistrations", _, Some(name), Some("sync"), Verb::Update) => {
            let request: SyncRequest =
                if body.iter().all(u8::is_ascii_whitespace) { SyncRequest::default() } else { decode(body)? };
            let synced = catalog.sync(name, &request).await?;
            Ok(one(StatusCode::OK, &api_version, "ApiRegistration", &synced))
        }
        ("apiregistrations", _, Some(name), Some("status"), Verb::Get) => {
            let status = catalog.status(name).await?;
            Ok(json_response(StatusCode::OK, &serde_json::to_value(status).unwrap_or(Value::Null), &[]))
        }
        ("apiregistrations", _, Some(name), Some("openapi.json"), Verb::Get) => openapi(catalog, name).await,
        ("subscriptions", namespace, None, None, Verb::List) => {
            let (items, revision) = catalog.snapshot("subscriptions").await?;
            let items = items.into_iter().filter(|item| in_namespace(item, namespace)).collect();
            Ok(list("SubscriptionList", items, revision))
        }
        ("subscriptions", Some(namespace), None, None, Verb::Create) => {
            let created = catalog.subscribe(namespace, decode_named(body, "api")?).await?;
            Ok(one(StatusCode::CREATED, &api_version, "Subscription", &created))
        }
        ("subscriptions", Some(namespace), Some(name), None, Verb::Get) => Ok(one(
            StatusCode::OK,
            &api_version,
            "Subscription",
            &catalog.subscription(namespace, name).await?,
        )),
        ("subscriptions", Some(namespace), Some(name), None, Verb::Update) => {
            let body: Subscription = decode(body)?;
            let updated = catalog.set_active(namespace, name, body.active).await?;
            Ok(one(StatusCode::OK, &api_version, "Subscription", &updated))
        }
        ("subscriptions", Some(namespace), Some(name), None, Verb::Delete) => {
            let deleted = catalog.unsubscribe(namespace, name).await?;
            Ok(one(StatusCode::OK, &api_version, "Subscription", &deleted))
        }
        _ => Err(ApiError::MethodNotAllowed),
    }
}

/// Every registered API of this instance, with the resources its stored document serves; none
/// when no catalog is served or it cannot be read (discovery must still answer).
pub(crate) async fn registered_apis(state: &ApiState) -> Vec<crate::discovery::RegisteredApi> {
    let Some(catalog) = state.catalog.as_deref() else { return Vec::new() };
    let registrations = match catalog.registrations().await {
        Ok(registrations) => registrations,
        Err(error) => {
            tracing::warn!(%error, "discovery lists no registered APIs: the catalog cannot be read");
            return Vec::new();
        }
    };
    let mut specs = catalog.specs().await.unwrap_or_else(|error| {
        tracing::warn!(%error, "discovery lists registered APIs without resources: their documents cannot be read");
        Default::default()
    });
    let mut apis = Vec::with_capacity(registrations.len());
    for registration in registrations {
        let name = registration.object.name;
        let resources = specs.remove(&name).map(|spec| spec.resources).unwrap_or_default();
        let version = resources.first().map_or_else(|| "v1".to_owned(), |r| r.version.clone());
        let resources = resources.into_iter().filter(|r| r.version == version).collect();
        apis.push(crate::discovery::RegisteredApi { group: name, version, resources });
    }
    apis
}

/// Legacy discovery of a registered API: `/apis/<api>` (its group) and `/apis/<api>/<version>`
/// (the resources of its stored document), as `/apis` advertises them.
pub(crate) async fn registered_discovery(state: &ApiState, path: &str) -> Option<Response> {
    let rest = path.strip_prefix("/apis/")?.trim_end_matches('/');
    let (group, version) = match rest.split_once('/') {
        Some((group, version)) if !version.contains('/') => (group, Some(version)),
        Some(_) => return None,
        None => (rest, None),
    };
    let api = registered_apis(state).await.into_iter().find(|api| api.group == group)?;
    let body = match version {
        None => {
            let version =
                json!({"groupVersion": format!("{}/{}", api.group, api.version), "version": api.version});
            json!({"kind": "APIGroup", "apiVersion": "v1", "name": api.group, "versions": [version], "preferredVersion": version})
        }
        Some(version) if version == api.version => crate::discovery::registered_resource_list(&api),
        Some(_) => return None,
    };
    Some(json_response(StatusCode::OK, &body, &[]))
}

/// The answer to a request for a registered API's resources, which Kayra does not serve: a
/// 404 naming the API and where it is served.
pub(crate) async fn served_elsewhere(state: &ApiState, path: &str) -> Option<ApiError> {
    let group = path.strip_prefix("/apis/")?.split('/').next()?;
    let catalog = state.catalog.as_deref()?;
    catalog.registration(group).await.ok()?;
    Some(ApiError::NotFound(format!(
        "the API {group} is registered in Kayra's catalog but served by its own service: send {path} through the gateway that routes /apis/{group}/, not to Kayra"
    )))
}

/// Whether a list is a watch: `watch` in any of Go's boolean spellings.
fn in_namespace(item: &Value, namespace: Option<&str>) -> bool {
    namespace.is_none_or(|namespace| {
        item.pointer("/metadata/namespace").and_then(Value::as_str) == Some(namespace)
    })
}

/// How long a watch runs before the server ends it (clients then watch again).
const MAX_WATCH: std::time::Duration = std::time::Duration::from_secs(30 * 60);

/// A watch of registrations or subscriptions: from `resourceVersion` when given (410 Gone as
/// an ERROR event when it is compacted), else every current object as ADDED, then each change.
async fn watch(
    catalog: Arc<Catalog>,
    kind: &KindInfo,
    plural: &str,
    namespace: Option<&str>,
    query: &HashMap<String, String>,
    output: Output,
) -> Result<Response, ApiError> {
    let timeout = match query.get("timeoutSeconds") {
        Some(seconds) => std::time::Duration::from_secs(
            seconds.parse().map_err(|_| ApiError::BadRequest("timeoutSeconds must be a number".into()))?,
        ),
        None => MAX_WATCH,
    }
    .min(MAX_WATCH);
    let (initial, after) =
        match query.get("resourceVersion").map(String::as_str).filter(|rv| !rv.is_empty() && *rv != "0") {
            Some(rv) => {
                let after = rv
                    .parse()
                    .map_err(|_| ApiError::BadRequest(format!("resourceVersion {rv:?} is not a number")))?;
                (Vec::new(), after)
            }
            None => catalog.snapshot(plural).await?,
        };
    let mut watcher = match catalog.watch(plural, after).await {
        Ok(watcher) => watcher,
        // A compacted revision is an ERROR event in the stream, as Kubernetes answers it.
        Err(gone @ CatalogError::Store(kayra_store::StoreError::Compacted { .. })) => {
            let (_, status) = ApiError::from(gone).to_status();
            return Ok(stream(futures_util::stream::iter([Ok(line(
                &json!({"type": "ERROR", "object": status}),
            ))])));
        }
        Err(other) => return Err(other.into()),
    };
    let (plural, namespace) = (plural.to_owned(), namespace.map(str::to_owned));
    let kind = kind.clone();
    let (sender, receiver) = tokio::sync::mpsc::channel::<Result<bytes::Bytes, std::io::Error>>(64);
    let render = move |object: Value, first: bool| match output {
        Output::Json => object,
        Output::Table(version) => {
            let rv = json!({"resourceVersion": object.pointer("/metadata/resourceVersion").cloned().unwrap_or(Value::Null)});
            let object = match object {
                Value::Object(object) => object,
                _ => Object::new(),
            };
            table::render(&kind, &[object], rv, version, None, first)
        }
    };
    let events =
        initial.into_iter().filter(|item| in_namespace(item, namespace.as_deref())).collect::<Vec<_>>();
    tokio::spawn(async move {
        let deadline = tokio::time::sleep(timeout);
        tokio::pin!(deadline);
        let mut first = true;
        for object in events {
            let event = json!({"type": "ADDED", "object": render(object, first)});
            first = false;
            if sender.send(Ok(line(&event))).await.is_err() {
                return;
            }
        }
        loop {
            let event = tokio::select! {
                () = &mut deadline => break,
                () = sender.closed() => break,
                event = watcher.next() => event,
            };
            let text = match event {
                None => break,
                Some(Err(error)) => {
                    let (_, status) = ApiError::from(CatalogError::Store(error)).to_status();
                    let _ = sender.send(Ok(line(&json!({"type": "ERROR", "object": status})))).await;
                    break;
                }
                Some(Ok(event)) => match catalog.event(&plural, &event) {
                    Ok((kind_of_change, object)) if in_namespace(&object, namespace.as_deref()) => {
                        let event = json!({"type": kind_of_change, "object": render(object, first)});
                        first = false;
                        line(&event)
                    }
                    _ => continue,
                },
            };
            if sender.send(Ok(text)).await.is_err() {
                break;
            }
        }
    });
    let mut receiver = receiver;
    Ok(stream(futures_util::stream::poll_fn(move |cx| receiver.poll_recv(cx))))
}

/// One watch event, as a line.
fn line(event: &Value) -> bytes::Bytes {
    bytes::Bytes::from(format!("{event}\n"))
}

/// A streamed response of watch events.
fn stream(
    events: impl futures_util::Stream<Item = Result<bytes::Bytes, std::io::Error>> + Send + 'static,
) -> Response {
    let mut response = Response::new(Body::from_stream(events));
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache, private"));
    response
}

/// A stored document, byte for byte.
async fn openapi(catalog: &Catalog, name: &str) -> Result<Response, ApiError> {
    catalog.registration(name).await?;
    let document = catalog.document(name).await?.ok_or_else(|| {
        ApiError::NotFound(format!(
            "no OpenAPI document has been fetched for {name} yet; it is fetched on its next sync"
        ))
    })?;
    let mut response = Response::new(Body::from(document));
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    Ok(response)
}

fn decode<T: DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    serde_json::from_slice(body).map_err(invalid_body)
}

/// Decodes an object whose flat `field` names it (`name` for a registration, `api` for a
/// subscription). What kubectl sends names it in `metadata.name`; that fills the field when
/// the body leaves it out.
fn decode_named<T: DeserializeOwned>(body: &[u8], field: &str) -> Result<T, ApiError> {
    let mut value: Value = serde_json::from_slice(body).map_err(invalid_body)?;
    if let Some(name) = value.pointer("/metadata/name").and_then(Value::as_str).map(str::to_owned)
        && let Some(object) = value.as_object_mut()
    {
        object.entry(field).or_insert(Value::String(name));
    }
    serde_json::from_value(value).map_err(invalid_body)
}

fn invalid_body(error: serde_json::Error) -> ApiError {
    ApiError::BadRequest(format!("the request body is not valid: {error}"))
}

fn one<T: Serialize>(code: StatusCode, api_version: &str, kind: &str, stored: &Stored<T>) -> Response {
    json_response(code, &stored.to_json(api_version, kind), &[])
}

/// The one mapping from what the catalog refuses to what the API answers.
impl From<CatalogError> for ApiError {
    fn from(error: CatalogError) -> ApiError {
        match error {
            CatalogError::Invalid(_) => ApiError::BadRequest(error.to_string()),
            CatalogError::NotFound(message) => ApiError::NotFound(message),
            CatalogError::NamespaceTerminating(_) => ApiError::Forbidden(error.to_string()),
            CatalogError::Sync(sync) => ApiError::NotFound(sync.to_string()),
            CatalogError::Conflict(message) => ApiError::Conflict(message),
            CatalogError::Store(store) => ApiError::Registry(store.into()),
            CatalogError::Corrupt { .. } => ApiError::Internal(error.to_string()),
        }
    }
}
