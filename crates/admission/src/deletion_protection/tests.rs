//! Deletion protection, table-driven over namespace `a` where `web-0`..`web-4` join Service
//! `web`, `api` joins `api`, and `api` needs Secret `token` (another needs it optionally).

use std::sync::Arc;

use kayra_registry::{Operation, Refusal};
use serde_json::json;

use super::{DeletionProtection, required_secrets, service_of};
use crate::fixture::{object, user, write};
use crate::ports::{Fleet, Resources};

struct Namespace;

impl Fleet for Namespace {
    fn allocatable(&self, _node: &str) -> Option<Resources> {
        None
    }

    fn requested_on(&self, _node: &str, _namespace: &str, _name: &str) -> Resources {
        Resources::default()
    }

    fn members(&self, namespace: &str, service: &str) -> Vec<String> {
        match (namespace, service) {
            ("a", "web") => (0..5).map(|i| format!("web-{i}")).collect(),
            ("a", "api") => vec!["api".to_owned()],
            _ => Vec::new(),
        }
    }

    fn secret_users(&self, namespace: &str, secret: &str) -> Vec<String> {
        match (namespace, secret) {
            ("a", "token") => vec!["api".to_owned()],
            _ => Vec::new(),
        }
    }
}

fn check(resource: &str, name: &str, operation: Operation, expect: Result<(), &str>) {
    let alice = user("alice");
    let stored = object(json!({"metadata": {"name": name, "namespace": "a"}}));
    let write =
        crate::Write { operation, old: Some(&stored), ..write(&alice, resource, Some("a"), name, &stored) };
    let decision =
        crate::Validating::validate(&DeletionProtection::new("example.com", Arc::new(Namespace)), &write);
    match (expect, decision) {
        (Ok(()), Ok(())) => {}
        (Err(text), Err(Refusal::Conflict(message))) => assert_eq!(message, text),
        (expect, decision) => panic!("{resource}/{name}: expected {expect:?}, got {decision:?}"),
    }
}

#[test]
fn services_and_secrets_in_use_are_not_deleted() {
    use Operation::{Delete, Update};
    check(
        "services",
        "web",
        Delete,
        Err(
            "service \"web\" is in use: in namespace \"a\", applications \"web-0\", \"web-1\", \"web-2\" and 2 more join it (spec.serviceName); delete them or stop them naming it first",
        ),
    );
    check(
        "services",
        "api",
        Delete,
        Err(
            "service \"api\" is in use: in namespace \"a\", application \"api\" joins it (spec.serviceName); delete them or stop them naming it first",
        ),
    );
    check(
        "secrets",
        "token",
        Delete,
        Err(
            "secret \"token\" is in use: in namespace \"a\", application \"api\" needs it (an env secretRef without optional: true); delete them or stop them naming it first",
        ),
    );
    check("services", "idle", Delete, Ok(()));
    check("secrets", "unused", Delete, Ok(()));
    check("services", "web", Update, Ok(()));
    check("applications", "web", Delete, Ok(()));
}

#[test]
fn what_an_application_names_is_read_from_its_spec() {
    let app = object(json!({"spec": {"serviceName": "web", "env": [
        {"name": "A", "secretRef": {"name": "token", "key": "a"}},
        {"name": "", "secretRef": {"name": "bundle", "key": "*"}, "prefix": "B_"},
        {"name": "C", "secretRef": {"name": "maybe", "key": "c", "optional": true}},
        {"name": "D", "secretRef": {"name": "token", "key": "d", "optional": false}},
        {"name": "E", "value": "plain"},
    ]}}));
    assert_eq!(service_of(&app), Some("web"));
    assert_eq!(required_secrets(&app), ["bundle", "token"]);
    assert_eq!(service_of(&object(json!({"spec": {"serviceName": ""}}))), None);
}
