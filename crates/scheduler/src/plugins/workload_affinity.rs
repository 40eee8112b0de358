//! `InterPodAffinity`, over Applications: required affinity puts an Application in a topology
//! domain (the nodes sharing a value of `topologyKey`) where Applications its selector picks
//! already run; required anti-affinity keeps it out of such domains; and, symmetrically, a
//! placed Application's required anti-affinity keeps out newcomers it picks. Preferred terms
//! add or subtract their weight for each picked Application in the node's domain; scores are
//! normalised between the worst and the best node. A term's selector looks in the term's
//! `namespaces`, or the Application's own namespace when it lists none.
//!
//! As in Kubernetes, the first of a group whose affinity picks only its own kind may go
//! anywhere: when no placed Application meets a required affinity term and the Application
//! meets it itself, the term holds everywhere.
//!
//! The pre-filter reads the snapshot's label index once per Application; the filter and score
//! then cost a few lookups per node.

use foldhash::{HashMap, HashSet, HashSetExt};
use k8s_openapi::api::core::v1::PodAffinityTerm;

use crate::SchedulerError;
use crate::framework::{CycleState, MAX_SCORE, Plugin, Reasons};
use crate::model::{AppInfo, NodeInfo};
use crate::plugins::selects;
use crate::snapshot::Snapshot;

/// kube-scheduler's reason for a node that a placed Application's anti-affinity protects.
pub const EXISTING_ANTI: &str = "node(s) didn't satisfy existing pods anti-affinity rules";
/// kube-scheduler's reason for a node outside every domain required affinity allows.
pub const AFFINITY: &str = "node(s) didn't match pod affinity rules";
/// kube-scheduler's reason for a node inside a domain required anti-affinity forbids.
pub const ANTI: &str = "node(s) didn't match pod anti-affinity rules";

const NAME: &str = "InterPodAffinity";

/// Affinity and anti-affinity between Applications.
#[derive(Debug, Clone, Copy)]
pub struct WorkloadAffinity;

/// Domains as `topologyKey` → values.
type Domains = HashMap<String, HashSet<String>>;

/// What the pre-filter works out for one Application.
#[derive(Debug, Default)]
struct Prepared {
    /// Domains placed Applications' anti-affinity keeps this one out of.
    existing_anti: Domains,
    /// For each required affinity term: the domains it allows, or `None` when it holds
    /// everywhere.
    affinity: Vec<Option<(String, HashSet<String>)>>,
    /// Domains this one's anti-affinity keeps it out of.
    anti: Domains,
    /// Preferred weights by domain.
    preferred: HashMap<String, HashMap<String, i64>>,
}

fn namespaces(term: &PodAffinityTerm, own: &str) -> Vec<String> {
    match term.namespaces.as_deref() {
        Some(list) if !list.is_empty() => list.to_vec(),
        _ => vec![own.to_owned()],
    }
}

/// The domains of `term.topologyKey` where Applications `term` picks are placed.
fn domains_of(term: &PodAffinityTerm, app: &AppInfo, snapshot: &Snapshot) -> HashSet<String> {
    let Some(selector) = &term.label_selector else { return HashSet::new() };
    let namespaces = namespaces(term, &app.namespace);
    snapshot
        .select(&namespaces, selector)
        .filter(|(_, other)| other.id != app.id)
        .filter_map(|(node, _)| snapshot.nodes().get(node).and_then(|n| n.topology(&term.topology_key)))
        .map(str::to_owned)
        .collect()
}

/// Whether `term` of an Application in `own` looks in `namespace`.
fn looks_in(term: &PodAffinityTerm, own: &str, namespace: &str) -> bool {
    match term.namespaces.as_deref() {
        Some(list) if !list.is_empty() => list.iter().any(|n| n == namespace),
        _ => own == namespace,
    }
}

fn picks_itself(term: &PodAffinityTerm, app: &AppInfo) -> bool {
    term.label_selector.as_ref().is_some_and(|selector| selects(selector, &app.labels))
        && looks_in(term, &app.namespace, &app.namespace)
}

impl Plugin for WorkloadAffinity {
    fn name(&self) -> &'static str {
        NAME
    }

    fn pre_filter(
        &self,
        app: &AppInfo,
        snapshot: &Snapshot,
        state: &mut CycleState,
    ) -> Result<(), SchedulerError> {
        let mut prepared = Prepared::default();
        for (node, placed) in snapshot.anti_affine_for(app) {
            if placed.id == app.id {
                continue;
            }
            let terms = placed
                .affinity
                .workload_anti_affinity
                .as_ref()
                .and_then(|anti| anti.required_during_scheduling_ignored_during_execution.as_ref());
            for term in terms.into_iter().flatten() {
                let picked =
                    term.label_selector.as_ref().is_some_and(|selector| selects(selector, &app.labels));
                if picked
                    && namespaces(term, &placed.namespace).contains(&app.namespace)
                    && let Some(value) =
                        snapshot.nodes().get(node).and_then(|n| n.topology(&term.topology_key))
                {
                    prepared
                        .existing_anti
                        .entry(term.topology_key.clone())
                        .or_default()
                        .insert(value.to_owned());
                }
            }
        }
        if let Some(affinity) = &app.affinity.workload_affinity {
            for term in affinity.required_during_scheduling_ignored_during_execution.iter().flatten() {
                let domains = domains_of(term, app, snapshot);
                prepared.affinity.push(if domains.is_empty() && picks_itself(term, app) {
                    None
                } else {
                    Some((term.topology_key.clone(), domains))
                });
            }
            for weighted in affinity.preferred_during_scheduling_ignored_during_execution.iter().flatten() {
                add_preferred(
                    &mut prepared,
                    &weighted.pod_affinity_term,
                    app,
                    snapshot,
                    i64::from(weighted.weight),
                );
            }
        }
        if let Some(anti) = &app.affinity.workload_anti_affinity {
            for term in anti.required_during_scheduling_ignored_during_execution.iter().flatten() {
                prepared
                    .anti
                    .entry(term.topology_key.clone())
                    .or_default()
                    .extend(domains_of(term, app, snapshot));
            }
            for weighted in anti.preferred_during_scheduling_ignored_during_execution.iter().flatten() {
                add_preferred(
                    &mut prepared,
                    &weighted.pod_affinity_term,
                    app,
                    snapshot,
                    -i64::from(weighted.weight),
                );
            }
        }
        state.write(NAME, prepared);
        Ok(())
    }

    fn filter(&self, _: &AppInfo, node: &NodeInfo, _: &Snapshot, state: &CycleState) -> Result<(), Reasons> {
        let Some(prepared) = state.read::<Prepared>(NAME) else { return Ok(()) };
        let inside = |domains: &Domains| {
            domains.iter().any(|(key, values)| node.topology(key).is_some_and(|value| values.contains(value)))
        };
        if inside(&prepared.existing_anti) {
            return Err(vec![EXISTING_ANTI.into()]);
        }
        let affinity_holds = prepared.affinity.iter().all(|term| match term {
            None => true,
            Some((key, values)) => node.topology(key).is_some_and(|value| values.contains(value)),
        });
        if !affinity_holds {
            return Err(vec![AFFINITY.into()]);
        }
        if inside(&prepared.anti) {
            return Err(vec![ANTI.into()]);
        }
        Ok(())
    }

    fn scores(&self) -> bool {
        true
    }

    fn score(&self, _: &AppInfo, node: &NodeInfo, _: &Snapshot, state: &CycleState) -> i64 {
        let Some(prepared) = state.read::<Prepared>(NAME) else { return 0 };
        prepared
            .preferred
            .iter()
            .filter_map(|(key, weights)| node.topology(key).and_then(|value| weights.get(value)))
            .sum()
    }

    fn normalize(&self, scores: &mut [i64]) {
        let (Some(min), Some(max)) = (scores.iter().copied().min(), scores.iter().copied().max()) else {
            return;
        };
        for score in scores.iter_mut() {
            *score = if max == min { 0 } else { (*score - min) * MAX_SCORE / (max - min) };
        }
    }
}

fn add_preferred(
    prepared: &mut Prepared,
    term: &PodAffinityTerm,
    app: &AppInfo,
    snapshot: &Snapshot,
    weight: i64,
) {
    let Some(selector) = &term.label_selector else { return };
    let namespaces = namespaces(term, &app.namespace);
    for (node, other) in snapshot.select(&namespaces, selector) {
        if other.id == app.id {
            continue;
        }
        if let Some(value) = snapshot.nodes().get(node).and_then(|n| n.topology(&term.topology_key)) {
            *prepared
                .preferred
                .entry(term.topology_key.clone())
                .or_default()
                .entry(value.to_owned())
                .or_default() += weight;
        }
    }
}

#[cfg(test)]
mod tests;
