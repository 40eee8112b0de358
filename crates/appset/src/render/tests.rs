//! Expansion: names, scale, nodeSpread as nodes come, go and change, the common merge, and the
//! marks every child carries.

use std::collections::BTreeMap;

use kayra_api::kinds::applicationset::ApplicationSet;
use serde_json::json;

use super::*;

fn owner() -> Owner {
    Owner { domain: "example.com".into(), namespace: "demo".into(), name: "web".into(), uid: "u-1".into() }
}

fn set(spec: serde_json::Value) -> ApplicationSet {
    serde_json::from_value(json!({"metadata": {"name": "web", "namespace": "demo"}, "spec": spec})).unwrap()
}

fn node(name: &str, labels: &[(&str, &str)], schedulable: bool) -> Node {
    Node {
        name: name.into(),
        labels: labels.iter().map(|(k, v)| ((*k).into(), (*v).into())).collect(),
        schedulable,
        ready: true,
    }
}

fn names(rendering: &Rendering) -> Vec<&str> {
    rendering.children.iter().map(Rendered::name).collect()
}

#[test]
fn components_expand_by_replicas_by_node_or_to_one() {
    let spread = set(json!({"applications": [
        {"name": "api", "spec": {"command": ["/api"]}, "scale": {"replicas": 3}},
        {"name": "agent", "spec": {"command": ["/agent"]}, "scale": {"nodeSpread": {"nodeSelector": {"role": "edge"}}}},
        {"name": "db", "spec": {"command": ["/db"]}},
        {"name": "none", "spec": {"command": ["/x"]}, "scale": {"replicas": 0}},
    ]}));
    let nodes = |list: &[Node]| render(&spread, &owner(), list).unwrap();
    let edge = |name: &str| node(name, &[("role", "edge")], true);
    let start = nodes(&[edge("n2"), edge("n1"), node("core", &[("role", "core")], true)]);
    assert_eq!(
        names(&start),
        ["web-api-0", "web-api-1", "web-api-2", "web-agent-n1", "web-agent-n2", "web-db"]
    );
    let pinned: Vec<Option<&str>> = start.children.iter().map(Rendered::node).collect();
    assert_eq!(pinned, [None, None, None, Some("n1"), Some("n2"), None]);
    assert!(start.children.iter().filter(|r| r.component == "agent").all(|r| r.pinned));

    // A node joins, one leaves, one is cordoned, one is relabelled into the selector.
    let later =
        nodes(&[edge("n3"), node("n2", &[("role", "edge")], false), node("core", &[("role", "edge")], true)]);
    let agents: Vec<&str> =
        later.children.iter().filter(|r| r.component == "agent").map(Rendered::name).collect();
    assert_eq!(agents, ["web-agent-core", "web-agent-n3"]);
}

#[test]
fn common_is_merged_under_each_childs_own_values_and_the_marks_are_stamped_last() {
    let rendered = render(
        &set(json!({
            "common": {
                "labels": {"team": "a", "tier": "common", "fleet.example.com/application-set": "spoofed"},
                "annotations": {"note": "common"},
                "env": [{"name": "A", "value": "common"}, {"name": "B", "value": "common"}],
            },
            "applications": [{
                "name": "api",
                "metadata": {"labels": {"tier": "api"}, "annotations": {"note": "api"}},
                "spec": {"command": ["/api"], "env": [{"name": "A", "value": "own"}]},
            }],
        })),
        &owner(),
        &[],
    )
    .unwrap();
    let child = &rendered.children[0].application;
    let labels = child.metadata.labels.clone().unwrap();
    assert_eq!(
        labels,
        BTreeMap::from([
            ("fleet.example.com/application-set".to_owned(), "web".to_owned()),
            ("fleet.example.com/component".to_owned(), "api".to_owned()),
            ("team".to_owned(), "a".to_owned()),
            ("tier".to_owned(), "api".to_owned()),
        ])
    );
    let annotations = child.metadata.annotations.clone().unwrap();
    assert_eq!(annotations["note"], "api");
    assert_eq!(annotations["fleet.example.com/appset-spec-hash"], rendered.children[0].hash);
    assert_eq!(rendered.children[0].hash, hash(&child.spec));
    let env: Vec<(&str, &str)> =
        child.spec.env.iter().map(|e| (e.name.as_str(), e.value.as_deref().unwrap_or_default())).collect();
    assert_eq!(env, [("A", "own"), ("B", "common")]);
    let reference = &child.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (
            reference.api_version.as_str(),
            reference.kind.as_str(),
            reference.name.as_str(),
            reference.uid.as_str()
        ),
        ("fleet.example.com/v1", "ApplicationSet", "web", "u-1")
    );
    assert_eq!((reference.controller, reference.block_owner_deletion), (Some(true), Some(true)));
}

#[test]
fn a_changed_template_changes_the_hash_and_nothing_else_does() {
    let with = |command: &str, label: &str| {
        render(
            &set(json!({"applications": [{"name": "api", "metadata": {"labels": {"l": label}}, "spec": {"command": [command]}}]})),
            &owner(),
            &[],
        )
        .unwrap()
        .children[0]
            .hash
            .clone()
    };
    assert_eq!(with("/a", "x"), with("/a", "y"), "labels are not the spec");
    assert_ne!(with("/a", "x"), with("/b", "x"));
}

#[test]
fn ports_render_a_service_the_children_join_unless_the_component_names_one_or_is_a_job() {
    let rendered = render(
        &set(json!({"applications": [
            {"name": "api", "spec": {"command": ["/api"], "ports": [{"name": "http", "port": 80}, {"port": 9090}]}, "scale": {"replicas": 2}},
            {"name": "named", "spec": {"command": ["/x"], "ports": [{"port": 81}], "serviceName": "shared"}},
            {"name": "job", "spec": {"command": ["/j"], "ports": [{"port": 82}], "lifecycle": {"restartPolicy": "Never"}}},
        ]})),
        &owner(),
        &[],
    )
    .unwrap();
    assert_eq!(rendered.services.len(), 1);
    let service = &rendered.services[0];
    assert_eq!(service.name, "web-api");
    let ports: Vec<(Option<&str>, i64)> = service.ports.iter().map(|p| (p.name.as_deref(), p.port)).collect();
    assert_eq!(ports, [(Some("http"), 80), (Some("port-9090"), 9090)], "several ports are each named");
    let joined: Vec<Option<&str>> =
        rendered.children.iter().map(|r| r.application.spec.service_name.as_deref()).collect();
    assert_eq!(joined, [Some("web-api"), Some("web-api"), Some("shared"), None]);
    let steps: Vec<Option<usize>> = rendered.children.iter().map(|r| r.init_step).collect();
    assert_eq!(steps, [None, None, None, Some(0)]);
}

#[test]
fn names_are_dns_bounded_and_never_collide_and_the_count_is_capped() {
    let long = ["n".repeat(60), "m".repeat(60), "o".repeat(60), "p".repeat(60)].join(".");
    let rendered = render(
        &set(json!({"applications": [{"name": "agent", "spec": {"command": ["/a"]}, "scale": {"nodeSpread": {}}}]})),
        &owner(),
        &[node(&long, &[], true), node("Node_1", &[], true), node("short.example", &[], true)],
    )
    .unwrap();
    let names = names(&rendered);
    assert!(names.iter().all(|n| n.len() <= 253 && kayra_api::validation::is_dns_subdomain(n)), "{names:?}");
    assert!(names.contains(&"web-agent-node-1"));
    assert!(names.contains(&"web-agent-short.example"), "{names:?}");
    assert!(names.iter().any(|n| n.starts_with("web-agent-nnn") && n.len() == 63), "{names:?}");

    let too_many = render(
        &set(
            json!({"applications": [{"name": "a", "spec": {"command": ["/a"]}, "scale": {"replicas": 501}}]}),
        ),
        &owner(),
        &[],
    );
    assert!(matches!(too_many, Err(Error::Render(message)) if message.contains("at most 500")));
    let split = render(
        &set(json!({"applications": [
            {"name": "a", "spec": {"command": ["/a"]}, "scale": {"replicas": 300}},
            {"name": "b", "spec": {"command": ["/b"]}, "scale": {"replicas": 201}},
        ]})),
        &owner(),
        &[],
    );
    assert!(matches!(split, Err(Error::Render(_))), "the cap is per set, not per component");
    let collide = render(
        &set(json!({"applications": [
            {"name": "a-0", "spec": {"command": ["/a"]}},
            {"name": "a", "spec": {"command": ["/a"]}, "scale": {"replicas": 1}},
        ]})),
        &owner(),
        &[],
    );
    assert!(matches!(collide, Err(Error::Render(message)) if message.contains("web-a-0")));
}
