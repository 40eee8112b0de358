//! A binding places an Application and marks it `Scheduled` in one admitted write.

use std::sync::Arc;

use kayra_api::clock::SystemClock;
use kayra_api::scheme::Scheme;
use kayra_authn::Identity;
use kayra_registry::{Registry, RegistryError, meta_str};
use kayra_store::mvcc::{MvccStore, Options};
use serde_json::{Map, Value, json};

use crate::ApplicationLayer;
use crate::client::Client;

const MARK: &str = "fleet.example.com/scheduled-by";

async fn fleet() -> (Arc<ApplicationLayer>, Client) {
    let store = Arc::new(MvccStore::in_memory(Options::default()).unwrap());
    let registry = Registry::new(store, Arc::new(SystemClock), "/registry/");
    let control = Arc::new(ApplicationLayer::new(Arc::new(Scheme::new("example.com")), registry));
    let client = control.client(crate::controller_identity("scheduler"));
    let namespaces = client.resource("", "namespaces").unwrap();
    let namespace = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a"}});
    client.create(&namespaces, None, namespace).await.unwrap();
    let nodes = client.resource("", "nodes").unwrap();
    let node = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}, "spec": {}});
    let mut node = client.create(&nodes, None, node).await.unwrap();
    node.insert("status".into(), json!({"allocatable": {"memory": "1Gi"}, "capacity": {"memory": "1Gi"}}));
    client.update_status(&nodes, None, "n1", node).await.unwrap();
    (control, client)
}

async fn application(client: &Client, name: &str, memory: &str) -> kayra_registry::Object {
    let applications = client.resource("fleet.example.com", "applications").unwrap();
    let app = json!({"apiVersion": "fleet.example.com/v1", "kind": "Application", "metadata": {"name": name},
                     "spec": {"command": ["/bin/true"], "resources": {"requests": {"memory": memory}}}});
    client.create(&applications, Some("a"), app).await.unwrap()
}

fn marked() -> Map<String, Value> {
    let mut annotations = Map::new();
    annotations.insert(MARK.into(), json!("kayra-scheduler"));
    annotations
}

#[tokio::test]
async fn a_binding_sets_the_node_the_mark_and_scheduled_true_in_one_write() {
    let (control, client) = fleet().await;
    let applications = client.resource("fleet.example.com", "applications").unwrap();
    let mut app = application(&client, "web", "256Mi").await;
    app.insert(
        "status".into(),
        json!({"phase": "Pending", "message": "0/1 nodes are available",
               "conditions": [{"type": "Scheduled", "status": "False", "reason": "Unschedulable",
                               "message": "0/1 nodes are available", "lastTransitionTime": "2020-01-01T00:00:00Z"}]}),
    );
    let app = client.update_status(&applications, Some("a"), "web", app).await.unwrap();
    let before = control.registry().store().revision().await.unwrap();

    let binding = super::binding_to("web", "n1", Some(meta_str(&app, "resourceVersion")), marked());
    let bound = client.bind("a", "web", &binding).await.unwrap();

    assert_eq!(control.registry().store().revision().await.unwrap(), before + 1, "one write");
    let stored = client.get(&applications, Some("a"), "web").await.unwrap();
    assert_eq!(stored, bound);
    assert_eq!(stored["spec"]["placement"]["nodeName"], "n1");
    assert_eq!(stored["metadata"]["annotations"][MARK], "kayra-scheduler");
    let scheduled = &stored["status"]["conditions"][0];
    assert_eq!(scheduled["type"], "Scheduled");
    assert_eq!(scheduled["status"], "True");
    assert_eq!(scheduled["message"], "Successfully assigned a/web to n1");
    assert_ne!(scheduled["lastTransitionTime"], "2020-01-01T00:00:00Z", "the condition changed");
    assert_eq!(stored["status"]["phase"], "Pending");
    assert!(stored["status"].get("message").is_none(), "why it could not be placed no longer holds");
}

#[tokio::test]
async fn a_bound_or_changed_application_is_not_bound_again() {
    let (_control, client) = fleet().await;
    let app = application(&client, "web", "1Mi").await;
    let version = meta_str(&app, "resourceVersion").to_owned();
    client.bind("a", "web", &super::binding_to("web", "n1", None, marked())).await.unwrap();

    let again = client.bind("a", "web", &super::binding_to("web", "n1", None, marked())).await;
    assert!(
        matches!(&again, Err(RegistryError::Conflict { message, .. }) if message.contains("already assigned to node \"n1\"")),
        "{again:?}"
    );
    application(&client, "api", "1Mi").await;
    let stale = client.bind("a", "api", &super::binding_to("api", "n1", Some(&version), marked())).await;
    assert!(matches!(stale, Err(RegistryError::Conflict { .. })), "{stale:?}");
    let elsewhere = json!({"metadata": {"name": "other"}, "target": {"name": "n1"}});
    assert!(matches!(client.bind("a", "api", &elsewhere).await, Err(RegistryError::BadRequest(_))));
    let nowhere = json!({"target": {"kind": "Pod", "name": "n1"}});
    assert!(matches!(client.bind("a", "api", &nowhere).await, Err(RegistryError::Invalid { .. })));
}

#[tokio::test]
async fn placement_admission_decides_a_binding() {
    let (control, client) = fleet().await;
    application(&client, "big", "768Mi").await;
    application(&client, "more", "512Mi").await;
    let missing = client.bind("a", "big", &super::binding_to("big", "n9", None, marked())).await;
    assert!(matches!(missing, Err(RegistryError::Invalid { .. })), "no Node n9: {missing:?}");
    client.bind("a", "big", &super::binding_to("big", "n1", None, marked())).await.unwrap();
    let over = client.bind("a", "more", &super::binding_to("more", "n1", None, marked())).await;
    assert!(
        matches!(&over, Err(RegistryError::Forbidden(message)) if message.contains("by 256Mi")),
        "768Mi + 512Mi of 1Gi: {over:?}"
    );

    // Only the control plane's loops mark what they placed, and binding takes its own grant.
    let admin = control.client(Identity::new("admin", "", vec![kayra_authz::MASTERS.to_owned()]));
    let mark = admin.bind("a", "more", &super::binding_to("more", "n1", None, marked())).await;
    assert!(
        matches!(&mark, Err(RegistryError::Forbidden(message)) if message.contains("only the scheduler marks")),
        "{mark:?}"
    );
    let nobody = control.client(Identity::new("mallory", "", vec![]));
    let refused = nobody.bind("a", "more", &super::binding_to("more", "n1", None, Map::new())).await;
    assert!(
        matches!(&refused, Err(RegistryError::Forbidden(message)) if message.contains("applications/binding")),
        "{refused:?}"
    );
}

/// An unbinding (an eviction, a lost node) undoes the control plane's placement: like the
/// binding it leaves `generation` where the author's last change put it, and the status says
/// nothing runs it any more.
#[tokio::test]
async fn an_unbinding_leaves_the_generation_its_author_wrote() {
    let (control, scheduler) = fleet().await;
    let applications = scheduler.resource("fleet.example.com", "applications").unwrap();
    application(&scheduler, "web", "1Mi").await;
    let mut bound =
        scheduler.bind("a", "web", &super::binding_to("web", "n1", None, marked())).await.unwrap();
    assert_eq!(bound["metadata"]["generation"], 1, "a binding is not the author's change");
    let status = bound.get_mut("status").and_then(Value::as_object_mut).unwrap();
    status.insert("phase".into(), json!("Running"));
    status.insert("startedAt".into(), json!("2026-12-01T00:00:00Z"));
    status["conditions"].as_array_mut().unwrap().push(json!({"type": "Ready", "status": "True"}));
    scheduler.update_status(&applications, Some("a"), "web", bound).await.unwrap();

    let nobody = control.client(Identity::new("mallory", "", vec![]));
    let refused = crate::eviction::unbind(&nobody, &applications, "a", "web", None, false).await;
    assert!(matches!(refused, Err(RegistryError::Forbidden(_))), "{refused:?}");

    let eviction = control.client(crate::controller_identity("eviction"));
    let unbinding = crate::eviction::unbind(&eviction, &applications, "a", "web", None, false).await.unwrap();
    let crate::eviction::Unbinding::Unbound { node, application } = unbinding else {
        panic!("the scheduler placed it: {unbinding:?}")
    };
    assert_eq!(node, "n1");
    let stored = scheduler.get(&applications, Some("a"), "web").await.unwrap();
    assert_eq!(stored, application);
    assert_eq!(stored["metadata"]["generation"], 1, "an unbinding is not the author's change");
    assert_eq!(stored["spec"]["placement"].get("nodeName"), None, "{stored:?}");
    assert_eq!(stored["metadata"]["annotations"].get(MARK), None, "the mark goes with the binding");
    assert_eq!((&stored["status"]["phase"], stored["status"].get("startedAt")), (&json!("Pending"), None));
    let conditions = stored["status"]["conditions"].as_array().unwrap();
    assert!(conditions.iter().all(|c| c["type"] != "Ready"), "nothing runs it: {conditions:?}");
}
