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
///
/// Built of combinators rather than `async` blocks: every request's future holds this one, and
/// an `async` block holding the future below it makes room for that future more than once.
pub(crate) fn layer<F: Future<Output = Response>>(
    request: Request,
    next: impl FnOnce(Request) -> F,
) -> impl Future<Output = Response> {
    catching(next(request)).map(|outcome| match outcome {
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
    })
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
pub(crate) fn catching<T>(future: impl Future<Output = T>) -> impl Future<Output = Result<T, Panic>> {
    // The slot is read while the scope still holds it: the map runs inside the scope's poll.
    let caught = AssertUnwindSafe(future).catch_unwind().map(|outcome| {
        outcome.map_err(|payload| {
            let captured = CAUGHT.with(|slot| slot.borrow_mut().take());
            captured.unwrap_or_else(|| Panic {
                message: message(payload.as_ref()),
                location: "unknown".to_owned(),
                backtrace: "unavailable: the panic hook was replaced".to_owned(),
            })
        })
    });
    CAUGHT.scope(RefCell::new(None), caught)
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

#[cfg(test)]
mod tests {
    use axum::body::Body;

    use super::*;

    /// A future that holds `N` bytes across an await, as a request's layers below do.
    async fn holding<const N: usize>(request: Request) -> Response {
        let held = [7u8; N];
        tokio::task::yield_now().await;
        let _ = request;
        Response::new(Body::from(held.to_vec()))
    }

    #[test]
    fn the_layer_makes_room_for_the_future_below_it_once() {
        let below = std::mem::size_of_val(&holding::<8192>(Request::default()));
        let layered = std::mem::size_of_val(&layer(Request::default(), holding::<8192>));
        assert!(
            layered < below + 1024,
            "the recovery layer's future is {layered} bytes around one of {below}"
        );
    }

    #[tokio::test]
    async fn a_panic_below_is_a_500_and_an_answer_passes_through() {
        install_panic_hook();
        let answered = layer(Request::default(), holding::<16>).await;
        assert_eq!(answered.status(), axum::http::StatusCode::OK);
        let panicked = layer(Request::default(), |_| async { panic!("asked for") }).await;
        assert_eq!(panicked.status(), axum::http::StatusCode::INTERNAL_SERVER_ERROR);
        let caught = catching::<()>(async { panic!("a message") }).await.expect_err("it panicked");
        assert_eq!(caught.message, "a message");
        assert!(caught.location.contains("recover.rs"), "{}", caught.location);
    }
}
