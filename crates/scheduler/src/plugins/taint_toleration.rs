//! `TaintToleration`: a node with a `NoSchedule` or `NoExecute` taint the Application does not
//! tolerate is ruled out (`node(s) had untolerated taint {key: value}`, naming the first); a
//! `PreferNoSchedule` taint it does not tolerate lowers the node's score.

use crate::framework::{CycleState, Plugin, Reasons, default_normalize};
use crate::model::{AppInfo, NodeInfo};
use crate::plugins::{tolerated, untolerated};
use crate::snapshot::Snapshot;

/// Taints against tolerations.
#[derive(Debug, Clone, Copy)]
pub struct TaintToleration;

impl Plugin for TaintToleration {
    fn name(&self) -> &'static str {
        "TaintToleration"
    }

    fn filter(&self, app: &AppInfo, node: &NodeInfo, _: &Snapshot, _: &CycleState) -> Result<(), Reasons> {
        let blocking = node
            .taints
            .iter()
            .filter(|taint| matches!(taint.effect.as_str(), "NoSchedule" | "NoExecute"))
            .find(|taint| !tolerated(&app.tolerations, taint));
        match blocking {
            Some(taint) => Err(vec![untolerated(taint).into()]),
            None => Ok(()),
        }
    }

    fn scores(&self) -> bool {
        true
    }

    fn score(&self, app: &AppInfo, node: &NodeInfo, _: &Snapshot, _: &CycleState) -> i64 {
        let untolerated = node
            .taints
            .iter()
            .filter(|taint| taint.effect == "PreferNoSchedule" && !tolerated(&app.tolerations, taint))
            .count();
        i64::try_from(untolerated).unwrap_or(i64::MAX)
    }

    fn normalize(&self, scores: &mut [i64]) {
        default_normalize(scores, true);
    }
}

#[cfg(test)]
mod tests;
