//! Escalation prevention, table-driven over the fixture's RBAC state.

use std::sync::Arc;

use kayra_api::kinds::rbac::{ClusterRole, Role, RoleBinding};
use kayra_authz::Rbac;
use kayra_registry::{Operation, Part, Refusal};
use serde_json::{Value, json};

use super::RbacEscalation;
use crate::Validating;
use crate::fixture::{FLEET, meta, object, rbac, role_ref, rule, subject, user, write};

/// What a decision must be: admitted, forbidden with a message containing the text, or invalid
/// naming the field.
#[derive(Debug, Clone, Copy)]
enum Expect {
    Admitted,
    Forbidden(&'static str),
    Invalid(&'static str),
}

fn check(
    rbac: &Arc<Rbac>,
    who: &str,
    resource: &str,
    namespace: Option<&str>,
    body: &Value,
    expect: Expect,
    why: &str,
) {
    let plugin = RbacEscalation::new("example.com", rbac.clone());
    let caller = user(who);
    let body = object(body.clone());
    let decision = plugin.validate(&write(&caller, resource, namespace, "r", &body));
    match (expect, &decision) {
        (Expect::Admitted, Ok(())) => {}
        (Expect::Forbidden(text), Err(Refusal::Forbidden(message))) => {
            assert!(message.contains(text), "{why}: {message} lacks {text:?}");
            assert!(message.contains(&format!("\"{who}\"")), "the refusal names the user: {message}");
        }
        (Expect::Invalid(field), Err(Refusal::Invalid(causes))) => {
            assert!(causes.iter().any(|cause| cause.field == field), "{why}: {causes:?} names {field}");
        }
        _ => panic!(
            "{why}: {who} writing {resource} in {namespace:?} {body:?}: expected {expect:?}, got {decision:?}"
        ),
    }
}

/// Who writes which resource in which namespace, the body, the expected decision, and why.
type Case<'a> = (&'a str, &'a str, Option<&'a str>, &'a Value, Expect, &'a str);

fn role(rules: Value) -> Value {
    json!({ "rules": rules })
}

fn binding(kind: &str, name: &str) -> Value {
    json!({"roleRef": {"kind": kind, "name": name}})
}

fn fixture() -> Rbac {
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
    for (name, user, role) in [("frank-binds", "frank", "binder"), ("gina-escalates", "gina", "escalator")] {
        rbac.add_binding(RoleBinding {
            metadata: meta(Some("a"), name),
            subjects: vec![subject("User", user, None)],
            role_ref: role_ref("ClusterRole", role),
            ..RoleBinding::default()
        });
    }
    rbac
}

#[test]
fn rbac_writes_grant_only_what_the_writer_holds() {
    use Expect::{Admitted, Forbidden, Invalid};
    let rbac = Arc::new(fixture());
    let held = role(json!([{"apis": [FLEET], "resources": ["applications"], "verbs": ["get", "delete"]}]));
    let wider = role(json!([{"apis": [FLEET], "resources": ["applications", "secrets"], "verbs": ["get"]}]));
    let wildcard = role(json!([{"apis": [FLEET], "resources": ["*"], "verbs": ["get"]}]));
    let named = role(
        json!([{"apis": [FLEET], "resources": ["services"], "resourceNames": ["web"], "verbs": ["get"]}]),
    );
    let urls = role(json!([{"nonResourceURLs": ["/healthz"], "verbs": ["get"]}]));
    let not_held = "attempting to grant RBAC permissions not currently held";
    let cases: Vec<Case<'_>> = vec![
        ("alice", "roles", Some("a"), &held, Admitted, "rules she holds in a"),
        ("alice", "roles", Some("a"), &wider, Forbidden("\"secrets\""), "secrets she does not hold"),
        (
            "alice",
            "roles",
            Some("a"),
            &wildcard,
            Forbidden(not_held),
            "* is more than the resources she holds",
        ),
        ("alice", "roles", Some("a"), &named, Admitted, "one name of a resource she holds"),
        ("alice", "roles", Some("c"), &held, Forbidden(not_held), "nothing held in c"),
        ("alice", "clusterroles", None, &held, Forbidden(not_held), "a namespace grant is not cluster-wide"),
        ("anyone", "clusterroles", None, &urls, Admitted, "a URL every caller may get"),
        ("carol", "clusterroles", None, &urls, Admitted, "held through system:authenticated"),
        ("gina", "roles", Some("a"), &wider, Admitted, "escalate on roles"),
        ("gina", "roles", Some("b"), &wider, Forbidden("escalate verb on roles"), "escalate only in a"),
    ];
    let editor = binding("Role", "editor");
    let reader = binding("ClusterRole", "reader");
    let everything = binding("ClusterRole", "everything");
    let missing = binding("Role", "missing");
    let odd_kind = binding("Group", "reader");
    let cluster_role_kind = binding("Role", "editor");
    let undecodable = json!({"rules": "all"});
    let bindings: Vec<Case<'_>> = vec![
        ("alice", "rolebindings", Some("a"), &editor, Admitted, "a role she holds"),
        ("alice", "rolebindings", Some("a"), &reader, Admitted, "a subset of what she holds"),
        (
            "alice",
            "rolebindings",
            Some("a"),
            &everything,
            Forbidden("bind verb on clusterroles"),
            "more than she holds",
        ),
        (
            "alice",
            "rolebindings",
            Some("a"),
            &missing,
            Forbidden("it does not exist"),
            "a role that does not exist",
        ),
        ("frank", "rolebindings", Some("a"), &everything, Admitted, "bind on that role"),
        ("frank", "rolebindings", Some("a"), &reader, Forbidden(not_held), "bind on another role only"),
        ("frank", "clusterrolebindings", None, &everything, Forbidden(not_held), "bind granted in a only"),
        ("root", "clusterrolebindings", None, &everything, Admitted, "masters"),
        ("alice", "rolebindings", Some("a"), &odd_kind, Invalid("roleRef.kind"), "a Group is no role"),
        (
            "root",
            "clusterrolebindings",
            None,
            &cluster_role_kind,
            Invalid("roleRef.kind"),
            "a cluster binding of a Role",
        ),
        ("alice", "roles", Some("a"), &undecodable, Invalid("rules"), "rules that do not decode"),
    ];
    for (who, resource, namespace, body, expect, why) in cases.into_iter().chain(bindings) {
        check(&rbac, who, resource, namespace, body, expect, why);
    }
}

#[test]
fn a_grant_too_large_to_check_is_refused_and_the_refusal_stays_short() {
    let rbac = Arc::new(fixture());
    let names: Vec<String> = (0..200).map(|i| format!("n{i}")).collect();
    let huge = role(json!([
        {"apis": [FLEET], "resources": ["applications"], "resourceNames": names, "verbs": ["get", "list", "watch", "update", "patch", "delete", "create", "deletecollection"]},
        {"apis": [FLEET, "other"], "resources": (0..30).map(|i| format!("r{i}")).collect::<Vec<_>>(), "resourceNames": (0..200).map(|i| format!("n{i}")).collect::<Vec<_>>(), "verbs": ["get"]}
    ]));
    check(&rbac, "alice", "roles", Some("a"), &huge, Expect::Forbidden("more than 10000"), "huge");
    let big = role(
        json!([{"apis": [FLEET], "resources": (0..100).map(|i| format!("r{i}")).collect::<Vec<_>>(), "verbs": ["get"]}]),
    );
    let plugin = RbacEscalation::new("example.com", rbac.clone());
    let alice = user("alice");
    let big = object(big);
    let refused = plugin.validate(&write(&alice, "roles", Some("a"), "r", &big));
    let Err(Refusal::Forbidden(refused)) = refused else { panic!("not refused: {refused:?}") };
    assert!(refused.len() < 2000 && refused.ends_with("and 90 more"), "the refusal names a few: {refused}");
}

#[test]
fn a_held_star_slash_star_covers_no_wildcard_grant() {
    // A held `*/*` decides no request, so it covers no wildcard grant either.
    let mut odd = fixture();
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
    let odd = Arc::new(odd);
    for granted in ["*/status", "applications/*", "*"] {
        let wider = role(json!([{"apis": [FLEET], "resources": [granted], "verbs": ["get"]}]));
        check(&odd, "olga", "roles", Some("a"), &wider, Expect::Forbidden("not currently held"), granted);
    }
}

#[test]
fn a_writer_holding_huge_rules_cannot_make_one_check_cost_unbounded_work() {
    let mut heavy = fixture();
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
    let many: Vec<String> = (0..9_000).map(|j| format!("x{j}")).collect();
    let grant = role(json!([{"apis": [FLEET], "resources": many, "verbs": ["get"]}]));
    check(&Arc::new(heavy), "hank", "roles", Some("a"), &grant, Expect::Forbidden("too many rules"), "heavy");
}

#[test]
fn deletes_and_status_writes_grant_nothing_and_are_not_checked() {
    let plugin = RbacEscalation::new("example.com", Arc::new(fixture()));
    let alice = user("alice");
    let everything = object(role(json!([{"apis": ["*"], "resources": ["*"], "verbs": ["*"]}])));
    let create = write(&alice, "roles", Some("a"), "r", &everything);
    assert!(plugin.validate(&create).is_err(), "the write itself would be refused");
    let delete = crate::Write { operation: Operation::Delete, old: Some(&everything), ..create };
    assert_eq!(plugin.validate(&delete), Ok(()), "deleting a role grants nothing");
    let status =
        crate::Write { operation: Operation::Update, part: Part::Status, old: Some(&everything), ..create };
    assert_eq!(plugin.validate(&status), Ok(()), "a status write leaves the rules as stored");
    let elsewhere = crate::Write { api: "authorization.other.org", ..create };
    assert_eq!(plugin.validate(&elsewhere), Ok(()), "another domain's group is not RBAC");
}
