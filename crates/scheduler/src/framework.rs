//! The scheduling framework, with kube-scheduler's extension points: a queue sort orders the
//! Applications waiting for a node; for one Application, pre-filter plugins compute what the
//! cycle needs once (and may reject it outright), filter plugins rule nodes out, post-filter
//! plugins may act when no node is left, score plugins rank the rest (each normalised to
//! 0–100 and weighted). Reserve plugins then run in order over the scheduler's snapshot
//! (`SnapshotReservation` counts the Application on its node until the bind lands), and bind
//! plugins are tried in order until one binds (`DefaultBinder` writes the `binding`
//! subresource through the application layer); when a reserve plugin or the bind fails, every
//! reserve plugin's unreserve runs, in reverse order. In a large fleet a cycle stops filtering
//! once it has found as many feasible nodes as kube-scheduler's adaptive sample asks
//! ([`feasible_to_find`]), starting where the previous cycle stopped.
//!
//! A node that fails a filter is counted under each reason the first failing plugin gives, and
//! an Application no node passes is explained as kube-scheduler does:
//! `0/3 nodes are available: 1 node(s) were unschedulable, 2 Insufficient memory.`

use std::any::Any;
use std::borrow::Cow;
use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::sync::Mutex;

use kayra_registry::Object;

use crate::SchedulerError;
use crate::model::{App, AppInfo, NodeInfo};
use crate::plugins;
use crate::snapshot::Snapshot;

/// The highest score a plugin gives a node after normalisation.
pub const MAX_SCORE: i64 = 100;

/// Why a filter ruled a node out, in kube-scheduler's words: mostly fixed phrases, borrowed,
/// so that ruling out most of a large fleet allocates no text.
pub type Reasons = Vec<Cow<'static, str>>;

/// What pre-filter plugins computed for one Application's cycle, by plugin name (a handful,
/// looked up once per node and plugin: a list, searched in order).
#[derive(Default)]
pub struct CycleState {
    values: Vec<(&'static str, Box<dyn Any + Send + Sync>)>,
    /// The moment of the cycle (for heartbeat ages).
    pub now: Option<jiff::Timestamp>,
}

impl std::fmt::Debug for CycleState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.values.iter().map(|(name, _)| *name).collect();
        f.debug_struct("CycleState").field("plugins", &names).finish()
    }
}

impl CycleState {
    /// A fresh state at `now`.
    pub fn at(now: Option<jiff::Timestamp>) -> CycleState {
        CycleState { values: Vec::new(), now }
    }

    /// Keeps `value` for plugin `name`.
    pub fn write<T: Any + Send + Sync>(&mut self, name: &'static str, value: T) {
        self.values.retain(|(kept, _)| *kept != name);
        self.values.push((name, Box::new(value)));
    }

    /// What plugin `name` kept.
    pub fn read<T: Any>(&self, name: &'static str) -> Option<&T> {
        self.values.iter().find(|(kept, _)| *kept == name).and_then(|(_, value)| value.downcast_ref())
    }
}

/// One plugin: a unit implementing some of the extension points.
pub trait Plugin: Send + Sync {
    /// The plugin's name, as kube-scheduler spells it.
    fn name(&self) -> &'static str;

    /// Computes what the cycle needs once, or rejects the Application on every node
    /// ([`SchedulerError::Rejected`]: its reason is then counted once per node).
    fn pre_filter(
        &self,
        _app: &AppInfo,
        _snapshot: &Snapshot,
        _state: &mut CycleState,
    ) -> Result<(), SchedulerError> {
        Ok(())
    }

    /// Whether `node` may take the Application: `Err` holds kube-scheduler's reasons.
    fn filter(
        &self,
        _app: &AppInfo,
        _node: &NodeInfo,
        _snapshot: &Snapshot,
        _state: &CycleState,
    ) -> Result<(), Reasons> {
        Ok(())
    }

    /// Whether the plugin scores nodes.
    fn scores(&self) -> bool {
        false
    }

    /// The node's raw score.
    fn score(&self, _app: &AppInfo, _node: &NodeInfo, _snapshot: &Snapshot, _state: &CycleState) -> i64 {
        0
    }

    /// Brings raw scores to 0–[`MAX_SCORE`]; the default leaves them as they are.
    fn normalize(&self, _scores: &mut [i64]) {}
}

/// Orders the Applications waiting for a node.
pub trait QueueSort: Send + Sync {
    /// Whether `a` is placed before `b`.
    fn compare(&self, a: &AppInfo, b: &AppInfo) -> Ordering;
}

/// Acts when no node passes the filters (kube-scheduler's preemption sits here); answers a
/// note appended to the explanation, if any.
pub trait PostFilter: Send + Sync {
    /// The plugin's name.
    fn name(&self) -> &'static str;
    /// Acts on an Application that fits nowhere.
    fn post_filter(
        &self,
        app: &AppInfo,
        snapshot: &Snapshot,
        unschedulable: &Unschedulable,
    ) -> Option<String>;
}

/// Holds a decision between the choice of a node and its bind, over the scheduler's snapshot;
/// undoes it when a later step fails.
pub trait Reserve: Send + Sync {
    /// The plugin's name.
    fn name(&self) -> &'static str;

    /// Reserves `node` for `app`; `Err` says why the decision cannot stand.
    fn reserve(&self, app: &App, node: &str, snapshot: &mut Snapshot) -> Result<(), SchedulerError>;

    /// Undoes what [`Reserve::reserve`] did, or would have done: it runs on every reserve
    /// plugin when any step after the choice fails, including those whose reserve did not run.
    fn unreserve(&self, app: &App, node: &str, snapshot: &mut Snapshot);
}

/// Writes a decision to the store.
#[async_trait::async_trait]
pub trait Bind: Send + Sync {
    /// The plugin's name.
    fn name(&self) -> &'static str;

    /// Binds `app` to `node`, answering the bound object or why the write failed; `None` when
    /// this plugin does not bind `app` (kube-scheduler's `Skip`), so that the next one may.
    async fn bind(&self, app: &AppInfo, node: &str) -> Option<Result<Object, SchedulerError>>;
}

/// How nodes are scored for resources: kube-scheduler's `NodeResourcesFit` strategies.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Policy {
    /// `LeastAllocated`: the emptiest node wins, spreading Applications (the default).
    #[default]
    Spread,
    /// `MostAllocated`: the fullest node that fits wins, packing Applications.
    Binpack,
}

/// Why no node took an Application.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unschedulable {
    /// How many nodes were considered.
    pub nodes: usize,
    /// How many nodes failed with each reason.
    pub reasons: BTreeMap<String, usize>,
    /// What the post-filter plugins said, if anything.
    pub notes: Vec<String>,
}

impl Unschedulable {
    /// kube-scheduler's explanation: `0/3 nodes are available: 1 node(s) were unschedulable,
    /// 2 Insufficient memory.` (reasons as `count reason`, sorted as strings).
    pub fn message(&self) -> String {
        if self.nodes == 0 {
            return "no nodes available to schedule pods".to_owned();
        }
        let mut reasons: Vec<String> =
            self.reasons.iter().map(|(reason, n)| format!("{n} {reason}")).collect();
        reasons.sort();
        let mut message = format!("0/{} nodes are available: {}.", self.nodes, reasons.join(", "));
        for note in &self.notes {
            message.push(' ');
            message.push_str(note);
        }
        message
    }
}

/// A plugin with its score weight.
struct Weighted {
    plugin: Box<dyn Plugin>,
    weight: i64,
}

/// The configured plugins.
pub struct Framework {
    /// Where the next cycle starts looking, so that successive cycles examine different nodes
    /// first when they stop early (kube-scheduler's `nextStartNodeIndex`).
    next_start: std::sync::atomic::AtomicUsize,
    queue_sort: Box<dyn QueueSort>,
    plugins: Vec<Weighted>,
    post_filters: Vec<Box<dyn PostFilter>>,
    reserves: Vec<Box<dyn Reserve>>,
    binders: Vec<Box<dyn Bind>>,
    /// How old a node's heartbeat may be before the node counts as unreachable.
    heartbeat_timeout: Option<std::time::Duration>,
}

impl std::fmt::Debug for Framework {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.plugins.iter().map(|p| p.plugin.name()).collect();
        let reserves: Vec<&str> = self.reserves.iter().map(|p| p.name()).collect();
        let binders: Vec<&str> = self.binders.iter().map(|p| p.name()).collect();
        f.debug_struct("Framework")
            .field("plugins", &names)
            .field("reserves", &reserves)
            .field("binders", &binders)
            .finish_non_exhaustive()
    }
}

impl Framework {
    /// kube-scheduler's default set for what Kayra places, in its filter order and with its
    /// default score weights: `PrioritySort`; `NodeUnschedulable` (with readiness and
    /// heartbeat), `TaintToleration` (weight 3), `NodeAffinity` (2), `NodeResourcesFit` (1),
    /// `InterPodAffinity` (2). A node counts once in an explanation, for the first filter it
    /// fails. Then `SnapshotReservation`; the binder comes with the scheduler, which writes
    /// as its client ([`crate::Scheduler::with_framework`]).
    pub fn new(policy: Policy, heartbeat_timeout: Option<std::time::Duration>) -> Framework {
        Framework {
            next_start: std::sync::atomic::AtomicUsize::new(0),
            queue_sort: Box::new(plugins::priority::PrioritySort),
            plugins: vec![
                Weighted {
                    plugin: Box::new(plugins::node_schedulable::NodeSchedulable { heartbeat_timeout }),
                    weight: 0,
                },
                Weighted { plugin: Box::new(plugins::taint_toleration::TaintToleration), weight: 3 },
                Weighted { plugin: Box::new(plugins::node_affinity::NodeAffinity), weight: 2 },
                Weighted { plugin: Box::new(plugins::resources_fit::ResourcesFit { policy }), weight: 1 },
                Weighted { plugin: Box::new(plugins::workload_affinity::WorkloadAffinity), weight: 2 },
            ],
            post_filters: Vec::new(),
            reserves: vec![Box::new(plugins::snapshot_reservation::SnapshotReservation)],
            binders: Vec::new(),
            heartbeat_timeout,
        }
    }

    /// How old a node's heartbeat may be before the node counts as unreachable; `None` when
    /// the `Ready` condition alone is trusted.
    pub fn heartbeat_timeout(&self) -> Option<std::time::Duration> {
        self.heartbeat_timeout
    }

    /// Adds a post-filter plugin.
    pub fn with_post_filter(mut self, plugin: impl PostFilter + 'static) -> Framework {
        self.post_filters.push(Box::new(plugin));
        self
    }

    /// Adds a plugin after the others, scoring with `weight` (0 when it only filters).
    pub fn with_plugin(mut self, plugin: impl Plugin + 'static, weight: i64) -> Framework {
        self.plugins.push(Weighted { plugin: Box::new(plugin), weight });
        self
    }

    /// Adds a reserve plugin after the others.
    pub fn with_reserve(mut self, plugin: impl Reserve + 'static) -> Framework {
        self.reserves.push(Box::new(plugin));
        self
    }

    /// Adds a bind plugin, tried after the others.
    pub fn with_bind(mut self, plugin: impl Bind + 'static) -> Framework {
        self.binders.push(Box::new(plugin));
        self
    }

    /// The queue order: whether `a` goes before `b`.
    pub fn compare(&self, a: &AppInfo, b: &AppInfo) -> Ordering {
        self.queue_sort.compare(a, b)
    }

    /// One scheduling cycle: the node `app` goes to, or why none.
    pub fn schedule(
        &self,
        app: &AppInfo,
        snapshot: &Snapshot,
        now: Option<jiff::Timestamp>,
    ) -> Result<String, Unschedulable> {
        let nodes = snapshot.nodes();
        let mut state = CycleState::at(now);
        let mut reasons = BTreeMap::new();
        for weighted in &self.plugins {
            if let Err(rejected) = weighted.plugin.pre_filter(app, snapshot, &mut state) {
                reasons.insert(rejected.to_string(), nodes.len());
                return Err(self.post_filter(
                    app,
                    snapshot,
                    Unschedulable { nodes: nodes.len(), reasons, notes: vec![] },
                ));
            }
        }
        // Few distinct reasons, most of them the same borrowed phrase: counted in a list, and
        // made text of only when no node is left.
        let mut failed: Vec<(Cow<'static, str>, usize)> = Vec::new();
        let mut feasible: Vec<&NodeInfo> = Vec::new();
        let wanted = feasible_to_find(nodes.len());
        let start = self.next_start.load(std::sync::atomic::Ordering::Relaxed) % nodes.len().max(1);
        let mut examined = 0;
        'nodes: for node in nodes.values().cycle().skip(start).take(nodes.len()) {
            if feasible.len() >= wanted {
                break;
            }
            examined += 1;
            for weighted in &self.plugins {
                if let Err(why) = weighted.plugin.filter(app, node, snapshot, &state) {
                    for reason in why {
                        match failed.iter_mut().find(|(known, _)| *known == reason) {
                            Some((_, count)) => *count += 1,
                            None => failed.push((reason, 1)),
                        }
                    }
                    continue 'nodes;
                }
            }
            feasible.push(node);
        }
        self.next_start.store((start + examined) % nodes.len().max(1), std::sync::atomic::Ordering::Relaxed);
        match feasible.as_slice() {
            [] => Err(self.post_filter(
                app,
                snapshot,
                Unschedulable {
                    nodes: nodes.len(),
                    reasons: failed.into_iter().map(|(reason, n)| (reason.into_owned(), n)).collect(),
                    notes: vec![],
                },
            )),
            [only] => Ok(only.name.clone()),
            _ => {
                let mut totals = vec![0i64; feasible.len()];
                for weighted in self.plugins.iter().filter(|w| w.plugin.scores() && w.weight > 0) {
                    let mut scores: Vec<i64> = feasible
                        .iter()
                        .map(|node| weighted.plugin.score(app, node, snapshot, &state))
                        .collect();
                    weighted.plugin.normalize(&mut scores);
                    for (total, score) in totals.iter_mut().zip(scores) {
                        *total += score * weighted.weight;
                    }
                }
                // The highest total; the first examined among equals, so that the same
                // sequence of cycles over the same fleet gives the same placements.
                let mut best = 0;
                for (at, total) in totals.iter().enumerate() {
                    if *total > totals[best] {
                        best = at;
                    }
                }
                Ok(feasible[best].name.clone())
            }
        }
    }

    /// Runs the reserve plugins in order once `node` is chosen for `app`; when one refuses,
    /// every reserve plugin's unreserve runs in reverse order and its reason is answered.
    pub fn reserve(&self, app: &App, node: &str, snapshot: &mut Snapshot) -> Result<(), SchedulerError> {
        for plugin in &self.reserves {
            if let Err(reason) = plugin.reserve(app, node, snapshot) {
                self.unreserve(app, node, snapshot);
                return Err(reason);
            }
        }
        Ok(())
    }

    /// Runs every reserve plugin's unreserve, in reverse order.
    pub fn unreserve(&self, app: &App, node: &str, snapshot: &mut Snapshot) {
        for plugin in self.reserves.iter().rev() {
            plugin.unreserve(app, node, snapshot);
        }
    }

    /// Binds a reserved decision: the bind plugins are tried in order until one binds. When
    /// the bind fails, or none binds, the reservation is undone on the snapshot `reserved`
    /// holds (locked only then, after the write) and the failure answered.
    pub async fn bind<S: AsMut<Snapshot> + Send>(
        &self,
        app: &App,
        node: &str,
        reserved: &Mutex<S>,
    ) -> Result<Object, SchedulerError> {
        let mut outcome = None;
        for plugin in &self.binders {
            outcome = plugin.bind(app, node).await;
            if outcome.is_some() {
                break;
            }
        }
        let outcome = outcome
            .unwrap_or_else(|| Err(SchedulerError::NoBinder { app: app.id.clone(), node: node.to_owned() }));
        if outcome.is_err() {
            let mut state = reserved.lock().expect("the snapshot's lock is never held across a panic");
            self.unreserve(app, node, state.as_mut());
        }
        outcome
    }

    fn post_filter(
        &self,
        app: &AppInfo,
        snapshot: &Snapshot,
        mut unschedulable: Unschedulable,
    ) -> Unschedulable {
        for plugin in &self.post_filters {
            if let Some(note) = plugin.post_filter(app, snapshot, &unschedulable) {
                unschedulable.notes.push(note);
            }
        }
        unschedulable
    }
}

/// How many feasible nodes a cycle looks for before it stops filtering: every node of a small
/// fleet; of a large one, kube-scheduler's adaptive `percentageOfNodesToScore` (50% less 1% per
/// 125 nodes, at least 5%, at least 100 nodes).
pub fn feasible_to_find(nodes: usize) -> usize {
    if nodes < 100 {
        return nodes;
    }
    let percent = 50usize.saturating_sub(nodes / 125).max(5);
    (nodes * percent / 100).max(100)
}

/// kube-scheduler's `DefaultNormalizeScore`: scales to 0–[`MAX_SCORE`] by the highest score,
/// reversed (the lowest raw score best) when `reverse`.
pub fn default_normalize(scores: &mut [i64], reverse: bool) {
    let max = scores.iter().copied().max().unwrap_or(0);
    if max == 0 {
        if reverse {
            scores.iter_mut().for_each(|score| *score = MAX_SCORE);
        }
        return;
    }
    for score in scores.iter_mut() {
        *score = *score * MAX_SCORE / max;
        if reverse {
            *score = MAX_SCORE - *score;
        }
    }
}

#[cfg(test)]
mod tests {
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
            let soft =
                |n: usize| (0..n).map(|i| taint(&format!("soft-{i}"), "", "PreferNoSchedule")).collect();
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
                [&["reserve first on n1", "reserve second on n1", "bind binder to n1"][..], &unreserved]
                    .concat(),
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
            reasons: [("node(s) were unschedulable".to_owned(), 1), ("Insufficient memory".to_owned(), 2)]
                .into(),
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
}
