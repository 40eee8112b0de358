//! The one place errors become HTTP: every failure is a `metav1.Status` with the code and
//! `reason` Kubernetes uses, and a 5xx reveals nothing internal (the detail goes to the log).

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use kayra_registry::RegistryError;
use serde_json::{Value, json};

/// Everything a request can fail with.
#[derive(Debug)]
pub enum ApiError {
    /// No such route or object.
    NotFound(String),
    /// Wrong verb for the route.
    MethodNotAllowed,
    /// A malformed request.
    BadRequest(String),
    /// No identity.
    Unauthorized,
    /// An identity, but not allowed.
    Forbidden(String),
    /// Nothing in `Accept` can be served.
    NotAcceptable,
    /// The body's media type is not accepted here.
    UnsupportedMediaType(String),
    /// The body is larger than allowed.
    TooLarge,
    /// The request conflicts with what is stored.
    Conflict(String),
    /// What the registry answered.
    Registry(RegistryError),
    /// Too many requests of this kind are in flight; try again later.
    TooManyRequests(String),
    /// What the request needs is not reachable now (a node's session).
    Unavailable(String),
    /// A server fault; logged, never shown.
    Internal(String),
    /// A refusal an earlier layer decided, answered where refusals are answered.
    Refused(std::sync::Arc<ApiError>),
}

impl From<RegistryError> for ApiError {
    fn from(error: RegistryError) -> ApiError {
        ApiError::Registry(error)
    }
}

/// A `metav1.Status` failure body.
pub(crate) fn status(code: StatusCode, reason: &str, message: &str, details: Option<Value>) -> Value {
    let mut status = json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": message, "reason": reason, "code": code.as_u16(),
    });
    if let Some(details) = details {
        status["details"] = details;
    }
    status
}

/// Splits `plural.group` into group and plural for `details`.
fn resource_details(resource: &str, name: &str) -> Value {
    let (kind, group) = resource.split_once('.').unwrap_or((resource, ""));
    json!({"name": name, "group": group, "kind": kind})
}

impl ApiError {
    /// The status code, and the Status body.
    pub fn to_status(&self) -> (StatusCode, Value) {
        use RegistryError as R;
        let (code, reason, message, details) = match self {
            ApiError::Refused(refusal) => return refusal.to_status(),
            ApiError::NotFound(message) => (StatusCode::NOT_FOUND, "NotFound", message.clone(), Some(json!({}))),
            ApiError::MethodNotAllowed => (
                StatusCode::METHOD_NOT_ALLOWED,
                "MethodNotAllowed",
                "the server does not allow this method on the requested resource".to_owned(),
                Some(json!({})),
            ),
            ApiError::BadRequest(message) => (StatusCode::BAD_REQUEST, "BadRequest", message.clone(), None),
            ApiError::Unauthorized => (StatusCode::UNAUTHORIZED, "Unauthorized", "Unauthorized".to_owned(), None),
            ApiError::Forbidden(message) => (StatusCode::FORBIDDEN, "Forbidden", message.clone(), None),
            ApiError::NotAcceptable => (
                StatusCode::NOT_ACCEPTABLE,
                "NotAcceptable",
                "only the following media types are accepted: application/json, application/json;as=Table;v=v1;g=meta.k8s.io"
                    .to_owned(),
                None,
            ),
            ApiError::UnsupportedMediaType(message) => {
                (StatusCode::UNSUPPORTED_MEDIA_TYPE, "UnsupportedMediaType", message.clone(), None)
            }
            ApiError::TooLarge => (
                StatusCode::PAYLOAD_TOO_LARGE,
                "RequestEntityTooLarge",
                "the request body is larger than the server accepts (3 MiB)".to_owned(),
                None,
            ),
            ApiError::Conflict(message) => (StatusCode::CONFLICT, "Conflict", message.clone(), None),
            ApiError::TooManyRequests(message) => {
                (StatusCode::TOO_MANY_REQUESTS, "TooManyRequests", message.clone(), Some(json!({"retryAfterSeconds": 1})))
            }
            ApiError::Unavailable(message) => {
                (StatusCode::SERVICE_UNAVAILABLE, "ServiceUnavailable", message.clone(), None)
            }
            ApiError::Internal(detail) => {
                tracing::error!(%detail, "internal error");
                (StatusCode::INTERNAL_SERVER_ERROR, "InternalError", "Internal error occurred".to_owned(), None)
            }
            ApiError::Registry(error) => match error {
                R::NotFound { resource, name } => {
                    (StatusCode::NOT_FOUND, "NotFound", error.to_string(), Some(resource_details(resource, name)))
                }
                R::NotMeasured { resource, name, message } => {
                    (StatusCode::NOT_FOUND, "NotFound", message.clone(), Some(resource_details(resource, name)))
                }
                R::AlreadyExists { resource, name } => {
                    (StatusCode::CONFLICT, "AlreadyExists", error.to_string(), Some(resource_details(resource, name)))
                }
                R::Conflict { resource, name, .. } => {
                    (StatusCode::CONFLICT, "Conflict", error.to_string(), Some(resource_details(resource, name)))
                }
                R::Invalid { kind, name, causes } => {
                    let (kind_name, group) = kind.split_once('.').unwrap_or((kind, ""));
                    let causes: Vec<Value> = causes
                        .iter()
                        .map(|c| json!({"reason": c.reason, "message": c.message, "field": c.field}))
                        .collect();
                    let summary = causes_summary(error);
                    let message = format!("{kind} \"{name}\" is invalid: {summary}");
                    let details = json!({"name": name, "group": group, "kind": kind_name, "causes": causes});
                    (StatusCode::UNPROCESSABLE_ENTITY, "Invalid", message, Some(details))
                }
                R::ApplyConflict { message, causes } => {
                    // As kube-apiserver answers a conflicting apply: causes only, no name or kind.
                    let causes: Vec<Value> = causes
                        .iter()
                        .map(|(field, message)| json!({"type": "FieldManagerConflict", "message": message, "field": field}))
                        .collect();
                    (StatusCode::CONFLICT, "Conflict", message.clone(), Some(json!({"causes": causes})))
                }
                R::BadRequest(message) => (StatusCode::BAD_REQUEST, "BadRequest", message.clone(), None),
                R::Forbidden(message) => (StatusCode::FORBIDDEN, "Forbidden", message.clone(), None),
                R::Expired { message, .. } => (StatusCode::GONE, "Expired", message.clone(), None),
                R::TooLargeResourceVersion { .. } => (
                    StatusCode::GATEWAY_TIMEOUT,
                    "Timeout",
                    error.to_string(),
                    Some(json!({"causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}], "retryAfterSeconds": 1})),
                ),
                R::Store(kayra_store::StoreError::FutureRevision { requested, current }) => (
                    StatusCode::GATEWAY_TIMEOUT,
                    "Timeout",
                    format!("Too large resource version: {requested}, current: {current}"),
                    Some(json!({"causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}], "retryAfterSeconds": 1})),
                ),
                R::Store(kayra_store::StoreError::ValueTooLarge { limit, .. }) => (
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "RequestEntityTooLarge",
                    format!("the object is larger than the {limit} bytes the store accepts"),
                    None,
                ),
                R::Store(kayra_store::StoreError::InvalidArgument(message)) => {
                    (StatusCode::BAD_REQUEST, "BadRequest", message.clone(), None)
                }
                R::Store(kayra_store::StoreError::Compacted { requested, compacted }) => (
                    StatusCode::GONE,
                    "Expired",
                    format!("too old resource version: {requested} ({compacted})"),
                    None,
                ),
                R::Store(store) if store.is_retryable() => {
                    tracing::warn!(error = %store, "store unavailable");
                    (
                        StatusCode::SERVICE_UNAVAILABLE,
                        "ServiceUnavailable",
                        "the storage backend is unavailable; try again".to_owned(),
                        None,
                    )
                }
                R::Store(_) | R::Corrupt { .. } => {
                    tracing::error!(%error, "storage failure");
                    (StatusCode::INTERNAL_SERVER_ERROR, "InternalError", "Internal error occurred".to_owned(), None)
                }
            },
        };
        (code, status(code, reason, &message, details))
    }
}

fn causes_summary(error: &RegistryError) -> String {
    let RegistryError::Invalid { causes, .. } = error else { return String::new() };
    causes
        .iter()
        .map(|c| if c.field.is_empty() { c.message.clone() } else { format!("{}: {}", c.field, c.message) })
        .collect::<Vec<_>>()
        .join(", ")
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (code, body) = self.to_status();
        let mut response = (code, axum::Json(body)).into_response();
        if code == StatusCode::UNAUTHORIZED {
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer realm=\"kayra\""));
        }
        if let ApiError::Registry(RegistryError::Expired { continue_from: Some(token), .. }) = &self {
            let (code, mut body) = self.to_status();
            body["metadata"] = json!({"continue": token});
            return (code, axum::Json(body)).into_response();
        }
        response
    }
}
