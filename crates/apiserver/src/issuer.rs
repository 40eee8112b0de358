//! The service-account issuer's two public documents, `GET /.well-known/openid-configuration`
//! and `GET /openid/v1/jwks` (Kubernetes' paths): the only answers besides health that need no
//! identity, because a verifier elsewhere (Vault, a cloud's workload-identity federation)
//! fetches them without one. They carry no private material, and a small token bucket bounds
//! how often anyone may ask (`429` beyond it).

use std::sync::Mutex;
use std::time::Instant;

use axum::body::Body;
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};

use crate::error::ApiError;
use crate::state::ApiState;

/// Which of the issuer's documents a path names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Document {
    /// `/.well-known/openid-configuration`.
    Discovery,
    /// `/openid/v1/jwks`.
    Jwks,
}

/// How many requests may come at once before the bucket refuses.
const BURST: f64 = 20.0;
/// How many requests a second the bucket refills.
const PER_SECOND: f64 = 10.0;

/// A token bucket: `BURST` requests at once, `PER_SECOND` sustained.
#[derive(Debug)]
pub(crate) struct Bucket {
    state: Mutex<(f64, Instant)>,
}

impl Default for Bucket {
    fn default() -> Bucket {
        Bucket { state: Mutex::new((BURST, Instant::now())) }
    }
}

impl Bucket {
    /// Takes one request's token at `now`; `false` when the bucket is empty.
    pub(crate) fn take(&self, now: Instant) -> bool {
        let mut state = self.state.lock().expect("the bucket's lock is never held across a panic");
        let (tokens, last) = *state;
        let refilled = (tokens + now.saturating_duration_since(last).as_secs_f64() * PER_SECOND).min(BURST);
        let (left, taken) = if refilled >= 1.0 { (refilled - 1.0, true) } else { (refilled, false) };
        *state = (left, now.max(last));
        taken
    }
}

/// Answers `document` to anyone, within the bucket.
pub(crate) async fn serve(state: &ApiState, document: Document, method: &Method) -> Response {
    if method != Method::GET && method != Method::HEAD {
        return ApiError::MethodNotAllowed.into_response();
    }
    if !state.issuer_requests.take(Instant::now()) {
        return ApiError::TooManyRequests(
            "too many requests for the service-account issuer's documents; try again in a second".to_owned(),
        )
        .into_response();
    }
    let layer = state.layer();
    let body = match document {
        Document::Discovery => layer.discovery_document().ok_or(()),
        Document::Jwks if layer.issuer_url().is_none() => Err(()),
        Document::Jwks => match layer.jwks().await {
            Ok(jwks) => Ok(jwks),
            Err(error) => return ApiError::from(error).into_response(),
        },
    };
    let Ok(body) = body else {
        return ApiError::NotFound("this server issues no service-account tokens".to_owned()).into_response();
    };
    let content_type = match document {
        Document::Discovery => "application/json",
        Document::Jwks => "application/jwk-set+json",
    };
    let mut response = Response::new(Body::from(body.to_string()));
    *response.status_mut() = StatusCode::OK;
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    // Short enough that a verifier sees a rotated key soon; verifiers refetch on an unknown kid.
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("public, max-age=300"));
    response
}

/// How long the bucket takes to refill one request's token.
#[cfg(test)]
pub(crate) const REFILL: std::time::Duration = std::time::Duration::from_millis(100);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bucket_allows_a_burst_then_one_request_per_refill() {
        let bucket = Bucket::default();
        let start = Instant::now();
        let taken = (0..30).filter(|_| bucket.take(start)).count();
        assert_eq!(taken, 20, "the burst");
        assert!(!bucket.take(start));
        assert!(bucket.take(start + REFILL), "one more after a refill");
        assert!(!bucket.take(start + REFILL));
    }
}
