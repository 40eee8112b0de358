//! Tolerations bounded by `tolerationSeconds`: the first matching toleration of each taint
//! counts, and the shortest bound decides when an Application leaves a tainted node.

use std::sync::Arc;

use serde_json::json;

use super::*;
use crate::plugins::taint;
use crate::plugins::testing::{app, node, shape};

#[test]
fn the_first_matching_toleration_of_each_taint_counts_and_the_shortest_bound_wins() {
    let mut n = node("n1", &[]);
    n.taints = vec![taint("maintenance", "", "NoExecute"), taint("degraded", "", "NoExecute")];
    let secs = |s: u64| Duration::from_secs(s);
    let cases = [
        ("no toleration", json!([]), Tolerance::None(taint("maintenance", "", "NoExecute"))),
        (
            "one taint tolerated only",
            json!([{"key": "maintenance", "operator": "Exists"}]),
            Tolerance::None(taint("degraded", "", "NoExecute")),
        ),
        ("both forever", json!([{"operator": "Exists"}]), Tolerance::Forever),
        (
            "two bounds over two taints: the shorter",
            json!([{"key": "maintenance", "operator": "Exists", "tolerationSeconds": 60},
                   {"key": "degraded", "operator": "Exists", "tolerationSeconds": 30}]),
            Tolerance::For(secs(30), taint("degraded", "", "NoExecute")),
        ),
        (
            "a bound and forever: the bound",
            json!([{"key": "maintenance", "operator": "Exists", "tolerationSeconds": 60},
                   {"key": "degraded", "operator": "Exists"}]),
            Tolerance::For(secs(60), taint("maintenance", "", "NoExecute")),
        ),
        (
            "the first match of a taint, not the longest",
            json!([{"operator": "Exists", "tolerationSeconds": 30},
                   {"key": "maintenance", "operator": "Exists", "tolerationSeconds": 60},
                   {"key": "degraded", "operator": "Exists"}]),
            Tolerance::For(secs(30), taint("maintenance", "", "NoExecute")),
        ),
        (
            "a first match that is forever hides a later bound",
            json!([{"operator": "Exists"},
                   {"key": "maintenance", "operator": "Exists", "tolerationSeconds": 30}]),
            Tolerance::Forever,
        ),
        (
            "zero or less: not at all",
            json!([{"operator": "Exists", "tolerationSeconds": -5}]),
            Tolerance::For(secs(0), taint("maintenance", "", "NoExecute")),
        ),
    ];
    for (case, tolerations, expected) in cases {
        let mut a = app("a", &[]);
        a.scheduler_placed = true;
        a.tolerations = shape(tolerations);
        assert_eq!(tolerance(&n, &Arc::new(a)), expected, "{case}");
    }
}
