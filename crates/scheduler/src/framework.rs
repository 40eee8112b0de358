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
    queue_sort: std::sync::Arc<dyn QueueSort>,
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
            queue_sort: std::sync::Arc::new(plugins::priority::PrioritySort),
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

    /// The queue order.
    pub fn queue_sort(&self) -> std::sync::Arc<dyn QueueSort> {
        self.queue_sort.clone()
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
mod tests;
