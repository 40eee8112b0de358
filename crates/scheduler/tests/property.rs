//! Random fleets and Applications through the framework, checked against a brute-force search
//! written apart from the plugins: no node is ever over-committed, every placement meets every
//! required rule (resources, cordon, readiness and heartbeat, node selector and affinity with
//! every operator, taints, workload affinity and anti-affinity both ways and across
//! namespaces), an Application is left pending only when no node could take it, and the same
//! input gives the same placements. Preferred node and workload terms and `PreferNoSchedule`
//! taints only score, so they bear on determinism alone. Fleets of 100 nodes and more are
//! sampled as kube-scheduler samples them (a cycle stops once it found enough feasible nodes):
//! a placement must still be feasible, and a pending Application still have no feasible node.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use kayra_scheduler::framework::{Framework, Policy};
use kayra_scheduler::model::{AppInfo, NodeInfo, Readiness, Resources};
use kayra_scheduler::snapshot::Snapshot;
use proptest::prelude::*;
use serde_json::json;

#[derive(Debug, Clone)]
struct NodeSpec {
    cpu: i64,
    memory: i64,
    zone: u8,
    ssd: bool,
    cordoned: bool,
    tainted: Option<(u8, bool)>,
    cores: Option<u8>,
    soft_taint: bool,
    health: Health,
}

/// A node's `Ready` condition and heartbeat.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Health {
    Fresh,
    Stale,
    NotReady,
    Unknown,
}

/// The operator of a requirement on a node's numeric `cores` label.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CoresOp {
    Exists,
    DoesNotExist,
    Gt,
    Lt,
}

#[derive(Debug, Clone)]
struct AppSpec {
    cpu: i64,
    memory: i64,
    group: u8,
    priority: i64,
    zone_selector: Option<u8>,
    ssd_required: Option<bool>,
    tolerates: Option<u8>,
    anti_host: bool,
    anti_zone_of: Option<u8>,
    near_group: Option<u8>,
    namespace: u8,
    cores_rule: Option<(CoresOp, u8)>,
    tolerates_conditions: bool,
    /// Whether the `anti_zone_of` and `near_group` terms list both namespaces (rather than
    /// none, which means the Application's own).
    everywhere: (bool, bool),
    preferred_zone: Option<(u8, i32)>,
    preferred_group: Option<(u8, i32, bool)>,
}

/// Nodes, each oddity (a cordon, a node not ready or not heard from; taints twice as often)
/// in `odd` percent of them.
fn node_spec(odd: u32) -> impl Strategy<Value = NodeSpec> {
    let health = prop_oneof![
        100 - 3 * odd => Just(Health::Fresh),
        odd => Just(Health::Stale),
        odd => Just(Health::NotReady),
        odd => Just(Health::Unknown),
    ];
    let odd = f64::from(odd) / 100.0;
    (
        (1i64..=8, 1i64..=8, 0u8..3, any::<bool>()),
        (prop::bool::weighted(odd), prop::option::weighted(2.0 * odd, (0u8..2, any::<bool>()))),
        (prop::option::weighted(0.7, 0u8..16), prop::bool::weighted(0.3), health),
    )
        .prop_map(|((cpu, memory, zone, ssd), (cordoned, tainted), (cores, soft_taint, health))| {
            NodeSpec {
                cpu: cpu * 500,
                memory: memory << 28,
                zone,
                ssd,
                cordoned,
                tainted,
                cores,
                soft_taint,
                health,
            }
        })
}

fn app_spec() -> impl Strategy<Value = AppSpec> {
    let cores_op =
        prop_oneof![Just(CoresOp::Exists), Just(CoresOp::DoesNotExist), Just(CoresOp::Gt), Just(CoresOp::Lt)];
    (
        (0i64..=6, 0i64..=6, 0u8..3, -1i64..=1),
        (
            prop::option::weighted(0.2, 0u8..3),
            prop::option::weighted(0.2, any::<bool>()),
            prop::option::weighted(0.3, 0u8..2),
        ),
        (
            prop::bool::weighted(0.3),
            prop::option::weighted(0.15, 0u8..3),
            prop::option::weighted(0.15, 0u8..3),
        ),
        (
            0u8..2,
            prop::option::weighted(0.25, (cores_op, 0u8..16)),
            prop::bool::weighted(0.2),
            any::<(bool, bool)>(),
        ),
        (
            prop::option::weighted(0.3, (0u8..3, 1i32..=100)),
            prop::option::weighted(0.3, (0u8..3, 1i32..=100, any::<bool>())),
        ),
    )
        .prop_map(
            |(
                (cpu, memory, group, priority),
                (zone_selector, ssd_required, tolerates),
                (anti_host, anti_zone_of, near_group),
                (namespace, cores_rule, tolerates_conditions, everywhere),
                (preferred_zone, preferred_group),
            )| AppSpec {
                cpu: cpu * 250,
                memory: memory << 27,
                group,
                priority,
                zone_selector,
                ssd_required,
                tolerates,
                anti_host,
                anti_zone_of,
                near_group,
                namespace,
                cores_rule,
                tolerates_conditions,
                everywhere,
                preferred_zone,
                preferred_group,
            },
        )
}

const NAMESPACES: [&str; 2] = ["demo", "other"];

/// When every cycle runs.
fn now() -> jiff::Timestamp {
    "2026-01-01T01:00:00Z".parse().unwrap()
}

/// How old a heartbeat may be.
const HEARTBEAT_TIMEOUT: Duration = Duration::from_secs(40);

fn zone(z: u8) -> String {
    format!("z{z}")
}

fn node_info(at: usize, spec: &NodeSpec) -> NodeInfo {
    let zone = zone(spec.zone);
    let disk = if spec.ssd { "ssd" } else { "hdd" };
    let cores = spec.cores.map(|c| c.to_string());
    let mut labels = vec![("zone", zone.as_str()), ("disk", disk)];
    if let Some(cores) = &cores {
        labels.push(("cores", cores));
    }
    let mut node =
        NodeInfo::new(&format!("n{at}"), Resources { cpu: spec.cpu, memory: spec.memory }, &labels);
    node.unschedulable = spec.cordoned;
    if let Some((key, execute)) = spec.tainted {
        node.taints = vec![serde_json::from_value(json!({"key": format!("t{key}"), "value": "x", "effect": if execute { "NoExecute" } else { "NoSchedule" }})).unwrap()];
    }
    if spec.soft_taint {
        node.taints
            .push(serde_json::from_value(json!({"key": "soft", "effect": "PreferNoSchedule"})).unwrap());
    }
    let ago = |seconds: i64| Some(now() - jiff::SignedDuration::from_secs(seconds));
    (node.readiness, node.heartbeat) = match spec.health {
        Health::Fresh => (Readiness::Ready, ago(10)),
        Health::Stale => (Readiness::Ready, ago(120)),
        Health::NotReady => (Readiness::NotReady, ago(5)),
        Health::Unknown => (Readiness::Unknown, ago(300)),
    };
    node
}

fn app_info(at: usize, spec: &AppSpec) -> AppInfo {
    let mut app = AppInfo::new(NAMESPACES[usize::from(spec.namespace)], &format!("a{at:02}"));
    app.created = format!("2026-01-01T00:00:{:02}Z", at % 60);
    app.requests = Resources { cpu: spec.cpu, memory: spec.memory };
    app.labels = [("group".to_owned(), format!("g{}", spec.group))].into();
    app.priority = spec.priority;
    if let Some(z) = spec.zone_selector {
        app.node_selector = [("zone".to_owned(), zone(z))].into();
    }
    let mut affinity = serde_json::Map::new();
    let mut expressions = Vec::new();
    if let Some(ssd) = spec.ssd_required {
        expressions
            .push(json!({"key": "disk", "operator": if ssd { "In" } else { "NotIn" }, "values": ["ssd"]}));
    }
    if let Some((op, value)) = spec.cores_rule {
        expressions.push(match op {
            CoresOp::Exists => json!({"key": "cores", "operator": "Exists"}),
            CoresOp::DoesNotExist => json!({"key": "cores", "operator": "DoesNotExist"}),
            CoresOp::Gt => json!({"key": "cores", "operator": "Gt", "values": [value.to_string()]}),
            CoresOp::Lt => json!({"key": "cores", "operator": "Lt", "values": [value.to_string()]}),
        });
    }
    let mut node_affinity = serde_json::Map::new();
    if !expressions.is_empty() {
        node_affinity.insert(
            "requiredDuringSchedulingIgnoredDuringExecution".into(),
            json!({"nodeSelectorTerms": [{"matchExpressions": expressions}]}),
        );
    }
    if let Some((z, weight)) = spec.preferred_zone {
        node_affinity.insert("preferredDuringSchedulingIgnoredDuringExecution".into(), json!([
            {"weight": weight, "preference": {"matchExpressions": [{"key": "zone", "operator": "In", "values": [zone(z)]}]}}]));
    }
    if !node_affinity.is_empty() {
        affinity.insert("nodeAffinity".into(), serde_json::Value::Object(node_affinity));
    }
    let scope = |everywhere: bool| if everywhere { json!(NAMESPACES) } else { json!(null) };
    let mut anti = Vec::new();
    if spec.anti_host {
        anti.push(json!({"labelSelector": {"matchLabels": {"group": format!("g{}", spec.group)}}, "topologyKey": "kubernetes.io/hostname"}));
    }
    if let Some(g) = spec.anti_zone_of {
        anti.push(
            json!({"labelSelector": {"matchLabels": {"group": format!("g{g}")}}, "topologyKey": "zone", "namespaces": scope(spec.everywhere.0)}),
        );
    }
    let preferred = |anti: bool| {
        spec.preferred_group.filter(|(_, _, a)| *a == anti).map(|(g, weight, _)| json!([{"weight": weight, "podAffinityTerm":
            {"labelSelector": {"matchLabels": {"group": format!("g{g}")}}, "topologyKey": "zone", "namespaces": scope(spec.everywhere.1)}}]))
    };
    let mut workload_anti = serde_json::Map::new();
    if !anti.is_empty() {
        workload_anti.insert("requiredDuringSchedulingIgnoredDuringExecution".into(), json!(anti));
    }
    if let Some(terms) = preferred(true) {
        workload_anti.insert("preferredDuringSchedulingIgnoredDuringExecution".into(), terms);
    }
    if !workload_anti.is_empty() {
        affinity.insert("workloadAntiAffinity".into(), serde_json::Value::Object(workload_anti));
    }
    let mut workload = serde_json::Map::new();
    if let Some(g) = spec.near_group {
        workload.insert("requiredDuringSchedulingIgnoredDuringExecution".into(), json!([
            {"labelSelector": {"matchLabels": {"group": format!("g{g}")}}, "topologyKey": "zone", "namespaces": scope(spec.everywhere.1)}]));
    }
    if let Some(terms) = preferred(false) {
        workload.insert("preferredDuringSchedulingIgnoredDuringExecution".into(), terms);
    }
    if !workload.is_empty() {
        affinity.insert("workloadAffinity".into(), serde_json::Value::Object(workload));
    }
    app.affinity = serde_json::from_value(serde_json::Value::Object(affinity)).unwrap();
    if let Some(key) = spec.tolerates {
        app.tolerations = vec![
            serde_json::from_value(json!({"key": format!("t{key}"), "operator": "Equal", "value": "x"}))
                .unwrap(),
        ];
    }
    if spec.tolerates_conditions {
        for key in ["node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"] {
            app.tolerations.push(serde_json::from_value(json!({"key": key, "operator": "Exists"})).unwrap());
        }
    }
    app
}

/// Whether a term of `app` listing both namespaces when `everywhere` looks at `other`.
fn looks_at(app: &AppSpec, everywhere: bool, other: &AppSpec) -> bool {
    everywhere || app.namespace == other.namespace
}

/// Whether `node` could take `app` given what is placed (`placed`: app spec, node index).
fn feasible(app: &AppSpec, node_at: usize, nodes: &[NodeSpec], placed: &[(AppSpec, usize)]) -> bool {
    let node = &nodes[node_at];
    let used: (i64, i64) =
        placed.iter().filter(|(_, n)| *n == node_at).fold((0, 0), |(c, m), (a, _)| (c + a.cpu, m + a.memory));
    if (app.cpu > 0 && used.0 + app.cpu > node.cpu) || (app.memory > 0 && used.1 + app.memory > node.memory) {
        return false;
    }
    if node.cordoned
        || app.zone_selector.is_some_and(|z| z != node.zone)
        || app.ssd_required.is_some_and(|ssd| ssd != node.ssd)
    {
        return false;
    }
    if node.health != Health::Fresh && !app.tolerates_conditions {
        return false;
    }
    let cores_hold = match app.cores_rule {
        None => true,
        Some((CoresOp::Exists, _)) => node.cores.is_some(),
        Some((CoresOp::DoesNotExist, _)) => node.cores.is_none(),
        Some((CoresOp::Gt, value)) => node.cores.is_some_and(|cores| cores > value),
        Some((CoresOp::Lt, value)) => node.cores.is_some_and(|cores| cores < value),
    };
    if !cores_hold {
        return false;
    }
    if node.tainted.is_some_and(|(key, _)| app.tolerates != Some(key)) {
        return false;
    }
    for (other, other_at) in placed {
        let same_host = *other_at == node_at;
        let same_zone = nodes[*other_at].zone == node.zone;
        let same_namespace = other.namespace == app.namespace;
        // Its own anti-affinity, and the placed ones' (symmetric).
        if (app.anti_host && other.group == app.group && same_namespace && same_host)
            || (app.anti_zone_of == Some(other.group) && looks_at(app, app.everywhere.0, other) && same_zone)
            || (other.anti_host && other.group == app.group && same_namespace && same_host)
            || (other.anti_zone_of == Some(app.group)
                && looks_at(other, other.everywhere.0, app)
                && same_zone)
        {
            return false;
        }
    }
    if let Some(g) = app.near_group {
        let picked = |other: &AppSpec| other.group == g && looks_at(app, app.everywhere.1, other);
        let any = placed.iter().any(|(other, _)| picked(other));
        let near = placed.iter().any(|(other, at)| picked(other) && nodes[*at].zone == node.zone);
        if !(near || (!any && app.group == g)) {
            return false;
        }
    }
    true
}

fn run(nodes: &[NodeSpec], apps: &[AppSpec], policy: Policy) -> Vec<Option<String>> {
    let framework = Framework::new(policy, Some(HEARTBEAT_TIMEOUT));
    let mut snapshot = Snapshot::default();
    snapshot.replace_nodes(nodes.iter().enumerate().map(|(at, n)| node_info(at, n)).collect());
    let mut order: Vec<(usize, AppInfo)> =
        apps.iter().enumerate().map(|(at, a)| (at, app_info(at, a))).collect();
    order.sort_by(|(_, a), (_, b)| framework.queue_sort().compare(a, b));
    let mut placed: Vec<(AppSpec, usize)> = Vec::new();
    let mut result = vec![None; apps.len()];
    for (at, app) in order {
        let brute: Vec<usize> =
            (0..nodes.len()).filter(|n| feasible(&apps[at], *n, nodes, &placed)).collect();
        match framework.schedule(&app, &snapshot, Some(now())) {
            Ok(node) => {
                let node_at: usize = node[1..].parse().unwrap();
                assert!(
                    brute.contains(&node_at),
                    "{} went to {node}, which breaks a rule; feasible: {brute:?}",
                    app.id
                );
                snapshot.assume(&Arc::new(app), &node);
                placed.push((apps[at].clone(), node_at));
                result[at] = Some(node);
            }
            Err(why) => assert!(
                brute.is_empty(),
                "{} left pending ({}) though {brute:?} could take it",
                app.id,
                why.message()
            ),
        }
    }
    let mut load: BTreeMap<usize, (i64, i64)> = BTreeMap::new();
    for (app, at) in &placed {
        let entry = load.entry(*at).or_default();
        entry.0 += app.cpu;
        entry.1 += app.memory;
    }
    for (at, (cpu, memory)) in load {
        assert!(cpu <= nodes[at].cpu && memory <= nodes[at].memory, "n{at} is over-committed");
    }
    result
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn placements_are_feasible_complete_and_deterministic(
        nodes in prop::collection::vec(node_spec(10), 0..7),
        apps in prop::collection::vec(app_spec(), 0..16),
        binpack in any::<bool>(),
    ) {
        let policy = if binpack { Policy::Binpack } else { Policy::Spread };
        let first = run(&nodes, &apps, policy);
        prop_assert_eq!(first, run(&nodes, &apps, policy));
    }
}

proptest! {
    // Large fleets cost more per case; fewer cases still cover the sampling.
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn sampled_large_fleets_place_feasibly_completely_and_deterministically(
        nodes in prop::collection::vec(node_spec(2), 100..200),
        apps in prop::collection::vec(app_spec(), 0..40),
        binpack in any::<bool>(),
    ) {
        let policy = if binpack { Policy::Binpack } else { Policy::Spread };
        let first = run(&nodes, &apps, policy);
        prop_assert_eq!(first, run(&nodes, &apps, policy));
    }
}
