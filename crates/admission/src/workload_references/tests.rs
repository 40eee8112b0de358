//! Workload references, table-driven over the fixture's RBAC state.

use std::sync::Arc;

use kayra_api::kinds::rbac::{Role, RoleBinding};
use kayra_authz::Rbac;
use kayra_registry::{Operation, Part, Refusal};
use serde_json::{Value, json};

use super::WorkloadReferences;
use crate::Validating;
use crate::fixture::{FLEET, meta, object, rbac, role_ref, rule, subject, user, write};

/// What a decision must be: admitted, or refused (forbidden or invalid) with a message
/// containing the text.
#[derive(Debug, Clone, Copy)]
enum Expect {
    Admitted,
    Forbidden(&'static str),
    Invalid(&'static str),
}

fn check(rbac: &Arc<Rbac>, who: &str, resource: &str, body: &Value, expect: Expect, why: &str) {
    let plugin = WorkloadReferences::new("example.com", rbac.clone());
    let caller = user(who);
    let body = object(body.clone());
    let decision = plugin.validate(&write(&caller, resource, Some("a"), "x", &body));
    match (expect, &decision) {
        (Expect::Admitted, Ok(())) => {}
        (Expect::Forbidden(text), Err(Refusal::Forbidden(message))) => {
            assert!(message.contains(text), "{why}: {message} lacks {text:?}");
        }
        (Expect::Invalid(text), Err(Refusal::Invalid(causes))) => {
            assert!(
                causes.iter().any(|cause| cause.message.contains(text)),
                "{why}: {causes:?} lacks {text:?}"
            );
        }
        _ => panic!("{why}: {who} writing {body:?}: expected {expect:?}, got {decision:?}"),
    }
}

/// The fixture, with alice allowed to get the Secret `db` in `a`.
fn fixture() -> Arc<Rbac> {
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
    Arc::new(rbac)
}

fn app(secret: &str, service: &str) -> Value {
    json!({"spec": {"env": [{"name": "A", "value": "1"}, {"name": "P", "secretRef": {"name": secret, "key": "p"}}], "serviceName": service}})
}

#[test]
fn workloads_refer_only_to_what_their_writer_may_read() {
    use Expect::{Admitted, Forbidden, Invalid};
    let rbac = fixture();
    let set = json!({"spec": {"applications": [{"name": "c", "spec": {"env": [{"name": "P", "secretRef": {"name": "other", "key": "p"}}]}}]}});
    let many: Vec<Value> = (0..300)
        .map(|i| json!({"name": format!("V{i}"), "secretRef": {"name": format!("s{i}"), "key": "k"}}))
        .collect();
    let many = json!({"spec": {"env": many}});
    let repeated: Vec<Value> =
        (0..300).map(|i| json!({"name": format!("V{i}"), "secretRef": {"name": "db", "key": "k"}})).collect();
    let repeated = json!({"spec": {"env": repeated}});
    let cases: Vec<(&str, &str, Value, Expect, &str)> = vec![
        ("alice", "applications", app("db", "web"), Admitted, "a Secret and a Service she may get"),
        (
            "alice",
            "applications",
            app("other", "web"),
            Forbidden("secrets \"other\""),
            "a Secret she may not get",
        ),
        (
            "alice",
            "applications",
            app("other", "web"),
            Forbidden("needs get on it"),
            "the refusal says what is needed",
        ),
        ("alice", "applicationsets", set, Forbidden("secrets \"other\""), "inside a set's components"),
        ("alice", "applications", many, Invalid("at most 256"), "too many to check"),
        ("alice", "applications", repeated, Admitted, "one Secret named many times"),
        ("bob", "applications", json!({"spec": {}}), Admitted, "naming nothing needs nothing"),
        ("bob", "applications", app("db", "web"), Forbidden("cannot refer to"), "bob may get neither"),
        (
            "bob",
            "applications",
            json!({"spec": {"serviceName": "web"}}),
            Forbidden("services \"web\""),
            "nor services",
        ),
        ("root", "applications", app("anything", "any"), Admitted, "masters"),
    ];
    for (who, resource, body, expect, why) in cases {
        check(&rbac, who, resource, &body, expect, why);
    }
}

#[test]
fn status_writes_deletes_and_other_kinds_name_nothing_new() {
    let plugin = WorkloadReferences::new("example.com", fixture());
    let alice = user("alice");
    let stolen = object(app("other", "web"));
    let create = write(&alice, "applications", Some("a"), "x", &stolen);
    assert!(plugin.validate(&create).is_err(), "the write itself would be refused");
    let status =
        crate::Write { operation: Operation::Update, part: Part::Status, old: Some(&stolen), ..create };
    assert_eq!(plugin.validate(&status), Ok(()), "a status write keeps the spec as stored");
    let delete = crate::Write { operation: Operation::Delete, old: Some(&stolen), ..create };
    assert_eq!(plugin.validate(&delete), Ok(()), "deleting names nothing");
    let other_kind = write(&alice, "roles", Some("a"), "x", &stolen);
    assert_eq!(plugin.validate(&other_kind), Ok(()), "only workloads are checked");
}
