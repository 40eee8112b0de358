//! The API catalog over HTTP: `catalog.<domain>/v1` registrations (with their `sync`, `status`
//! and `openapi.json`) and namespaced subscriptions, in the flat snake_case JSON the catalog's
//! users write, with `apiVersion`, `kind` and `metadata` added to what is returned. Every
//! request is decided by RBAC like any other resource request; the stored OpenAPI documents are
//! readable by every authenticated caller through the bootstrap `system:basic-user` role.

use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::Response;
use kayra_authn::Identity;
use kayra_catalog::{Catalog, CatalogError, Stored, Subscription, SyncRequest};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use kayra_registry::Object;

use crate::error::ApiError;
use crate::handlers::json_response;
use crate::media::{self, Output};
use crate::routes::CatalogPath;
use crate::state::ApiState;
use crate::table;

/// Serves one catalog request.
pub(crate) async fn serve(
    state: &ApiState,
    identity: &Identity,
    method: &Method,
    path: CatalogPath,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<Response, ApiError> {
    let catalog = state
        .catalog
        .as_deref()
        .ok_or_else(|| ApiError::NotFound("this instance serves no API catalog".to_owned()))?;
    let verb = verb(method, &path)?;
    authorize(state, identity, verb, &path)?;
    let group = format!("catalog.{}", state.scheme.domain());
    let kind = state.scheme.find(&group, "v1", path.plural).expect("the scheme serves the catalog's Kinds");
    let output = media::output(headers).ok_or(ApiError::NotAcceptable)?;
    let list = |kind_name: &str, items: Vec<Value>| match output {
        Output::Table(version) => {
            let objects: Vec<Object> = items
                .into_iter()
                .filter_map(|item| match item {
                    Value::Object(object) => Some(object),
                    _ => None,
                })
                .collect();
            json_response(StatusCode::OK, &table::render(kind, &objects, json!({}), version, None, true), &[])
        }
        Output::Json => json_response(
            StatusCode::OK,
            &json!({"apiVersion": kind.api_version(), "kind": kind_name, "metadata": {}, "items": items}),
            &[],
        ),
    };
    let api_version = catalog.api_version();
    let name = path.name.as_deref();
    match (path.plural, path.namespace.as_deref(), name, path.subresource.as_deref(), verb) {
        ("apiregistrations", _, None, None, "list") => {
            let items = catalog.registrations().await.map_err(error)?;
            Ok(list(
                "ApiRegistrationList",
                items.iter().map(|r| r.to_json(&api_version, "ApiRegistration")).collect(),
            ))
        }
        ("apiregistrations", _, None, None, "create") => {
            let created = catalog.create_registration(decode(body)?).await.map_err(error)?;
            Ok(one(StatusCode::CREATED, &api_version, "ApiRegistration", &created))
        }
        ("apiregistrations", _, Some(name), None, "get") => Ok(one(
            StatusCode::OK,
            &api_version,
            "ApiRegistration",
            &catalog.registration(name).await.map_err(error)?,
        )),
        ("apiregistrations", _, Some(name), None, "update") => {
            let changes: serde_json::Map<String, Value> = decode(body)?;
            let updated = catalog.update_registration(name, &changes).await.map_err(error)?;
            Ok(one(StatusCode::OK, &api_version, "ApiRegistration", &updated))
        }
        ("apiregistrations", _, Some(name), None, "delete") => {
            let deleted = catalog.delete_registration(name).await.map_err(error)?;
            Ok(one(StatusCode::OK, &api_version, "ApiRegistration", &deleted))
        }
        ("apiregistrations", _, Some(name), Some("sync"), "update") => {
            let request: SyncRequest =
                if body.iter().all(u8::is_ascii_whitespace) { SyncRequest::default() } else { decode(body)? };
            let synced = catalog.sync(name, &request).await.map_err(error)?;
            Ok(one(StatusCode::OK, &api_version, "ApiRegistration", &synced))
        }
        ("apiregistrations", _, Some(name), Some("status"), "get") => {
            let status = catalog.status(name).await.map_err(error)?;
            Ok(json_response(StatusCode::OK, &serde_json::to_value(status).unwrap_or(Value::Null), &[]))
        }
        ("apiregistrations", _, Some(name), Some("openapi.json"), "get") => openapi(catalog, name).await,
        ("subscriptions", namespace, None, None, "list") => {
            let items = catalog.all_subscriptions().await.map_err(error)?;
            let items = items
                .iter()
                .filter(|s| namespace.is_none_or(|namespace| s.object.namespace == namespace))
                .map(|s| s.to_json(&api_version, "Subscription"))
                .collect();
            Ok(list("SubscriptionList", items))
        }
        ("subscriptions", Some(namespace), None, None, "create") => {
            namespace_exists(state, namespace).await?;
            let created = catalog.subscribe(namespace, decode(body)?).await.map_err(error)?;
            Ok(one(StatusCode::CREATED, &api_version, "Subscription", &created))
        }
        ("subscriptions", Some(namespace), Some(name), None, "get") => Ok(one(
            StatusCode::OK,
            &api_version,
            "Subscription",
            &catalog.subscription(namespace, name).await.map_err(error)?,
        )),
        ("subscriptions", Some(namespace), Some(name), None, "update") => {
            let body: Subscription = decode(body)?;
            let updated = catalog.set_active(namespace, name, body.active).await.map_err(error)?;
            Ok(one(StatusCode::OK, &api_version, "Subscription", &updated))
        }
        ("subscriptions", Some(namespace), Some(name), None, "delete") => {
            let deleted = catalog.unsubscribe(namespace, name).await.map_err(error)?;
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
    let mut apis = Vec::with_capacity(registrations.len());
    for registration in registrations {
        let name = registration.object.name;
        let resources = match catalog.spec(&name).await {
            Ok(Some(spec)) => spec.resources,
            _ => Vec::new(),
        };
        let version = resources.first().map_or_else(|| "v1".to_owned(), |r| r.version.clone());
        let resources = resources.into_iter().filter(|r| r.version == version).collect();
        apis.push(crate::discovery::RegisteredApi { group: name, version, resources });
    }
    apis
}

/// The answer to a request for a registered API's resources, which Kayra does not serve: a
/// 404 naming the API and where it is served.
pub(crate) async fn served_elsewhere(state: &ApiState, path: &str) -> Option<ApiError> {
    let group = path.strip_prefix("/apis/")?.split('/').next()?;
    let catalog = state.catalog.as_deref()?;
    let owner = catalog.registration(group).await.ok()?.object.owner;
    let owner = if owner.is_empty() { String::new() } else { format!(" (owner: {owner})") };
    Some(ApiError::NotFound(format!(
        "the API {group} is registered in Kayra's catalog but served by its own service{owner}: send {path} through the gateway that routes /apis/{group}/, not to Kayra"
    )))
}

/// The RBAC verb of a catalog request.
fn verb(method: &Method, path: &CatalogPath) -> Result<&'static str, ApiError> {
    let verb = match (method, path.name.is_some(), path.subresource.as_deref()) {
        (&Method::GET, false, None) => "list",
        (&Method::GET, true, None | Some("status" | "openapi.json")) => "get",
        (&Method::POST, false, None) => "create",
        (&Method::PUT, true, None | Some("sync")) => "update",
        (&Method::DELETE, true, None) => "delete",
        _ => return Err(ApiError::MethodNotAllowed),
    };
    Ok(verb)
}

fn authorize(state: &ApiState, identity: &Identity, verb: &str, path: &CatalogPath) -> Result<(), ApiError> {
    let group = format!("catalog.{}", state.scheme.domain());
    let resource = match &path.subresource {
        Some(sub) => format!("{}/{sub}", path.plural),
        None => path.plural.to_owned(),
    };
    let action = kayra_authz::Action::Resource {
        verb: verb.to_owned(),
        api: group.clone(),
        resource: resource.clone(),
        namespace: path.namespace.clone(),
        name: path.name.clone(),
    };
    if state.allows(identity, &action) {
        return Ok(());
    }
    let subject = match &path.name {
        Some(name) => format!("{}.{group} \"{name}\" is forbidden", path.plural),
        None => format!("{}.{group} is forbidden", path.plural),
    };
    let scope = match &path.namespace {
        Some(namespace) => format!(" in the namespace \"{namespace}\""),
        None => " at the cluster scope".to_owned(),
    };
    Err(ApiError::Forbidden(format!(
        "{subject}: User \"{}\" cannot {verb} resource \"{resource}\" in API group \"{group}\"{scope}",
        identity.user
    )))
}

/// A stored document, byte for byte.
async fn openapi(catalog: &Catalog, name: &str) -> Result<Response, ApiError> {
    catalog.registration(name).await.map_err(error)?;
    let spec = catalog.spec(name).await.map_err(error)?.ok_or_else(|| {
        ApiError::NotFound(format!(
            "no OpenAPI document has been fetched for {name} yet; it is fetched on its next sync"
        ))
    })?;
    let mut response = Response::new(Body::from(spec.document));
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    Ok(response)
}

async fn namespace_exists(state: &ApiState, namespace: &str) -> Result<(), ApiError> {
    let kind = state.scheme.find("", "v1", "namespaces").expect("the scheme serves namespaces");
    state.registry.get(state.resource(kind), None, namespace).await?;
    Ok(())
}

/// Decodes a body. What kubectl sends carries the name in `metadata.name`: when the flat
/// field (`name` for a registration, `api` for a subscription) is absent, it is taken from there.
fn decode<T: DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    let invalid =
        |error: serde_json::Error| ApiError::BadRequest(format!("the request body is not valid: {error}"));
    let mut value: Value = serde_json::from_slice(body).map_err(invalid)?;
    if let Some(name) = value.pointer("/metadata/name").and_then(Value::as_str).map(str::to_owned)
        && let Some(object) = value.as_object_mut()
    {
        let field =
            if object.get("kind").and_then(Value::as_str) == Some("Subscription") { "api" } else { "name" };
        object.entry(field).or_insert(Value::String(name));
    }
    serde_json::from_value(value).map_err(invalid)
}

fn one<T: Serialize>(code: StatusCode, api_version: &str, kind: &str, stored: &Stored<T>) -> Response {
    json_response(code, &stored.to_json(api_version, kind), &[])
}

fn error(error: CatalogError) -> ApiError {
    match error {
        CatalogError::Invalid(_) => ApiError::BadRequest(error.to_string()),
        CatalogError::NotFound(message) => ApiError::NotFound(message),
        CatalogError::Sync(sync) => ApiError::NotFound(sync.to_string()),
        CatalogError::Conflict(message) => ApiError::Conflict(message),
        CatalogError::Store(store) => ApiError::Registry(store.into()),
        CatalogError::Corrupt { .. } => ApiError::Internal(error.to_string()),
    }
}
