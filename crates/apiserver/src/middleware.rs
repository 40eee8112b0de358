//! The layers every request passes through before its handler, each a tower layer in a module
//! of its own, assembled here in the one order they run in (outermost first):
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

use std::sync::Arc;

use axum::Router;
use axum::middleware::{from_fn, from_fn_with_state};
use tower::ServiceBuilder;

use crate::state::ApiState;

/// `routes` behind every layer, in their order.
pub(crate) fn stack(routes: Router<Arc<ApiState>>, state: Arc<ApiState>) -> Router {
    recover::install_panic_hook();
    let layers = ServiceBuilder::new()
        .layer(from_fn(audit_id::layer))
        .layer(from_fn(recover::layer))
        .layer(from_fn_with_state(state.clone(), audit::layer))
        .layer(from_fn_with_state(state.clone(), authentication::layer))
        .layer(from_fn_with_state(state.clone(), impersonation::layer))
        .layer(from_fn_with_state(state.clone(), routing::layer))
        .layer(from_fn_with_state(state.clone(), instrument::layer))
        .layer(from_fn_with_state(state.clone(), authorization::layer))
        .layer(from_fn(limits::layer));
    routes.layer(layers).with_state(state)
}

/// Reads and drops what a refused request still sends (up to 256 KiB, for at most a second),
/// so that its client reads the answer instead of a reset connection.
pub(crate) async fn drain(body: axum::body::Body) {
    let limited = http_body_util::Limited::new(body, 256 * 1024);
    let _ =
        tokio::time::timeout(std::time::Duration::from_secs(1), http_body_util::BodyExt::collect(limited))
            .await;
}
