//! `GET` of one object and of a collection, as JSON or as a Table (`kubectl get`). A JSON list
//! streams the watch cache's shared encodings of its items when it can.

use axum::http::StatusCode;
use axum::response::Response;
use bytes::Bytes;

use super::{Call, options, respond};
use crate::error::ApiError;
use crate::media::{self, Output};
use crate::table;

/// One object.
pub(crate) async fn get(call: &Call<'_>) -> Result<Response, ApiError> {
    let output = media::output(call.headers).ok_or(ApiError::NotAcceptable)?;
    let resource_version = call.query.get("resourceVersion").map(String::as_str);
    if output == Output::Json {
        let json = call.permitted.get_json(resource_version).await?;
        return Ok(respond::json_bytes(StatusCode::OK, json));
    }
    let object = call.permitted.get(resource_version).await?;
    Ok(respond::json_response(
        StatusCode::OK,
        &respond::one(&call.target.kind, object, output, call.query),
        &[],
    ))
}

/// One page of a collection.
pub(crate) async fn list(call: &Call<'_>) -> Result<Response, ApiError> {
    let output = media::output(call.headers).ok_or(ApiError::NotAcceptable)?;
    let options = options::list(call.query)?;
    let kind = &call.target.kind;
    match output {
        Output::Json => {
            let list = call.permitted.list_json(&options).await?;
            let metadata = respond::list_metadata(
                &list.resource_version,
                list.continue_token.as_deref(),
                list.remaining_item_count,
            );
            Ok(respond::list(kind, metadata, list.items))
        }
        Output::Table(version) => {
            let list = call.permitted.list(&options).await?;
            let metadata = respond::list_metadata(
                &list.resource_version,
                list.continue_token.as_deref(),
                list.remaining_item_count,
            );
            let include = call.query.get("includeObject").map(String::as_str);
            let body = table::render(kind, &list.items, metadata, version, include, true);
            Ok(respond::json_response(StatusCode::OK, &body, &[]))
        }
    }
}

/// An object's JSON, as `serde_json` writes it.
pub(crate) fn encode(object: &kayra_registry::Object) -> Bytes {
    Bytes::from(serde_json::to_vec(object).expect("a JSON map always serializes"))
}
