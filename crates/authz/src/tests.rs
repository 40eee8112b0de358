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

#[test]
fn a_node_is_authorized_for_its_own_node_only() {
    let node = caller("system:node:n1", &[NODES]);
    let mut rbac = rbac();
    rbac.add_cluster_role(ClusterRole {
        metadata: meta(None, "nodes"),
        rules: vec![rule(&[""], &["nodes", "nodes/status"], &[], &["*"])],
        ..ClusterRole::default()
    });
    rbac.add_cluster_binding(ClusterRoleBinding {
        metadata: meta(None, "nodes"),
        subjects: vec![subject("Group", NODES, None)],
        role_ref: role_ref("ClusterRole", "nodes"),
        ..ClusterRoleBinding::default()
    });
    assert!(rbac.allows(&node, &on("patch", "", "nodes/status", None, Some("n1"))));
    assert!(!rbac.allows(&node, &on("patch", "", "nodes/status", None, Some("n2"))), "another node's status");
    assert!(!rbac.allows(&node, &on("delete", "", "nodes", None, Some("n2"))));
    let check = |verb: &str, resource: &str, name: Option<&str>, expected: bool, why: &str| {
        assert_eq!(
            rbac.allows(&node, &on(verb, "", resource, None, name)),
            expected,
            "{verb} {resource} {name:?}: {why}"
        );
    };
    check("get", "nodes", Some("n1"), true, "its own Node");
    check("get", "nodes/status", Some("n1"), true, "its own status");
    check("watch", "nodes", Some("n1"), true, "a watch of its own Node, by metadata.name");
    check("create", "nodes", None, true, "a create names its Node in the body, which admission checks");
    check("get", "nodes", Some("n2"), false, "another node");
    check("get", "nodes/status", Some("n2"), false, "another node's status");
    check("list", "nodes", Some("n2"), false, "another node, by metadata.name");
    check("list", "nodes", None, false, "every node");
    check("watch", "nodes", None, false, "every node");
    check("deletecollection", "nodes", None, false, "every node");
    let impostor = caller("system:node:n1", &[]);
    assert!(
        !rbac.allows(&impostor, &on("patch", "", "nodes/status", None, Some("n1"))),
        "the name alone is not a node"
    );
}

#[test]
fn held_rules_cover_single_permissions_and_wildcards_only_by_wildcards() {
    let held = |resources: &[&str], names: &[&str]| rule(&[FLEET], resources, names, &["get"]);
    let check = |held: PolicyRule, granted: Action, expected: bool, why: &str| {
        assert_eq!(coverage::covers(&held, &granted), expected, "{why}: {held:?} {granted:?}");
    };
    let get = |resource: &str, name: Option<&str>| on("get", FLEET, resource, None, name);
    check(held(&["applications"], &[]), get("applications", None), true, "the same permission");
    check(held(&["applications"], &[]), get("applications", Some("web")), true, "one name of it");
    check(held(&["applications"], &["web"]), get("applications", None), false, "every name is more");
    check(held(&["applications"], &[]), on("list", FLEET, "applications", None, None), false, "another verb");
    check(held(&["*"], &[]), get("*/status", None), true, "* covers any wildcard");
    check(held(&["*/status"], &[]), get("*/status", None), true, "the same wildcard");
    check(held(&["*/*"], &[]), get("applications/*", None), false, "*/* decides no request");
    check(held(&["applications/*"], &[]), get("applications/status", None), true, "as a request would be");
    check(held(&["applications/status"], &[]), get("*/status", None), false, "one is not all");
    let wide = rule(&[FLEET, "other"], &["a", "b", "c"], &["x", "y"], &["get", "list"]);
    assert_eq!(coverage::permissions(&wide).len(), coverage::permission_count(&wide));
    assert_eq!(coverage::permission_count(&wide), 2 * 2 * 3 * 2);
    assert_eq!(coverage::rule_size(&wide), 2 + 2 + 3 + 2);
    assert_eq!(
        coverage::describe(&get("applications", Some("web"))),
        format!(
            "{{APIGroups:[{FLEET:?}], Resources:[\"applications\"], ResourceNames:[web] Verbs:[\"get\"]}}"
        )
    );
}

#[test]
fn refusals_are_worded_as_kubernetes_words_them() {
    let resource = |verb: &str, api: &str, resource: &str, namespace: Option<&str>, name: Option<&str>| {
        Action::Resource {
            verb: verb.to_owned(),
            api: api.to_owned(),
            resource: resource.to_owned(),
            namespace: namespace.map(str::to_owned),
            name: name.map(str::to_owned),
        }
    };
    let cases = [
        (
            resource("get", "fleet.example.com", "applications", Some("demo"), Some("web")),
            "applications.fleet.example.com \"web\" is forbidden: User \"alice\" cannot get resource \"applications\" in API group \"fleet.example.com\" in the namespace \"demo\"",
        ),
        (
            resource("list", "fleet.example.com", "applications", None, None),
            "applications.fleet.example.com is forbidden: User \"alice\" cannot list resource \"applications\" in API group \"fleet.example.com\" at the cluster scope",
        ),
        (
            resource("update", "", "nodes/status", None, Some("n1")),
            "nodes \"n1\" is forbidden: User \"alice\" cannot update resource \"nodes/status\" in API group \"\" at the cluster scope",
        ),
        (
            Action::NonResource { verb: "get".to_owned(), path: "/metrics".to_owned() },
            "forbidden: User \"alice\" cannot get path \"/metrics\"",
        ),
    ];
    for (action, expected) in cases {
        assert_eq!(action.refusal("alice"), expected);
    }
}
