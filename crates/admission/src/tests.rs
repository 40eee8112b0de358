//! The chain: order, refusals naming their plugin, and the registry port over a caller.

use std::sync::{Arc, Mutex};

use kayra_api::validation::FieldError;
use kayra_registry::{AdmissionRequest, NoRules, Object, Operation, Part, Refusal, Resource};
use serde_json::json;

use crate::fixture::{object, rbac, user, write};
use crate::{Chain, Mutating, Validating, Write};

/// Records, in one shared log, which plugin saw which object; adds its name to `seen` when it
/// mutates, refuses when told to.
struct Plugin {
    name: &'static str,
    log: Arc<Mutex<Vec<String>>>,
    refusal: Option<Refusal>,
}

impl Plugin {
    fn new(name: &'static str, log: &Arc<Mutex<Vec<String>>>, refusal: Option<Refusal>) -> Arc<Plugin> {
        Arc::new(Plugin { name, log: log.clone(), refusal })
    }

    fn record(&self, write: &Write<'_>) {
        let seen = write.object.get("seen").cloned().unwrap_or(json!([]));
        self.log.lock().expect("not poisoned").push(format!("{} saw {seen}", self.name));
    }
}

impl Mutating for Plugin {
    fn name(&self) -> &'static str {
        self.name
    }

    fn mutate(&self, write: &Write<'_>) -> Result<Option<Object>, Refusal> {
        self.record(write);
        if let Some(refusal) = &self.refusal {
            return Err(refusal.clone());
        }
        let mut changed = write.object.clone();
        let seen = changed.entry("seen").or_insert(json!([]));
        seen.as_array_mut().expect("a list").push(json!(self.name));
        Ok(Some(changed))
    }
}

impl Validating for Plugin {
    fn name(&self) -> &'static str {
        self.name
    }

    fn validate(&self, write: &Write<'_>) -> Result<(), Refusal> {
        self.record(write);
        self.refusal.clone().map_or(Ok(()), Err)
    }
}

fn log(log: &Arc<Mutex<Vec<String>>>) -> Vec<String> {
    log.lock().expect("not poisoned").clone()
}

#[test]
fn mutating_plugins_run_in_order_then_validating_plugins_see_the_result() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let chain = Chain::default()
        .with_validating(Plugin::new("check", &seen, None))
        .with_mutating(Plugin::new("first", &seen, None))
        .with_mutating(Plugin::new("second", &seen, None));
    assert_eq!(chain.plugin_names(), ["first", "second", "check"]);
    let alice = user("alice");
    let body = object(json!({"metadata": {"name": "x"}}));
    let stored = chain.mutate(&write(&alice, "roles", Some("a"), "x", &body)).expect("admitted");
    assert_eq!(stored["seen"], json!(["first", "second"]));
    chain.validate(&write(&alice, "roles", Some("a"), "x", &stored)).expect("admitted");
    assert_eq!(log(&seen), ["first saw []", "second saw [\"first\"]", "check saw [\"first\",\"second\"]"]);
}

#[test]
fn the_first_refusal_ends_the_chain_and_names_its_plugin() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let no = Refusal::Forbidden("hold the rule first".into());
    let invalid = Refusal::Invalid(vec![FieldError::required("spec.ref")]);
    let chain = Chain::default()
        .with_validating(Plugin::new("Allow", &seen, None))
        .with_validating(Plugin::new("Deny", &seen, Some(no)))
        .with_validating(Plugin::new("Never", &seen, None));
    let alice = user("alice");
    let body = object(json!({}));
    let refused = chain.validate(&write(&alice, "roles", Some("a"), "x", &body));
    assert_eq!(refused, Err(Refusal::Forbidden("Deny: hold the rule first".into())));
    assert_eq!(log(&seen), ["Allow saw []", "Deny saw []"], "nothing after the refusal runs");
    let chain = Chain::default().with_mutating(Plugin::new("Broken", &seen, Some(invalid.clone())));
    let refused = chain.mutate(&write(&alice, "roles", Some("a"), "x", &body));
    assert_eq!(refused.map(|_| ()), Err(invalid), "an invalid object's causes speak for themselves");
}

fn resource(group: &str, plural: &str, namespaced: bool) -> Resource {
    Resource {
        group: group.into(),
        version: "v1".into(),
        kind: "Thing".into(),
        plural: plural.into(),
        namespaced,
        status_subresource: true,
        field_labels: Vec::new(),
        strategy: Arc::new(NoRules),
    }
}

#[test]
fn the_standard_chain_decides_for_its_caller_through_the_registry_port() {
    let chain = Chain::standard("example.com", Arc::new(rbac()), Arc::new(crate::ports::NoNodes));
    assert_eq!(
        chain.plugin_names(),
        [
            "CertificateSigningRequest",
            "ChildOwnership",
            "NodePlacement",
            "ChildOwnership",
            "DeletionProtection",
            "RBACEscalation",
            "WorkloadReferences",
            "RunAsNonRoot",
            "NodeRestriction",
            "NodePlacement",
            "CertificateSigningRequest"
        ]
    );
    let roles = resource("authorization.example.com", "roles", true);
    let request =
        |operation, dry_run| AdmissionRequest { resource: &roles, operation, part: Part::Main, dry_run };
    let everything = object(
        json!({"metadata": {"name": "r", "namespace": "a"}, "rules": [{"apis": ["*"], "resources": ["*"], "verbs": ["*"]}]}),
    );
    let alice = chain.clone().for_caller(user("alice"));
    for dry_run in [false, true] {
        match alice.validate(&request(Operation::Create, dry_run), &everything, None) {
            Err(Refusal::Forbidden(message)) => {
                assert!(message.starts_with("RBACEscalation: user \"alice\""), "{message}");
                assert!(message.contains("escalate verb on roles"), "says what to change: {message}");
            }
            other => panic!("alice may not grant everything (dry run {dry_run}): {other:?}"),
        }
    }
    let root = chain.clone().for_caller(user("root"));
    assert_eq!(root.validate(&request(Operation::Create, false), &everything, None), Ok(()));
    let mut unchanged = everything.clone();
    alice.mutate(&request(Operation::Create, false), &mut unchanged, None).expect("no plugin changes a role");
    assert_eq!(unchanged, everything);
    let nodes = resource("", "nodes", false);
    let node = chain.for_caller(crate::fixture::caller("system:node:n1", &[kayra_authz::NODES]));
    let other = object(json!({"metadata": {"name": "n2"}}));
    let delete =
        AdmissionRequest { resource: &nodes, operation: Operation::Delete, part: Part::Main, dry_run: false };
    assert!(
        matches!(node.validate(&delete, &other, Some(&other)), Err(Refusal::Forbidden(m)) if m.starts_with("NodeRestriction: ")),
        "a node deletes only its own Node"
    );
}
