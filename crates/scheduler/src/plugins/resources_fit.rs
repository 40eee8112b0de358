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
mod tests {
    use super::*;
    use crate::model::Resources;
    use crate::plugins::testing::{app, node, on, snapshot};

    fn asking(cpu: i64, memory: i64) -> AppInfo {
        let mut a = app("new", &[]);
        a.requests = Resources { cpu, memory };
        a
    }

    #[test]
    fn requests_must_fit_what_the_node_has_left() {
        let mut big = app("big", &[]);
        big.requests = Resources { cpu: 3000, memory: 6 << 30 };
        let mut done = app("done", &[]);
        done.requests = Resources { cpu: 4000, memory: 8 << 30 };
        done.finished = true;
        let fleet = snapshot(vec![node("n1", &[])], vec![on(big, "n1"), on(done, "n1")]);
        let plugin = ResourcesFit { policy: Policy::Spread };
        let state = CycleState::default();
        let n1 = &fleet.nodes()["n1"];
        let cases = [
            ((1000, 2 << 30), Ok(())),
            ((0, 0), Ok(())),
            ((1001, 0), Err(vec!["Insufficient cpu".into()])),
            ((0, (2 << 30) + 1), Err(vec!["Insufficient memory".into()])),
            ((2000, 4 << 30), Err(vec!["Insufficient cpu".into(), "Insufficient memory".into()])),
        ];
        for ((cpu, memory), expected) in cases {
            assert_eq!(plugin.filter(&asking(cpu, memory), n1, &fleet, &state), expected, "{cpu} {memory}");
        }
    }

    #[test]
    fn spread_prefers_the_emptier_node_and_binpack_the_fuller() {
        let mut half = app("half", &[]);
        half.requests = Resources { cpu: 2000, memory: 4 << 30 };
        let fleet = snapshot(vec![node("busy", &[]), node("idle", &[])], vec![on(half, "busy")]);
        let new = asking(1000, 2 << 30);
        let state = CycleState::default();
        let score =
            |policy, name: &str| ResourcesFit { policy }.score(&new, &fleet.nodes()[name], &fleet, &state);
        assert_eq!((score(Policy::Spread, "busy"), score(Policy::Spread, "idle")), (25, 75));
        assert_eq!((score(Policy::Binpack, "busy"), score(Policy::Binpack, "idle")), (75, 25));
        // Unset requests score as 100m and 200Mi, so request-less Applications spread too.
        let bare = app("bare", &[]);
        let idle =
            ResourcesFit { policy: Policy::Spread }.score(&bare, &fleet.nodes()["idle"], &fleet, &state);
        assert!(idle < MAX_SCORE && idle > 90, "{idle}");
    }
}
