//! The taint manager: a node's `NoExecute` taint moves the scheduler-placed Applications on it
//! that do not tolerate it (at once), or tolerate it for `tolerationSeconds` only (when that
//! time has passed since the taint was first seen). Moving is unbinding: `nodeName` and the
//! scheduled-by annotation are cleared together, and the scheduler places the Application
//! again. Applications their authors pinned stay where they are.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Taint;

use crate::model::{App, NodeInfo};
use crate::plugins::tolerates;

/// What to do on one node now.
#[derive(Debug, Default)]
pub struct Verdict {
    /// Applications to unbind now, each with the taint that moves it.
    pub evict: Vec<(App, Taint)>,
    /// When the next tolerated-for-a-while Application is due.
    pub next: Option<Instant>,
}

/// Which of `apps` (on `node`) move because of its `NoExecute` taints; `seen` tells when a
/// taint was first seen.
pub fn verdict<'a>(
    node: &NodeInfo,
    apps: impl IntoIterator<Item = &'a App>,
    seen: impl Fn(&Taint) -> Instant,
    now: Instant,
) -> Verdict {
    let mut verdict = Verdict::default();
    let taints: Vec<&Taint> = node.taints.iter().filter(|t| t.effect == "NoExecute").collect();
    if taints.is_empty() {
        return verdict;
    }
    'apps: for app in apps.into_iter().filter(|app| app.scheduler_placed) {
        let mut due: Option<Instant> = None;
        for taint in &taints {
            let tolerations: Vec<_> = app.tolerations.iter().filter(|t| tolerates(t, taint)).collect();
            if tolerations.is_empty() {
                verdict.evict.push((app.clone(), (*taint).clone()));
                continue 'apps;
            }
            // Tolerated forever unless every matching toleration is bounded; then the longest
            // bound counts, as Kubernetes takes it.
            if tolerations.iter().all(|t| t.toleration_seconds.is_some()) {
                let seconds =
                    tolerations.iter().filter_map(|t| t.toleration_seconds).max().unwrap_or(0).max(0);
                let at = seen(taint) + Duration::from_secs(seconds.unsigned_abs());
                if at <= now {
                    verdict.evict.push((app.clone(), (*taint).clone()));
                    continue 'apps;
                }
                due = Some(due.map_or(at, |d| d.min(at)));
            }
        }
        if let Some(at) = due {
            verdict.next = Some(verdict.next.map_or(at, |n| n.min(at)));
        }
    }
    verdict
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::json;

    use super::*;
    use crate::plugins::taint;
    use crate::plugins::testing::{app, node, shape};

    #[test]
    fn no_execute_moves_what_the_scheduler_placed_and_does_not_tolerate() {
        let mut n = node("n1", &[]);
        n.taints = vec![taint("maintenance", "", "NoExecute"), taint("soft", "", "NoSchedule")];
        let placed = |name: &str, tolerations: serde_json::Value, by_scheduler: bool| {
            let mut a = app(name, &[]);
            a.scheduler_placed = by_scheduler;
            a.tolerations = shape(tolerations);
            Arc::new(a)
        };
        let apps = vec![
            placed("moved", json!([]), true),
            placed("pinned", json!([]), false),
            placed("tolerant", json!([{"key": "maintenance", "operator": "Exists"}]), true),
            placed(
                "for-a-while",
                json!([{"key": "maintenance", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 30}]),
                true,
            ),
        ];
        let start = Instant::now();
        let at = |now: Instant| {
            let v = verdict(&n, &apps, |_| start, now);
            (v.evict.iter().map(|(a, t)| format!("{}:{}", a.name, t.key)).collect::<Vec<_>>(), v.next)
        };
        assert_eq!(at(start), (vec!["moved:maintenance".to_owned()], Some(start + Duration::from_secs(30))));
        assert_eq!(at(start + Duration::from_secs(30)).0, ["moved:maintenance", "for-a-while:maintenance"]);
        n.taints = vec![taint("soft", "", "NoSchedule")];
        assert!(verdict(&n, &apps, |_| start, start).evict.is_empty(), "NoSchedule moves nothing");
    }
}
