//! `POST .../applications/<name>/binding` and `POST /api/v1/namespaces/<ns>/pods/<name>/binding`:
//! a `v1` Binding that places an Application on a Node and marks it `Scheduled` in one write,
//! what a scheduler sends. The rules are `kayra_application::binding`'s; this adapter only parses
//! and answers, with a success Status and `201` as Kubernetes does.

use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use bytes::Bytes;
use kayra_authn::Identity;
use serde_json::{Value, json};

use crate::error::ApiError;
use crate::handlers::json_response;
use crate::routes::ResourcePath;
use crate::state::ApiState;

/// Serves one binding; the caller has been authorized for `create` on the `binding`
/// subresource of `path`'s resource.
pub(crate) async fn serve(
    state: &ApiState,
    identity: &Identity,
    path: &ResourcePath<'_>,
    dry_run: bool,
    headers: &HeaderMap,
    body: &Bytes,
) -> Result<Response, ApiError> {
    let (Some(namespace), Some(name)) = (path.namespace.as_deref(), path.name.as_deref()) else {
        return Err(ApiError::NotFound("the server could not find the requested resource".to_owned()));
    };
    let not_a_binding = |error: String| ApiError::BadRequest(format!("the body is not a Binding: {error}"));
    let binding: Value = match crate::media::body(headers) {
        crate::media::Body::Protobuf => return Err(not_a_binding("send it as JSON".to_owned())),
        _ => serde_json::from_slice(body).map_err(|error| not_a_binding(error.to_string()))?,
    };
    kayra_application::binding::bind(state.control(), identity, namespace, name, &binding, dry_run)
        .await
        .map_err(|error| match error {
            kayra_registry::RegistryError::NotFound { .. } => {
                ApiError::NotFound(format!("{} \"{name}\" not found", path.kind.plural))
            }
            other => ApiError::Registry(other),
        })?;
    let success =
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201});
    Ok(json_response(StatusCode::CREATED, &success, &[]))
}
