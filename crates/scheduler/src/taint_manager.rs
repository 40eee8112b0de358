//! The taint manager, as Kubernetes' (`NoExecuteTaintManager`): a node's `NoExecute` taints
//! move the scheduler-placed Applications on it that do not tolerate one of them (at once), or
//! tolerate them for a while only: each taint is matched by the first of the Application's
//! tolerations that tolerates it, and the smallest `tolerationSeconds` among those matches
//! counts, from when the Application was first found tolerating the node for a while (the taint
//! appeared, or the Application arrived). A match without `tolerationSeconds` tolerates forever;
//! one of 0 or less, not at all. Moving is unbinding: `nodeName` and the scheduled-by
//! annotation are cleared together, and the scheduler places the Application again.
//! Applications their authors pinned stay where they are.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Taint;

use crate::model::{App, NodeInfo};
use crate::plugins::tolerates;

/// What to do on one node now.
#[derive(Debug, Default)]
pub struct Verdict {
    /// Applications to unbind now, each with the taint that moves it.
    pub evict: Vec<(App, Taint)>,
    /// Applications that tolerate the node's taints for a while: each with when it is due.
    pub bounded: Vec<(App, Instant)>,
    /// When the next tolerated-for-a-while Application is due.
    pub next: Option<Instant>,
}

/// How long an Application tolerates a node's taints.
#[derive(Debug, Clone, PartialEq)]
pub enum Tolerance {
    /// It does not tolerate this taint.
    None(Taint),
    /// For this long, as this taint's toleration says.
    For(Duration, Taint),
    /// As long as the taints stay (or the node has no `NoExecute` taint).
    Forever,
}

/// How long `app` tolerates the `NoExecute` taints of `node` (Kubernetes'
/// `GetMatchingTolerations` and `getMinTolerationTime`).
pub fn tolerance(node: &NodeInfo, app: &App) -> Tolerance {
    let mut shortest: Option<(i64, &Taint)> = None;
    for taint in node.taints.iter().filter(|t| t.effect == "NoExecute") {
        let Some(toleration) = app.tolerations.iter().find(|t| tolerates(t, taint)) else {
            return Tolerance::None(taint.clone());
        };
        if let Some(seconds) = toleration.toleration_seconds
            && shortest.is_none_or(|(least, _)| seconds < least)
        {
            shortest = Some((seconds, taint));
        }
    }
    match shortest {
        Some((seconds, taint)) => {
            Tolerance::For(Duration::from_secs(seconds.max(0).unsigned_abs()), taint.clone())
        }
        None => Tolerance::Forever,
    }
}

/// Which of `apps` (on `node`) move because of its `NoExecute` taints; `since` tells when an
/// Application was first found tolerating them for a while (asked only of those that do).
pub fn verdict<'a>(
    node: &NodeInfo,
    apps: impl IntoIterator<Item = &'a App>,
    since: impl Fn(&App) -> Instant,
    now: Instant,
) -> Verdict {
    let mut verdict = Verdict::default();
    for app in apps.into_iter().filter(|app| app.scheduler_placed) {
        match tolerance(node, app) {
            Tolerance::None(taint) => verdict.evict.push((app.clone(), taint)),
            Tolerance::For(duration, taint) => {
                let at = since(app) + duration;
                if at <= now {
                    verdict.evict.push((app.clone(), taint));
                } else {
                    verdict.bounded.push((app.clone(), at));
                    verdict.next = Some(verdict.next.map_or(at, |n| n.min(at)));
                }
            }
            Tolerance::Forever => {}
        }
    }
    verdict
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod tolerance_tests;
