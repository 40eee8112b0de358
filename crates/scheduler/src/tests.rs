//! The scheduler over an in-memory application layer: what it writes when a decision meets a
//! concurrent write.

use std::sync::Arc;

use kayra_api::scheme::Scheme;
use kayra_control::Control;
use kayra_registry::{Object, Registry, SystemClock, meta_str};
use kayra_store::mvcc::{MvccStore, Options};
use serde_json::{Value, json};

use crate::model::AppInfo;
use crate::queue::Entry;
use crate::{Framework, Policy, SCHEDULE, Scheduler};

async fn scheduler() -> Scheduler {
    scheduler_with(Framework::new(Policy::Spread, None)).await
}

async fn scheduler_with(framework: Framework) -> Scheduler {
    let store = Arc::new(MvccStore::in_memory(Options::default()).expect("a memory store"));
    let registry = Registry::new(store, Arc::new(SystemClock), "/registry/");
    let control = Arc::new(Control::new(Arc::new(Scheme::new("example.com")), registry));
    let client = control.client(kayra_control::controller_identity("scheduler"));
    let namespaces = client.resource("", "namespaces").expect("namespaces");
    let namespace = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "demo"}});
    client.create(&namespaces, None, namespace).await.expect("the namespace");
    Scheduler::with_framework(client, framework).expect("a scheduler")
}

async fn create(scheduler: &Scheduler, name: &str) -> Object {
    let application = json!({
        "apiVersion": "fleet.example.com/v1", "kind": "Application",
        "metadata": {"name": name, "namespace": "demo"},
        "spec": {"command": ["/bin/true"], "resources": {"requests": {"memory": "1Gi"}}},
    });
    let inner = &scheduler.inner;
    inner.client.create(&inner.applications, Some("demo"), application).await.expect("created")
}

fn entry(scheduler: &Scheduler, object: Object) -> Entry {
    let app = Arc::new(AppInfo::from_object(&object, &scheduler.inner.domain).expect("decodes"));
    Entry {
        app,
        object: Arc::new(object),
        stage: crate::queue::Stage::InFlight,
        attempts: 0,
        backoff_until: None,
        since: None,
    }
}

async fn scheduled_condition(scheduler: &Scheduler, name: &str) -> Option<Value> {
    let inner = &scheduler.inner;
    let stored = inner.client.get(&inner.applications, Some("demo"), name).await.expect("stored");
    stored
        .get("status")
        .and_then(|s| s.get("conditions"))
        .and_then(Value::as_array)
        .and_then(|conditions| conditions.iter().find(|c| c["type"] == "Scheduled").cloned())
}

async fn events(scheduler: &Scheduler, reason: &str) -> Vec<String> {
    let client = &scheduler.inner.client;
    let resource = client.resource("", "events").expect("events");
    client
        .list_all(&resource, Some("demo"))
        .await
        .expect("events listed")
        .iter()
        .filter(|e| e.get("reason").and_then(Value::as_str) == Some(reason))
        .map(|e| e.get("message").and_then(Value::as_str).unwrap_or_default().to_owned())
        .collect()
}

#[tokio::test]
async fn an_explanation_that_meets_a_newer_version_is_written_on_that_version() {
    let scheduler = scheduler().await;
    let decided = create(&scheduler, "too-big").await;
    // Another writer updates the status between the decision and its explanation.
    let mut other = decided.clone();
    other.insert("status".into(), json!({"phase": "Pending", "message": "waiting"}));
    let inner = &scheduler.inner;
    let newer = inner
        .client
        .update_status(&inner.applications, Some("demo"), "too-big", &other)
        .await
        .expect("the other write");
    assert_ne!(meta_str(&newer, "resourceVersion"), meta_str(&decided, "resourceVersion"));

    let message = "0/0 nodes are available.";
    scheduler.explain(entry(&scheduler, decided), message).await;

    let condition = scheduled_condition(&scheduler, "too-big").await.expect("Scheduled is written");
    assert_eq!((condition["status"].as_str(), condition["message"].as_str()), (Some("False"), Some(message)));
    assert_eq!(events(&scheduler, "FailedScheduling").await, [message]);
}

#[tokio::test]
async fn an_explanation_is_not_written_over_an_application_pinned_meanwhile() {
    let scheduler = scheduler().await;
    let decided = create(&scheduler, "pinned").await;
    let inner = &scheduler.inner;
    let nodes = inner.client.resource("", "nodes").expect("nodes");
    let node = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},
        "status": {"allocatable": {"cpu": "4", "memory": "8Gi"}}});
    inner.client.create(&nodes, None, node).await.expect("the node");
    let patch = json!({"spec": {"placement": {"nodeName": "n1"}}});
    inner
        .client
        .patch(&inner.applications, Some("demo"), "pinned", kayra_registry::PatchKind::Merge, &patch)
        .await
        .expect("pinned by its author");

    scheduler.explain(entry(&scheduler, decided), "0/0 nodes are available.").await;

    assert_eq!(scheduled_condition(&scheduler, "pinned").await, None);
    assert!(events(&scheduler, "FailedScheduling").await.is_empty());
}

fn ready_node(name: &str, heartbeat: &str) -> Object {
    let node = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
        "status": {"allocatable": {"cpu": "4", "memory": "8Gi"},
                   "conditions": [{"type": "Ready", "status": "True", "lastHeartbeatTime": heartbeat}]}});
    match node {
        Value::Object(object) => object,
        _ => unreachable!("a JSON object"),
    }
}

#[tokio::test]
async fn a_node_heard_from_again_after_a_silence_wakes_what_did_not_fit() {
    let scheduler =
        scheduler_with(Framework::new(Policy::Spread, Some(std::time::Duration::from_secs(40)))).await;
    let woken = |keys: Vec<kayra_loop::Key>| keys.iter().any(|key| key.as_str() == SCHEDULE);
    assert!(woken(scheduler.put_node(&ready_node("n1", "2026-01-01T00:00:00Z"))), "a new node");
    assert!(!woken(scheduler.put_node(&ready_node("n1", "2026-01-01T00:00:10Z"))), "a heartbeat on time");
    assert!(woken(scheduler.put_node(&ready_node("n1", "2026-01-01T00:01:00Z"))), "after 50s of silence");
}

fn object(value: Value) -> Object {
    match value {
        Value::Object(object) => object,
        _ => unreachable!("a JSON object"),
    }
}

#[tokio::test]
async fn an_application_placed_on_a_node_with_a_no_execute_taint_is_looked_at_when_it_lands() {
    let scheduler = scheduler().await;
    let mut node = ready_node("n1", "2026-01-01T00:00:00Z");
    node.insert("spec".into(), json!({"taints": [{"key": "maintenance", "effect": "NoExecute"}]}));
    scheduler.put_node(&node);
    let placed = |version: &str, by_scheduler: bool| {
        let annotations = if by_scheduler {
            json!({"fleet.example.com/scheduled-by": "kayra-scheduler"})
        } else {
            json!({})
        };
        Arc::new(object(json!({
            "apiVersion": "fleet.example.com/v1", "kind": "Application",
            "metadata": {"name": "a", "namespace": "demo", "resourceVersion": version, "annotations": annotations},
            "spec": {"command": ["/bin/true"], "placement": {"nodeName": "n1"}},
        })))
    };
    let taints = |keys: Vec<kayra_loop::Key>| keys.iter().any(|key| key.as_str() == "taints/n1");
    assert!(!taints(scheduler.put_app(placed("1", false))), "a pin is never moved");
    assert!(taints(scheduler.put_app(placed("2", true))), "placed by the scheduler");
    // Its own bind recorded it already; the watch's copy still brings the node's pass.
    assert!(taints(scheduler.put_app(placed("2", true))), "the same version seen again");
}
