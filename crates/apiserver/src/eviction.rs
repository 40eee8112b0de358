//! `POST /api/v1/namespaces/<ns>/pods/<name>/eviction`: a `policy/v1` Eviction, what `kubectl
//! drain` sends for each pod on the node it drains.
//!
//! A Pod is a view of an Application. One the scheduler placed is unbound (and so stopped on
//! its node and placed again): `201` with a success Status, as Kubernetes answers. One its
//! author pinned cannot move, which Kubernetes knows as a pod whose disruption budget allows no
//! disruption: `429 TooManyRequests` with Kubernetes' message, which `kubectl drain` reports
//! and retries every five seconds until its `--timeout` (as it does for a budget), so that a
//! pin its author clears meanwhile lets the drain finish. A `403` would end the drain at once,
//! and the pin is no refusal of the caller's rights.

use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use bytes::Bytes;
use kayra_application::eviction::Eviction;
use serde_json::{Value, json};

use crate::error::ApiError;
use crate::handlers::json_response;
use crate::routes::ResourcePath;
use crate::state::ApiState;

/// Kubernetes' refusal of an eviction that a disruption budget forbids.
pub(crate) const DISRUPTION_BUDGET: &str =
    "Cannot evict pod as it would violate the pod's disruption budget.";

/// Serves one eviction; the caller has been authorized for `create pods/eviction`.
pub(crate) async fn serve(
    state: &ApiState,
    path: &ResourcePath<'_>,
    dry_run_query: bool,
    headers: &HeaderMap,
    body: &Bytes,
) -> Result<Response, ApiError> {
    let (Some(namespace), Some(name)) = (path.namespace.as_deref(), path.name.as_deref()) else {
        return Err(ApiError::NotFound("the server could not find the requested resource".to_owned()));
    };
    let not_an_eviction =
        |error: String| ApiError::BadRequest(format!("the body is not an Eviction: {error}"));
    let eviction: Value = match crate::media::body(headers) {
        _ if body.is_empty() => json!({}),
        crate::media::Body::Protobuf => crate::protobuf::decode(body).map_err(not_an_eviction)?,
        _ => serde_json::from_slice(body).map_err(|error| not_an_eviction(error.to_string()))?,
    };
    if let Some(named) = eviction.pointer("/metadata/name").and_then(Value::as_str)
        && named != name
    {
        return Err(ApiError::BadRequest(format!(
            "name in URL does not match name in Eviction object: \"{name}\" and \"{named}\""
        )));
    }
    let dry_run = dry_run_query
        || eviction
            .pointer("/deleteOptions/dryRun")
            .and_then(Value::as_array)
            .is_some_and(|modes| modes.iter().any(|mode| mode == "All"));
    let decided = kayra_application::eviction::evict(state.control(), namespace, name, dry_run)
        .await
        .map_err(|error| match error {
            kayra_registry::RegistryError::NotFound { .. } => {
                ApiError::NotFound(format!("pods \"{name}\" not found"))
            }
            other => ApiError::Registry(other),
        })?;
    match decided {
        Eviction::Evicted { .. } => {
            let success = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201});
            Ok(json_response(StatusCode::CREATED, &success, &[]))
        }
        Eviction::Refused { node } => Err(ApiError::TooManyRequests(format!(
            "{DISRUPTION_BUDGET} Application \"{name}\" is pinned to node \"{node}\" by its author \
             (spec.placement.nodeName, not placed by the scheduler): it moves only when its author clears or changes the pin."
        ))),
    }
}
