//! The scheduler over an in-memory application layer: what it writes when a decision meets a
//! concurrent write.

use std::sync::Arc;

use kayra_api::clock::SystemClock;
use kayra_api::scheme::Scheme;
use kayra_application::ApplicationLayer;
use kayra_registry::{Object, Registry, meta_str};
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
    let control = Arc::new(ApplicationLayer::new(Arc::new(Scheme::new("example.com")), registry));
    let client = control.client(kayra_application::controller_identity("scheduler"));
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
    let mut entry = Entry::new(app, Arc::new(object));
    entry.stage = crate::queue::Stage::InFlight;
    entry
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

/// An Application listed before an empty list of nodes waits for no later change: once both
/// lists are in, the queue is run and the Application explained.
#[tokio::test]
async fn an_empty_node_list_still_runs_the_queue_once_both_lists_are_in() {
    use kayra_application::feed::Follower;

    let scheduler = scheduler().await;
    let created = Arc::new(create(&scheduler, "early").await);
    let follower = |collection| crate::SchedulerFollower { scheduler: scheduler.clone(), collection };
    let items = follower(crate::Collection::Applications).listed(vec![created]);
    assert!(items.iter().any(|item| item.keys.contains(&kayra_loop::Key::new(SCHEDULE))), "{items:?}");
    // The scheduling key the Application brought found the nodes not yet listed; an empty node
    // list carries no key of its own.
    let items = follower(crate::Collection::Nodes).listed(Vec::new());
    assert!(items.is_empty(), "{items:?}");
    let woken =
        tokio::time::timeout(std::time::Duration::from_secs(5), scheduler.inner.wake.notified()).await;
    assert!(woken.is_ok(), "nothing queued the scheduling key once both lists were in");
}

/// More Events due on one tick than one writer takes: every one is written, once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_event_due_on_a_tick_is_written_once_however_many_are_due() {
    let scheduler = scheduler().await;
    let application = create(&scheduler, "busy").await;
    let count = crate::EVENTS_AT_ONCE * 2 + 5;
    let writers: Vec<_> = (0..count)
        .map(|i| {
            let (scheduler, application) = (scheduler.clone(), application.clone());
            tokio::spawn(async move {
                let event = scheduler.occurrence(
                    &application,
                    crate::Severity::Normal,
                    "Scheduled",
                    format!("event {i}"),
                );
                scheduler.record_on_tick(event).await;
            })
        })
        .collect();
    for writer in writers {
        writer.await.expect("a writer");
    }
    let mut messages = events(&scheduler, "Scheduled").await;
    messages.sort();
    let mut expected: Vec<String> = (0..count).map(|i| format!("event {i}")).collect();
    expected.sort();
    assert_eq!(messages, expected);
    assert!(scheduler.due().is_empty(), "nothing is left behind");
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

mod binds {
    //! The scheduler over a real application layer on an in-memory store: what a bind writes, and
    //! what a failed bind leaves in the snapshot.

    use std::sync::Arc;
    use std::time::Duration;

    use kayra_api::clock::SystemClock;
    use kayra_api::kinds::application::SCHEDULER;
    use kayra_api::scheme::Scheme;
    use kayra_application::ApplicationLayer;
    use kayra_application::client::Client;
    use kayra_registry::{Object, PatchKind, Registry, WatchEvent, WatchOptions, meta_str};
    use kayra_store::mvcc::{MvccStore, Options};
    use serde_json::{Value, json};
    use tokio_util::sync::CancellationToken;

    use super::super::*;

    /// A layer with namespace `a` and Ready Nodes of 2 cores and 1Gi each.
    async fn fleet(nodes: &[&str]) -> (Arc<ApplicationLayer>, Client) {
        let store = Arc::new(MvccStore::in_memory(Options::default()).expect("an in-memory store opens"));
        let registry = Registry::new(store, Arc::new(SystemClock), "/registry/");
        let control = Arc::new(ApplicationLayer::new(Arc::new(Scheme::new("example.com")), registry));
        let client = control.client(kayra_application::controller_identity("test"));
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
        let scheduler = Scheduler::new(
            control.client(kayra_application::controller_identity("scheduler")),
            Policy::Spread,
        )
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
        // A repeat of an Event counts up on the one written before, so the counts are summed.
        let scheduled_events = async |name: &str| {
            client
                .list_all(&events, Some("a"))
                .await
                .expect("listed")
                .into_iter()
                .filter(|e| e["reason"] == "Scheduled" && e["involvedObject"]["name"] == name)
                .map(|e| e["count"].as_u64().unwrap_or(1))
                .sum::<u64>()
        };
        let recorded = async |name: &str| {
            tokio::time::timeout(Duration::from_secs(10), async {
                while scheduled_events(name).await == 0 {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            })
            .await
            .unwrap_or_else(|_| panic!("a Scheduled Event is recorded for {name}"));
        };
        recorded("web").await;
        // The scheduler follows the Applications in revision order and places them one pass
        // after another: one created after web's binding is placed after web's bound version
        // was seen, so a second placement of web would have been decided by then.
        client.create(&applications, Some("a"), application("later")).await.expect("created");
        recorded("later").await;
        assert_eq!(scheduled_events("web").await, 1, "exactly one Scheduled Event");
        stop.cancel();
        let _ = running.await;
    }

    /// The taint manager's unbinding undoes the scheduler's placement, as its binding made it:
    /// neither is the author's change, and `generation` stays where the author left it.
    #[tokio::test]
    async fn a_taint_managers_unbinding_leaves_the_generation_its_author_wrote() {
        let (control, client) = fleet(&["n1"]).await;
        let applications = client.resource("fleet.example.com", "applications").expect("served");
        let scheduler = Scheduler::new(
            control.client(kayra_application::controller_identity("scheduler")),
            Policy::Spread,
        )
        .expect("the scheduler starts");
        let stop = CancellationToken::new();
        let running = tokio::spawn(scheduler.into_loop().run(stop.clone()));
        let watching = WatchOptions { namespace: Some("a".into()), ..WatchOptions::default() };
        let mut watch = client.watch(&applications, &watching).await.expect("watched");
        client.create(&applications, Some("a"), application("web")).await.expect("created");
        let mut next = async |bound: bool| {
            tokio::time::timeout(Duration::from_secs(10), async {
                loop {
                    if let WatchEvent::Added(object) | WatchEvent::Modified(object) =
                        watch.next().await.expect("a change")
                        && node_of(&object).is_some() == bound
                        && (bound
                            || object["metadata"]["annotations"]
                                .get("fleet.example.com/scheduled-by")
                                .is_none())
                    {
                        return object;
                    }
                }
            })
            .await
            .expect("the Application's binding changes")
        };
        let bound = next(true).await;
        assert_eq!(bound["metadata"]["generation"], 1, "{bound:?}");

        let nodes = client.resource("", "nodes").expect("served");
        let taint = json!({"spec": {"taints": [{"key": "maintenance", "effect": "NoExecute"}]}});
        client.patch(&nodes, None, "n1", PatchKind::Merge, &taint).await.expect("tainted");
        let unbound = next(false).await;
        assert_eq!(unbound["metadata"]["generation"], 1, "{unbound:?}");
        stop.cancel();
        let _ = running.await;
    }

    #[tokio::test]
    async fn a_failed_bind_keeps_a_pin_seen_meanwhile_in_the_snapshot() {
        let (control, client) = fleet(&["n1", "n2"]).await;
        let applications = client.resource("fleet.example.com", "applications").expect("served");
        let scheduler = Scheduler::new(
            control.client(kayra_application::controller_identity("scheduler")),
            Policy::Spread,
        )
        .expect("the scheduler starts");
        let created = client.create(&applications, Some("a"), application("x")).await.expect("created");
        scheduler.put_app(Arc::new(created));

        // Decided and reserved on n1, as a pass of the queue does.
        let entry = {
            let mut state = scheduler.state();
            let (mut batch, _) = state.queue.pop(Instant::now(), 1);
            let entry = batch.pop().expect("x waits");
            scheduler.inner.framework.reserve(&entry.app, "n1", &mut state.snapshot).expect("reserved");
            entry
        };
        // Before its bind is written, the author pins x to n2, and the watch brings that version.
        let pin = json!({"spec": {"placement": {"nodeName": "n2"}}});
        let pinned =
            client.patch(&applications, Some("a"), "x", PatchKind::Merge, &pin).await.expect("pinned");
        scheduler.put_app(Arc::new(pinned.clone()));

        assert!(scheduler.bind(entry, "n1").await.is_none(), "the bind is refused: x changed");

        let state = scheduler.state();
        let (node, app) = state.snapshot.placed("a/x").expect("x is still placed");
        assert_eq!(node, "n2");
        assert_eq!(app.resource_version, meta_str(&pinned, "resourceVersion"));
        assert!(state.snapshot.usage("n2").is_some_and(|usage| usage.apps.contains("a/x")));
        assert!(!state.snapshot.usage("n1").is_some_and(|usage| usage.apps.contains("a/x")));
    }
}
