//! `GET|PUT|PATCH /apis/fleet.<domain>/v1/namespaces/<ns>/applicationsets/<name>/scale`: the
//! set as an `autoscaling/v1` Scale, what `kubectl scale appset/<name> --replicas=N` reads and
//! patches. The rules are `kayra_application::scale`'s; this adapter only parses and answers.

use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use bytes::Bytes;
use kayra_authn::Identity;
use kayra_registry::PatchKind;
use serde_json::Value;

use crate::error::ApiError;
use crate::handlers::json_response;
use crate::routes::ResourcePath;
use crate::state::ApiState;

/// Serves one request to a set's scale; the caller has been authorized for `verb` on
/// `applicationsets/scale`.
pub(crate) async fn serve(
    state: &ApiState,
    identity: &Identity,
    verb: &str,
    path: &ResourcePath<'_>,
    dry_run: bool,
    headers: &HeaderMap,
    body: &Bytes,
) -> Result<Response, ApiError> {
    let (Some(namespace), Some(name)) = (path.namespace.as_deref(), path.name.as_deref()) else {
        return Err(ApiError::NotFound("the server could not find the requested resource".to_owned()));
    };
    let control = state.control();
    let not_found = |error: kayra_registry::RegistryError| match error {
        kayra_registry::RegistryError::NotFound { .. } => {
            ApiError::NotFound(format!("applicationsets.{} \"{name}\" not found", path.kind.group))
        }
        other => ApiError::Registry(other),
    };
    let scale = match verb {
        "get" => kayra_application::scale::read(control, namespace, name).await.map_err(not_found)?,
        "update" => {
            let scale: Value = serde_json::from_slice(body)
                .map_err(|error| ApiError::BadRequest(format!("the body is not a Scale: {error}")))?;
            kayra_application::scale::write(control, identity, namespace, name, &scale, dry_run)
                .await
                .map_err(not_found)?
        }
        "patch" => {
            let (patch_kind, patch) = crate::handlers::patch_body(path.kind, headers, body)?;
            let mut scale =
                kayra_application::scale::read(control, namespace, name).await.map_err(not_found)?;
            let bad = |error: String| {
                ApiError::BadRequest(format!("the patch does not apply to the Scale: {error}"))
            };
            match patch_kind {
                PatchKind::Merge => {
                    let patch: Value = serde_json::from_slice(&patch).map_err(|e| bad(e.to_string()))?;
                    json_patch::merge(&mut scale, &patch);
                }
                PatchKind::Json => {
                    let patch: json_patch::Patch =
                        serde_json::from_slice(&patch).map_err(|e| bad(e.to_string()))?;
                    json_patch::patch(&mut scale, &patch).map_err(|e| bad(e.to_string()))?;
                }
            }
            kayra_application::scale::write(control, identity, namespace, name, &scale, dry_run)
                .await
                .map_err(not_found)?
        }
        _ => return Err(ApiError::MethodNotAllowed),
    };
    Ok(json_response(StatusCode::OK, &scale, &[]))
}
