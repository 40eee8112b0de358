//! Trying a call again on another member. The client spreads calls over every endpoint it was
//! given and keeps a dead member among them, so a call may go to a member that is down, or to
//! one that has no leader during an election. Such a call is tried again, after a short and
//! growing wait, for as long as [`PATIENCE`] allows, when trying again cannot do anything twice:
//!
//! - any call whose connection could not be made, since the request never left this process;
//! - any call etcd refused for want of a leader, since etcd refuses it before proposing it;
//! - a read (and a watch's start, and a lease's renewal, which a second attempt cannot
//!   duplicate) that failed in transit.
//!
//! A write that may have reached a leader is not tried again: it is reported failed, and a
//! caller that tries it itself does so under its own revision compares.

use std::future::Future;
use std::time::{Duration, Instant};

/// How long a call keeps being tried on the members that answer: longer than etcd's default
/// election (a 1 s election timeout and a few heartbeats), shorter than a client's patience.
pub(crate) const PATIENCE: Duration = Duration::from_secs(3);

/// The first wait before trying again; doubled each time up to [`MAX_WAIT`].
const FIRST_WAIT: Duration = Duration::from_millis(10);
const MAX_WAIT: Duration = Duration::from_millis(250);

/// What a call may do if it runs twice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Call {
    /// Nothing: it reads, or its second run changes nothing the first did not.
    Idempotent,
    /// Write something a second time.
    Write,
}

/// Runs `attempt` until it succeeds, fails in a way that may not be tried again, or runs out of
/// [`PATIENCE`].
pub(crate) async fn retrying<T, F, Fut>(call: Call, mut attempt: F) -> Result<T, etcd_client::Error>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, etcd_client::Error>>,
{
    let deadline = Instant::now() + PATIENCE;
    let mut wait = FIRST_WAIT;
    loop {
        match attempt().await {
            Err(error) if may_retry(call, &error) && Instant::now() + wait < deadline => {
                tracing::debug!(%error, ?wait, "an etcd call is tried again");
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(MAX_WAIT);
            }
            answered => return answered,
        }
    }
}

/// Whether a call that failed with `error` may run again.
fn may_retry(call: Call, error: &etcd_client::Error) -> bool {
    use etcd_client::Error as E;
    match error {
        E::GRpcStatus(status) => may_retry_status(call, i32::from(status.code()), status.message()),
        E::TransportError(_) | E::IoError(_) => call == Call::Idempotent,
        _ => false,
    }
}

/// gRPC's codes for a call that did not reach an answer.
const UNAVAILABLE: i32 = 14;
const DEADLINE_EXCEEDED: i32 = 4;

/// Whether a call etcd (or the connection to it) answered with gRPC status `code` and
/// `message` may run again.
fn may_retry_status(call: Call, code: i32, message: &str) -> bool {
    let unsent = code == UNAVAILABLE
        && (message.contains("tcp connect error") || message.contains("error trying to connect"));
    let leaderless = message.contains("no leader");
    let in_transit = matches!(code, UNAVAILABLE | DEADLINE_EXCEEDED)
        || message.contains("transport error")
        || message.contains("leader changed");
    unsent || leaderless || (call == Call::Idempotent && in_transit)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_what_cannot_apply_twice_is_tried_again() {
        const UNKNOWN: i32 = 2;
        const INVALID_ARGUMENT: i32 = 3;
        let cases = [
            (UNAVAILABLE, "tcp connect error", true, true),
            (UNAVAILABLE, "etcdserver: no leader", true, true),
            (UNAVAILABLE, "error reading a body from connection", true, false),
            (UNAVAILABLE, "etcdserver: request timed out", true, false),
            (UNKNOWN, "transport error", true, false),
            (INVALID_ARGUMENT, "etcdserver: request is too large", false, false),
        ];
        for (code, message, idempotent, write) in cases {
            assert_eq!(may_retry_status(Call::Idempotent, code, message), idempotent, "{message}");
            assert_eq!(may_retry_status(Call::Write, code, message), write, "{message}");
        }
        let broken = || etcd_client::Error::IoError(std::io::Error::other("broken pipe"));
        assert!(may_retry(Call::Idempotent, &broken()) && !may_retry(Call::Write, &broken()));
    }

    #[tokio::test]
    async fn a_call_is_tried_until_it_answers_or_patience_runs_out() {
        let failure = || etcd_client::Error::IoError(std::io::Error::other("connection reset"));
        let mut calls = 0;
        let answered = retrying(Call::Idempotent, || {
            calls += 1;
            let answer = if calls < 3 { Err(failure()) } else { Ok(calls) };
            async move { answer }
        })
        .await;
        assert_eq!(answered.ok(), Some(3));
        let mut writes = 0;
        let written: Result<(), _> = retrying(Call::Write, || {
            writes += 1;
            async { Err(failure()) }
        })
        .await;
        assert!(written.is_err() && writes == 1, "a write that may have arrived is not sent again");
        let started = Instant::now();
        let failed: Result<(), _> = retrying(Call::Idempotent, || async { Err(failure()) }).await;
        assert!(failed.is_err());
        assert!(started.elapsed() <= PATIENCE + MAX_WAIT, "gave up within its patience");
    }
}
