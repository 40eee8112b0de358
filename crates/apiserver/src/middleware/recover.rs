//! Recovering from a panic in one request: the request is answered 500 and the panic is logged
//! with its message, where it happened and its backtrace, while the server goes on serving.
//!
//! A backtrace must be taken while the panicking stack still exists, so it cannot be taken
//! where the panic is caught. [`install_panic_hook`] adds a panic hook, once per process, that
//! captures the backtrace ([`Backtrace::force_capture`], whatever `RUST_BACKTRACE` says) into
//! the request's slot when the panicking code runs inside [`catching`]; panics anywhere else go
//! on to the hook that was there before, untouched. [`catching`] then takes the slot's content
//! and hands it to its caller to log.
//!
//! A panic in a task a request spawns (a watch's stream) is not the request's: it ends that
//! task, and the previous hook reports it.

use std::backtrace::Backtrace;
use std::cell::RefCell;
use std::future::Future;
use std::panic::AssertUnwindSafe;

use axum::extract::Request;
use axum::response::{IntoResponse, Response};
use futures_util::FutureExt;

use crate::error::ApiError;

/// Serves the request, answering a panic anywhere below with a 500 `Status` (which reveals
/// nothing of it) and logging it with its backtrace, in the request's span.
pub(crate) async fn layer<F: Future<Output = Response>>(
    request: Request,
    next: impl FnOnce(Request) -> F,
) -> Response {
    match catching(next(request)).await {
        Ok(response) => response,
        Err(panic) => {
            tracing::error!(
                panic = %panic.message,
                at = %panic.location,
                backtrace = %panic.backtrace,
                "the request panicked; answered 500"
            );
            ApiError::Internal("the request could not be served".to_owned()).into_response()
        }
    }
}

/// A panic caught in a request.
#[derive(Debug)]
pub(crate) struct Panic {
    /// The panic's message, when it was a string.
    pub(crate) message: String,
    /// `file:line:column` of the panic.
    pub(crate) location: String,
    /// The stack when it panicked.
    pub(crate) backtrace: String,
}

tokio::task_local! {
    /// The slot of the request being polled, which the panic hook fills.
    static CAUGHT: RefCell<Option<Panic>>;
}

/// Runs `future`, turning a panic while it is polled into `Err` with what the hook captured.
pub(crate) async fn catching<T>(future: impl Future<Output = T>) -> Result<T, Panic> {
    CAUGHT
        .scope(RefCell::new(None), async {
            let outcome = AssertUnwindSafe(future).catch_unwind().await;
            outcome.map_err(|payload| {
                let captured = CAUGHT.with(|slot| slot.borrow_mut().take());
                captured.unwrap_or_else(|| Panic {
                    message: message(payload.as_ref()),
                    location: "unknown".to_owned(),
                    backtrace: "unavailable: the panic hook was replaced".to_owned(),
                })
            })
        })
        .await
}

/// Installs the hook that captures a request's panic (once per process; later calls do
/// nothing). Panics outside a request go to the hook that was installed before.
pub(crate) fn install_panic_hook() {
    static INSTALLED: std::sync::Once = std::sync::Once::new();
    INSTALLED.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let in_request = CAUGHT.try_with(|slot| {
                let panic = Panic {
                    message: message(info.payload()),
                    location: info.location().map_or_else(|| "unknown".to_owned(), ToString::to_string),
                    backtrace: Backtrace::force_capture().to_string(),
                };
                // A panic while the slot is borrowed (never: it is only borrowed to take it)
                // keeps what the slot holds.
                if let Ok(mut slot) = slot.try_borrow_mut() {
                    *slot = Some(panic);
                }
            });
            if in_request.is_err() {
                previous(info);
            }
        }));
    });
}

fn message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| (*s).to_owned()))
        .unwrap_or_else(|| "a panic without a message".to_owned())
}
