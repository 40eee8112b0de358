//! The scheduler over a real application layer on an in-memory store: what a bind writes, and
//! what a failed bind leaves in the snapshot.

use std::sync::Arc;
use std::time::Duration;

use kayra_api::scheme::Scheme;
use kayra_control::Control;
use kayra_control::client::Client;
use kayra_registry::{Object, PatchKind, Registry, SystemClock, WatchEvent, WatchOptions, meta_str};
use kayra_store::mvcc::{MvccStore, Options};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::*;

/// A layer with namespace `a` and Ready Nodes of 2 cores and 1Gi each.
async fn fleet(nodes: &[&str]) -> (Arc<Control>, Client) {
    let store = Arc::new(MvccStore::in_memory(Options::default()).expect("an in-memory store opens"));
    let registry = Registry::new(store, Arc::new(SystemClock), "/registry/");
    let control = Arc::new(Control::new(Arc::new(Scheme::new("example.com")), registry));
    let client = control.client(kayra_control::controller_identity("test"));
    let namespaces = client.resource("", "namespaces").expect("served");
    let namespace = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a"}});
    client.create(&namespaces, None, namespace).await.expect("created");
    let resource = client.resource("", "nodes").expect("served");
    let now = jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string();
    for name in nodes {
        let node = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}, "spec": {}});
        let mut node = client.create(&resource, None, node).await.expect("created");
        node.insert(
            "status".into(),
            json!({"allocatable": {"cpu": "2", "memory": "1Gi"}, "capacity": {"cpu": "2", "memory": "1Gi"},
                   "conditions": [{"type": "Ready", "status": "True", "reason": "KayraAgentReady",
                                   "lastHeartbeatTime": now, "lastTransitionTime": now}]}),
        );
        client.update_status(&resource, None, name, node).await.expect("written");
    }
    (control, client)
}

fn application(name: &str) -> Value {
    json!({"apiVersion": "fleet.example.com/v1", "kind": "Application", "metadata": {"name": name},
           "spec": {"command": ["/bin/true"], "resources": {"requests": {"memory": "256Mi"}}}})
}

fn node_of(object: &Object) -> Option<&str> {
    object.get("spec").and_then(|spec| spec.pointer("/placement/nodeName")).and_then(Value::as_str)
}

#[tokio::test]
async fn every_version_a_bind_writes_is_already_scheduled_and_gets_one_scheduled_event() {
    let (control, client) = fleet(&["n1"]).await;
    let applications = client.resource("fleet.example.com", "applications").expect("served");
    let scheduler =
        Scheduler::new(control.client(kayra_control::controller_identity("scheduler")), Policy::Spread)
            .expect("the scheduler starts");
    let stop = CancellationToken::new();
    let running = tokio::spawn(scheduler.into_loop().run(stop.clone()));
    let watching = WatchOptions { namespace: Some("a".into()), ..WatchOptions::default() };
    let mut watch = client.watch(&applications, &watching).await.expect("watched");
    client.create(&applications, Some("a"), application("web")).await.expect("created");

    let bound = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            if let WatchEvent::Added(object) | WatchEvent::Modified(object) =
                watch.next().await.expect("a change")
                && node_of(&object).is_some()
            {
                return object;
            }
        }
    })
    .await
    .expect("the Application is bound");
    // The first version that names the node says Scheduled=True: no later status write (an
    // agent's report racing it) can leave a bound Application without it.
    let conditions = bound["status"]["conditions"].as_array().cloned().unwrap_or_default();
    let scheduled: Vec<&Value> = conditions.iter().filter(|c| c["type"] == "Scheduled").collect();
    assert_eq!(scheduled.len(), 1, "{bound:?}");
    assert_eq!(scheduled[0]["status"], "True", "{bound:?}");
    assert_eq!(bound["metadata"]["annotations"]["fleet.example.com/scheduled-by"], SCHEDULER);

    let events = client.resource("", "events").expect("served");
    let scheduled_events = || async {
        client
            .list_all(&events, Some("a"))
            .await
            .expect("listed")
            .into_iter()
            .filter(|e| e["reason"] == "Scheduled" && e["involvedObject"]["name"] == "web")
            .count()
    };
    tokio::time::timeout(Duration::from_secs(10), async {
        while scheduled_events().await == 0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("a Scheduled Event is recorded");
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(scheduled_events().await, 1, "exactly one Scheduled Event");
    stop.cancel();
    let _ = running.await;
}

#[tokio::test]
async fn a_failed_bind_keeps_a_pin_seen_meanwhile_in_the_snapshot() {
    let (control, client) = fleet(&["n1", "n2"]).await;
    let applications = client.resource("fleet.example.com", "applications").expect("served");
    let scheduler =
        Scheduler::new(control.client(kayra_control::controller_identity("scheduler")), Policy::Spread)
            .expect("the scheduler starts");
    let created = client.create(&applications, Some("a"), application("x")).await.expect("created");
    scheduler.put_app(Arc::new(created));

    // Decided and reserved on n1, as a pass of the queue does.
    let entry = {
        let mut state = scheduler.state();
        let (mut batch, _) = state.queue.pop(Instant::now(), 1, |_, _| std::cmp::Ordering::Equal);
        let entry = batch.pop().expect("x waits");
        state.snapshot.assume(&entry.app, "n1");
        state.assumed.insert(entry.app.id.clone(), "n1".to_owned());
        entry
    };
    // Before its bind is written, the author pins x to n2, and the watch brings that version.
    let pin = json!({"spec": {"placement": {"nodeName": "n2"}}});
    let pinned = client.patch(&applications, Some("a"), "x", PatchKind::Merge, &pin).await.expect("pinned");
    scheduler.put_app(Arc::new(pinned.clone()));

    assert!(scheduler.bind(entry, "n1").await.is_none(), "the bind is refused: x changed");

    let state = scheduler.state();
    let (node, app) = state.snapshot.placed("a/x").expect("x is still placed");
    assert_eq!(node, "n2");
    assert_eq!(app.resource_version, meta_str(&pinned, "resourceVersion"));
    assert!(state.snapshot.usage("n2").is_some_and(|usage| usage.apps.contains("a/x")));
    assert!(!state.snapshot.usage("n1").is_some_and(|usage| usage.apps.contains("a/x")));
}
