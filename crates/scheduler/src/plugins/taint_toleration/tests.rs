//! Hard taints filter, soft ones score, tolerations lift both.

use serde_json::json;

use super::*;
use crate::plugins::taint;
use crate::plugins::testing::{app, node, shape, snapshot};

#[test]
fn hard_taints_filter_soft_ones_score_and_tolerations_lift_both() {
    let tainted = |name: &str, taints: Vec<k8s_openapi::api::core::v1::Taint>| {
        let mut n = node(name, &[]);
        n.taints = taints;
        n
    };
    let fleet = snapshot(
        vec![
            tainted("clean", vec![]),
            tainted("db", vec![taint("dedicated", "db", "NoSchedule")]),
            tainted("draining", vec![taint("maintenance", "", "NoExecute")]),
            tainted("soft", vec![taint("spot", "true", "PreferNoSchedule")]),
        ],
        vec![],
    );
    let state = CycleState::default();
    let plain = app("plain", &[]);
    let results: Vec<Result<(), Reasons>> =
        fleet.nodes().values().map(|n| TaintToleration.filter(&plain, n, &fleet, &state)).collect();
    assert_eq!(
        results,
        [
            Ok(()),
            Err(vec!["node(s) had untolerated taint {dedicated: db}".into()]),
            Err(vec!["node(s) had untolerated taint {maintenance: }".into()]),
            Ok(()),
        ]
    );
    let mut tolerant = app("tolerant", &[]);
    tolerant.tolerations = vec![
        shape(json!({"key": "dedicated", "operator": "Equal", "value": "db", "effect": "NoSchedule"})),
        shape(json!({"key": "maintenance", "operator": "Exists"})),
    ];
    assert!(fleet.nodes().values().all(|n| TaintToleration.filter(&tolerant, n, &fleet, &state).is_ok()));
    let mut scores: Vec<i64> = ["clean", "soft"]
        .iter()
        .map(|n| TaintToleration.score(&plain, &fleet.nodes()[*n], &fleet, &state))
        .collect();
    TaintToleration.normalize(&mut scores);
    assert_eq!(scores, [100, 0]);
    let mut spot = app("spot", &[]);
    spot.tolerations =
        vec![shape(json!({"key": "spot", "operator": "Exists", "effect": "PreferNoSchedule"}))];
    assert_eq!(TaintToleration.score(&spot, &fleet.nodes()["soft"], &fleet, &state), 0);
}
