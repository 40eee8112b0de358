//! Requests fit what a node has left; spread prefers the emptier node, binpack the fuller.

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
    let idle = ResourcesFit { policy: Policy::Spread }.score(&bare, &fleet.nodes()["idle"], &fleet, &state);
    assert!(idle < MAX_SCORE && idle > 90, "{idle}");
}
