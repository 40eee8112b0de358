//! Restart decisions, table-tested.

use std::time::Duration;

use super::*;

fn backoff() -> Backoff {
    Backoff {
        initial: Duration::from_secs(10),
        max: Duration::from_secs(40),
        reset_after: Duration::from_secs(600),
    }
}

fn failed(seconds: u64) -> Outcome {
    Outcome { succeeded: false, ran_for: Duration::from_secs(seconds) }
}

fn succeeded() -> Outcome {
    Outcome { succeeded: true, ran_for: Duration::from_secs(1) }
}

fn restart(seconds: u64) -> Next {
    Next::Restart { after: Duration::from_secs(seconds) }
}

fn finished(phase: Phase, reason: Option<&'static str>) -> Next {
    Next::Finished { phase, reason }
}

#[test]
fn each_policy_decides_each_sequence_of_runs() {
    use RestartPolicy::*;
    /// A policy, a back-off limit, how each run ends, and what each end leads to.
    type Case = (RestartPolicy, Option<i64>, Vec<Outcome>, Vec<Next>);
    let cases: Vec<Case> = vec![
        (
            Always,
            None,
            vec![succeeded(), failed(1), failed(1), failed(1)],
            vec![restart(10), restart(20), restart(40), restart(40)],
        ),
        (
            Always,
            None,
            vec![failed(1), failed(1), failed(600), failed(1)],
            vec![restart(10), restart(20), restart(10), restart(20)],
        ),
        (
            OnFailure,
            None,
            vec![failed(1), failed(1), succeeded()],
            vec![restart(10), restart(20), finished(Phase::Succeeded, None)],
        ),
        (
            OnFailure,
            Some(2),
            vec![failed(1), failed(1), failed(1)],
            vec![restart(10), restart(20), finished(Phase::Failed, Some("BackoffLimitExceeded"))],
        ),
        (OnFailure, Some(0), vec![failed(1)], vec![finished(Phase::Failed, Some("BackoffLimitExceeded"))]),
        (Never, None, vec![failed(1)], vec![finished(Phase::Failed, None)]),
        (Never, None, vec![succeeded()], vec![finished(Phase::Succeeded, None)]),
        (
            Never,
            Some(1),
            vec![failed(1), failed(1)],
            vec![restart(10), finished(Phase::Failed, Some("BackoffLimitExceeded"))],
        ),
    ];
    for (policy, limit, outcomes, expect) in cases {
        let mut history = History::default();
        let got: Vec<Next> = outcomes
            .iter()
            .map(|outcome| after_run(policy, limit, &backoff(), &mut history, *outcome))
            .collect();
        assert_eq!(got, expect, "{policy:?} limit {limit:?} {outcomes:?}");
    }
}

#[test]
fn counters_count_restarts_and_failures() {
    let mut history = History::default();
    for outcome in [failed(1), succeeded(), failed(1)] {
        after_run(RestartPolicy::Always, None, &backoff(), &mut history, outcome);
    }
    assert_eq!((history.restarts, history.failures, history.streak), (3, 2, 3));
}

#[test]
fn unknown_policies_read_as_always() {
    let cases = [
        (None, RestartPolicy::Always),
        (Some("OnFailure"), RestartPolicy::OnFailure),
        (Some("Never"), RestartPolicy::Never),
        (Some("x"), RestartPolicy::Always),
    ];
    for (word, expect) in cases {
        assert_eq!(RestartPolicy::parse(word), expect);
    }
}
