//! The innermost handler: an authorized request, served by what its path addresses —
//! `/version`, `/metrics`, discovery, OpenAPI, a Kind's objects, the catalog, `/check` — and a
//! path no route serves answered 404 (or, when it is a registered API's discovery and the
//! caller may read discovery, with the API's own).

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use kayra_application::permitted::Permitted;

use crate::error::ApiError;
use crate::handlers::respond::json_response;
use crate::handlers::{self, Call};
use crate::middleware::authorization::Unrouted;
use crate::middleware::routing::Route;
use crate::routes::{QueryParameters, Target};
use crate::serve::Disconnect;
use crate::state::ApiState;
use crate::{catalog, check, discovery, media};

/// Serves one authorized request.
pub(crate) async fn serve(
    State(state): State<Arc<ApiState>>,
    request: Request,
) -> Result<Response, ApiError> {
    #[cfg(test)]
    crate::tests::fault(request.headers(), "handler");
    let (mut parts, body) = request.into_parts();
    let path = parts.uri.path().to_owned();
    if let Some(Unrouted { discovery }) = parts.extensions.remove::<Unrouted>() {
        return unrouted(&state, &path, discovery.is_some()).await;
    }
    let (Some(Route::Served(target)), Some(permitted), Some(QueryParameters(query))) = (
        parts.extensions.remove::<Route>(),
        parts.extensions.remove::<Permitted>(),
        parts.extensions.remove::<QueryParameters>(),
    ) else {
        return Err(ApiError::Internal("a request reached its handler without its authorization".to_owned()));
    };
    let body = axum::body::to_bytes(body, usize::MAX)
        .await
        .map_err(|error| ApiError::BadRequest(format!("the request body could not be read: {error}")))?;
    let read_only = |response: Response| -> Result<Response, ApiError> {
        if parts.method == Method::GET || parts.method == Method::HEAD {
            Ok(response)
        } else {
            Err(ApiError::MethodNotAllowed)
        }
    };
    match target {
        Target::Health => Ok((StatusCode::OK, "ok").into_response()),
        Target::Issuer(document) => Ok(crate::issuer::serve(&state, document, &parts.method).await),
        Target::Version => read_only(json(discovery::version())),
        Target::Metrics => read_only(metrics(&state)),
        Target::Api => read_only(discovery_response(&state, &parts.headers, true, &[])?),
        Target::Apis => {
            let registered = catalog::registered_apis(&state).await;
            read_only(discovery_response(&state, &parts.headers, false, &registered)?)
        }
        Target::GroupVersion(group, version) => {
            read_only(json(discovery::resource_list(state.scheme(), &group, &version)))
        }
        Target::Group(group) => read_only(json(discovery::group(state.scheme(), &group))),
        Target::OpenApiRoot => read_only(json(state.openapi.root())),
        Target::OpenApi(group, version) => {
            let document = state.openapi.get(&group, &version).ok_or_else(|| {
                ApiError::NotFound("the server could not find the requested resource".to_owned())
            })?;
            let mut response = Response::new(Body::from(document.to_vec()));
            response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
            if parts.uri.query().is_some_and(|q| q.contains("hash=")) {
                response
                    .headers_mut()
                    .insert(header::CACHE_CONTROL, HeaderValue::from_static("public, immutable"));
            }
            read_only(response)
        }
        Target::Resource(_) => {
            let target = permitted.kind_target().ok_or_else(|| {
                ApiError::Internal("a resource request was authorized as something else".to_owned())
            })?;
            // A stream to a process upgrades the connection: its handler takes the request's parts.
            if target.subresource.as_deref().is_some_and(|sub| kayra_api::scheme::STREAMS.contains(&sub)) {
                return handlers::streams::serve(&state, &permitted, &mut parts).await;
            }
            let disconnect = parts.extensions.get::<Disconnect>().cloned();
            let call = Call {
                state: &state,
                permitted: &permitted,
                target,
                query: &query,
                headers: &parts.headers,
                body: &body,
                disconnect,
            };
            handlers::serve(call).await
        }
        Target::Catalog(_) => catalog::serve(&state, &permitted, &query, &parts.headers, &body).await,
        Target::Check => check::serve(&state, &permitted, &body).await,
        Target::NodeLog { .. } => handlers::logs::serve_agent(&state, &permitted, &query).await,
        Target::SessionLog { .. } => handlers::logs::serve_forwarded(&state, &permitted, &query).await,
        Target::SessionStream { .. } => {
            handlers::streams::serve_forwarded(&state, &permitted, &mut parts).await
        }
        Target::SessionUsage { .. } => handlers::usage::serve_held(&permitted).await,
    }
}

/// A path no route serves: a registered API's discovery when the caller may read discovery, a
/// 404 saying where a registered API is served, else a plain 404.
async fn unrouted(state: &ApiState, path: &str, may_discover: bool) -> Result<Response, ApiError> {
    if may_discover && let Some(found) = catalog::registered_discovery(state, path).await {
        return Ok(found);
    }
    if let Some(elsewhere) = catalog::served_elsewhere(state, path).await {
        return Err(elsewhere);
    }
    Err(ApiError::NotFound("the server could not find the requested resource".to_owned()))
}

/// The metrics registry in the OpenMetrics text format Prometheus scrapes.
fn metrics(state: &ApiState) -> Response {
    let mut text = String::new();
    if let Some(registry) = &state.metrics
        && let Err(error) = prometheus_client::encoding::text::encode(&mut text, registry)
    {
        tracing::error!(%error, "the metrics could not be encoded");
        return ApiError::Internal("the metrics could not be encoded".to_owned()).into_response();
    }
    let mut response = Response::new(Body::from(text));
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/openmetrics-text; version=1.0.0; charset=utf-8"),
    );
    response
}

fn json(value: serde_json::Value) -> Response {
    json_response(StatusCode::OK, &value, &[])
}

fn discovery_response(
    state: &ApiState,
    headers: &HeaderMap,
    core: bool,
    registered: &[discovery::RegisteredApi],
) -> Result<Response, ApiError> {
    match media::discovery(headers).ok_or(ApiError::NotAcceptable)? {
        media::Discovery::Aggregated(version) => {
            let mut response = json(discovery::aggregated(state.scheme(), core, version, registered));
            let content_type =
                format!("application/json;g=apidiscovery.k8s.io;v={version};as=APIGroupDiscoveryList");
            response
                .headers_mut()
                .insert(header::CONTENT_TYPE, HeaderValue::from_str(&content_type).expect("a valid header"));
            Ok(response)
        }
        media::Discovery::Legacy if core => Ok(json(discovery::api_versions(&state.server_address))),
        media::Discovery::Legacy => Ok(json(discovery::api_group_list(state.scheme(), registered))),
    }
}
