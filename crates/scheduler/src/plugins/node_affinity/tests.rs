//! Node affinity: the selector and required terms filter, preferred terms score.

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
        (json!([{"matchExpressions": [{"key": "cores", "operator": "Gt", "values": ["8"]}]}]), vec!["ssd-a"]),
        (json!([{"matchExpressions": [{"key": "cores", "operator": "Lt", "values": ["8"]}]}]), vec!["hdd-b"]),
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
