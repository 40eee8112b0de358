//! What a request's query (and a delete's body) asks, read into the application layer's
//! options: `dryRun`, `fieldValidation`, `fieldManager` (or the `User-Agent`), `force`, list
//! and watch selectors and versions, and `DeleteOptions` with its preconditions and
//! propagation policy.

use axum::http::HeaderMap;
use axum::http::header::USER_AGENT;
use kayra_application::options::{DeleteRequest, FieldValidation, WriteRequest};
use kayra_registry::{ListOptions, WatchOptions};
use serde_json::{Value, json};

use crate::error::ApiError;
use crate::routes::Query;

/// `dryRun`: `All`, or nothing.
pub(crate) fn dry_run(query: &Query) -> Result<bool, ApiError> {
    match query.get("dryRun").map(String::as_str) {
        None | Some("") => Ok(false),
        Some("All") => Ok(true),
        Some(other) => Err(ApiError::BadRequest(format!(
            "dryRun: Unsupported value: \"{other}\": supported values: \"All\""
        ))),
    }
}

/// What a create, update, patch or apply asks beyond its object: the query's `dryRun`,
/// `fieldValidation`, `fieldManager` and `force`, and the client's `User-Agent`.
pub(crate) fn write(query: &Query, headers: &HeaderMap) -> Result<WriteRequest, ApiError> {
    let force = match query.get("force").map(String::as_str) {
        None | Some("" | "false") => false,
        Some("true") => true,
        Some(other) => return Err(ApiError::BadRequest(format!("force: invalid boolean {other:?}"))),
    };
    Ok(WriteRequest {
        dry_run: dry_run(query)?,
        field_validation: FieldValidation::parse(query.get("fieldValidation").map_or("", String::as_str))?,
        field_manager: query.get("fieldManager").cloned(),
        user_agent: headers.get(USER_AGENT).and_then(|agent| agent.to_str().ok()).map(str::to_owned),
        force,
    })
}

/// A list's selectors, page and version.
pub(crate) fn list(query: &Query) -> Result<ListOptions, ApiError> {
    Ok(ListOptions {
        label_selector: query.get("labelSelector").cloned(),
        field_selector: query.get("fieldSelector").cloned(),
        limit: query
            .get("limit")
            .map(|limit| limit.parse::<usize>())
            .transpose()
            .map_err(|_| ApiError::BadRequest("limit must be a number".into()))?,
        continue_token: query.get("continue").cloned(),
        resource_version: query.get("resourceVersion").cloned(),
        resource_version_match: query.get("resourceVersionMatch").cloned(),
    })
}

/// A watch's selectors and the version it starts after (the namespace is the request's).
pub(crate) fn watch(query: &Query) -> WatchOptions {
    WatchOptions {
        namespace: None,
        label_selector: query.get("labelSelector").cloned(),
        field_selector: query.get("fieldSelector").cloned(),
        resource_version: query.get("resourceVersion").cloned(),
    }
}

/// A delete's options, from the query and the `DeleteOptions` body.
pub(crate) fn delete(query: &Query, body: &[u8]) -> Result<DeleteRequest, ApiError> {
    let body: Value = if body.iter().all(u8::is_ascii_whitespace) {
        json!({})
    } else {
        serde_json::from_slice(body)
            .map_err(|e| ApiError::BadRequest(format!("the DeleteOptions body is not valid JSON: {e}")))?
    };
    let text = |value: Option<&Value>| value.and_then(Value::as_str).map(str::to_owned);
    let dry_run_body =
        body.get("dryRun").and_then(Value::as_array).is_some_and(|list| list.iter().any(|v| v == "All"));
    let grace =
        match (body.get("gracePeriodSeconds").and_then(Value::as_i64), query.get("gracePeriodSeconds")) {
            (Some(seconds), _) => Some(seconds),
            (None, Some(text)) => Some(
                text.parse()
                    .map_err(|_| ApiError::BadRequest("gracePeriodSeconds must be a number".into()))?,
            ),
            (None, None) => None,
        };
    let policy = text(body.get("propagationPolicy")).or_else(|| query.get("propagationPolicy").cloned());
    // The deprecated `orphanDependents` says the same as a policy, and may not contradict one.
    let orphan = match (body.get("orphanDependents").and_then(Value::as_bool), query.get("orphanDependents"))
    {
        (Some(orphan), _) => Some(orphan),
        (None, Some(text)) => Some(text == "true"),
        (None, None) => None,
    };
    let propagation_policy = match (policy, orphan) {
        (Some(_), Some(_)) => {
            return Err(ApiError::BadRequest(
                "orphanDependents and propagationPolicy may not both be set; use propagationPolicy".into(),
            ));
        }
        (Some(policy), None) => Some(policy),
        (None, Some(true)) => Some("Orphan".to_owned()),
        (None, Some(false)) => Some("Background".to_owned()),
        (None, None) => None,
    };
    Ok(DeleteRequest {
        uid: text(body.pointer("/preconditions/uid")),
        resource_version: text(body.pointer("/preconditions/resourceVersion")),
        propagation_policy,
        grace_period_seconds: grace,
        dry_run: dry_run_body || dry_run(query)?,
    })
}
