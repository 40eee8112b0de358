//! `NodeAffinity`: `nodeSelector` and required node affinity rule nodes out (`node(s) didn't
//! match Pod's node affinity/selector`, kube-scheduler's words); preferred terms score a node by
//! the summed weights of the terms it meets, normalised to the best node. The required terms
//! are alternatives (one must hold); the requirements of a term must all hold.

use k8s_openapi::api::core::v1::NodeSelectorTerm;

use crate::framework::{CycleState, Plugin, Reasons, default_normalize};
use crate::model::{AppInfo, NodeInfo};
use crate::plugins::meets;
use crate::snapshot::Snapshot;

/// kube-scheduler's reason for a node that fails the selector or required affinity.
pub const MISMATCH: &str = "node(s) didn't match Pod's node affinity/selector";

/// Node selector and node affinity.
#[derive(Debug, Clone, Copy)]
pub struct NodeAffinity;

fn term_holds(term: &NodeSelectorTerm, node: &NodeInfo) -> bool {
    let expressions = term.match_expressions.as_deref().unwrap_or_default();
    // A term with no requirements selects nothing, as in Kubernetes.
    !expressions.is_empty() && expressions.iter().all(|requirement| meets(requirement, &node.labels))
}

/// Whether `node` meets `app`'s node selector and required node affinity.
pub fn required_holds(app: &AppInfo, node: &NodeInfo) -> bool {
    if !app.node_selector.iter().all(|(key, value)| node.labels.get(key) == Some(value)) {
        return false;
    }
    let required = app
        .affinity
        .node_affinity
        .as_ref()
        .and_then(|affinity| affinity.required_during_scheduling_ignored_during_execution.as_ref());
    match required {
        Some(selector) => selector.node_selector_terms.iter().any(|term| term_holds(term, node)),
        None => true,
    }
}

impl Plugin for NodeAffinity {
    fn name(&self) -> &'static str {
        "NodeAffinity"
    }

    fn filter(&self, app: &AppInfo, node: &NodeInfo, _: &Snapshot, _: &CycleState) -> Result<(), Reasons> {
        if required_holds(app, node) { Ok(()) } else { Err(vec![MISMATCH.into()]) }
    }

    fn scores(&self) -> bool {
        true
    }

    fn score(&self, app: &AppInfo, node: &NodeInfo, _: &Snapshot, _: &CycleState) -> i64 {
        let preferred = app
            .affinity
            .node_affinity
            .as_ref()
            .and_then(|affinity| affinity.preferred_during_scheduling_ignored_during_execution.as_ref());
        preferred
            .into_iter()
            .flatten()
            .filter(|term| term_holds(&term.preference, node))
            .map(|term| i64::from(term.weight))
            .sum()
    }

    fn normalize(&self, scores: &mut [i64]) {
        default_normalize(scores, false);
    }
}

#[cfg(test)]
mod tests;
