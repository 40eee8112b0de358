//! What a request's path addresses. A path that is not canonical (empty, `.`, `..` or
//! percent-encoded segments) is refused before anything else looks at it; health and readiness,
//! and the service-account issuer's discovery document and JWKS, are answered to anyone here,
//! the only paths that need no identity; every other path goes on with its [`Route`].

use std::future::Future;
use std::sync::Arc;

use axum::extract::Request;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use crate::error::ApiError;
use crate::routes::{self, PathError, Target};
use crate::state::ApiState;

/// What a request's path addresses, in its extensions.
#[derive(Debug, Clone)]
pub(crate) enum Route {
    /// A route serves it.
    Served(Target),
    /// No route serves it (the catalog may know it as a registered API's).
    Unrouted,
}

/// Routes the request.
pub(crate) async fn layer<F: Future<Output = Response>>(
    state: &Arc<ApiState>,
    mut request: Request,
    next: impl FnOnce(Request) -> F,
) -> Response {
    let method = request.method().clone();
    // What the rare answers await is boxed: every request's future makes room for whatever
    // any of its branches awaits.
    let route = match routes::parse(state.scheme(), state.gates, request.uri().path()) {
        Err(PathError::NonCanonical) => {
            Box::pin(super::drain(request.into_body())).await;
            return ApiError::BadRequest(
                "the request path is not canonical: empty, '.', '..' or percent-encoded segments are refused"
                    .to_owned(),
            )
            .into_response();
        }
        Ok(Target::Health) => return (StatusCode::OK, "ok").into_response(),
        Ok(Target::Issuer(document)) => {
            Box::pin(super::drain(request.into_body())).await;
            return Box::pin(crate::issuer::serve(state, document, &method)).await;
        }
        Ok(target) => Route::Served(target),
        Err(PathError::NotFound) => Route::Unrouted,
    };
    request.extensions_mut().insert(route);
    next(request).await
}

#[cfg(test)]
mod tests {
    use axum::body::Body;
    use axum::http::{Request, StatusCode};
    use tower::ServiceExt;

    use crate::tests::{router, status_of};

    #[tokio::test]
    async fn a_path_that_is_not_canonical_is_refused_to_anyone_and_health_answered_to_anyone() {
        let dir = tempfile::tempdir().expect("a directory");
        let app = router(dir.path());
        let ask = |path: &str| {
            app.clone().oneshot(Request::builder().uri(path).body(Body::empty()).expect("a request"))
        };
        for path in ["/api/v1//namespaces", "/api/v1/namespaces/%2e%2e/events", "/api/v1/namespaces/./x"] {
            let (code, status) = status_of(ask(path).await.expect("an answer")).await;
            assert_eq!(code, StatusCode::BAD_REQUEST, "{path}: {status}");
            assert!(status["message"].as_str().unwrap_or_default().contains("not canonical"), "{status}");
        }
        for path in ["/healthz", "/livez", "/readyz/ping"] {
            let response = ask(path).await.expect("an answer");
            assert_eq!(response.status(), StatusCode::OK, "{path}");
        }
        let (code, _) = status_of(ask("/api/v1/namespaces").await.expect("an answer")).await;
        assert_eq!(code, StatusCode::UNAUTHORIZED, "everything else needs an identity");
    }
}
