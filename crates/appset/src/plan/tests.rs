//! Planning: creates, the rolling budget, init steps, sameNode, prune, Services and status.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kayra_api::kinds::applicationset::ApplicationSet;
use serde_json::json;

use super::*;
use crate::render::{Owner, render};

fn owner() -> Owner {
    Owner { domain: "example.com".into(), namespace: "demo".into(), name: "web".into(), uid: "u-1".into() }
}

fn rendering(components: serde_json::Value) -> Rendering {
    let set: ApplicationSet = serde_json::from_value(json!({"spec": {"applications": components}})).unwrap();
    render(&set, &owner(), &[]).unwrap()
}

fn replicas(n: usize, command: &str) -> Rendering {
    rendering(json!([{"name": "api", "spec": {"command": [command]}, "scale": {"replicas": n}}]))
}

/// A child as `r` would write it, on `node`, available or not.
fn child_of(r: &Rendered, node: Option<&str>, available: bool) -> Child {
    Child {
        hash: Some(r.hash.clone()),
        labels: r.application.metadata.labels.clone().unwrap_or_default(),
        node: node.map(str::to_owned),
        phase: Some(if available { "Running" } else { "Pending" }.into()),
        available,
        ..Child::default()
    }
}

struct Case<'a> {
    rendering: &'a Rendering,
    children: BTreeMap<String, Child>,
    services: BTreeMap<String, ServiceState>,
    max_unavailable: Option<IntOrString>,
    same_node: bool,
    prune: bool,
    generation: i64,
    frozen: bool,
}

impl<'a> Case<'a> {
    fn new(rendering: &'a Rendering) -> Case<'a> {
        Case {
            rendering,
            children: BTreeMap::new(),
            services: BTreeMap::new(),
            max_unavailable: None,
            same_node: false,
            prune: true,
            generation: 1,
            frozen: false,
        }
    }

    fn plan(&self) -> Plan {
        plan(&Input {
            generation: self.generation,
            rendering: Ok(self.rendering),
            same_node: self.same_node,
            prune: self.prune,
            max_unavailable: self.max_unavailable.as_ref(),
            frozen: self.frozen,
            children: &self.children,
            services: &self.services,
            previous: None,
            now: "2026-01-01T00:00:00Z",
        })
    }
}

/// The steps as `verb name` words.
fn steps(plan: &Plan) -> Vec<String> {
    plan.steps
        .iter()
        .map(|step| match step {
            Step::CreateService(s) => format!("create-service {}", s.name),
            Step::UpdateServicePorts { name, .. } => format!("update-service {name}"),
            Step::DeleteService(name) => format!("delete-service {name}"),
            Step::Create(a) => format!(
                "create {}{}",
                a.metadata.name.as_deref().unwrap_or_default(),
                a.bound_node().map(|n| format!("@{n}")).unwrap_or_default()
            ),
            Step::Update(a) => format!(
                "update {}{}",
                a.metadata.name.as_deref().unwrap_or_default(),
                a.bound_node().map(|n| format!("@{n}")).unwrap_or_default()
            ),
            Step::Delete(name) => format!("delete {name}"),
            Step::Freeze { name, frozen: true } => format!("freeze {name}"),
            Step::Freeze { name, frozen: false } => format!("thaw {name}"),
        })
        .collect()
}

fn condition<'a>(plan: &'a Plan, type_: &str) -> (&'a str, &'a str, &'a str) {
    let c = plan.status.conditions.iter().find(|c| c.type_ == type_).unwrap_or_else(|| panic!("no {type_}"));
    (c.status.as_str(), c.reason.as_deref().unwrap_or_default(), c.message.as_deref().unwrap_or_default())
}

#[test]
fn a_new_set_creates_every_child_unbudgeted_and_converges_once_all_are_ready() {
    let rendered = replicas(4, "/v1");
    let mut case = Case::new(&rendered);
    let plan = case.plan();
    assert_eq!(
        steps(&plan),
        ["create web-api-0", "create web-api-1", "create web-api-2", "create web-api-3"]
    );
    assert_eq!(condition(&plan, "Converged").0, "False");
    assert_eq!((plan.status.desired, plan.status.current), (Some(4), Some(0)));

    for r in &rendered.children {
        case.children.insert(r.name().into(), child_of(r, Some("n1"), true));
    }
    let plan = case.plan();
    assert!(plan.steps.is_empty());
    assert_eq!(condition(&plan, "Converged").0, "True");
    assert_eq!(condition(&plan, "Progressing"), ("True", "Complete", "the set runs its current template"));
    assert_eq!(plan.status.phase.as_deref(), Some("Ready"));
    let counts = (
        plan.status.desired,
        plan.status.current,
        plan.status.scheduled,
        plan.status.ready,
        plan.status.updated,
    );
    assert_eq!(counts, (Some(4), Some(4), Some(4), Some(4), Some(4)));
    assert_eq!(plan.status.children.len(), 4);
    assert_eq!(plan.status.children[0].node.as_deref(), Some("n1"));
}

#[test]
fn the_rolling_budget_replaces_available_children_in_name_order_and_down_ones_for_free() {
    let old = replicas(4, "/v1");
    let new = replicas(4, "/v2");
    // Each row: which of the four children run the new template (u), which are available
    // (a: up; d: down), the budget, and which may be replaced now.
    let table: &[(&str, Option<IntOrString>, &[&str], bool)] = &[
        ("oa oa oa oa", Some(IntOrString::Int(1)), &["web-api-0"], true),
        ("oa oa oa oa", Some(IntOrString::Int(2)), &["web-api-0", "web-api-1"], true),
        ("oa oa oa oa", Some(IntOrString::String("50%".into())), &["web-api-0", "web-api-1"], true),
        ("oa oa oa oa", None, &["web-api-0"], true),
        // One new child is not ready yet: the budget of one is spent.
        ("ud oa oa oa", Some(IntOrString::Int(1)), &[], true),
        // A down old child costs nothing to replace, and does not spend the budget either.
        ("oa od oa oa", Some(IntOrString::Int(1)), &["web-api-1"], true),
        ("oa od oa oa", Some(IntOrString::Int(2)), &["web-api-0", "web-api-1"], true),
        ("ua ua od oa", Some(IntOrString::Int(1)), &["web-api-2"], true),
        ("ua ua ua oa", Some(IntOrString::Int(1)), &["web-api-3"], false),
        ("ua ua ua ua", Some(IntOrString::Int(1)), &[], false),
    ];
    for (states, budget, replaced, held) in table {
        let mut case = Case::new(&new);
        case.max_unavailable = budget.clone();
        for (at, state) in states.split(' ').enumerate() {
            let source = if state.starts_with('u') { &new } else { &old };
            let r = &source.children[at];
            case.children.insert(r.name().into(), child_of(r, Some("n1"), state.ends_with('a')));
        }
        let plan = case.plan();
        let want: Vec<String> = replaced.iter().map(|n| format!("update {n}@n1")).collect();
        assert_eq!(steps(&plan), want, "{states} with {budget:?}");
        assert_eq!(
            condition(&plan, "Converged").1 == "RolloutHeld",
            *held,
            "{states}: {:?}",
            plan.status.conditions
        );
    }
}

#[test]
fn a_scheduler_chosen_node_is_kept_and_a_label_only_change_costs_nothing() {
    let old =
        rendering(json!([{"name": "api", "metadata": {"labels": {"v": "1"}}, "spec": {"command": ["/a"]}}]));
    let new =
        rendering(json!([{"name": "api", "metadata": {"labels": {"v": "2"}}, "spec": {"command": ["/b"]}}]));
    let relabelled =
        rendering(json!([{"name": "api", "metadata": {"labels": {"v": "2"}}, "spec": {"command": ["/a"]}}]));
    let mut case = Case::new(&new);
    case.children.insert("web-api".into(), child_of(&old.children[0], Some("n7"), true));
    let plan = case.plan();
    assert_eq!(steps(&plan), ["update web-api@n7"]);
    let mut case = Case::new(&relabelled);
    case.max_unavailable = Some(IntOrString::Int(1));
    case.children.insert("web-api".into(), child_of(&old.children[0], Some("n7"), true));
    case.children.insert("web-api-x".into(), child_of(&old.children[0], Some("n7"), false));
    case.prune = false;
    let plan = case.plan();
    assert_eq!(steps(&plan), ["update web-api@n7"]);
}

#[test]
fn labels_others_add_to_a_child_are_theirs_and_ask_for_no_update() {
    let rendered =
        rendering(json!([{"name": "api", "metadata": {"labels": {"v": "1"}}, "spec": {"command": ["/a"]}}]));
    let mut child = child_of(&rendered.children[0], Some("n7"), true);
    child.labels.insert("team".into(), "web".into());
    let mut case = Case::new(&rendered);
    case.children.insert("web-api".into(), child.clone());
    assert!(steps(&case.plan()).is_empty(), "an added label is kept as it is");
    child.labels.insert("v".into(), "0".into());
    case.children.insert("web-api".into(), child);
    assert_eq!(steps(&case.plan()), ["update web-api@n7"], "a rendered label is the set's");
}

#[test]
fn init_steps_run_in_order_and_a_failure_holds_the_set_until_its_generation_changes() {
    let rendered = rendering(json!([
        {"name": "migrate", "spec": {"command": ["/m"], "lifecycle": {"restartPolicy": "Never"}}},
        {"name": "seed", "spec": {"command": ["/s"], "lifecycle": {"restartPolicy": "Never"}}, "scale": {"replicas": 2}},
        {"name": "api", "spec": {"command": ["/a"], "ports": [{"port": 80}]}, "scale": {"replicas": 2}},
    ]));
    let by_name = |name: &str| rendered.children.iter().find(|r| r.name() == name).unwrap();
    let mut case = Case::new(&rendered);
    let plan = case.plan();
    assert_eq!(steps(&plan), ["create web-migrate"]);
    assert_eq!(condition(&plan, "Initialized").1, "Initializing");
    let Step::Create(first) = &plan.steps[0] else { unreachable!() };
    assert_eq!(first.metadata.annotations.as_ref().unwrap()["fleet.example.com/appset-generation"], "1");

    let done = |r: &Rendered, phase: &str, code: i64| Child {
        phase: Some(phase.into()),
        exit_code: Some(code),
        attempt: Some(1),
        ..child_of(r, Some("n1"), false)
    };
    case.children.insert("web-migrate".into(), done(by_name("web-migrate"), "Running", 0));
    assert!(case.plan().steps.is_empty(), "the step is still running");
    case.children.insert("web-migrate".into(), done(by_name("web-migrate"), "Succeeded", 0));
    assert_eq!(steps(&case.plan()), ["create web-seed-0", "create web-seed-1"]);

    case.children.insert("web-seed-0".into(), done(by_name("web-seed-0"), "Succeeded", 0));
    case.children.insert("web-seed-1".into(), done(by_name("web-seed-1"), "Failed", 3));
    let plan = case.plan();
    assert!(plan.steps.is_empty(), "a failed step is not retried: {:?}", steps(&plan));
    let (status, reason, message) = condition(&plan, "Initialized");
    assert_eq!((status, reason), ("False", "InitFailed"));
    assert!(message.contains("web-seed-1 failed with exit code 3"), "{message}");
    assert_eq!(plan.status.phase.as_deref(), Some("InitFailed"));
    assert_eq!(plan.status.desired, Some(2), "init children are not counted");
    assert_eq!(plan.status.current, Some(0));

    case.generation = 2;
    assert_eq!(steps(&case.plan()), ["delete web-seed-1"], "a new generation runs the failed step again");

    case.generation = 1;
    case.children.insert("web-seed-1".into(), done(by_name("web-seed-1"), "Succeeded", 0));
    let plan = case.plan();
    assert_eq!(steps(&plan), ["create-service web-api", "create web-api-0", "create web-api-1"]);
    assert_eq!(condition(&plan, "Initialized"), ("True", "Initialized", "every init step succeeded"));
}

#[test]
fn same_node_siblings_wait_for_the_anchor_and_then_follow_it() {
    let rendered = rendering(json!([
        {"name": "db", "spec": {"command": ["/db"]}},
        {"name": "cache", "spec": {"command": ["/c"]}, "scale": {"replicas": 2}},
    ]));
    let mut case = Case::new(&rendered);
    case.same_node = true;
    let plan = case.plan();
    assert_eq!(steps(&plan), ["create web-cache-0"], "the lexically first child anchors");
    assert_eq!(condition(&plan, "Converged").1, "AwaitingAnchor");
    case.children.insert("web-cache-0".into(), child_of(&rendered.children[1], None, false));
    assert!(case.plan().steps.is_empty(), "not yet placed");
    case.children.insert("web-cache-0".into(), child_of(&rendered.children[1], Some("n4"), false));
    assert_eq!(steps(&case.plan()), ["create web-cache-1@n4", "create web-db@n4"]);
    // The anchor moved: the siblings follow.
    case.children.insert("web-cache-1".into(), child_of(&rendered.children[2], Some("n4"), true));
    case.children.insert("web-db".into(), child_of(&rendered.children[0], Some("n4"), true));
    case.children.insert("web-cache-0".into(), child_of(&rendered.children[1], Some("n5"), true));
    case.max_unavailable = Some(IntOrString::Int(2));
    assert_eq!(steps(&case.plan()), ["update web-cache-1@n5", "update web-db@n5"]);

    let with_init = rendering(json!([
        {"name": "app", "spec": {"command": ["/a"]}},
        {"name": "setup", "spec": {"command": ["/s"], "lifecycle": {"restartPolicy": "Never"}}},
    ]));
    let mut case = Case::new(&with_init);
    case.same_node = true;
    assert_eq!(steps(&case.plan()), ["create web-setup"], "the first init child anchors");
}

#[test]
fn prune_deletes_what_is_no_longer_rendered_and_keeps_services_with_members() {
    let rendered = replicas(2, "/v1");
    let mut case = Case::new(&rendered);
    for r in &replicas(3, "/v1").children {
        case.children.insert(r.name().into(), child_of(r, Some("n1"), true));
    }
    let service = |owned: bool, members: bool| ServiceState { owned, ports: Vec::new(), members };
    case.services.insert("web-old".into(), service(true, false));
    case.services.insert("web-busy".into(), service(true, true));
    case.services.insert("someone-elses".into(), service(false, false));
    let plan = case.plan();
    assert_eq!(steps(&plan), ["delete web-api-2", "delete-service web-old"]);
    assert_eq!(plan.status.current, Some(3));
    assert_eq!(condition(&plan, "Converged").0, "False");
    case.prune = false;
    assert!(case.plan().steps.is_empty());
}

#[test]
fn a_rendered_service_is_created_before_children_joined_if_foreign_and_only_its_ports_updated() {
    let rendered = rendering(json!([{"name": "api", "spec": {"command": ["/a"], "ports": [{"port": 80}]}}]));
    let mut case = Case::new(&rendered);
    assert_eq!(steps(&case.plan()), ["create-service web-api", "create web-api"]);
    let port = |port: i64| ServicePort { port, protocol: Some("TCP".into()), ..ServicePort::default() };
    case.services
        .insert("web-api".into(), ServiceState { owned: false, ports: vec![port(81)], members: false });
    assert_eq!(steps(&case.plan()), ["create web-api"], "a foreign Service is joined, never written");
    case.services
        .insert("web-api".into(), ServiceState { owned: true, ports: vec![port(81)], members: false });
    assert_eq!(steps(&case.plan()), ["update-service web-api", "create web-api"]);
    case.services
        .insert("web-api".into(), ServiceState { owned: true, ports: vec![port(80)], members: true });
    assert_eq!(steps(&case.plan()), ["create web-api"]);
}

#[test]
fn a_render_error_changes_nothing_and_says_why() {
    let children = BTreeMap::from([("web-api-0".to_owned(), Child::default())]);
    let services = BTreeMap::new();
    let previous = ApplicationSetStatus { desired: Some(3), ..ApplicationSetStatus::default() };
    let plan = plan(&Input {
        generation: 2,
        rendering: Err("the set renders 900 Applications; at most 500 are allowed".into()),
        same_node: false,
        prune: true,
        max_unavailable: None,
        frozen: false,
        children: &children,
        services: &services,
        previous: Some(&previous),
        now: "2026-01-01T00:00:00Z",
    });
    assert!(plan.steps.is_empty());
    assert_eq!(plan.status.desired, Some(3), "the last desired count stays");
    assert_eq!(condition(&plan, "Rendered").1, "RenderError");
    assert_eq!(plan.status.phase.as_deref(), Some("RenderError"));
}

#[test]
fn a_condition_keeps_its_transition_time_until_its_status_changes() {
    let rendered = replicas(1, "/v1");
    let children = BTreeMap::new();
    let services = BTreeMap::new();
    let input = |previous: Option<&'static ApplicationSetStatus>, now: &'static str| Input {
        generation: 1,
        rendering: Ok(&rendered),
        same_node: false,
        prune: true,
        max_unavailable: None,
        frozen: false,
        children: &children,
        services: &services,
        previous,
        now,
    };
    let first = plan(&input(None, "2026-01-01T00:00:00Z")).status;
    let first: &'static ApplicationSetStatus = Box::leak(Box::new(first));
    let second = plan(&input(Some(first), "2026-01-01T00:05:00Z")).status;
    assert_eq!(&second, first, "an unchanged pass writes nothing");
}

#[test]
fn a_child_is_available_only_when_ready_at_its_generation_on_a_ready_node() {
    let nodes = BTreeMap::from([
        ("up".to_owned(), Node { name: "up".into(), ready: true, ..Node::default() }),
        ("down".to_owned(), Node { name: "down".into(), ready: false, ..Node::default() }),
    ]);
    let object = |node: &str, generation: i64, observed: i64, ready: &str| -> Object {
        let value = json!({
            "metadata": {"name": "web-api-0", "generation": generation,
                "annotations": {"fleet.example.com/appset-spec-hash": "h", "fleet.example.com/appset-generation": "4"}},
            "spec": {"placement": {"nodeName": node}},
            "status": {"phase": "Running", "observedGeneration": observed, "conditions": [{"type": "Ready", "status": ready}]},
        });
        value.as_object().unwrap().clone()
    };
    let child = Child::from_object(&object("up", 2, 2, "True"), "example.com", &nodes);
    assert!(child.available);
    assert_eq!(
        (child.hash.as_deref(), child.attempt, child.node.as_deref()),
        (Some("h"), Some(4), Some("up"))
    );
    assert!(!Child::from_object(&object("down", 2, 2, "True"), "example.com", &nodes).available);
    assert!(!Child::from_object(&object("up", 3, 2, "True"), "example.com", &nodes).available);
    assert!(!Child::from_object(&object("up", 2, 2, "False"), "example.com", &nodes).available);
    assert!(!Child::from_object(&object("gone", 2, 2, "True"), "example.com", &nodes).available);
}

#[test]
fn a_frozen_set_only_freezes_its_children_and_a_thawed_one_thaws_them_before_rolling_on() {
    let old = replicas(3, "/v1");
    let new = replicas(4, "/v2");
    let mut case = Case::new(&new);
    for r in &old.children {
        case.children.insert(r.name().into(), child_of(r, Some("n1"), true));
    }
    case.children.insert("web-gone".into(), child_of(&old.children[0], Some("n1"), true));

    // Frozen mid-change: no create, replacement or prune; every child frozen, in place.
    case.frozen = true;
    let plan = case.plan();
    assert_eq!(steps(&plan), ["freeze web-api-0", "freeze web-api-1", "freeze web-api-2", "freeze web-gone"]);
    let (status, reason, message) = condition(&plan, "Progressing");
    assert_eq!((status, reason), ("False", "Frozen"), "{message}");
    assert_eq!(condition(&plan, "Converged").1, "Frozen");
    for child in case.children.values_mut() {
        child.frozen = true;
        child.available = false;
    }
    let plan = case.plan();
    assert!(plan.steps.is_empty(), "held: {:?}", steps(&plan));
    assert_eq!(condition(&plan, "Progressing").1, "Frozen");

    // Thawed: the children first, and nothing else in that pass.
    case.frozen = false;
    let plan = case.plan();
    assert_eq!(steps(&plan), ["thaw web-api-0", "thaw web-api-1", "thaw web-api-2", "thaw web-gone"]);
    assert_eq!(condition(&plan, "Progressing"), ("True", "Thawing", condition(&plan, "Progressing").2));
    // Thawed as stored, but their nodes still say they are held: still nothing moves.
    for child in case.children.values_mut() {
        child.frozen = false;
        child.held = true;
    }
    let plan = case.plan();
    assert!(plan.steps.is_empty(), "{:?}", steps(&plan));
    assert_eq!(condition(&plan, "Progressing").1, "Thawing");
    for child in case.children.values_mut() {
        child.held = false;
        child.available = true;
    }
    // Then the rollout resumes within its budget (25% of 4: one unavailable at a time, which
    // the child still to be created is).
    let plan = case.plan();
    assert_eq!(steps(&plan), ["create web-api-3", "delete web-gone"]);
    assert_eq!(condition(&plan, "Progressing").1, "RollingOut");
}
