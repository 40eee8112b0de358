//! RBAC decisions, table-driven.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kayra_api::kinds::rbac::{
    ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef, Subject,
};

use super::*;

const FLEET: &str = "fleet.example.com";

fn meta(namespace: Option<&str>, name: &str) -> ObjectMeta {
    ObjectMeta { name: Some(name.into()), namespace: namespace.map(Into::into), ..ObjectMeta::default() }
}

fn rule(apis: &[&str], resources: &[&str], names: &[&str], verbs: &[&str]) -> PolicyRule {
    let owned = |list: &[&str]| list.iter().map(|s| (*s).to_owned()).collect();
    PolicyRule {
        apis: owned(apis),
        resources: owned(resources),
        resource_names: owned(names),
        verbs: owned(verbs),
        non_resource_urls: Vec::new(),
    }
}

fn subject(kind: &str, name: &str, namespace: Option<&str>) -> Subject {
    Subject { kind: kind.into(), name: name.into(), namespace: namespace.map(Into::into) }
}

fn role_ref(kind: &str, name: &str) -> RoleRef {
    RoleRef { kind: kind.into(), name: name.into() }
}

fn rbac() -> Rbac {
    let mut rbac = Rbac::default();
    rbac.add_namespace("a");
    rbac.add_namespace("b");
    let cluster_roles = [
        ("reader", rule(&[FLEET], &["applications"], &[], &["get", "list", "watch"])),
        ("status-writer", rule(&["*"], &["applications/status"], &[], &["update", "patch"])),
        ("named", rule(&[FLEET], &["applications"], &["web"], &["get", "delete"])),
        ("subresources", rule(&["*"], &["applications/*"], &[], &["get"])),
        ("any-status", rule(&["*"], &["*/status"], &[], &["get"])),
        (
            "health",
            PolicyRule {
                verbs: vec!["get".into()],
                non_resource_urls: vec!["/healthz".into(), "/logs/*".into()],
                ..PolicyRule::default()
            },
        ),
        ("everything", rule(&["*"], &["*"], &[], &["*"])),
    ];
    for (name, rule) in cluster_roles {
        rbac.add_cluster_role(ClusterRole {
            metadata: meta(None, name),
            rules: vec![rule],
            ..ClusterRole::default()
        });
    }
    rbac.add_role(Role {
        metadata: meta(Some("a"), "editor"),
        rules: vec![rule(&[FLEET], &["applications", "services"], &[], &["*"])],
        ..Role::default()
    });
    let bindings = [
        ("a", vec![subject("User", "alice", None)], role_ref("Role", "editor")),
        ("a", vec![subject("Group", "readers", None)], role_ref("ClusterRole", "reader")),
        ("a", vec![subject("ServiceAccount", "robot", None)], role_ref("ClusterRole", "subresources")),
        ("ghost", vec![subject("User", "alice", None)], role_ref("ClusterRole", "everything")),
        ("b", vec![subject("User", "alice", None)], role_ref("Role", "editor")),
    ];
    for (namespace, subjects, role_ref) in bindings {
        rbac.add_binding(RoleBinding {
            metadata: meta(Some(namespace), "b"),
            subjects,
            role_ref,
            ..RoleBinding::default()
        });
    }
    let cluster_bindings = [
        (vec![subject("Group", "system:authenticated", None)], role_ref("ClusterRole", "health")),
        (vec![subject("User", "carol", None)], role_ref("ClusterRole", "named")),
        (vec![subject("ServiceAccount", "bot", Some("a"))], role_ref("ClusterRole", "status-writer")),
        (vec![subject("User", "dave", None)], role_ref("ClusterRole", "any-status")),
        (vec![subject("User", "eve", None)], role_ref("Role", "editor")),
    ];
    for (subjects, role_ref) in cluster_bindings {
        rbac.add_cluster_binding(ClusterRoleBinding {
            metadata: meta(None, "c"),
            subjects,
            role_ref,
            ..ClusterRoleBinding::default()
        });
    }
    rbac
}

fn caller(user: &str, groups: &[&str]) -> Caller {
    let mut groups: Vec<String> = groups.iter().map(|g| (*g).to_owned()).collect();
    groups.push("system:authenticated".into());
    Caller { user: user.into(), groups }
}

fn on(verb: &str, api: &str, resource: &str, namespace: Option<&str>, name: Option<&str>) -> Action {
    Action::Resource {
        verb: verb.into(),
        api: api.into(),
        resource: resource.into(),
        namespace: namespace.map(Into::into),
        name: name.map(Into::into),
    }
}

fn path(verb: &str, path: &str) -> Action {
    Action::NonResource { verb: verb.into(), path: path.into() }
}

#[test]
fn decisions_follow_kubernetes_rbac() {
    let rbac = rbac();
    let cases: Vec<(Caller, Action, bool, &str)> = vec![
        (
            caller("alice", &[]),
            on("create", FLEET, "applications", Some("a"), None),
            true,
            "a Role in its namespace",
        ),
        (caller("alice", &[]), on("delete", FLEET, "services", Some("a"), Some("x")), true, "verb *"),
        (
            caller("alice", &[]),
            on("create", FLEET, "applications", Some("c"), None),
            false,
            "no binding in c",
        ),
        (
            caller("alice", &[]),
            on("create", FLEET, "applications", None, None),
            false,
            "a Role grants nothing cluster-wide",
        ),
        (
            caller("alice", &[]),
            on("get", FLEET, "applications", Some("ghost"), Some("x")),
            false,
            "a binding in a missing namespace grants nothing",
        ),
        (
            caller("alice", &[]),
            on("get", FLEET, "applications", Some("b"), None),
            false,
            "the Role lives in a, not b",
        ),
        (caller("alice", &[]), on("get", "", "namespaces", None, None), false, "nothing on core"),
        (
            caller("alice", &[]),
            on("get", FLEET, "applications/status", Some("a"), Some("x")),
            false,
            "subresources are their own resources",
        ),
        (
            caller("bob", &["readers"]),
            on("list", FLEET, "applications", Some("a"), None),
            true,
            "a ClusterRole through a RoleBinding",
        ),
        (
            caller("bob", &["readers"]),
            on("list", FLEET, "applications", Some("b"), None),
            false,
            "only in the binding's namespace",
        ),
        (
            caller("bob", &["readers"]),
            on("list", FLEET, "applications", None, None),
            false,
            "not cluster-wide",
        ),
        (
            caller("bob", &["readers"]),
            on("create", FLEET, "applications", Some("a"), None),
            false,
            "read-only",
        ),
        (
            caller("bob", &["readers"]),
            on("list", "other.example.com", "applications", Some("a"), None),
            false,
            "another API group",
        ),
        (
            caller("carol", &[]),
            on("get", FLEET, "applications", Some("a"), Some("web")),
            true,
            "a named object",
        ),
        (
            caller("carol", &[]),
            on("get", FLEET, "applications", Some("z"), Some("web")),
            true,
            "cluster bindings reach every namespace",
        ),
        (
            caller("carol", &[]),
            on("get", FLEET, "applications", Some("a"), Some("db")),
            false,
            "another name",
        ),
        (
            caller("carol", &[]),
            on("list", FLEET, "applications", Some("a"), None),
            false,
            "resourceNames cannot allow a list",
        ),
        (
            caller("carol", &[]),
            on("create", FLEET, "applications", Some("a"), Some("web")),
            false,
            "verb not granted",
        ),
        (
            caller("system:serviceaccount:a:bot", &[]),
            on("patch", FLEET, "applications/status", Some("a"), Some("x")),
            true,
            "a service account",
        ),
        (
            caller("system:serviceaccount:b:bot", &[]),
            on("patch", FLEET, "applications/status", Some("a"), Some("x")),
            false,
            "another namespace's account",
        ),
        (
            caller("system:serviceaccount:a:bot", &[]),
            on("patch", FLEET, "applications", Some("a"), Some("x")),
            false,
            "only the subresource",
        ),
        (
            caller("system:serviceaccount:a:robot", &[]),
            on("get", FLEET, "applications/log", Some("a"), Some("x")),
            true,
            "resource/* covers its subresources",
        ),
        (
            caller("system:serviceaccount:a:robot", &[]),
            on("get", FLEET, "applications", Some("a"), Some("x")),
            false,
            "resource/* is not the resource",
        ),
        (caller("dave", &[]), on("get", "", "nodes/status", None, Some("n1")), true, "*/status"),
        (
            caller("dave", &[]),
            on("get", "", "nodes", None, Some("n1")),
            false,
            "*/status is not the resource",
        ),
        (
            caller("eve", &[]),
            on("get", FLEET, "applications", Some("a"), None),
            false,
            "a ClusterRoleBinding to a Role grants nothing",
        ),
        (caller("anyone", &[]), path("get", "/healthz"), true, "exact non-resource URL"),
        (caller("anyone", &[]), path("get", "/logs/app/1"), true, "prefix non-resource URL"),
        (caller("anyone", &[]), path("post", "/healthz"), false, "verb on a non-resource URL"),
        (caller("anyone", &[]), path("get", "/healthzz"), false, "not a prefix rule"),
        (caller("alice", &[]), path("get", "/version"), false, "RoleBindings never grant non-resource URLs"),
        (
            caller("root", &["system:masters"]),
            on("delete", "", "namespaces", None, Some("kube-system")),
            true,
            "masters",
        ),
    ];
    for (caller, action, expected, why) in cases {
        assert_eq!(rbac.allows(&caller, &action), expected, "{why}: {caller:?} {action:?}");
    }
}

#[test]
fn masters_may_do_everything_and_strangers_nothing() {
    let rbac = rbac();
    let verbs = ["get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"];
    let resources =
        ["applications", "applications/status", "services", "namespaces", "nodes/proxy", "secrets"];
    let apis = ["", FLEET, "authorization.example.com"];
    let namespaces = [None, Some("a"), Some("b"), Some("ghost")];
    let names = [None, Some("web")];
    let master = caller("root", &["system:masters"]);
    let stranger = caller("mallory", &["nobody"]);
    let mut checked = 0;
    for verb in verbs {
        for resource in resources {
            for api in apis {
                for namespace in namespaces {
                    for name in names {
                        let action = on(verb, api, resource, namespace, name);
                        assert!(rbac.allows(&master, &action), "{action:?}");
                        assert!(!rbac.allows(&stranger, &action), "{action:?}");
                        checked += 2;
                    }
                }
            }
        }
    }
    assert_eq!(checked, 2 * 8 * 6 * 3 * 4 * 2);
}

fn write<'a>(
    resource: &'a str,
    namespace: Option<&'a str>,
    name: &'a str,
    object: &'a serde_json::Value,
) -> Write<'a> {
    let object = object.as_object().expect("an object");
    let api = match resource {
        "nodes" => "",
        "applications" | "applicationsets" => FLEET,
        _ => "authorization.example.com",
    };
    Write { api, resource, namespace, name, object, old: None }
}

#[test]
fn rbac_writes_grant_only_what_the_writer_holds() {
    let mut rbac = rbac();
    rbac.add_cluster_role(ClusterRole {
        metadata: meta(None, "binder"),
        rules: vec![rule(&["authorization.example.com"], &["clusterroles"], &["everything"], &["bind"])],
        ..ClusterRole::default()
    });
    rbac.add_cluster_role(ClusterRole {
        metadata: meta(None, "escalator"),
        rules: vec![rule(&["authorization.example.com"], &["roles"], &[], &["escalate"])],
        ..ClusterRole::default()
    });
    rbac.add_binding(RoleBinding {
        metadata: meta(Some("a"), "frank-binds"),
        subjects: vec![subject("User", "frank", None)],
        role_ref: role_ref("ClusterRole", "binder"),
        ..RoleBinding::default()
    });
    rbac.add_binding(RoleBinding {
        metadata: meta(Some("a"), "gina-escalates"),
        subjects: vec![subject("User", "gina", None)],
        role_ref: role_ref("ClusterRole", "escalator"),
        ..RoleBinding::default()
    });
    let role = |rules: serde_json::Value| serde_json::json!({"rules": rules});
    let binding = |kind: &str, name: &str| serde_json::json!({"roleRef": {"kind": kind, "name": name}});
    let held = role(
        serde_json::json!([{"apis": [FLEET], "resources": ["applications"], "verbs": ["get", "delete"]}]),
    );
    let wider = role(
        serde_json::json!([{"apis": [FLEET], "resources": ["applications", "secrets"], "verbs": ["get"]}]),
    );
    let wildcard = role(serde_json::json!([{"apis": [FLEET], "resources": ["*"], "verbs": ["get"]}]));
    let named = role(
        serde_json::json!([{"apis": [FLEET], "resources": ["services"], "resourceNames": ["web"], "verbs": ["get"]}]),
    );
    let urls = role(serde_json::json!([{"nonResourceURLs": ["/healthz"], "verbs": ["get"]}]));
    let editor = binding("Role", "editor");
    let reader = binding("ClusterRole", "reader");
    let everything = binding("ClusterRole", "everything");
    let missing = binding("Role", "missing");
    let cases: Vec<(&str, Write<'_>, bool, &str)> = vec![
        ("alice", write("roles", Some("a"), "r", &held), true, "rules she holds in a"),
        ("alice", write("roles", Some("a"), "r", &wider), false, "secrets she does not hold"),
        ("alice", write("roles", Some("a"), "r", &wildcard), false, "* is more than the resources she holds"),
        ("alice", write("roles", Some("a"), "r", &named), true, "one name of a resource she holds"),
        ("alice", write("roles", Some("c"), "r", &held), false, "nothing held in c"),
        ("alice", write("clusterroles", None, "r", &held), false, "a namespace grant is not cluster-wide"),
        ("anyone", write("clusterroles", None, "r", &urls), true, "a URL every caller may get"),
        ("carol", write("clusterroles", None, "r", &urls), true, "held through system:authenticated"),
        ("gina", write("roles", Some("a"), "r", &wider), true, "escalate on roles"),
        ("gina", write("roles", Some("b"), "r", &wider), false, "escalate only in a"),
        ("alice", write("rolebindings", Some("a"), "b", &editor), true, "a role she holds"),
        ("alice", write("rolebindings", Some("a"), "b", &reader), true, "a subset of what she holds"),
        ("alice", write("rolebindings", Some("a"), "b", &everything), false, "more than she holds"),
        ("alice", write("rolebindings", Some("a"), "b", &missing), false, "a role that does not exist"),
        ("frank", write("rolebindings", Some("a"), "b", &everything), true, "bind on that role"),
        ("frank", write("rolebindings", Some("a"), "b", &reader), false, "bind on another role only"),
        ("frank", write("clusterrolebindings", None, "b", &everything), false, "bind granted in a only"),
        ("root", write("clusterrolebindings", None, "b", &everything), true, "masters"),
    ];
    let names: Vec<String> = (0..200).map(|i| format!("n{i}")).collect();
    let huge = role(
        serde_json::json!([{"apis": [FLEET], "resources": ["applications"], "resourceNames": names, "verbs": ["get", "list", "watch", "update", "patch", "delete", "create", "deletecollection"]}, {"apis": [FLEET, "other"], "resources": (0..30).map(|i| format!("r{i}")).collect::<Vec<_>>(), "resourceNames": (0..200).map(|i| format!("n{i}")).collect::<Vec<_>>(), "verbs": ["get"]}]),
    );
    let admission = Admission { rbac: &rbac, caller: &caller("alice", &[]), domain: "example.com" };
    let refused = admission.admit(&write("roles", Some("a"), "r", &huge)).unwrap_err();
    assert!(refused.contains("more than 10000"), "{refused}");
    let big = role(
        serde_json::json!([{"apis": [FLEET], "resources": (0..100).map(|i| format!("r{i}")).collect::<Vec<_>>(), "verbs": ["get"]}]),
    );
    let refused = admission.admit(&write("roles", Some("a"), "r", &big)).unwrap_err();
    assert!(refused.len() < 2000 && refused.ends_with("and 90 more"), "the refusal names a few: {refused}");
    // A held `*/*` decides no request, so it covers no wildcard grant either.
    let mut odd = rbac.clone();
    odd.add_cluster_role(ClusterRole {
        metadata: meta(None, "odd"),
        rules: vec![rule(&[FLEET], &["*/*"], &[], &["get"])],
        ..ClusterRole::default()
    });
    odd.add_binding(RoleBinding {
        metadata: meta(Some("a"), "odd"),
        subjects: vec![subject("User", "olga", None)],
        role_ref: role_ref("ClusterRole", "odd"),
        ..RoleBinding::default()
    });
    let olga = caller("olga", &[]);
    let admission = Admission { rbac: &odd, caller: &olga, domain: "example.com" };
    assert!(!odd.allows(&olga, &on("get", FLEET, "applications/status", Some("a"), Some("x"))));
    for granted in ["*/status", "applications/*", "*"] {
        let wider = role(serde_json::json!([{"apis": [FLEET], "resources": [granted], "verbs": ["get"]}]));
        assert!(
            admission.admit(&write("roles", Some("a"), "r", &wider)).is_err(),
            "{granted} is not covered by */*"
        );
    }
    // A writer holding huge rules cannot make one check cost unbounded work.
    let mut heavy = rbac.clone();
    for i in 0..50 {
        let resources: Vec<String> = (0..10_000).map(|j| format!("r{j}")).collect();
        let resources: Vec<&str> = resources.iter().map(String::as_str).collect();
        heavy.add_role(Role {
            metadata: meta(Some("a"), &format!("big-{i}")),
            rules: vec![rule(&[FLEET], &resources, &[], &["get"])],
            ..Role::default()
        });
        heavy.add_binding(RoleBinding {
            metadata: meta(Some("a"), &format!("big-{i}")),
            subjects: vec![subject("User", "hank", None)],
            role_ref: role_ref("Role", &format!("big-{i}")),
            ..RoleBinding::default()
        });
    }
    let hank = caller("hank", &[]);
    let admission = Admission { rbac: &heavy, caller: &hank, domain: "example.com" };
    let many: Vec<String> = (0..9_000).map(|j| format!("x{j}")).collect();
    let refused = admission
        .admit(&write(
            "roles",
            Some("a"),
            "r",
            &role(serde_json::json!([{"apis": [FLEET], "resources": many, "verbs": ["get"]}])),
        ))
        .unwrap_err();
    assert!(refused.contains("too many rules"), "{refused}");
    for (user, write, expected, why) in cases {
        let groups: &[&str] = if user == "root" { &["system:masters"] } else { &[] };
        let caller = caller(user, groups);
        let admission = Admission { rbac: &rbac, caller: &caller, domain: "example.com" };
        let decision = admission.admit(&write);
        assert_eq!(decision.is_ok(), expected, "{why}: {user} {write:?}: {decision:?}");
        if let Err(message) = decision {
            assert!(message.contains(user), "the refusal names the user: {message}");
        }
    }
}

#[test]
fn workloads_refer_only_to_what_their_writer_may_read() {
    let mut rbac = rbac();
    rbac.add_role(Role {
        metadata: meta(Some("a"), "one-secret"),
        rules: vec![rule(&[FLEET], &["secrets"], &["db"], &["get"])],
        ..Role::default()
    });
    rbac.add_binding(RoleBinding {
        metadata: meta(Some("a"), "alice-secret"),
        subjects: vec![subject("User", "alice", None)],
        role_ref: role_ref("Role", "one-secret"),
        ..RoleBinding::default()
    });
    let app = |secret: &str, service: &str| serde_json::json!({"spec": {"env": [{"name": "A", "value": "1"}, {"name": "P", "secretRef": {"name": secret, "key": "p"}}], "serviceName": service}});
    let set = serde_json::json!({"spec": {"applications": [{"name": "c", "spec": {"env": [{"name": "P", "secretRef": {"name": "other", "key": "p"}}]}}]}});
    let alice = caller("alice", &[]);
    let admission = Admission { rbac: &rbac, caller: &alice, domain: "example.com" };
    assert!(admission.admit(&write("applications", Some("a"), "x", &app("db", "web"))).is_ok());
    let refused = admission.admit(&write("applications", Some("a"), "x", &app("other", "web"))).unwrap_err();
    assert!(refused.contains("secrets \"other\""), "{refused}");
    assert!(
        admission.admit(&write("applicationsets", Some("a"), "s", &set)).is_err(),
        "inside a set's components"
    );
    let many: Vec<serde_json::Value> = (0..300)
        .map(|i| serde_json::json!({"name": format!("V{i}"), "secretRef": {"name": format!("s{i}"), "key": "k"}}))
        .collect();
    let refused = admission
        .admit(&write("applications", Some("a"), "x", &serde_json::json!({"spec": {"env": many}})))
        .unwrap_err();
    assert!(refused.contains("at most"), "{refused}");
    let repeated: Vec<serde_json::Value> = (0..300)
        .map(|i| serde_json::json!({"name": format!("V{i}"), "secretRef": {"name": "db", "key": "k"}}))
        .collect();
    assert!(
        admission
            .admit(&write("applications", Some("a"), "x", &serde_json::json!({"spec": {"env": repeated}})))
            .is_ok(),
        "one Secret named many times"
    );
    let bob = caller("bob", &["readers"]);
    let admission = Admission { rbac: &rbac, caller: &bob, domain: "example.com" };
    assert!(
        admission.admit(&write("applications", Some("a"), "x", &serde_json::json!({"spec": {}}))).is_ok()
    );
    assert!(
        admission.admit(&write("applications", Some("a"), "x", &app("db", "web"))).is_err(),
        "services: bob may not get them"
    );
}

#[test]
fn a_node_writes_only_its_own_node() {
    let rbac = rbac();
    let node = caller("system:node:n1", &[admission::NODES]);
    let admission = Admission { rbac: &rbac, caller: &node, domain: "example.com" };
    let object = serde_json::json!({});
    assert!(admission.admit(&write("nodes", None, "n1", &object)).is_ok());
    assert!(admission.admit(&write("nodes", None, "n2", &object)).is_err());
    let labelled = serde_json::json!({"metadata": {"labels": {"gpu": "yes"}}});
    assert!(
        admission.admit(&write("nodes", None, "n1", &labelled)).is_err(),
        "no labels of its own choosing"
    );
    let schedulable = serde_json::json!({"spec": {"unschedulable": false}});
    let cordoned =
        serde_json::json!({"spec": {"unschedulable": true}, "metadata": {"labels": {"zone": "a"}}});
    let update = |new: &serde_json::Value, old: &serde_json::Value| {
        let mut write = write("nodes", None, "n1", new);
        write.old = old.as_object();
        admission.admit(&write)
    };
    assert!(update(&schedulable, &cordoned).is_err(), "a node may not uncordon itself");
    assert!(update(&cordoned, &cordoned).is_ok(), "spec and labels as stored");
    let admin = caller("root", &["system:masters"]);
    let by_admin = Admission { rbac: &rbac, caller: &admin, domain: "example.com" };
    assert!(by_admin.admit(&write("nodes", None, "n2", &labelled)).is_ok());
    let mut rbac = rbac;
    rbac.add_cluster_role(ClusterRole {
        metadata: meta(None, "nodes"),
        rules: vec![rule(&[""], &["nodes", "nodes/status"], &[], &["*"])],
        ..ClusterRole::default()
    });
    rbac.add_cluster_binding(ClusterRoleBinding {
        metadata: meta(None, "nodes"),
        subjects: vec![subject("Group", admission::NODES, None)],
        role_ref: role_ref("ClusterRole", "nodes"),
        ..ClusterRoleBinding::default()
    });
    assert!(rbac.allows(&node, &on("patch", "", "nodes/status", None, Some("n1"))));
    assert!(!rbac.allows(&node, &on("patch", "", "nodes/status", None, Some("n2"))), "another node's status");
    assert!(!rbac.allows(&node, &on("delete", "", "nodes", None, Some("n2"))));
    assert!(rbac.allows(&node, &on("get", "", "nodes", None, Some("n2"))), "reading other nodes is fine");
    let impostor = caller("system:node:n1", &[]);
    assert!(
        !rbac.allows(&impostor, &on("patch", "", "nodes/status", None, Some("n1"))),
        "the name alone is not a node"
    );
}
