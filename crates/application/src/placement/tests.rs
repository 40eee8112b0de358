//! The fleet index: what is bound to each node, which Applications name a Service or a
//! Secret, and a first write that waits sees every Node created before it.

use super::*;
use serde_json::json;

fn event(value: serde_json::Value, deleted: bool) -> WatchEvent {
    let serde_json::Value::Object(object) = value else { panic!("an object") };
    if deleted { WatchEvent::Deleted(Arc::new(object)) } else { WatchEvent::Modified(Arc::new(object)) }
}

fn app(name: &str, node: Option<&str>, memory: &str) -> serde_json::Value {
    json!({"metadata": {"name": name, "namespace": "a"},
           "spec": {"placement": {"nodeName": node}, "resources": {"requests": {"memory": memory}}}})
}

#[test]
fn the_index_sums_what_is_bound_to_each_node_leaving_out_the_one_written() {
    let index = FleetIndex::default();
    {
        let mut state = index.state.lock().expect("not poisoned");
        state.apply(
            &event(json!({"metadata": {"name": "n1"}, "status": {"allocatable": {"memory": "1Ki"}}}), false),
            false,
        );
        state.apply(&event(app("x", Some("n1"), "100"), false), true);
        state.apply(&event(app("y", Some("n1"), "200"), false), true);
        state.apply(&event(app("z", None, "400"), false), true);
        state.apply(&event(app("y", Some("n2"), "200"), false), true);
    }
    assert_eq!(index.allocatable("n1"), Some(Resources { cpu: None, memory: Some(1024.0) }));
    assert_eq!(index.allocatable("n2"), None, "an Application bound to it does not make a Node");
    assert_eq!(index.requested_on("n1", "a", "other").memory, Some(100.0), "y moved to n2");
    assert_eq!(index.requested_on("n1", "a", "x").memory, Some(0.0), "x itself is left out");
    assert_eq!(index.requested_on("n2", "a", "other").memory, Some(200.0));
    {
        let mut state = index.state.lock().expect("not poisoned");
        let mut done = app("y", Some("n2"), "200");
        done["status"] = json!({"phase": "Succeeded"});
        state.apply(&event(done, false), true);
        state.apply(&event(app("x", Some("n1"), "100"), true), true);
        state.apply(&event(json!({"metadata": {"name": "n1"}}), true), false);
    }
    assert_eq!(index.requested_on("n2", "a", "other").memory, Some(0.0), "a finished one asks nothing");
    assert_eq!(index.requested_on("n1", "a", "other").memory, Some(0.0), "a deleted one asks nothing");
    assert_eq!(index.allocatable("n1"), None, "a deleted Node is gone");
}

#[test]
fn the_index_knows_which_applications_name_a_service_or_a_secret() {
    let index = FleetIndex::default();
    let named = |name: &str, service: &str, secret: &str, optional: bool| {
        json!({"metadata": {"name": name, "namespace": "a"}, "spec": {"serviceName": service,
               "env": [{"name": "T", "secretRef": {"name": secret, "key": "t", "optional": optional}}]}})
    };
    {
        let mut state = index.state.lock().expect("not poisoned");
        state.apply(&event(named("y", "web", "token", false), false), true);
        state.apply(&event(named("x", "web", "token", true), false), true);
        state.apply(&event(named("z", "api", "token", false), false), true);
        state.apply(&event(named("z", "api", "token", false), true), true);
    }
    assert_eq!(index.members("a", "web"), ["x", "y"]);
    assert_eq!(index.members("b", "web"), Vec::<String>::new(), "another namespace");
    assert_eq!(index.members("a", "api"), Vec::<String>::new(), "z was deleted");
    assert_eq!(index.secret_users("a", "token"), ["y"], "x names it optionally");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_write_that_waits_sees_every_node_created_before_it() {
    use kayra_api::clock::SystemClock;
    use kayra_api::scheme::Scheme;
    use kayra_store::mvcc::{MvccStore, Options};

    let store = Arc::new(MvccStore::in_memory(Options::default()).expect("an in-memory store opens"));
    let registry = Registry::new(store, Arc::new(SystemClock), "/registry/");
    let control = Arc::new(crate::ApplicationLayer::new(Arc::new(Scheme::new("example.com")), registry));
    let client = control.client(crate::controller_identity("test"));
    let namespaces = client.resource("", "namespaces").expect("served");
    let namespace = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a"}});
    client.create(&namespaces, None, namespace).await.expect("created");
    let nodes = client.resource("", "nodes").expect("served");
    for i in 0..1000 {
        let node =
            json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": format!("n{i}")}, "spec": {}});
        client.create(&nodes, None, node).await.expect("created");
    }
    // The index starts following with this write, from the objects as they stand: it is
    // caught up only once it holds all of them, not as soon as it holds the first.
    let applications = client.resource("fleet.example.com", "applications").expect("served");
    let pinned = json!({"apiVersion": "fleet.example.com/v1", "kind": "Application", "metadata": {"name": "x"},
                        "spec": {"command": ["/bin/true"], "placement": {"nodeName": "n999"}}});
    client.create(&applications, Some("a"), pinned).await.expect("n999 is known");
}
