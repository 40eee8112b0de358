//! What workloads and nodes consume, as the application layer reads it from the nodes' usage
//! samples: an Application's `metrics` subresource (`ApplicationMetrics`) and the
//! `metrics.k8s.io/v1beta1` NodeMetrics and PodMetrics `kubectl top` reads, as JSON or a Table.

use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{Value, json};

use kayra_application::permitted::Permitted;

use super::{Call, respond};
use crate::error::ApiError;
use crate::media::{self, Output};
use crate::table;

/// `GET /apis/fleet.<domain>/v1/sessionusage`: the samples of the sessions this replica holds,
/// for the replica that asked (never read through another).
pub(crate) async fn serve_held(permitted: &Permitted) -> Result<Response, ApiError> {
    let held = permitted.session_usage().await?;
    Ok(respond::json_response(StatusCode::OK, &json!({"samples": held}), &[]))
}

/// `GET .../applications/<name>/metrics`.
pub(crate) async fn application(call: &Call<'_>) -> Result<Response, ApiError> {
    let metrics = call.permitted.application_metrics().await?;
    Ok(respond::json_response(StatusCode::OK, &metrics, &[]))
}

/// One NodeMetrics or PodMetrics.
pub(crate) async fn get(call: &Call<'_>) -> Result<Response, ApiError> {
    let output = media::output(call.headers).ok_or(ApiError::NotAcceptable)?;
    let Value::Object(reading) = call.permitted.usage().await? else {
        return Err(ApiError::Internal("a usage reading is not an object".to_owned()));
    };
    Ok(respond::json_response(
        StatusCode::OK,
        &respond::one(&call.target.kind, reading, output, call.query),
        &[],
    ))
}

/// Every NodeMetrics or PodMetrics the request addresses, selected by label.
pub(crate) async fn list(call: &Call<'_>) -> Result<Response, ApiError> {
    let output = media::output(call.headers).ok_or(ApiError::NotAcceptable)?;
    if call.query.get("fieldSelector").is_some_and(|selector| !selector.is_empty()) {
        return Err(ApiError::BadRequest(format!(
            "{} select by label only: a field selector does not apply",
            call.target.kind.plural
        )));
    }
    let selector = call.query.get("labelSelector").map(String::as_str);
    let list = call.permitted.usage_list(selector).await?;
    match output {
        Output::Json => Ok(respond::json_response(StatusCode::OK, &list, &[])),
        Output::Table(version) => {
            let items: Vec<_> = list
                .get("items")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|item| item.as_object().cloned())
                .collect();
            let include = call.query.get("includeObject").map(String::as_str);
            let body = table::render(&call.target.kind, &items, json!({}), version, include, true);
            Ok(respond::json_response(StatusCode::OK, &body, &[]))
        }
    }
}
