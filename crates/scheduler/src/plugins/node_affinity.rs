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
mod tests {
    use serde_json::json;

    use super::*;
    use crate::plugins::testing::{app, node, shape, snapshot};

    #[test]
    fn selector_and_required_terms_filter_and_preferred_terms_score() {
        let fleet = snapshot(
            vec![
                node("ssd-a", &[("disk", "ssd"), ("zone", "a"), ("cores", "16")]),
                node("hdd-b", &[("disk", "hdd"), ("zone", "b"), ("cores", "4")]),
                node("bare", &[]),
            ],
            vec![],
        );
        let state = CycleState::default();
        let passing = |a: &AppInfo| -> Vec<&str> {
            fleet
                .nodes()
                .values()
                .filter(|n| NodeAffinity.filter(a, n, &fleet, &state).is_ok())
                .map(|n| n.name.as_str())
                .collect()
        };
        let mut selector = app("s", &[]);
        selector.node_selector = [("disk".to_owned(), "ssd".to_owned())].into();
        assert_eq!(passing(&selector), ["ssd-a"]);
        assert_eq!(
            NodeAffinity.filter(&selector, &fleet.nodes()["bare"], &fleet, &state),
            Err(vec![MISMATCH.into()])
        );
        let with = |affinity: serde_json::Value| {
            let mut a = app("x", &[]);
            a.affinity = shape(json!({"nodeAffinity": affinity}));
            a
        };
        let required = |terms: serde_json::Value| {
            with(json!({"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}))
        };
        let cases = [
            (
                json!([{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a", "b"]}]}]),
                vec!["hdd-b", "ssd-a"],
            ),
            (
                json!([{"matchExpressions": [{"key": "zone", "operator": "NotIn", "values": ["a"]}]}]),
                vec!["bare", "hdd-b"],
            ),
            (json!([{"matchExpressions": [{"key": "disk", "operator": "Exists"}]}]), vec!["hdd-b", "ssd-a"]),
            (json!([{"matchExpressions": [{"key": "disk", "operator": "DoesNotExist"}]}]), vec!["bare"]),
            (
                json!([{"matchExpressions": [{"key": "cores", "operator": "Gt", "values": ["8"]}]}]),
                vec!["ssd-a"],
            ),
            (
                json!([{"matchExpressions": [{"key": "cores", "operator": "Lt", "values": ["8"]}]}]),
                vec!["hdd-b"],
            ),
            // Terms are alternatives; the requirements of one term all hold.
            (
                json!([{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}, {"key": "disk", "operator": "In", "values": ["hdd"]}]}]),
                vec![],
            ),
            (
                json!([{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}, {"matchExpressions": [{"key": "disk", "operator": "In", "values": ["hdd"]}]}]),
                vec!["hdd-b", "ssd-a"],
            ),
            (json!([{}]), vec![]),
        ];
        for (terms, expected) in cases {
            assert_eq!(passing(&required(terms.clone())), expected, "{terms}");
        }
        let preferring = with(json!({"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 10, "preference": {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]}},
            {"weight": 30, "preference": {"matchExpressions": [{"key": "disk", "operator": "Exists"}]}},
        ]}));
        let mut scores: Vec<i64> = ["bare", "hdd-b", "ssd-a"]
            .iter()
            .map(|n| NodeAffinity.score(&preferring, &fleet.nodes()[*n], &fleet, &state))
            .collect();
        assert_eq!(scores, [0, 40, 30]);
        NodeAffinity.normalize(&mut scores);
        assert_eq!(scores, [0, 100, 75]);
    }
}
