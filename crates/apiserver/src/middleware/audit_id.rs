//! The request's `Audit-Id`: the one the client sent when it is usable (visible ASCII, at most
//! 128 characters), else a fresh UUID. It names the request's span (so every log line of the
//! request carries it), its audit line, and goes back on the answer, as kube-apiserver does.

use axum::extract::Request;
use axum::http::{HeaderMap, HeaderValue};
use axum::response::Response;
use std::future::Future;
use tracing::Instrument;

/// The header that names a request in the audit log, as Kubernetes spells it.
pub(crate) const AUDIT_ID: &str = "audit-id";

/// A request's audit id, in its extensions.
#[derive(Debug, Clone)]
pub(crate) struct AuditId(pub(crate) String);

/// Names the request and runs it in its span.
pub(crate) async fn layer<F: Future<Output = Response>>(
    mut request: Request,
    next: impl FnOnce(Request) -> F,
) -> Response {
    let id = audit_id(request.headers());
    let span = tracing::info_span!("request", method = %request.method(), path = %request.uri().path(), audit_id = %id);
    request.extensions_mut().insert(AuditId(id.clone()));
    let mut response = next(request).instrument(span.clone()).await;
    if let Ok(value) = HeaderValue::from_str(&id) {
        response.headers_mut().insert(AUDIT_ID, value);
    }
    span.in_scope(|| tracing::debug!(status = response.status().as_u16(), "served"));
    response
}

/// The request's `Audit-Id` when it sends a usable one, else a fresh UUID.
fn audit_id(headers: &HeaderMap) -> String {
    headers
        .get(AUDIT_ID)
        .and_then(|v| v.to_str().ok())
        .filter(|v| !v.is_empty() && v.len() <= 128)
        .map(str::to_owned)
        .unwrap_or_else(|| uuid::Uuid::new_v4().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_usable_audit_id_is_kept_and_any_other_replaced() {
        let with = |value: &str| {
            let mut headers = HeaderMap::new();
            headers.insert(AUDIT_ID, HeaderValue::from_str(value).expect("a header value"));
            audit_id(&headers)
        };
        assert_eq!(with("abc-123"), "abc-123");
        assert_ne!(with(&"x".repeat(129)), "x".repeat(129));
        assert_eq!(audit_id(&HeaderMap::new()).len(), 36, "a fresh UUID");
    }
}
