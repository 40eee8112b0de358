//! Workload affinity: required rules over topology domains, symmetric anti-affinity,
//! preferred terms' weights per domain.

use serde_json::json;

use super::*;
use crate::plugins::testing::{app, node, on, shape, snapshot};

fn term(labels: serde_json::Value, key: &str) -> serde_json::Value {
    json!({"labelSelector": {"matchLabels": labels}, "topologyKey": key})
}

fn passing(new: &AppInfo, fleet: &Snapshot) -> Vec<Result<(), Reasons>> {
    let mut state = CycleState::default();
    WorkloadAffinity.pre_filter(new, fleet, &mut state).unwrap();
    fleet.nodes().values().map(|n| WorkloadAffinity.filter(new, n, fleet, &state)).collect()
}

#[test]
fn required_rules_hold_over_topology_domains_and_anti_affinity_is_symmetric() {
    let nodes =
        || vec![node("a1", &[("zone", "a")]), node("a2", &[("zone", "a")]), node("b1", &[("zone", "b")])];
    let ok = || Ok::<(), Reasons>(());
    let err = |reason: &str| Err::<(), Reasons>(vec![reason.to_owned().into()]);
    let with = |name: &str, labels: &[(&str, &str)], affinity: serde_json::Value| {
        let mut a = app(name, labels);
        a.affinity = shape(affinity);
        a
    };
    let db = app("db", &[("app", "db")]);
    let fleet = snapshot(nodes(), vec![on(db.clone(), "a2")]);
    // Near the database's zone.
    let near = with(
        "web",
        &[("app", "web")],
        json!({"workloadAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term(json!({"app": "db"}), "zone")]}}),
    );
    assert_eq!(passing(&near, &fleet), [ok(), ok(), err(AFFINITY)]);
    // Away from the database's host (kubernetes.io/hostname is the node's name when unlabelled).
    let apart = with(
        "web",
        &[("app", "web")],
        json!({"workloadAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term(json!({"app": "db"}), "kubernetes.io/hostname")]}}),
    );
    assert_eq!(passing(&apart, &fleet), [ok(), err(ANTI), ok()]);
    // A term in another namespace picks nothing there.
    let elsewhere = with(
        "web",
        &[],
        json!({"workloadAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": "zone", "namespaces": ["other"]}]}}),
    );
    assert_eq!(passing(&elsewhere, &fleet), [ok(), ok(), ok()]);
    // Symmetry: a placed Application's anti-affinity keeps newcomers it picks out of its zone.
    let loner = with(
        "loner",
        &[("app", "loner")],
        json!({"workloadAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term(json!({"app": "web"}), "zone")]}}),
    );
    let fleet = snapshot(nodes(), vec![on(loner, "b1")]);
    assert_eq!(passing(&app("web", &[("app", "web")]), &fleet), [ok(), ok(), err(EXISTING_ANTI)]);
    assert_eq!(passing(&app("db", &[("app", "db")]), &fleet), [ok(), ok(), ok()]);
    // A placed term with only matchExpressions (not in the label index) protects it too.
    let wary = with(
        "wary",
        &[],
        json!({"workloadAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchExpressions": [{"key": "app", "operator": "In", "values": ["web", "api"]}]}, "topologyKey": "zone"}]}}),
    );
    let fleet = snapshot(nodes(), vec![on(wary, "a1")]);
    assert_eq!(
        passing(&app("api", &[("app", "api")]), &fleet),
        [err(EXISTING_ANTI), err(EXISTING_ANTI), ok()]
    );
    assert_eq!(passing(&app("db", &[("app", "db")]), &fleet), [ok(), ok(), ok()]);
    // The first of a group whose affinity picks its own kind may go anywhere.
    let first = with(
        "g-0",
        &[("group", "g")],
        json!({"workloadAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term(json!({"group": "g"}), "zone")]}}),
    );
    assert_eq!(passing(&first, &snapshot(nodes(), vec![])), [ok(), ok(), ok()]);
    let stranger = with(
        "s",
        &[],
        json!({"workloadAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term(json!({"group": "g"}), "zone")]}}),
    );
    assert_eq!(passing(&stranger, &snapshot(nodes(), vec![])), [err(AFFINITY), err(AFFINITY), err(AFFINITY)]);
}

#[test]
fn preferred_terms_add_and_subtract_weights_per_domain() {
    let fleet = snapshot(
        vec![node("a1", &[("zone", "a")]), node("b1", &[("zone", "b")]), node("c1", &[("zone", "c")])],
        vec![on(app("cache", &[("app", "cache")]), "a1"), on(app("noisy", &[("app", "noisy")]), "b1")],
    );
    let mut new = app("web", &[]);
    new.affinity = shape(json!({
        "workloadAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 50, "podAffinityTerm": term(json!({"app": "cache"}), "zone")}]},
        "workloadAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 20, "podAffinityTerm": term(json!({"app": "noisy"}), "zone")}]},
    }));
    let mut state = CycleState::default();
    WorkloadAffinity.pre_filter(&new, &fleet, &mut state).unwrap();
    let mut scores: Vec<i64> =
        fleet.nodes().values().map(|n| WorkloadAffinity.score(&new, n, &fleet, &state)).collect();
    assert_eq!(scores, [50, -20, 0]);
    WorkloadAffinity.normalize(&mut scores);
    assert_eq!(scores, [100, 0, 28]);
}
