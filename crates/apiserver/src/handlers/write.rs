//! Writes: `POST` (create), `PUT` (update, of the object or its `status` or `approval`),
//! `PATCH` (a patch, or a server-side apply), `DELETE` of one object and of a collection. Each answers the object as written,
//! with a `Warning` header per unknown field dropped.

use axum::http::StatusCode;
use axum::response::Response;
use kayra_registry::Deleted;
use serde_json::{Value, json};

use super::{Call, body, options, respond};
use crate::error::ApiError;

/// `POST` to a collection.
pub(crate) async fn create(call: &Call<'_>) -> Result<Response, ApiError> {
    let options = options::write(call.query, call.headers)?;
    let object = body::object(&call.target.kind, call.headers, call.body)?;
    let written = call.permitted.create(object, &options).await?;
    Ok(respond::json_response(StatusCode::CREATED, &Value::Object(written.object), &written.warnings))
}

/// `PUT` of an object, its `status` or its `approval`.
pub(crate) async fn update(call: &Call<'_>) -> Result<Response, ApiError> {
    let options = options::write(call.query, call.headers)?;
    let object = body::object(&call.target.kind, call.headers, call.body)?;
    let written = call.permitted.update(object, &options).await?;
    Ok(respond::json_response(StatusCode::OK, &Value::Object(written.object), &written.warnings))
}

/// `PATCH` of an object, its `status` or its `approval`: a patch, or a server-side apply
/// (`201` when it created the object).
pub(crate) async fn patch(call: &Call<'_>) -> Result<Response, ApiError> {
    let options = options::write(call.query, call.headers)?;
    match body::patch(&call.target.kind, call.headers, call.body, true)? {
        body::Patch::Patch(kind, patch) => {
            let written = call.permitted.patch(kind, &patch, &options).await?;
            Ok(respond::json_response(StatusCode::OK, &Value::Object(written.object), &written.warnings))
        }
        body::Patch::Apply(config) => {
            let applied = call.permitted.apply(config, &options).await?;
            let code = if applied.created { StatusCode::CREATED } else { StatusCode::OK };
            Ok(respond::json_response(code, &Value::Object(applied.object), &applied.warnings))
        }
    }
}

/// `DELETE` of an object: the object as it was, or as marked for deletion while its finalizers
/// remain.
pub(crate) async fn delete(call: &Call<'_>) -> Result<Response, ApiError> {
    let options = options::delete(call.query, call.body)?;
    let object = match call.permitted.delete(&options).await? {
        Deleted::Gone(object) | Deleted::Pending(object) => object,
    };
    Ok(respond::json_response(StatusCode::OK, &Value::Object(object), &[]))
}

/// `DELETE` of a collection: the list of what was deleted.
pub(crate) async fn delete_collection(call: &Call<'_>) -> Result<Response, ApiError> {
    let options = options::delete(call.query, call.body)?;
    let selection = options::list(call.query)?;
    let deleted = call.permitted.delete_collection(&selection, &options).await?;
    let kind = &call.target.kind;
    let body = json!({
        "apiVersion": kind.api_version(), "kind": format!("{}List", kind.kind),
        "metadata": {"resourceVersion": deleted.resource_version}, "items": deleted.items,
    });
    Ok(respond::json_response(StatusCode::OK, &body, &[]))
}
