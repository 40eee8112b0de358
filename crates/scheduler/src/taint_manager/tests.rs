//! The taint manager's verdicts: what a `NoExecute` taint moves off a node, and what it leaves.

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
        // The first matching toleration counts, not the longest.
        placed(
            "first-match",
            json!([{"operator": "Exists", "tolerationSeconds": 30},
                   {"key": "maintenance", "operator": "Exists", "tolerationSeconds": 60}]),
            true,
        ),
    ];
    let start = Instant::now();
    let at = |now: Instant| {
        let v = verdict(&n, &apps, |_| start, now);
        (v.evict.iter().map(|(a, t)| format!("{}:{}", a.name, t.key)).collect::<Vec<_>>(), v.next)
    };
    assert_eq!(at(start), (vec!["moved:maintenance".to_owned()], Some(start + Duration::from_secs(30))));
    assert_eq!(
        at(start + Duration::from_secs(30)).0,
        ["moved:maintenance", "for-a-while:maintenance", "first-match:maintenance"]
    );
    n.taints = vec![taint("soft", "", "NoSchedule")];
    assert!(verdict(&n, &apps, |_| start, start).evict.is_empty(), "NoSchedule moves nothing");
}
