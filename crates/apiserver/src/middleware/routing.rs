//! What a request's path addresses. A path that is not canonical (empty, `.`, `..` or
//! percent-encoded segments) is refused before anything else looks at it; health and readiness
//! are answered to anyone here, the only paths that need no identity; every other path goes on
//! with its [`Route`].

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
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
pub(crate) async fn layer(State(state): State<Arc<ApiState>>, mut request: Request, next: Next) -> Response {
    let route = match routes::parse(state.scheme(), request.uri().path()) {
        Err(PathError::NonCanonical) => {
            super::drain(request.into_body()).await;
            return ApiError::BadRequest(
                "the request path is not canonical: empty, '.', '..' or percent-encoded segments are refused"
                    .to_owned(),
            )
            .into_response();
        }
        Ok(Target::Health) => return (StatusCode::OK, "ok").into_response(),
        Ok(target) => Route::Served(target),
        Err(PathError::NotFound) => Route::Unrouted,
    };
    request.extensions_mut().insert(route);
    next.run(request).await
}
