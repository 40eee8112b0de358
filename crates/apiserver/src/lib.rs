//! The HTTP surface of Kayra: the Kubernetes-shaped REST API that stock kubectl drives.
//!
//! [`router`] answers every request: health, `/version`, discovery, OpenAPI, and the resources
//! of the scheme, behind the [`middleware`] stack (audit id, recovery, audit, authentication,
//! impersonation, routing, authorization, limits, in that order). [`serve`] runs it over TLS
//! (client certificates verified against the cluster CA) or plain HTTP (bearer tokens only),
//! with timeouts and connection caps. Every error is a `metav1.Status`; authentication cannot be
//! turned off.
//!
//! This is an adapter: it holds no rule. Every request reaches the registry only through the
//! application layer's client (`kayra_application`), which authorizes it in its one
//! authorization function and admits every write; here requests and answers are translated —
//! paths, query parameters, media types, Tables, streams — and errors mapped in one place.
//! Start at [`router`], then `middleware.rs`, `dispatch.rs` and `handlers.rs`.

mod catalog;
mod check;
mod discovery;
mod dispatch;
mod error;
mod handlers;
mod issuer;
mod media;
pub mod metrics;
mod middleware;
mod openapi;
pub mod peers;
mod protobuf;
mod routes;
mod serve;
mod state;
mod table;

#[cfg(test)]
mod tests;

use std::sync::Arc;

use axum::Router;
#[cfg(feature = "bench")]
use axum::body::Body;
#[cfg(feature = "bench")]
use axum::http::{HeaderValue, header};
#[cfg(feature = "bench")]
use axum::response::Response;

pub use error::ApiError;
pub use middleware::audit::AuditLog;
pub use middleware::limits::{BODY_TIMEOUT, MAX_BODY};
pub use routes::Gates;
pub use serve::{PeerIdentity, ServeOptions, serve, tls_config};
pub use state::{ApiState, DEFAULT_WATCH_STALL};

/// A router that answers every request with the same JSON at once: the ceiling the API's
/// overhead is measured against.
#[cfg(feature = "bench")]
pub fn bare_router(body: bytes::Bytes) -> Router {
    Router::new().fallback(move || {
        let body = body.clone();
        async move {
            let mut response = Response::new(Body::from(body));
            response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
            response
        }
    })
}

/// A router that hands every request's body to `store` and answers 201 with it once `store`
/// says it is durable (500 if it is not): the ceiling a durable create over HTTP is measured
/// against, doing HTTP and the store's write and nothing else.
#[cfg(feature = "bench")]
pub fn durable_router<F, Stored>(store: F) -> Router
where
    F: Fn(bytes::Bytes) -> Stored + Clone + Send + Sync + 'static,
    Stored: std::future::Future<Output = bool> + Send + 'static,
{
    Router::new().fallback(move |body: bytes::Bytes| {
        let stored = store(body.clone());
        async move {
            let durable = stored.await;
            let mut response = Response::new(Body::from(body));
            *response.status_mut() =
                if durable { http::StatusCode::CREATED } else { http::StatusCode::INTERNAL_SERVER_ERROR };
            response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
            response
        }
    })
}

/// The API as an axum router: every request through the [`middleware`] stack, then to its
/// handler.
pub fn router(state: Arc<ApiState>) -> Router {
    middleware::stack(Router::new().fallback(dispatch::serve), state)
}

/// `api` with gRPC requests to the service at `prefix` (`/<package>.<Service>`) routed to
/// `service`: the node session shares the API's TLS listener. The service authenticates its
/// callers itself, from the verified client certificate the listener puts in each request.
pub fn with_grpc<S>(api: Router, prefix: &str, service: S) -> Router
where
    S: tower::Service<axum::extract::Request, Error = std::convert::Infallible>
        + Clone
        + Send
        + Sync
        + 'static,
    S::Response: axum::response::IntoResponse,
    S::Future: Send + 'static,
{
    api.route_service(&format!("{prefix}/{{*method}}"), service)
}
