//! Cordoned, not-ready, unreachable and silent nodes are ruled out unless tolerated.

use serde_json::json;

use super::*;
use crate::plugins::testing::{app, node, shape, snapshot};

type Verdict = Result<(), Reasons>;

#[test]
fn cordoned_not_ready_unreachable_and_silent_nodes_are_ruled_out_unless_tolerated() {
    let now: jiff::Timestamp = "2026-01-01T00:01:00Z".parse().unwrap();
    let plugin = NodeSchedulable { heartbeat_timeout: Some(Duration::from_secs(40)) };
    let state = CycleState::at(Some(now));
    let with = |f: fn(&mut NodeInfo)| {
        let mut n = node("n", &[]);
        n.heartbeat = Some("2026-01-01T00:00:50Z".parse().unwrap());
        f(&mut n);
        n
    };
    let cases: [(&str, NodeInfo, Verdict); 6] = [
        ("ready", with(|_| {}), Ok(())),
        ("no heartbeat known", with(|n| n.heartbeat = None), Ok(())),
        ("cordoned", with(|n| n.unschedulable = true), Err(vec![UNSCHEDULABLE.into()])),
        (
            "not ready",
            with(|n| n.readiness = Readiness::NotReady),
            Err(vec!["node(s) had untolerated taint {node.kubernetes.io/not-ready: }".into()]),
        ),
        (
            "unknown",
            with(|n| n.readiness = Readiness::Unknown),
            Err(vec!["node(s) had untolerated taint {node.kubernetes.io/unreachable: }".into()]),
        ),
        (
            "silent for 60s",
            with(|n| n.heartbeat = Some("2026-01-01T00:00:00Z".parse().unwrap())),
            Err(vec!["node(s) had untolerated taint {node.kubernetes.io/unreachable: }".into()]),
        ),
    ];
    let empty = snapshot(vec![], vec![]);
    for (case, n, expected) in cases {
        assert_eq!(plugin.filter(&app("a", &[]), &n, &empty, &state), expected, "{case}");
    }
    let mut tolerant = app("a", &[]);
    tolerant.tolerations = vec![
        shape(
            json!({"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}),
        ),
        shape(json!({"key": "node.kubernetes.io/unreachable", "operator": "Exists"})),
    ];
    assert_eq!(plugin.filter(&tolerant, &with(|n| n.unschedulable = true), &empty, &state), Ok(()));
    assert_eq!(plugin.filter(&tolerant, &with(|n| n.readiness = Readiness::Unknown), &empty, &state), Ok(()));
}
