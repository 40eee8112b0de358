//! `NodeResourcesFit`: an Application fits a node when its requests are no more than the
//! node's allocatable minus what the unfinished Applications already there request
//! (`Insufficient cpu`, `Insufficient memory`). Scoring follows the policy: `spread` is
//! kube-scheduler's `LeastAllocated` (the emptiest node wins), `binpack` its `MostAllocated`
//! (the fullest that fits wins), over CPU and memory with equal weights, counting unset
//! requests as kube-scheduler's scoring defaults.

use crate::framework::{CycleState, MAX_SCORE, Plugin, Policy, Reasons};
use crate::model::{AppInfo, NodeInfo};
use crate::snapshot::Snapshot;

/// Checks and scores CPU and memory.
#[derive(Debug, Clone, Copy)]
pub struct ResourcesFit {
    /// Spread or pack.
    pub policy: Policy,
}

impl Plugin for ResourcesFit {
    fn name(&self) -> &'static str {
        "NodeResourcesFit"
    }

    fn filter(
        &self,
        app: &AppInfo,
        node: &NodeInfo,
        snapshot: &Snapshot,
        _: &CycleState,
    ) -> Result<(), Reasons> {
        let requested = snapshot.usage(&node.name).map(|usage| usage.requested).unwrap_or_default();
        let free = node.allocatable.minus(requested);
        let mut reasons = Vec::new();
        if app.requests.cpu > 0 && app.requests.cpu > free.cpu {
            reasons.push("Insufficient cpu".into());
        }
        if app.requests.memory > 0 && app.requests.memory > free.memory {
            reasons.push("Insufficient memory".into());
        }
        if reasons.is_empty() { Ok(()) } else { Err(reasons) }
    }

    fn scores(&self) -> bool {
        true
    }

    fn score(&self, app: &AppInfo, node: &NodeInfo, snapshot: &Snapshot, _: &CycleState) -> i64 {
        let placed = snapshot.usage(&node.name).map(|usage| usage.scoring).unwrap_or_default();
        let wanted = placed.plus(app.scoring_requests());
        let one = |requested: i64, capacity: i64| -> i64 {
            if capacity <= 0 || requested > capacity {
                return 0;
            }
            match self.policy {
                Policy::Spread => (capacity - requested) * MAX_SCORE / capacity,
                Policy::Binpack => requested * MAX_SCORE / capacity,
            }
        };
        (one(wanted.cpu, node.allocatable.cpu) + one(wanted.memory, node.allocatable.memory)) / 2
    }
}

#[cfg(test)]
mod tests;
