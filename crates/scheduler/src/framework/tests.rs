//! The framework's extension points: weighted normalised scores, kube-scheduler's
//! explanations, unreserve in reverse order, bind plugins in order.

use super::*;

use std::sync::{Arc, Mutex};

use crate::model::Resources;
use crate::plugins::taint;
use crate::plugins::testing::{app, node, on, snapshot};

#[test]
fn weighted_normalised_scores_decide_the_winner() {
    // `empty` has nothing placed; `busy` holds 2.5 cores and 5 GiB of its 4 and 8. The
    // newcomer asks 1 core and 2 GiB: NodeResourcesFit (weight 1) scores empty 75, busy 12.
    // TaintToleration (weight 3) reverses and normalises the count of untolerated
    // PreferNoSchedule taints to 0–100.
    let cases: [(&str, usize, usize, &str); 3] = [
        // Without taints, resources decide.
        ("no taints", 0, 0, "empty"),
        // 0 × 3 + 75 against 100 × 3 + 12: one soft taint outweighs the spread (and would
        // not, were the raw count of 1 taint taken as a score).
        ("one soft taint on the emptier node", 1, 0, "busy"),
        // 0 × 3 + 75 against 50 × 3 + 12: only the weight of 3 makes half a taint score
        // beat the spread (75 against 50 + 12 unweighted).
        ("two soft taints against one", 2, 1, "busy"),
    ];
    for (case, empty_taints, busy_taints, winner) in cases {
        let soft = |n: usize| (0..n).map(|i| taint(&format!("soft-{i}"), "", "PreferNoSchedule")).collect();
        let mut empty = node("empty", &[]);
        empty.taints = soft(empty_taints);
        let mut busy = node("busy", &[]);
        busy.taints = soft(busy_taints);
        let mut resident = app("resident", &[]);
        resident.requests = Resources { cpu: 2500, memory: 5 << 30 };
        let fleet = snapshot(vec![empty, busy], vec![on(resident, "busy")]);
        let mut newcomer = app("newcomer", &[]);
        newcomer.requests = Resources { cpu: 1000, memory: 2 << 30 };
        let framework = Framework::new(Policy::Spread, None);
        assert_eq!(framework.schedule(&newcomer, &fleet, None).as_deref(), Ok(winner), "{case}");
    }
}

/// Rejects every Application before any node is looked at.
struct RejectingPreFilter;

impl Plugin for RejectingPreFilter {
    fn name(&self) -> &'static str {
        "RejectingPreFilter"
    }

    fn pre_filter(&self, _: &AppInfo, _: &Snapshot, _: &mut CycleState) -> Result<(), SchedulerError> {
        Err(SchedulerError::Rejected { reason: "node(s) didn't satisfy the rejecting rule".to_owned() })
    }
}

/// Says what kube-scheduler's preemption says when it finds no victim.
struct NoVictims;

impl PostFilter for NoVictims {
    fn name(&self) -> &'static str {
        "DefaultPreemption"
    }

    fn post_filter(&self, _: &AppInfo, _: &Snapshot, unschedulable: &Unschedulable) -> Option<String> {
        let n = unschedulable.nodes;
        Some(format!(
            "preemption: 0/{n} nodes are available: {n} No preemption victims found for incoming pod."
        ))
    }
}

#[test]
fn rejections_are_explained_in_kube_schedulers_words_with_post_filter_notes() {
    let fleet = || snapshot(vec![node("n1", &[]), node("n2", &[]), node("n3", &[])], vec![]);
    let mut huge = app("huge", &[]);
    huge.requests = Resources { cpu: 0, memory: 64 << 30 };
    let cases = [
        (
            "a pre-filter rejection counts on every node",
            Framework::new(Policy::Spread, None).with_plugin(RejectingPreFilter, 0),
            app("small", &[]),
            "0/3 nodes are available: 3 node(s) didn't satisfy the rejecting rule.",
        ),
        (
            "a post-filter's note follows the reasons",
            Framework::new(Policy::Spread, None).with_post_filter(NoVictims),
            huge.clone(),
            "0/3 nodes are available: 3 Insufficient memory. preemption: 0/3 nodes are available: \
             3 No preemption victims found for incoming pod.",
        ),
        (
            "a post-filter also hears of a pre-filter rejection",
            Framework::new(Policy::Spread, None)
                .with_plugin(RejectingPreFilter, 0)
                .with_post_filter(NoVictims),
            app("small", &[]),
            "0/3 nodes are available: 3 node(s) didn't satisfy the rejecting rule. preemption: 0/3 \
             nodes are available: 3 No preemption victims found for incoming pod.",
        ),
    ];
    for (case, framework, wanting, expected) in cases {
        let refused = framework.schedule(&wanting, &fleet(), None).expect_err(case);
        assert_eq!(refused.message(), expected, "{case}");
    }
}

type Log = Arc<Mutex<Vec<String>>>;

fn entries(log: &Log) -> Vec<String> {
    log.lock().expect("the test's log").clone()
}

/// Logs its calls; refuses to reserve when told to.
struct LoggingReserve {
    name: &'static str,
    refuses: bool,
    log: Log,
}

impl Reserve for LoggingReserve {
    fn name(&self) -> &'static str {
        self.name
    }

    fn reserve(&self, _: &App, node: &str, _: &mut Snapshot) -> Result<(), SchedulerError> {
        self.log.lock().expect("the test's log").push(format!("reserve {} on {node}", self.name));
        if self.refuses {
            Err(SchedulerError::ReservationRefused { reason: format!("{} refused", self.name) })
        } else {
            Ok(())
        }
    }

    fn unreserve(&self, _: &App, node: &str, _: &mut Snapshot) {
        self.log.lock().expect("the test's log").push(format!("unreserve {} on {node}", self.name));
    }
}

#[derive(Clone, Copy)]
enum Answer {
    Skip,
    Bind,
    Fail,
}

/// Logs its calls and answers as told.
struct ScriptedBind {
    name: &'static str,
    answer: Answer,
    log: Log,
}

#[async_trait::async_trait]
impl Bind for ScriptedBind {
    fn name(&self) -> &'static str {
        self.name
    }

    async fn bind(&self, app: &AppInfo, node: &str) -> Option<Result<Object, SchedulerError>> {
        self.log.lock().expect("the test's log").push(format!("bind {} to {node}", self.name));
        match self.answer {
            Answer::Skip => None,
            Answer::Bind => {
                let mut bound = Object::new();
                bound.insert("boundBy".into(), self.name.into());
                Some(Ok(bound))
            }
            Answer::Fail => Some(Err(SchedulerError::Bind {
                app: app.id.clone(),
                node: node.to_owned(),
                source: Box::new(kayra_registry::RegistryError::Conflict {
                    resource: "applications.fleet.example.com".into(),
                    name: app.name.clone(),
                    message: "the object has been modified".into(),
                }),
            })),
        }
    }
}

/// Bind plugins by name, with how each answers.
type Answers = &'static [(&'static str, Answer)];

/// A framework with reserve plugins `first` and `second` (`second` refusing when told) after
/// `SnapshotReservation`, and bind plugins answering as `answers`, all logging to `log`.
fn scripted(second_refuses: bool, answers: Answers, log: &Log) -> Framework {
    let mut framework = Framework::new(Policy::Spread, None)
        .with_reserve(LoggingReserve { name: "first", refuses: false, log: log.clone() })
        .with_reserve(LoggingReserve { name: "second", refuses: second_refuses, log: log.clone() });
    for (name, answer) in answers {
        framework = framework.with_bind(ScriptedBind { name, answer: *answer, log: log.clone() });
    }
    framework
}

#[tokio::test]
async fn a_failed_reserve_or_bind_runs_every_unreserve_in_reverse_order() {
    let unreserved = ["unreserve second on n1", "unreserve first on n1"];
    let cases: [(&str, bool, Answers, Vec<&str>); 3] = [
        (
            "the bind is refused",
            false,
            &[("binder", Answer::Fail)],
            [&["reserve first on n1", "reserve second on n1", "bind binder to n1"][..], &unreserved].concat(),
        ),
        (
            "no bind plugin binds",
            false,
            &[("skipper", Answer::Skip)],
            [&["reserve first on n1", "reserve second on n1", "bind skipper to n1"][..], &unreserved]
                .concat(),
        ),
        (
            "a reserve plugin refuses: every unreserve runs, the refusing one's too",
            true,
            &[("binder", Answer::Bind)],
            [&["reserve first on n1", "reserve second on n1"][..], &unreserved].concat(),
        ),
    ];
    for (case, second_refuses, answers, expected) in cases {
        let log = Log::default();
        let framework = scripted(second_refuses, answers, &log);
        let x: App = Arc::new(app("x", &[]));
        let reserved = Mutex::new(snapshot(vec![node("n1", &[])], vec![]));
        let outcome = {
            let mut fleet = reserved.lock().expect("the test's snapshot");
            framework.reserve(&x, "n1", &mut fleet)
        };
        if outcome.is_ok() {
            assert!(reserved.lock().expect("the test's snapshot").is_reserved("demo/x"), "{case}");
            framework.bind(&x, "n1", &reserved).await.expect_err(case);
        }
        assert_eq!(entries(&log), expected, "{case}");
        // SnapshotReservation, registered first, was undone last: n1 is free again.
        let fleet = reserved.lock().expect("the test's snapshot");
        assert!(!fleet.is_reserved("demo/x") && fleet.usage("n1").is_none(), "{case}");
    }
}

#[tokio::test]
async fn bind_plugins_are_tried_in_order_until_one_binds() {
    let cases: [(&str, Answers, Vec<&str>, Option<&str>); 3] = [
        (
            "skipped, then bound: the rest are not tried",
            &[("skips", Answer::Skip), ("binds", Answer::Bind), ("later", Answer::Bind)],
            vec!["bind skips to n1", "bind binds to n1"],
            Some("binds"),
        ),
        (
            "the first binds",
            &[("binds", Answer::Bind), ("later", Answer::Bind)],
            vec!["bind binds to n1"],
            Some("binds"),
        ),
        (
            "a failed write ends the bind",
            &[("fails", Answer::Fail), ("later", Answer::Bind)],
            vec!["bind fails to n1", "unreserve second on n1", "unreserve first on n1"],
            None,
        ),
    ];
    for (case, answers, expected, bound_by) in cases {
        let log = Log::default();
        let framework = scripted(false, answers, &log);
        let x: App = Arc::new(app("x", &[]));
        let reserved = Mutex::new(snapshot(vec![node("n1", &[])], vec![]));
        let outcome = framework.bind(&x, "n1", &reserved).await;
        assert_eq!(entries(&log), expected, "{case}");
        let by = outcome.ok().map(|bound| bound["boundBy"].as_str().map(str::to_owned));
        assert_eq!(by.flatten().as_deref(), bound_by, "{case}");
    }
}

#[test]
fn explanations_count_each_reason_in_kube_schedulers_words_and_order() {
    let unschedulable = Unschedulable {
        nodes: 3,
        reasons: [("node(s) were unschedulable".to_owned(), 1), ("Insufficient memory".to_owned(), 2)].into(),
        notes: vec![],
    };
    assert_eq!(
        unschedulable.message(),
        "0/3 nodes are available: 1 node(s) were unschedulable, 2 Insufficient memory."
    );
    let none = Unschedulable { nodes: 0, reasons: BTreeMap::new(), notes: vec![] };
    assert_eq!(none.message(), "no nodes available to schedule pods");
}

#[test]
fn each_node_counts_once_for_the_first_filter_it_fails_in_kube_schedulers_order() {
    use crate::plugins::taint;
    use crate::plugins::testing::{app, node, snapshot};
    // kube-scheduler filters NodeUnschedulable, TaintToleration, NodeAffinity,
    // NodeResourcesFit, InterPodAffinity in that order and stops at a node's first failure.
    let mut tainted = node("tainted-elsewhere", &[("zone", "b")]);
    tainted.taints = vec![taint("maintenance", "", "NoSchedule")];
    let mut cordoned = node("cordoned-tainted", &[("zone", "b")]);
    cordoned.unschedulable = true;
    cordoned.taints = vec![taint("maintenance", "", "NoSchedule")];
    let fleet = snapshot(vec![tainted, cordoned, node("elsewhere", &[("zone", "b")])], vec![]);
    let mut wanting = app("a", &[]);
    wanting.node_selector = [("zone".to_owned(), "a".to_owned())].into();
    let framework = Framework::new(Policy::Spread, None);
    let refused = framework.schedule(&wanting, &fleet, None).expect_err("fits nowhere");
    assert_eq!(
        refused.message(),
        "0/3 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, \
         1 node(s) had untolerated taint {maintenance: }, 1 node(s) were unschedulable."
    );
}

#[test]
fn large_fleets_are_sampled_as_kube_scheduler_samples_them() {
    assert_eq!(feasible_to_find(3), 3);
    assert_eq!(feasible_to_find(99), 99);
    assert_eq!(feasible_to_find(100), 100);
    assert_eq!(feasible_to_find(1_000), 420);
    assert_eq!(feasible_to_find(5_000), 500);
    assert_eq!(feasible_to_find(100_000), 5_000);
}

#[test]
fn normalisation_scales_to_the_highest_score_and_may_reverse() {
    let mut scores = [0, 5, 10];
    default_normalize(&mut scores, false);
    assert_eq!(scores, [0, 50, 100]);
    let mut scores = [0, 1, 2];
    default_normalize(&mut scores, true);
    assert_eq!(scores, [100, 50, 0]);
    let mut scores = [0, 0];
    default_normalize(&mut scores, true);
    assert_eq!(scores, [100, 100]);
}
