//! Request bodies in the media types kubectl sends: an object as JSON or in the protobuf
//! envelope of its typed clients, and a patch as a JSON merge patch, a JSON patch or (on the
//! builtin-shaped Kinds) a strategic merge patch.

use axum::http::HeaderMap;
use kayra_api::scheme::KindInfo;
use kayra_application::permitted::write::cannot_handle;
use kayra_registry::PatchKind;
use serde_json::Value;

use crate::error::ApiError;
use crate::media;

/// The object a create, update or review sends.
pub(crate) fn object(kind: &KindInfo, headers: &HeaderMap, body: &[u8]) -> Result<Value, ApiError> {
    match media::body(headers) {
        media::Body::Json => {
            serde_json::from_slice(body).map_err(|e| cannot_handle(kind, &e.to_string()).into())
        }
        media::Body::Protobuf => crate::protobuf::decode(body).map_err(|e| cannot_handle(kind, &e).into()),
        other => Err(ApiError::UnsupportedMediaType(format!(
            "the body of the request was in an unknown format ({other:?}) - accepted media types include: application/json, application/vnd.kubernetes.protobuf"
        ))),
    }
}

/// The patch format of a PATCH, turned into one the registry applies.
pub(crate) fn patch(
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
