//! Placement validation and what a move off a node does to the status.

use super::*;

fn fields(placement: serde_json::Value) -> Vec<String> {
    let application: Application = serde_json::from_value(serde_json::json!({
        "spec": {"command": ["/bin/true"], "placement": placement},
    }))
    .expect("the test's placement decodes");
    application.validate(None).into_iter().map(|error| error.field).collect()
}

#[test]
fn placement_rules_take_kubernetes_shapes_and_are_validated() {
    let good = serde_json::json!({
        "nodeSelector": {"disk": "ssd"},
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [
                    {"key": "zone", "operator": "In", "values": ["a", "b"]},
                    {"key": "gpu", "operator": "DoesNotExist"},
                    {"key": "cores", "operator": "Gt", "values": ["4"]},
                ]}]},
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 10, "preference": {"matchExpressions": [{"key": "zone", "operator": "NotIn", "values": ["c"]}]}},
                ],
            },
            "workloadAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "kubernetes.io/hostname"},
            ]},
            "workloadAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 100, "podAffinityTerm": {"labelSelector": {"matchExpressions": [{"key": "app", "operator": "Exists"}]}, "topologyKey": "zone"}},
            ]},
        },
        "tolerations": [
            {"key": "dedicated", "operator": "Equal", "value": "db", "effect": "NoSchedule"},
            {"operator": "Exists"},
            {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 30},
        ],
    });
    assert_eq!(fields(good), Vec::<String>::new());
    let bad = serde_json::json!({
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [
                    {"key": "zone", "operator": "In"},
                    {"key": "gpu", "operator": "Exists", "values": ["x"]},
                    {"key": "cores", "operator": "Lt", "values": ["four"]},
                    {"key": "x", "operator": "Near", "values": ["y"]},
                ]}]},
                "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 0, "preference": {}}],
            },
            "workloadAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{"topologyKey": ""}]},
        },
        "tolerations": [{"key": "a", "operator": "Exists", "value": "b"}, {"value": "b"}, {"key": "a", "effect": "Never"}, {"key": "a", "tolerationSeconds": 5}],
    });
    let required = "spec.placement.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions";
    assert_eq!(
        fields(bad),
        [
            format!("{required}[0].values"),
            format!("{required}[1].values"),
            format!("{required}[2].values[0]"),
            format!("{required}[3].operator"),
            "spec.placement.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight".into(),
            "spec.placement.affinity.workloadAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey".into(),
            "spec.placement.tolerations[0].operator".into(),
            "spec.placement.tolerations[1].operator".into(),
            "spec.placement.tolerations[2].effect".into(),
            "spec.placement.tolerations[3].effect".into(),
        ]
    );
    assert_eq!(scheduled_by_annotation("example.com"), "fleet.example.com/scheduled-by");
}

#[test]
fn moving_off_its_node_ends_what_the_status_said_of_the_run_there() {
    let with = |node: Option<&str>| {
        let object = serde_json::json!({
            "spec": {"placement": node.map_or(serde_json::json!({}), |n| serde_json::json!({"nodeName": n}))},
            "status": {"phase": "Running", "restarts": 3, "attempts": 1, "observedGeneration": 2, "startedAt": "t",
                       "address": "10.0.0.1", "conditions": [{"type": "Ready", "status": "True"}, {"type": "Scheduled", "status": "True"}]},
        });
        object.as_object().unwrap().clone()
    };
    let reset = serde_json::json!({"phase": "Pending", "attempts": 1, "observedGeneration": 2,
                                   "conditions": [{"type": "Scheduled", "status": "True"}]});
    for (before, after, moved) in [
        (Some("a"), None, true),
        (Some("a"), Some("b"), true),
        (Some("a"), Some("a"), false),
        (None, Some("a"), false),
        (None, None, false),
    ] {
        let old = with(before);
        let mut object = with(after);
        Application::carried_status(&old, &mut object);
        let expected = if moved { reset.clone() } else { with(after)["status"].clone() };
        assert_eq!(object["status"], expected, "{before:?} -> {after:?}");
    }
}

#[test]
fn the_bound_node_reads_the_same_from_the_shape_and_its_json() {
    for (placement, expected) in [
        (serde_json::json!({"nodeName": "n1"}), Some("n1")),
        (serde_json::json!({"nodeName": ""}), None),
        (serde_json::json!({"nodeSelector": {"disk": "ssd"}}), None),
        (serde_json::Value::Null, None),
    ] {
        let object = serde_json::json!({"spec": {"command": ["/bin/true"], "placement": placement}});
        let typed: Application = serde_json::from_value(object.clone()).expect("the test's object decodes");
        assert_eq!(typed.bound_node(), expected, "{object}");
        assert_eq!(bound_node(object.as_object().unwrap()), expected, "{object}");
        let pointed = object.pointer(NODE_NAME_POINTER).and_then(serde_json::Value::as_str);
        assert_eq!(pointed.filter(|node| !node.is_empty()), expected, "{object}");
    }
}

#[test]
fn a_rollback_keeps_where_the_process_runs_and_frozen_is_unset_unless_raised() {
    let object = |value: serde_json::Value| value.as_object().unwrap().clone();
    let current = object(serde_json::json!({"spec": {"command": ["/v3"], "placement": {"nodeName": "n2"}}}));
    let mut restored = object(
        serde_json::json!({"spec": {"command": ["/v1"], "placement": {"nodeName": "n1", "priority": 3}}}),
    );
    Application::restored(&current, &mut restored);
    assert_eq!(restored["spec"]["placement"], serde_json::json!({"nodeName": "n2", "priority": 3}));
    let unplaced = object(serde_json::json!({"spec": {"command": ["/v3"]}}));
    let mut restored =
        object(serde_json::json!({"spec": {"command": ["/v1"], "placement": {"nodeName": "n1"}}}));
    Application::restored(&unplaced, &mut restored);
    assert_eq!(restored["spec"].get("placement"), None, "placed anew, as it is now");

    let thawed: Application =
        serde_json::from_value(serde_json::json!({"spec": {"command": ["/x"]}})).unwrap();
    assert!(!thawed.spec.frozen);
    assert_eq!(serde_json::to_value(&thawed.spec).unwrap().get("frozen"), None, "false is not written");
    let set: crate::kinds::applicationset::ApplicationSet = serde_json::from_value(serde_json::json!({
        "spec": {"applications": [{"name": "web", "spec": {"command": ["/x"], "frozen": true}}]},
    }))
    .unwrap();
    let errors = crate::kinds::Kind::validate(&set, None);
    assert_eq!(
        errors.iter().map(|e| e.field.as_str()).collect::<Vec<_>>(),
        ["spec.applications[0].spec.frozen"]
    );
    assert!(errors[0].message.contains("/applicationsets/<name>/freeze"), "{}", errors[0].message);
}
