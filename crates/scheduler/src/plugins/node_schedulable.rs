//! `NodeUnschedulable`, with what Kubernetes expresses as node-condition taints: a cordoned
//! node (`spec.unschedulable`) is out unless the Application tolerates
//! `node.kubernetes.io/unschedulable:NoSchedule`; a node whose `Ready` is `False` carries
//! `node.kubernetes.io/not-ready:NoSchedule`, and one that is `Unknown`, or whose last heartbeat
//! is older than the heartbeat timeout, `node.kubernetes.io/unreachable:NoSchedule`.

use std::time::Duration;

use crate::framework::{CycleState, Plugin, Reasons};
use crate::model::{AppInfo, NodeInfo, Readiness};
use crate::plugins::{taint, tolerated, untolerated};
use crate::snapshot::Snapshot;

/// kube-scheduler's reason for a cordoned node.
pub const UNSCHEDULABLE: &str = "node(s) were unschedulable";

/// Rules out cordoned, not-ready and silent nodes.
#[derive(Debug, Clone, Copy)]
pub struct NodeSchedulable {
    /// How old a heartbeat may be before the node counts as unreachable; `None` trusts the
    /// `Ready` condition alone.
    pub heartbeat_timeout: Option<Duration>,
}

impl Plugin for NodeSchedulable {
    fn name(&self) -> &'static str {
        "NodeUnschedulable"
    }

    fn filter(
        &self,
        app: &AppInfo,
        node: &NodeInfo,
        _: &Snapshot,
        state: &CycleState,
    ) -> Result<(), Reasons> {
        if node.unschedulable
            && !tolerated(&app.tolerations, &taint("node.kubernetes.io/unschedulable", "", "NoSchedule"))
        {
            return Err(vec![UNSCHEDULABLE.into()]);
        }
        let stale = match (self.heartbeat_timeout, node.heartbeat, state.now) {
            (Some(timeout), Some(heartbeat), Some(now)) => {
                now.duration_since(heartbeat).as_secs_f64() > timeout.as_secs_f64()
            }
            _ => false,
        };
        let implicit = match node.readiness {
            Readiness::Ready if !stale => None,
            Readiness::NotReady => Some(taint("node.kubernetes.io/not-ready", "", "NoSchedule")),
            _ => Some(taint("node.kubernetes.io/unreachable", "", "NoSchedule")),
        };
        match implicit {
            Some(taint) if !tolerated(&app.tolerations, &taint) => Err(vec![untolerated(&taint).into()]),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
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
        assert_eq!(
            plugin.filter(&tolerant, &with(|n| n.readiness = Readiness::Unknown), &empty, &state),
            Ok(())
        );
    }
}
