//! The layers every request passes through before its handler, each in a module of its own and
//! all run by one tower layer on every route, in the one order assembled here (outermost first):
//!
//! 1. [`audit_id`] — echoes the request's `Audit-Id` or mints one, opens the request's span and
//!    puts the id on the answer;
//! 2. [`recover`] — a panic anywhere below becomes a logged 500 `Status`;
//! 3. [`audit`] — every mutating request, and every read of a log, is a line in the audit log
//!    with what it was answered, refused and panicking ones included;
//! 4. [`authentication`] — who the caller is (a verified client certificate, a bearer token),
//!    or nobody; it refuses nothing itself;
//! 5. [`impersonation`] — who the request acts as, when it asks to act as someone else;
//! 6. [`routing`] — a canonical path (else 400), health answered to anyone, and what the path
//!    addresses;
//! 7. [`instrument`] — the request counted, timed and held in flight by what its route names,
//!    refused ones included;
//! 8. [`authorization`] — 401 without an identity, then the request decided by the application
//!    layer's one authorization function; what it may do rides on to the handler;
//! 9. [`limits`] — the body, read within its size and time bounds.
//!
//! Each layer is an async function handed what runs below it (`next`), and one future per
//! request runs them all: no layer clones the services below it. Each layer's future is boxed
//! by the one above it: a future holding the one below it inline is as large as every layer
//! below together, and is copied whole each time the layer above takes it, so nine layers held
//! inline copied about 40 KB per request where boxed ones copy each layer's own state once.
//!
//! The audit log sits above authentication so that a request refused there (or panicking there)
//! is recorded too, and the Audit-Id above recovery so that a panic's log line and its 500 carry
//! the request's id.

pub(crate) mod audit;
pub(crate) mod audit_id;
pub(crate) mod authentication;
pub(crate) mod authorization;
pub(crate) mod impersonation;
pub(crate) mod instrument;
pub(crate) mod limits;
pub(crate) mod recover;
pub(crate) mod routing;

use std::convert::Infallible;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::Router;
use axum::extract::Request;
use axum::response::Response;
use futures_util::future::BoxFuture;
use tower::{Service, ServiceExt};

use crate::state::ApiState;

/// `routes` behind every layer, in their order.
pub(crate) fn stack(routes: Router<Arc<ApiState>>, state: Arc<ApiState>) -> Router {
    recover::install_panic_hook();
    let layered = state.clone();
    routes
        .layer(tower::layer::layer_fn(move |route| Layered { state: layered.clone(), route }))
        .with_state(state)
}

/// A route's service behind every layer.
#[derive(Clone)]
struct Layered<S> {
    state: Arc<ApiState>,
    route: S,
}

impl<S> Service<Request> for Layered<S>
where
    S: Service<Request, Response = Response, Error = Infallible> + Clone + Send + 'static,
    S::Future: Send,
{
    type Response = Response;
    type Error = Infallible;
    type Future = BoxFuture<'static, Result<Response, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        // The route is made ready when the request reaches it.
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request) -> Self::Future {
        let (state, route) = (self.state.clone(), self.route.clone());
        Box::pin(async move { Ok(layers(&state, route, request).await) })
    }
}

/// Runs `request` through every layer, in their order, then `route`.
async fn layers<S>(state: &Arc<ApiState>, route: S, request: Request) -> Response
where
    S: Service<Request, Response = Response, Error = Infallible>,
{
    let route = |request| async move {
        match route.oneshot(request).await {
            Ok(response) => response,
            Err(never) => match never {},
        }
    };
    audit_id::layer(request, |request| {
        Box::pin(recover::layer(request, |request| {
            Box::pin(audit::layer(state, request, |request| {
                Box::pin(authentication::layer(state, request, |request| {
                    Box::pin(impersonation::layer(state, request, |request| {
                        Box::pin(routing::layer(state, request, |request| {
                            Box::pin(instrument::layer(state, request, |request| {
                                Box::pin(authorization::layer(state, request, |request| {
                                    Box::pin(limits::layer(request, route))
                                }))
                            }))
                        }))
                    }))
                }))
            }))
        }))
    })
    .await
}

/// Reads and drops what a refused request still sends (up to 256 KiB, for at most a second),
/// so that its client reads the answer instead of a reset connection.
pub(crate) async fn drain(body: axum::body::Body) {
    let limited = http_body_util::Limited::new(body, 256 * 1024);
    let _ =
        tokio::time::timeout(std::time::Duration::from_secs(1), http_body_util::BodyExt::collect(limited))
            .await;
}
