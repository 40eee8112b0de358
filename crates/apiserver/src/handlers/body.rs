//! Request bodies in the media types kubectl sends: an object as JSON or in the protobuf
//! envelope of its typed clients, and a patch as a JSON merge patch, a JSON patch, a
//! server-side apply's configuration (YAML or JSON) or (on the builtin-shaped Kinds) a
//! strategic merge patch.

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

/// What a PATCH sends.
pub(crate) enum Patch {
    /// A patch the registry applies to the object: merge or JSON, or a strategic merge patch
    /// turned into a merge patch.
    Patch(PatchKind, Vec<u8>),
    /// A server-side apply's configuration (`application/apply-patch+yaml`, in YAML or JSON).
    Apply(Value),
}

/// The patch a PATCH sends, in the formats `kind` takes (an apply only where `apply` says
/// the target takes one); any other answers 415 listing those it takes.
pub(crate) fn patch(
    kind: &KindInfo,
    headers: &HeaderMap,
    body: &[u8],
    apply: bool,
) -> Result<Patch, ApiError> {
    let mut accepted = vec!["application/json-patch+json", "application/merge-patch+json"];
    if apply {
        accepted.push("application/apply-patch+yaml");
    }
    if kind.builtin {
        accepted.push("application/strategic-merge-patch+json");
    }
    match media::body(headers) {
        media::Body::MergePatch => Ok(Patch::Patch(PatchKind::Merge, body.to_vec())),
        media::Body::JsonPatch => Ok(Patch::Patch(PatchKind::Json, body.to_vec())),
        media::Body::StrategicMergePatch if kind.builtin => {
            let patch: Value = serde_json::from_slice(body)
                .map_err(|e| ApiError::BadRequest(format!("the patch is not valid JSON: {e}")))?;
            let merge = serde_json::to_vec(&strip_directives(patch)).expect("JSON serialises");
            Ok(Patch::Patch(PatchKind::Merge, merge))
        }
        media::Body::ApplyPatch if apply => Ok(Patch::Apply(configuration(body)?)),
        _ => Err(ApiError::UnsupportedMediaType(format!(
            "the body of the request was in an unknown format - accepted media types include: {}",
            accepted.join(", ")
        ))),
    }
}

/// An apply's configuration: JSON (what kubectl and client-go send), else YAML.
fn configuration(body: &[u8]) -> Result<Value, ApiError> {
    if let Ok(json) = serde_json::from_slice(body) {
        return Ok(json);
    }
    let text = std::str::from_utf8(body)
        .map_err(|_| ApiError::BadRequest("error decoding YAML: the body is not UTF-8".to_owned()))?;
    serde_saphyr::from_str(text)
        .map_err(|error| ApiError::BadRequest(format!("error decoding YAML: {error}")))
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
