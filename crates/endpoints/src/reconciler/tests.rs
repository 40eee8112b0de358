//! The loop's passes over an in-memory application layer: the status follows members, nodes and
//! readiness, and is written only when it changes.

use std::sync::Arc;

use kayra_api::clock::SystemClock;
use kayra_api::scheme::Scheme;
use kayra_application::ApplicationLayer;
use kayra_application::client::Client;
use kayra_loop::{Key, Reconciler};
use kayra_registry::{Registry, Resource};
use kayra_store::mvcc::{MvccStore, Options};
use serde_json::{Value, json};

use super::{EVERY_NAMESPACE, EndpointsReconciler};

struct World {
    admin: Client,
    loop_: EndpointsReconciler,
    services: Resource,
    applications: Resource,
}

async fn world() -> World {
    let store = Arc::new(MvccStore::in_memory(Options::default()).unwrap());
    let registry = Registry::new(store, Arc::new(SystemClock), "/registry/");
    let control = Arc::new(ApplicationLayer::new(Arc::new(Scheme::new("example.com")), registry));
    let admin = control.client(kayra_application::controller_identity("test"));
    let namespaces = admin.resource("", "namespaces").unwrap();
    let namespace = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "demo"}});
    admin.create(&namespaces, None, namespace).await.unwrap();
    let nodes = admin.resource("", "nodes").unwrap();
    let node = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},
                      "status": {"addresses": [{"type": "Hostname", "address": "n1"}, {"type": "InternalIP", "address": "10.0.0.1"}]}});
    admin.create(&nodes, None, node).await.unwrap();
    let loop_ = EndpointsReconciler::new(control.client(kayra_application::controller_identity("endpoints")))
        .unwrap();
    let services = admin.resource("fleet.example.com", "services").unwrap();
    let applications = admin.resource("fleet.example.com", "applications").unwrap();
    World { admin, loop_, services, applications }
}

impl World {
    async fn member(&self, name: &str, ready: &str) {
        let app = json!({"apiVersion": "fleet.example.com/v1", "kind": "Application",
            "metadata": {"name": name, "namespace": "demo"},
            "spec": {"command": ["/bin/true"], "serviceName": "web", "placement": {"nodeName": "n1"}}});
        let created = self.admin.create(&self.applications, Some("demo"), app).await.unwrap();
        let mut with_status = Value::Object(created);
        with_status["status"] =
            json!({"phase": "Running", "conditions": [{"type": "Ready", "status": ready}]});
        self.admin.update_status(&self.applications, Some("demo"), name, &with_status).await.unwrap();
    }

    async fn service(&self) -> Value {
        Value::Object(self.admin.get(&self.services, Some("demo"), "web").await.unwrap())
    }

    async fn pass(&self, key: &str) {
        self.loop_.reconcile(&Key::new(key)).await.unwrap();
    }
}

#[tokio::test]
async fn the_status_follows_the_members_and_is_written_only_when_it_changes() {
    let w = world().await;
    let service = json!({"apiVersion": "fleet.example.com/v1", "kind": "Service",
        "metadata": {"name": "web", "namespace": "demo"}, "spec": {"ports": [{"port": 80}]}});
    w.admin.create(&w.services, Some("demo"), service).await.unwrap();
    w.member("b", "True").await;
    w.member("a", "True").await;
    w.member("c", "False").await;
    w.pass("demo").await;
    let listed = w.service().await;
    let names: Vec<&str> = listed["status"]["endpoints"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["application"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["a", "b"], "ready members only, by name: {listed}");
    assert_eq!(listed["status"]["endpoints"][0]["address"], "10.0.0.1");
    assert_eq!(listed["status"]["endpoints"][0]["ports"], json!([{"port": 80, "protocol": "TCP"}]));

    // Nothing changed: nothing written, from the namespace's key or every namespace's.
    let version = |service: &Value| service["metadata"]["resourceVersion"].clone();
    w.pass("demo").await;
    w.pass(EVERY_NAMESPACE).await;
    assert_eq!(version(&w.service().await), version(&listed));

    // A member leaving takes its endpoint along.
    w.admin
        .delete(&w.applications, Some("demo"), "a", &kayra_application::options::DeleteRequest::default())
        .await
        .unwrap();
    w.pass("demo").await;
    let after = w.service().await;
    assert_eq!(after["status"]["endpoints"].as_array().unwrap().len(), 1, "{after}");
}
