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
        E::GRpcStatus(status) => {
            let message = status.message();
            let unsent = status.code() == tonic::Code::Unavailable
                && (message.contains("tcp connect error") || message.contains("error trying to connect"));
            let leaderless = message.contains("no leader");
            let in_transit =
                matches!(status.code(), tonic::Code::Unavailable | tonic::Code::DeadlineExceeded)
                    || message.contains("transport error")
                    || message.contains("leader changed");
            unsent || leaderless || (call == Call::Idempotent && in_transit)
        }
        E::TransportError(_) | E::IoError(_) => call == Call::Idempotent,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(code: tonic::Code, message: &str) -> etcd_client::Error {
        etcd_client::Error::GRpcStatus(tonic::Status::new(code, message))
    }

    #[test]
    fn only_what_cannot_apply_twice_is_tried_again() {
        let unsent = status(tonic::Code::Unavailable, "tcp connect error");
        let leaderless = status(tonic::Code::Unavailable, "etcdserver: no leader");
        let lost = status(tonic::Code::Unavailable, "error reading a body from connection");
        let timed_out = status(tonic::Code::Unavailable, "etcdserver: request timed out");
        let broken = status(tonic::Code::Unknown, "transport error");
        let refused = status(tonic::Code::InvalidArgument, "etcdserver: request is too large");
        for (error, idempotent, write) in [
            (&unsent, true, true),
            (&leaderless, true, true),
            (&lost, true, false),
            (&timed_out, true, false),
            (&broken, true, false),
        ] {
            assert_eq!(may_retry(Call::Idempotent, error), idempotent, "{error}");
            assert_eq!(may_retry(Call::Write, error), write, "{error}");
        }
        assert!(!may_retry(Call::Idempotent, &refused));
    }

    #[tokio::test]
    async fn a_call_is_tried_until_it_answers_or_patience_runs_out() {
        let mut calls = 0;
        let answered = retrying(Call::Write, || {
            calls += 1;
            let answer = if calls < 3 {
                Err(status(tonic::Code::Unavailable, "tcp connect error"))
            } else {
                Ok(calls)
            };
            async move { answer }
        })
        .await;
        assert_eq!(answered.ok(), Some(3));
        let started = Instant::now();
        let failed: Result<(), _> =
            retrying(Call::Idempotent, || async { Err(status(tonic::Code::Unavailable, "no leader")) }).await;
        assert!(failed.is_err());
        assert!(started.elapsed() <= PATIENCE + MAX_WAIT, "gave up within its patience");
    }
}
