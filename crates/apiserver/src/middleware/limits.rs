//! A request's body, read before its handler runs, within its bounds: at most [`MAX_BODY`]
//! bytes (413 past them) and [`BODY_TIMEOUT`] to arrive (400 after it). Handlers see the whole
//! body, never a stream a slow client holds open.

use axum::body::Body;
use axum::extract::Request;
use axum::response::{IntoResponse, Response};
use std::future::Future;

use crate::error::ApiError;

/// How long a client may take to send a request body.
pub const BODY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// The largest request body accepted.
pub const MAX_BODY: usize = 3 * 1024 * 1024;

/// Reads the body within its bounds (a request that says it sends none goes straight on).
pub(crate) async fn layer<F: Future<Output = Response>>(
    request: Request,
    next: impl FnOnce(Request) -> F,
) -> Response {
    if axum::body::HttpBody::is_end_stream(request.body()) {
        return next(request).await;
    }
    let (parts, body) = request.into_parts();
    match read(body).await {
        Ok(body) => next(Request::from_parts(parts, Body::from(body))).await,
        Err(error) => error.into_response(),
    }
}

async fn read(body: Body) -> Result<bytes::Bytes, ApiError> {
    match tokio::time::timeout(BODY_TIMEOUT, axum::body::to_bytes(body, MAX_BODY)).await {
        Ok(Ok(body)) => Ok(body),
        Ok(Err(error)) => {
            let error = error.into_inner();
            let too_large =
                std::iter::successors(Some(error.as_ref() as &(dyn std::error::Error + 'static)), |e| {
                    e.source()
                })
                .any(|e| e.is::<http_body_util::LengthLimitError>());
            Err(if too_large {
                ApiError::TooLarge
            } else {
                ApiError::BadRequest(format!("the request body could not be read: {error}"))
            })
        }
        Err(_) => Err(ApiError::BadRequest(format!(
            "the request body did not arrive within {} seconds",
            BODY_TIMEOUT.as_secs()
        ))),
    }
}

#[cfg(test)]
mod tests {
    use axum::body::Body;
    use axum::http::StatusCode;
    use tower::ServiceExt;

    use super::MAX_BODY;
    use crate::tests::{admin_request, router, status_of};

    #[tokio::test]
    async fn a_body_past_its_bound_is_refused_and_one_within_it_served() {
        let dir = tempfile::tempdir().expect("a directory");
        let app = router(dir.path());
        let post = |body: Vec<u8>| {
            let request = admin_request("POST", "/api/v1/namespaces")
                .header("content-type", "application/json")
                .body(Body::from(body))
                .expect("a request");
            app.clone().oneshot(request)
        };
        let (code, status) = status_of(post(vec![b' '; MAX_BODY + 1]).await.expect("an answer")).await;
        assert_eq!(
            (code, status["reason"].as_str()),
            (StatusCode::PAYLOAD_TOO_LARGE, Some("RequestEntityTooLarge"))
        );
        let within = br#"{"metadata": {"name": "small"}}"#.to_vec();
        let (code, status) = status_of(post(within).await.expect("an answer")).await;
        assert_eq!(code, StatusCode::CREATED, "{status}");
    }
}
