//! The scheme's Kinds: decoding, defaults, validation and unknown fields.

use serde_json::{Value, json};

use super::Scheme;
use crate::verb::Verb;

fn scheme() -> Scheme {
    Scheme::new("example.com")
}

#[test]
fn application_defaults_and_unknown_fields() {
    let scheme = scheme();
    let app = scheme.find("fleet.example.com", "v1", "applications").unwrap();
    let (normalized, unknown) = app
        .behaviour
        .normalize(
            &json!({"apiVersion": "fleet.example.com/v1", "kind": "Application", "metadata": {"name": "a"},
                           "spec": {"command": ["/bin/sleep", "1"], "bogus": 1,
                                    "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}, "extra": true}),
        )
        .unwrap();
    assert_eq!(unknown, ["extra", "spec.bogus"]);
    assert_eq!(normalized["spec"]["lifecycle"]["restartPolicy"], "Always");
    assert_eq!(normalized["spec"]["lifecycle"]["terminationGracePeriodSeconds"], 30);
    assert_eq!(normalized["spec"]["resources"]["requests"]["cpu"], "1", "an unset request takes the limit");
    assert!(normalized.get("extra").is_none());
    assert!(app.behaviour.validate(obj(&normalized), None).is_empty());

    let (probed, _) = app
        .behaviour
        .normalize(&json!({"metadata": {"name": "a"}, "spec": {"command": ["x"], "probes": {"liveness": {"tcpSocket": {"port": 80}}}}}))
        .unwrap();
    let liveness = &probed["spec"]["probes"]["liveness"];
    assert_eq!(
        [
            &liveness["initialDelaySeconds"],
            &liveness["periodSeconds"],
            &liveness["timeoutSeconds"],
            &liveness["failureThreshold"],
            &liveness["successThreshold"]
        ],
        [0, 10, 1, 3, 1],
        "probe timings take the Kubernetes defaults"
    );
}

#[test]
fn application_validation_names_each_field() {
    let scheme = scheme();
    let app = scheme.find("fleet.example.com", "v1", "applications").unwrap();
    let cases = [
        (json!({"spec": {}}), "spec.command"),
        (json!({"spec": {"command": ["a\nb"]}}), "spec.command[0]"),
        (json!({"spec": {"command": ["x"], "workingDir": "rel/dir"}}), "spec.workingDir"),
        (json!({"spec": {"command": ["x"], "env": [{"name": "1X", "value": "v"}]}}), "spec.env[0].name"),
        (
            json!({"spec": {"command": ["x"], "env": [{"name": "A", "value": "1"}, {"name": "A", "value": "2"}]}}),
            "spec.env[1]",
        ),
        (
            json!({"spec": {"command": ["x"], "env": [{"name": "", "secretRef": {"name": "s", "key": "*"}, "prefix": "DB_"}]}}),
            "",
        ),
        (json!({"spec": {"command": ["x"], "ports": [{"port": 70000}]}}), "spec.ports[0].port"),
        (
            json!({"spec": {"command": ["x"], "ports": [{"port": 80, "protocol": "SCTP"}]}}),
            "spec.ports[0].protocol",
        ),
        (
            json!({"spec": {"command": ["x"], "resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "1"}}}}),
            "spec.resources.requests.cpu",
        ),
        (
            json!({"spec": {"command": ["x"], "resources": {"limits": {"memory": "lots"}}}}),
            "spec.resources.limits.memory",
        ),
        (
            json!({"spec": {"command": ["x"], "lifecycle": {"restartPolicy": "Sometimes"}}}),
            "spec.lifecycle.restartPolicy",
        ),
        (
            json!({"spec": {"command": ["x"], "lifecycle": {"backoffLimit": 3}}}),
            "spec.lifecycle.backoffLimit",
        ),
        (json!({"spec": {"command": ["x"], "lifecycle": {"restartPolicy": "Never", "backoffLimit": 3}}}), ""),
        (json!({"spec": {"command": ["x"]}, "status": {"phase": "Dancing"}}), "status.phase"),
        (
            json!({"spec": {"command": ["x"]}, "status": {"conditions": [{"type": "Ready", "status": "Yes"}]}}),
            "status.conditions[0].status",
        ),
        (json!({"spec": {"command": "not-a-list"}}), "<decode>"),
        (
            json!({"spec": {"command": ["x"], "securityContext": {"runAsUser": -1}}}),
            "spec.securityContext.runAsUser",
        ),
        (
            json!({"spec": {"command": ["x"], "securityContext": {"runAsGroup": 4294967295i64}}}),
            "spec.securityContext.runAsGroup",
        ),
        (json!({"spec": {"command": ["x"], "securityContext": {"runAsUser": 1000, "runAsGroup": 0}}}), ""),
        (
            json!({"spec": {"command": ["x"], "probes": {"readiness": {"periodSeconds": 5}}}}),
            "spec.probes.readiness.exec|httpGet|tcpSocket",
        ),
        (
            json!({"spec": {"command": ["x"], "probes": {"readiness": {"tcpSocket": {"port": 1}, "httpGet": {"port": 1}}}}}),
            "spec.probes.readiness",
        ),
        (
            json!({"spec": {"command": ["x"], "probes": {"liveness": {"httpGet": {"port": 0}}}}}),
            "spec.probes.liveness.httpGet.port",
        ),
        (
            json!({"spec": {"command": ["x"], "probes": {"liveness": {"httpGet": {"port": 80, "path": "healthz"}}}}}),
            "spec.probes.liveness.httpGet.path",
        ),
        (
            json!({"spec": {"command": ["x"], "probes": {"liveness": {"exec": {"command": []}}}}}),
            "spec.probes.liveness.exec.command",
        ),
        (
            json!({"spec": {"command": ["x"], "probes": {"liveness": {"tcpSocket": {"port": 80}, "successThreshold": 2}}}}),
            "spec.probes.liveness.successThreshold",
        ),
        (
            json!({"spec": {"command": ["x"], "probes": {"readiness": {"tcpSocket": {"port": 80}, "periodSeconds": 0}}}}),
            "spec.probes.readiness.periodSeconds",
        ),
        (
            json!({"spec": {"command": ["x"], "probes": {"readiness": {"exec": {"command": ["true"]}, "successThreshold": 2},
                                                          "liveness": {"httpGet": {"port": 8080, "path": "/healthz"}}}}}),
            "",
        ),
    ];
    for (object, field) in cases {
        let errors = match app.behaviour.normalize(&object) {
            Ok((normalized, _)) => app.behaviour.validate(obj(&normalized), None),
            Err(_) => vec![crate::validation::FieldError::invalid("<decode>", "", "")],
        };
        let fields: Vec<&str> = errors.iter().map(|e| e.field.as_str()).collect();
        if field.is_empty() {
            assert!(errors.is_empty(), "{object}: {errors:?}");
        } else {
            assert!(fields.contains(&field), "{object}: expected {field}, got {errors:?}");
        }
    }
}

#[test]
fn secrets_fold_string_data_and_stay_immutable() {
    let scheme = scheme();
    let secret = scheme.find("fleet.example.com", "v1", "secrets").unwrap();
    let (normalized, _) = secret
        .behaviour
        .normalize(&json!({"stringData": {"password": "hunter2"}, "immutable": true}))
        .unwrap();
    assert_eq!(normalized["data"]["password"], "aHVudGVyMg==");
    assert_eq!(normalized["type"], "Opaque");
    assert!(normalized.get("stringData").is_none());
    let changed = json!({"type": "Opaque", "data": {"password": "b3RoZXI="}, "immutable": true});
    let errors = secret.behaviour.validate(obj(&changed), Some(obj(&normalized)));
    assert_eq!(errors[0].field, "data");
    let bad = json!({"data": {"../etc": "eA==", "k": "not base64!"}});
    assert_eq!(secret.behaviour.validate(obj(&bad), None).len(), 2);
}

#[test]
fn namespaces_start_active_with_their_finalizer() {
    let scheme = scheme();
    let namespace = scheme.find("", "v1", "namespaces").unwrap();
    let (normalized, unknown) =
        namespace.behaviour.normalize(&json!({"metadata": {"name": "team-a"}})).unwrap();
    assert!(unknown.is_empty());
    assert_eq!(normalized["status"]["phase"], "Active");
    assert_eq!(normalized["spec"]["finalizers"], json!(["kubernetes"]));
    assert!(namespace.names.check("team-a").is_none());
    assert!(namespace.names.check("team.a").is_some());
}

#[test]
fn services_need_names_for_several_ports() {
    let scheme = scheme();
    let service = scheme.find("fleet.example.com", "v1", "services").unwrap();
    let (normalized, _) = service
        .behaviour
        .normalize(&json!({"spec": {"ports": [{"port": 80}, {"name": "b", "port": 80}]}}))
        .unwrap();
    let errors = service.behaviour.validate(obj(&normalized), None);
    let fields: Vec<&str> = errors.iter().map(|e| e.field.as_str()).collect();
    assert_eq!(fields, ["spec.ports[0].name", "spec.ports[1]"]);
}

#[test]
fn group_versions_put_core_first_and_metrics_last() {
    let scheme = scheme();
    let groups: Vec<String> = scheme.group_versions().iter().map(|(g, v, _)| format!("{g}/{v}")).collect();
    assert_eq!(
        groups,
        [
            "/v1",
            "fleet.example.com/v1",
            "authorization.example.com/v1",
            "certificates.k8s.io/v1",
            "coordination.k8s.io/v1",
            "authorization.k8s.io/v1",
            "authentication.k8s.io/v1",
            "catalog.example.com/v1",
            "metrics.k8s.io/v1beta1"
        ]
    );
}

#[test]
fn application_sets_check_each_component_as_an_application() {
    let scheme = scheme();
    let set = scheme.find("fleet.example.com", "v1", "applicationsets").unwrap();
    let (normalized, _) = set
        .behaviour
        .normalize(&json!({"spec": {"applications": [
            {"name": "web", "spec": {"command": ["/bin/web"]}, "scale": {"replicas": 2}},
            {"name": "web", "spec": {"command": []}, "scale": {"replicas": -1}}
        ]}}))
        .unwrap();
    assert_eq!(normalized["spec"]["rollout"]["prune"], true);
    assert_eq!(normalized["spec"]["applications"][0]["spec"]["lifecycle"]["restartPolicy"], "Always");
    let fields: Vec<String> =
        set.behaviour.validate(obj(&normalized), None).into_iter().map(|e| e.field).collect();
    assert_eq!(
        fields,
        ["spec.applications[1]", "spec.applications[1].spec.command", "spec.applications[1].scale.replicas"]
    );
}

#[test]
fn application_sets_roll_by_an_int_or_percent_budget_and_print_ready_of_desired() {
    use crate::kinds::applicationset::rolling_budget;
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
    let scheme = scheme();
    let set = scheme.find("fleet.example.com", "v1", "applicationsets").unwrap();
    let component = json!({"name": "web", "spec": {"command": ["/bin/web"]}, "scale": {"replicas": 2}});
    let (normalized, _) = set.behaviour.normalize(&json!({"spec": {"applications": [component]}})).unwrap();
    assert_eq!(normalized["spec"]["rollout"]["maxUnavailable"], "25%", "defaulted as a Deployment's");
    for (max, valid) in [
        (json!(2), true),
        (json!("50%"), true),
        (json!("100%"), true),
        (json!(-1), false),
        (json!("101%"), false),
        (json!("x%"), false),
        (json!("5"), false),
    ] {
        let object = json!({"spec": {"applications": [component], "rollout": {"maxUnavailable": max}}});
        let (normalized, _) = set.behaviour.normalize(&object).unwrap();
        let fields: Vec<String> =
            set.behaviour.validate(obj(&normalized), None).into_iter().map(|e| e.field).collect();
        assert_eq!(fields.is_empty(), valid, "{max}: {fields:?}");
    }
    let percent = |p: &str| IntOrString::String(p.to_owned());
    for (max, desired, budget) in [
        (Some(percent("25%")), 100, 25),
        (Some(percent("25%")), 7, 1),
        (Some(percent("25%")), 3, 1),
        (None, 8, 2),
        (Some(IntOrString::Int(3)), 10, 3),
        (Some(IntOrString::Int(0)), 10, 1),
        (Some(percent("0%")), 10, 1),
    ] {
        assert_eq!(rolling_budget(max.as_ref(), desired), budget, "{max:?} of {desired}");
    }
    let subresources: Vec<&str> = set.subresources.iter().map(|sub| sub.name).collect();
    assert_eq!(subresources, ["status", "scale", "history", "rollback", "freeze", "thaw"]);
    let columns: Vec<&str> = set.table_columns().iter().map(|c| c.name).collect();
    assert_eq!(columns, ["Name", "Ready", "Up-to-date", "Phase", "Age"]);
    let object = json!({"metadata": {"name": "web"}, "status": {"desired": 4, "ready": 3, "updated": 2}});
    let cells: Vec<serde_json::Value> =
        set.table_columns().iter().map(|c| (c.cell)(&object, jiff::Timestamp::UNIX_EPOCH)).collect();
    assert_eq!(cells[1..3], [json!("3/4"), json!(2)]);
}

#[test]
fn only_a_set_with_exactly_one_replicated_component_scales() {
    use crate::kinds::applicationset::ApplicationSet;
    let set = |components: serde_json::Value| -> ApplicationSet {
        serde_json::from_value(json!({"spec": {"applications": components}})).unwrap()
    };
    let web = json!({"name": "web", "spec": {"command": ["/w"]}, "scale": {"replicas": 2}});
    let api = json!({"name": "api", "spec": {"command": ["/a"]}, "scale": {"replicas": 1}});
    let agent = json!({"name": "agent", "spec": {"command": ["/g"]}, "scale": {"nodeSpread": {}}});
    assert_eq!(set(json!([agent, web])).scaled_component(), Ok(1));
    let none = set(json!([agent])).scaled_component().unwrap_err();
    assert!(none.contains("no component scaled by replicas"), "{none}");
    let two = set(json!([web, api])).scaled_component().unwrap_err();
    assert!(two.contains("2 components scaled by replicas (web, api)"), "{two}");
}

#[test]
fn certificate_requests_are_served_in_their_builtin_shape() {
    let scheme = scheme();
    assert!(scheme.find("fleet.example.com", "v1", "certificatesigningrequests").is_none());
    let csr = scheme.find("certificates.k8s.io", "v1", "certificatesigningrequests").unwrap();
    assert!(!csr.namespaced && csr.builtin);
    assert_eq!(csr.short_names, ["csr"]);
    let subresources: Vec<&str> = csr.subresources.iter().map(|sub| sub.name).collect();
    assert_eq!(subresources, ["approval", "status"]);
    let columns: Vec<&str> = csr.table_columns().iter().map(|c| c.name).collect();
    assert_eq!(columns, ["Name", "Age", "SignerName", "Requestor", "RequestedDuration", "Condition"]);
    let row = |object: serde_json::Value| -> Vec<serde_json::Value> {
        csr.table_columns().iter().map(|c| (c.cell)(&object, jiff::Timestamp::UNIX_EPOCH)).collect()
    };
    let cells = row(json!({
        "metadata": {"name": "node-csr-x"},
        "spec": {"signerName": "kubernetes.io/kube-apiserver-client-kubelet", "username": "system:bootstrap:abcdef", "expirationSeconds": 3600},
        "status": {"conditions": [{"type": "Approved", "status": "True"}], "certificate": "eA=="}
    }));
    assert_eq!(cells[2], "kubernetes.io/kube-apiserver-client-kubelet");
    assert_eq!(cells[3], "system:bootstrap:abcdef");
    assert_eq!(cells[4], "60m");
    assert_eq!(cells[5], "Approved,Issued");
    let pending = row(json!({"metadata": {"name": "x"}, "spec": {"signerName": "a.b/c"}}));
    assert_eq!(pending[4], "<none>");
    assert_eq!(pending[5], "Pending");
}

#[test]
fn condition_types_are_the_words_on_the_wire() {
    use crate::kinds::ConditionType;
    for (condition, word) in [
        (ConditionType::Ready, "Ready"),
        (ConditionType::Scheduled, "Scheduled"),
        (ConditionType::NodeLost, "NodeLost"),
        (ConditionType::Converged, "Converged"),
    ] {
        assert_eq!(condition.as_str(), word);
        assert_eq!(serde_json::to_value(condition).unwrap(), word);
        assert_eq!(serde_json::from_value::<ConditionType>(json!(word)).unwrap(), condition);
    }
}

#[test]
fn the_rbac_check_is_a_create_only_review_of_the_authorization_group() {
    let scheme = scheme();
    let check = scheme.find("authorization.example.com", "v1", "check").expect("the check is in the scheme");
    assert_eq!((check.kind, check.namespaced, check.verbs), ("Check", false, &[Verb::Create][..]));
    assert!(check.review && !check.stored(), "answered at once, never stored");
    let (_, _, kinds) = scheme
        .group_versions()
        .into_iter()
        .find(|(group, version, _)| group == "authorization.example.com" && *version == "v1")
        .unwrap();
    let plurals: Vec<&str> = kinds.iter().map(|kind| kind.plural).collect();
    assert_eq!(plurals, ["roles", "rolebindings", "clusterroles", "clusterrolebindings", "check"]);
}

#[test]
fn the_workloads_keep_history_secrets_do_not_and_only_freeze_and_thaw_write_spec_frozen() {
    let scheme = Scheme::new("example.com");
    let fleet = |plural: &str| scheme.find("fleet.example.com", "v1", plural).unwrap();
    for plural in ["applications", "applicationsets", "services"] {
        assert!(fleet(plural).keeps_history(), "{plural}");
        let rollback = fleet(plural).subresource("rollback").unwrap();
        assert_eq!(rollback.verbs, [Verb::Create], "{plural}");
        assert_eq!(fleet(plural).subresource("history").unwrap().verbs, [Verb::Get], "{plural}");
    }
    assert!(!fleet("secrets").keeps_history());
    assert!(fleet("secrets").subresource("rollback").is_none());
    assert!(!scheme.find("", "v1", "namespaces").unwrap().keeps_history());
    for plural in ["applications", "applicationsets"] {
        let kind = fleet(plural);
        for door in ["freeze", "thaw"] {
            let found = kind.door(door).unwrap_or_else(|| panic!("{plural}/{door}"));
            assert_eq!(
                (found.field, found.pointer, found.permission),
                ("spec.frozen", "/spec/frozen", "freeze")
            );
            assert_eq!(kind.subresource(door).unwrap().verbs, [Verb::Create]);
        }
        assert!(kind.door("status").is_none());
    }
    assert!(fleet("services").doors.is_empty());
}

/// The object a test built as JSON, as behaviours take it.
fn obj(value: &Value) -> &serde_json::Map<String, Value> {
    value.as_object().expect("an object")
}
