//! History, rollback and the doors:
//!
//! - `GET .../<resource>/<name>/history`: the object's last spec states, a core `v1` List of
//!   Revisions, or a Table of them (REVISION, GENERATION, AGE, USER, CHANGE-CAUSE);
//! - `POST .../<resource>/<name>/rollback` with a `RollbackRequest` (`{"toRevision": "<rv>"}`;
//!   `0` or nothing for the previous spec): answered with the object written (`200`);
//! - `POST .../<resource>/<name>/freeze` and `/thaw`, with no body (or `{}`): answered with the
//!   object written (`200`).
//!
//! Each honours `dryRun=All`.

use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{Value, json};

use super::{Call, options, respond};
use crate::error::ApiError;
use crate::media::{self, Output};
use crate::table;

/// The object's history, as JSON or a Table.
pub(crate) async fn history(call: &Call<'_>) -> Result<Response, ApiError> {
    let output = media::output(call.headers).ok_or(ApiError::NotAcceptable)?;
    let revisions = call.permitted.history().await?;
    let metadata = json!({"resourceVersion": revisions.resource_version});
    let body = match output {
        Output::Json => {
            json!({"apiVersion": "v1", "kind": "List", "metadata": metadata, "items": revisions.items})
        }
        Output::Table(version) => table::render_columns(
            kayra_api::kinds::revision::COLUMNS,
            &revisions.items,
            metadata,
            version,
            call.query.get("includeObject").map(String::as_str),
            true,
        ),
    };
    Ok(respond::json_response(StatusCode::OK, &body, &[]))
}

/// Writes a revision of the history again.
pub(crate) async fn rollback(call: &Call<'_>) -> Result<Response, ApiError> {
    let request = body(call, "RollbackRequest")?;
    let written = call.permitted.rollback(&request, options::dry_run(call.query)?).await?;
    Ok(respond::json_response(StatusCode::OK, &Value::Object(written), &[]))
}

/// Freezes the object.
pub(crate) async fn freeze(call: &Call<'_>) -> Result<Response, ApiError> {
    body(call, "request to freeze")?;
    let written = call.permitted.freeze(options::dry_run(call.query)?).await?;
    Ok(respond::json_response(StatusCode::OK, &Value::Object(written), &[]))
}

/// Thaws the object.
pub(crate) async fn thaw(call: &Call<'_>) -> Result<Response, ApiError> {
    body(call, "request to thaw")?;
    let written = call.permitted.thaw(options::dry_run(call.query)?).await?;
    Ok(respond::json_response(StatusCode::OK, &Value::Object(written), &[]))
}

/// The request's JSON body; an empty one is `{}`.
fn body(call: &Call<'_>, what: &str) -> Result<Value, ApiError> {
    let bad = |error: String| ApiError::BadRequest(format!("the body is not a {what}: {error}"));
    match media::body(call.headers) {
        _ if call.body.is_empty() => Ok(json!({})),
        media::Body::Protobuf => Err(bad("send it as JSON".to_owned())),
        _ => {
            let value: Value = serde_json::from_slice(call.body).map_err(|error| bad(error.to_string()))?;
            if value.is_object() { Ok(value) } else { Err(bad("it is not a JSON object".to_owned())) }
        }
    }
}
