//! Random fleets and Applications through the framework, checked against a brute-force search
//! written apart from the plugins: no node is ever over-committed, every placement meets every
//! required rule (resources, cordon, node selector and affinity, taints, workload affinity and
//! anti-affinity both ways), an Application is left pending only when no node could take it,
//! and the same input gives the same placements.

use std::collections::BTreeMap;
use std::sync::Arc;

use kayra_scheduler::framework::{Framework, Policy};
use kayra_scheduler::model::{AppInfo, NodeInfo, Resources};
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
}

fn node_spec() -> impl Strategy<Value = NodeSpec> {
    (
        1i64..=8,
        1i64..=8,
        0u8..3,
        any::<bool>(),
        prop::bool::weighted(0.15),
        prop::option::weighted(0.3, (0u8..2, any::<bool>())),
    )
        .prop_map(|(cpu, memory, zone, ssd, cordoned, tainted)| NodeSpec {
            cpu: cpu * 500,
            memory: memory << 28,
            zone,
            ssd,
            cordoned,
            tainted,
        })
}

fn app_spec() -> impl Strategy<Value = AppSpec> {
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
    )
        .prop_map(
            |(
                (cpu, memory, group, priority),
                (zone_selector, ssd_required, tolerates),
                (anti_host, anti_zone_of, near_group),
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
            },
        )
}

fn zone(z: u8) -> String {
    format!("z{z}")
}

fn node_info(at: usize, spec: &NodeSpec) -> NodeInfo {
    let zone = zone(spec.zone);
    let disk = if spec.ssd { "ssd" } else { "hdd" };
    let mut node = NodeInfo::new(
        &format!("n{at}"),
        Resources { cpu: spec.cpu, memory: spec.memory },
        &[("zone", &zone), ("disk", disk)],
    );
    node.unschedulable = spec.cordoned;
    if let Some((key, execute)) = spec.tainted {
        node.taints = vec![serde_json::from_value(json!({"key": format!("t{key}"), "value": "x", "effect": if execute { "NoExecute" } else { "NoSchedule" }})).unwrap()];
    }
    node
}

fn app_info(at: usize, spec: &AppSpec) -> AppInfo {
    let mut app = AppInfo::new("demo", &format!("a{at:02}"));
    app.created = format!("2026-01-01T00:00:{:02}Z", at % 60);
    app.requests = Resources { cpu: spec.cpu, memory: spec.memory };
    app.labels = [("group".to_owned(), format!("g{}", spec.group))].into();
    app.priority = spec.priority;
    if let Some(z) = spec.zone_selector {
        app.node_selector = [("zone".to_owned(), zone(z))].into();
    }
    let mut affinity = serde_json::Map::new();
    if let Some(ssd) = spec.ssd_required {
        affinity.insert("nodeAffinity".into(), json!({"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "disk", "operator": if ssd { "In" } else { "NotIn" }, "values": ["ssd"]}]}]}}));
    }
    let mut anti = Vec::new();
    if spec.anti_host {
        anti.push(json!({"labelSelector": {"matchLabels": {"group": format!("g{}", spec.group)}}, "topologyKey": "kubernetes.io/hostname"}));
    }
    if let Some(g) = spec.anti_zone_of {
        anti.push(
            json!({"labelSelector": {"matchLabels": {"group": format!("g{g}")}}, "topologyKey": "zone"}),
        );
    }
    if !anti.is_empty() {
        affinity.insert(
            "workloadAntiAffinity".into(),
            json!({"requiredDuringSchedulingIgnoredDuringExecution": anti}),
        );
    }
    if let Some(g) = spec.near_group {
        affinity.insert(
            "workloadAffinity".into(),
            json!({"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"group": format!("g{g}")}}, "topologyKey": "zone"}]}),
        );
    }
    app.affinity = serde_json::from_value(serde_json::Value::Object(affinity)).unwrap();
    if let Some(key) = spec.tolerates {
        app.tolerations = vec![
            serde_json::from_value(json!({"key": format!("t{key}"), "operator": "Equal", "value": "x"}))
                .unwrap(),
        ];
    }
    app
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
    if node.tainted.is_some_and(|(key, _)| app.tolerates != Some(key)) {
        return false;
    }
    for (other, other_at) in placed {
        let same_host = *other_at == node_at;
        let same_zone = nodes[*other_at].zone == node.zone;
        // Its own anti-affinity, and the placed ones' (symmetric).
        if (app.anti_host && other.group == app.group && same_host)
            || (app.anti_zone_of == Some(other.group) && same_zone)
            || (other.anti_host && other.group == app.group && same_host)
            || (other.anti_zone_of == Some(app.group) && same_zone)
        {
            return false;
        }
    }
    if let Some(g) = app.near_group {
        let any = placed.iter().any(|(other, _)| other.group == g);
        let near = placed.iter().any(|(other, at)| other.group == g && nodes[*at].zone == node.zone);
        if !(near || (!any && app.group == g)) {
            return false;
        }
    }
    true
}

fn run(nodes: &[NodeSpec], apps: &[AppSpec], policy: Policy) -> Vec<Option<String>> {
    let framework = Framework::new(policy, None);
    let mut snapshot = Snapshot::default();
    snapshot.replace_nodes(nodes.iter().enumerate().map(|(at, n)| node_info(at, n)).collect());
    let mut order: Vec<(usize, AppInfo)> =
        apps.iter().enumerate().map(|(at, a)| (at, app_info(at, a))).collect();
    order.sort_by(|(_, a), (_, b)| framework.compare(a, b));
    let mut placed: Vec<(AppSpec, usize)> = Vec::new();
    let mut result = vec![None; apps.len()];
    for (at, app) in order {
        let brute: Vec<usize> =
            (0..nodes.len()).filter(|n| feasible(&apps[at], *n, nodes, &placed)).collect();
        match framework.schedule(&app, &snapshot, None) {
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
        nodes in prop::collection::vec(node_spec(), 0..7),
        apps in prop::collection::vec(app_spec(), 0..16),
        binpack in any::<bool>(),
    ) {
        let policy = if binpack { Policy::Binpack } else { Policy::Spread };
        let first = run(&nodes, &apps, policy);
        prop_assert_eq!(first, run(&nodes, &apps, policy));
    }
}
