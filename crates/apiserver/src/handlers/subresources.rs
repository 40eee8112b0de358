//! The subresources that are operations of their own:
//!
//! - `POST .../applications/<name>/binding` and `/api/v1/namespaces/<ns>/pods/<name>/binding`:
//!   a `v1` Binding that places an Application on a Node and marks it `Scheduled`, what a
//!   scheduler sends; answered with a success Status and `201`, as Kubernetes does;
//! - `POST /api/v1/namespaces/<ns>/pods/<name>/eviction`: a `policy/v1` Eviction, what
//!   `kubectl drain` sends for each pod on the node it drains. One the scheduler placed is
//!   unbound and placed again (`201`); one its author pinned cannot move, which Kubernetes
//!   knows as a pod whose disruption budget allows no disruption: `429 TooManyRequests` with
//!   Kubernetes' message, which `kubectl drain` reports and retries every five seconds until
//!   its `--timeout` (a `403` would end the drain at once, and the pin is no refusal of the
//!   caller's rights);
//! - `POST .../applications/<name>/token` and `/api/v1/namespaces/<ns>/pods/<name>/token`: an
//!   `authentication.k8s.io/v1` TokenRequest minting a service-account token for the
//!   Application, answered with the TokenRequest and its `status.token` (`201`);
//! - `GET|PUT|PATCH .../applicationsets/<name>/scale`: the set as an `autoscaling/v1` Scale,
//!   what `kubectl scale appset/<name> --replicas=N` reads and patches.

use axum::http::StatusCode;
use axum::response::Response;
use kayra_api::verb::Verb;
use kayra_application::eviction::Eviction;
use serde_json::{Value, json};

use super::{Call, options, respond};
use crate::error::ApiError;
use crate::media;

/// Kubernetes' refusal of an eviction that a disruption budget forbids.
pub(crate) const DISRUPTION_BUDGET: &str =
    "Cannot evict pod as it would violate the pod's disruption budget.";

/// Places the Application on the Binding's node.
pub(crate) async fn bind(call: &Call<'_>) -> Result<Response, ApiError> {
    let not_a_binding = |error: String| ApiError::BadRequest(format!("the body is not a Binding: {error}"));
    let binding: Value = match media::body(call.headers) {
        media::Body::Protobuf => return Err(not_a_binding("send it as JSON".to_owned())),
        _ => serde_json::from_slice(call.body).map_err(|error| not_a_binding(error.to_string()))?,
    };
    call.permitted.bind(&binding, options::dry_run(call.query)?).await?;
    Ok(respond::success(StatusCode::CREATED))
}

/// Mints a service-account token for the Application (or the Application a Pod views) as
/// the TokenRequest asks; answers the TokenRequest with the token in its status.
pub(crate) async fn token(call: &Call<'_>) -> Result<Response, ApiError> {
    let not_a_request =
        |error: String| ApiError::BadRequest(format!("the body is not a TokenRequest: {error}"));
    let request: Value = match media::body(call.headers) {
        _ if call.body.is_empty() => json!({}),
        media::Body::Protobuf => return Err(not_a_request("send it as JSON".to_owned())),
        _ => serde_json::from_slice(call.body).map_err(|error| not_a_request(error.to_string()))?,
    };
    let answered = call.permitted.token_request(&request).await?;
    Ok(respond::json_response(StatusCode::CREATED, &answered, &[]))
}

/// Evicts the Pod: moved, or refused as a disruption budget refuses it.
pub(crate) async fn evict(call: &Call<'_>) -> Result<Response, ApiError> {
    let not_an_eviction =
        |error: String| ApiError::BadRequest(format!("the body is not an Eviction: {error}"));
    let eviction: Value = match media::body(call.headers) {
        _ if call.body.is_empty() => json!({}),
        media::Body::Protobuf => crate::protobuf::decode(call.body).map_err(not_an_eviction)?,
        _ => serde_json::from_slice(call.body).map_err(|error| not_an_eviction(error.to_string()))?,
    };
    match call.permitted.evict(&eviction, options::dry_run(call.query)?).await? {
        Eviction::Evicted { .. } => Ok(respond::success(StatusCode::CREATED)),
        Eviction::Refused { node } => {
            let name = call.target.name.as_deref().unwrap_or_default();
            Err(ApiError::TooManyRequests(format!(
                "{DISRUPTION_BUDGET} Application \"{name}\" is pinned to node \"{node}\" by its author \
                 (spec.placement.nodeName, not placed by the scheduler): it moves only when its author clears or changes the pin."
            )))
        }
    }
}

/// Reads, replaces or patches the set's Scale.
pub(crate) async fn scale(call: &Call<'_>) -> Result<Response, ApiError> {
    let permitted = call.permitted;
    let scale = match permitted.request().verb {
        Verb::Get => permitted.scale().await?,
        Verb::Update => {
            let scale: Value = serde_json::from_slice(call.body)
                .map_err(|error| ApiError::BadRequest(format!("the body is not a Scale: {error}")))?;
            permitted.update_scale(&scale, &options::write(call.query, call.headers)?).await?
        }
        Verb::Patch => match super::body::patch(&call.target.kind, call.headers, call.body, false)? {
            super::body::Patch::Patch(kind, patch) => {
                permitted.patch_scale(kind, &patch, &options::write(call.query, call.headers)?).await?
            }
            super::body::Patch::Apply(_) => {
                return Err(ApiError::UnsupportedMediaType("a Scale takes no server-side apply".to_owned()));
            }
        },
        _ => return Err(ApiError::MethodNotAllowed),
    };
    Ok(respond::json_response(StatusCode::OK, &scale, &[]))
}
