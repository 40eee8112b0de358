//! The scheduling framework, with kube-scheduler's extension points: a queue sort orders the
//! Applications waiting for a node; for one Application, pre-filter plugins compute what the
//! cycle needs once (and may reject it outright), filter plugins rule nodes out, post-filter
//! plugins may act when no node is left, score plugins rank the rest (each normalised to
//! 0–100 and weighted), and the best node is reserved in the snapshot until the bind lands
//! (unreserved when it fails). In a large fleet a cycle stops filtering once it has found as many
//! feasible nodes as kube-scheduler's adaptive sample asks ([`feasible_to_find`]), starting where
//! the previous cycle stopped. The bind itself is the scheduler's write through the
//! application layer ([`crate::Scheduler`]).
//!
//! A node that fails a filter is counted under each reason the first failing plugin gives, and
//! an Application no node passes is explained as kube-scheduler does:
//! `0/3 nodes are available: 1 node(s) were unschedulable, 2 Insufficient memory.`

use std::any::Any;
use std::borrow::Cow;
use std::cmp::Ordering;
use std::collections::BTreeMap;

use crate::model::{AppInfo, NodeInfo};
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

    /// Computes what the cycle needs once, or rejects the Application on every node (the
    /// reason is then counted once per node).
    fn pre_filter(
        &self,
        _app: &AppInfo,
        _snapshot: &Snapshot,
        _state: &mut CycleState,
    ) -> Result<(), String> {
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
    /// How old a node's heartbeat may be before the node counts as unreachable.
    heartbeat_timeout: Option<std::time::Duration>,
}

impl std::fmt::Debug for Framework {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.plugins.iter().map(|p| p.plugin.name()).collect();
        f.debug_struct("Framework").field("plugins", &names).finish_non_exhaustive()
    }
}

impl Framework {
    /// kube-scheduler's default set for what Kayra places, in its filter order and with its
    /// default score weights: `PrioritySort`; `NodeUnschedulable` (with readiness and
    /// heartbeat), `TaintToleration` (weight 3), `NodeAffinity` (2), `NodeResourcesFit` (1),
    /// `InterPodAffinity` (2). A node counts once in an explanation, for the first filter it
    /// fails.
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
            if let Err(reason) = weighted.plugin.pre_filter(app, snapshot, &mut state) {
                reasons.insert(reason, nodes.len());
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
