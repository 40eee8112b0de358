//! What happens to an Application after each run, as kubelet and the Job controller decide it:
//! the restart policy, the job's back-off limit and the back-off before the next start. No IO:
//! the runtime feeds in how the run ended and acts on the answer.

use std::time::Duration;

use crate::backoff::Backoff;

/// When a process is started again after it ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RestartPolicy {
    /// Whatever the exit: a service.
    Always,
    /// After a failure: a job retried until it succeeds (or its back-off limit).
    OnFailure,
    /// Never: a job that runs once (or up to its back-off limit, when it has one).
    Never,
}

impl RestartPolicy {
    /// The policy an Application names; `Always` when it names none.
    pub(crate) fn parse(policy: Option<&str>) -> RestartPolicy {
        match policy {
            Some("OnFailure") => RestartPolicy::OnFailure,
            Some("Never") => RestartPolicy::Never,
            _ => RestartPolicy::Always,
        }
    }
}

/// The counters a decision reads and advances; kept across runs of one generation.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct History {
    /// Restarts so far.
    pub(crate) restarts: i64,
    /// Runs started (or attempted) so far.
    pub(crate) attempts: i64,
    /// Failed runs so far.
    pub(crate) failures: i64,
    /// Back-to-back restarts, for the back-off.
    pub(crate) streak: u32,
}

/// How a run ended, as the decision needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Outcome {
    /// Whether it succeeded (exit code 0).
    pub(crate) succeeded: bool,
    /// How long it ran; zero for a process that could not start.
    pub(crate) ran_for: Duration,
}

/// What to do after a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Next {
    /// Start it again after `after`.
    Restart {
        /// The back-off wait.
        after: Duration,
    },
    /// Done, in this phase; `reason` says why, for a job that ran out of attempts.
    Finished {
        /// `Succeeded` or `Failed`.
        phase: Phase,
        /// The CamelCase reason a failure carries.
        reason: Option<&'static str>,
    },
}

/// An Application's phase, as its status reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    /// Not started yet.
    Pending,
    /// Started: running, or waiting to run again.
    Running,
    /// A job that ended well.
    Succeeded,
    /// A job that ended badly.
    Failed,
}

impl Phase {
    /// The word the status carries.
    pub(crate) fn word(self) -> &'static str {
        match self {
            Phase::Pending => "Pending",
            Phase::Running => "Running",
            Phase::Succeeded => "Succeeded",
            Phase::Failed => "Failed",
        }
    }
}

/// Decides what follows a run that ended with `outcome`, advancing `history`. A job's
/// `backoff_limit` counts failed runs that may be retried (as a Kubernetes Job's); without one, an
/// `OnFailure` job retries until it succeeds and a `Never` job runs once.
pub(crate) fn after_run(
    policy: RestartPolicy,
    backoff_limit: Option<i64>,
    backoff: &Backoff,
    history: &mut History,
    outcome: Outcome,
) -> Next {
    if !outcome.succeeded {
        history.failures += 1;
    }
    let retry = match (policy, outcome.succeeded) {
        (RestartPolicy::Always, _) => true,
        (_, true) => return Next::Finished { phase: Phase::Succeeded, reason: None },
        (RestartPolicy::OnFailure, false) => backoff_limit.is_none_or(|limit| history.failures <= limit),
        (RestartPolicy::Never, false) => backoff_limit.is_some_and(|limit| history.failures <= limit),
    };
    if !retry {
        let reason = if backoff_limit.is_some() { Some("BackoffLimitExceeded") } else { None };
        return Next::Finished { phase: Phase::Failed, reason };
    }
    history.streak = backoff.streak_after(history.streak, outcome.ran_for);
    let after = backoff.delay(history.streak);
    history.streak += 1;
    history.restarts += 1;
    Next::Restart { after }
}

#[cfg(test)]
mod tests;
