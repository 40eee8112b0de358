//! The RBAC state the plugins' tests decide against: namespaces `a` and `b`, alice editing in
//! both, the `readers` group reading in `a`, carol holding named rights cluster-wide.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kayra_api::kinds::rbac::{
    ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef, Subject,
};

use kayra_authz::{Caller, Rbac};
use serde_json::Value;

use kayra_registry::Object;

pub(crate) const FLEET: &str = "fleet.example.com";

pub(crate) fn meta(namespace: Option<&str>, name: &str) -> ObjectMeta {
    ObjectMeta { name: Some(name.into()), namespace: namespace.map(Into::into), ..ObjectMeta::default() }
}

pub(crate) fn rule(apis: &[&str], resources: &[&str], names: &[&str], verbs: &[&str]) -> PolicyRule {
    let owned = |list: &[&str]| list.iter().map(|s| (*s).to_owned()).collect();
    PolicyRule {
        apis: owned(apis),
        resources: owned(resources),
        resource_names: owned(names),
        verbs: owned(verbs),
        non_resource_urls: Vec::new(),
    }
}

pub(crate) fn subject(kind: &str, name: &str, namespace: Option<&str>) -> Subject {
    Subject { kind: kind.into(), name: name.into(), namespace: namespace.map(Into::into) }
}

pub(crate) fn role_ref(kind: &str, name: &str) -> RoleRef {
    RoleRef { kind: kind.into(), name: name.into() }
}

pub(crate) fn rbac() -> Rbac {
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

pub(crate) fn caller(user: &str, groups: &[&str]) -> Caller {
    let mut groups: Vec<String> = groups.iter().map(|g| (*g).to_owned()).collect();
    groups.push("system:authenticated".into());
    Caller { user: user.into(), groups }
}

/// A JSON literal as an object.
pub(crate) fn object(value: Value) -> Object {
    match value {
        Value::Object(object) => object,
        other => panic!("not an object: {other}"),
    }
}

/// A create of `object` by `caller`; the group follows the resource as the standard chain's
/// domain, `example.com`, places it.
pub(crate) fn write<'a>(
    caller: &'a Caller,
    resource: &'a str,
    namespace: Option<&'a str>,
    name: &'a str,
    object: &'a Object,
) -> crate::Write<'a> {
    let api = match resource {
        "nodes" => "",
        "applications" | "applicationsets" | "secrets" | "services" => FLEET,
        _ => "authorization.example.com",
    };
    crate::Write {
        caller,
        operation: kayra_registry::Operation::Create,
        part: kayra_registry::Part::Main,
        dry_run: false,
        api,
        resource,
        namespace,
        name,
        object,
        old: None,
    }
}

/// A caller: `root` is in `system:masters`, `bob` in `readers`, everyone else only
/// authenticated.
pub(crate) fn user(name: &str) -> Caller {
    match name {
        "root" => caller(name, &["system:masters"]),
        "bob" => caller(name, &["readers"]),
        _ => caller(name, &[]),
    }
}
