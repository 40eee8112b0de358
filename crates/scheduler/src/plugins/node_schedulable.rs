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
mod tests;
