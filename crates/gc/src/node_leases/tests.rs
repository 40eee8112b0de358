//! The Node Lease collector's passes over an in-memory application layer: a Lease goes with
//! its Node, and only with the Node its owner reference names by uid.

use std::sync::Arc;

use kayra_api::clock::SystemClock;
use kayra_api::scheme::Scheme;
use kayra_application::ApplicationLayer;
use kayra_application::client::Client;
use kayra_application::options::DeleteRequest;
use kayra_loop::{Action, Key, Reconciler};
use kayra_registry::{Registry, RegistryError, Resource, meta_str};
use kayra_store::mvcc::{MvccStore, Options};
use serde_json::{Value, json};

use super::{NODE_LEASE_NAMESPACE, NodeLeaseCollector, node_owners};
use crate::reconciler::{DeletedLabels, GcMetrics};

struct World {
    client: Client,
    nodes: Resource,
    leases: Resource,
    collector: NodeLeaseCollector,
    deletions: GcMetrics,
}

async fn world() -> World {
    let store = Arc::new(MvccStore::in_memory(Options::default()).unwrap());
    let registry = Registry::new(store, Arc::new(SystemClock), "/registry/");
    let control = Arc::new(ApplicationLayer::new(Arc::new(Scheme::new("example.com")), registry));
    let client = control.client(kayra_application::controller_identity("node-server"));
    let namespaces = client.resource("", "namespaces").unwrap();
    let namespace =
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NODE_LEASE_NAMESPACE}});
    client.create(&namespaces, None, namespace).await.unwrap();
    let deletions = GcMetrics::default();
    let collector =
        NodeLeaseCollector::new(control.client(kayra_application::controller_identity("garbage-collector")))
            .unwrap()
            .with_metrics(deletions.clone());
    World {
        nodes: client.resource("", "nodes").unwrap(),
        leases: client.resource("coordination.k8s.io", "leases").unwrap(),
        client,
        collector,
        deletions,
    }
}

impl World {
    /// Node `name`; answers its uid.
    async fn node(&self, name: &str) -> String {
        let node = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}});
        meta_str(&self.client.create(&self.nodes, None, node).await.unwrap(), "uid").to_owned()
    }

    async fn delete_node(&self, name: &str) {
        self.client.delete(&self.nodes, None, name, &DeleteRequest::default()).await.unwrap();
    }

    /// Lease `name` in `kube-node-lease`, owned by the Nodes `owners` names (name, uid).
    async fn lease(&self, name: &str, owners: &[(&str, &str)]) {
        let references: Vec<Value> = owners
            .iter()
            .map(|(node, uid)| json!({"apiVersion": "v1", "kind": "Node", "name": node, "uid": uid}))
            .collect();
        let mut metadata = json!({"name": name, "namespace": NODE_LEASE_NAMESPACE});
        if !references.is_empty() {
            metadata["ownerReferences"] = Value::Array(references);
        }
        let lease = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": metadata,
                           "spec": {"holderIdentity": name, "leaseDurationSeconds": 40}});
        self.client.create(&self.leases, Some(NODE_LEASE_NAMESPACE), lease).await.unwrap();
    }

    /// Runs one pass over Lease `name`; answers whether the Lease is still there.
    async fn pass(&self, name: &str) -> bool {
        let action = self.collector.reconcile(&Key::object(Some(NODE_LEASE_NAMESPACE), name)).await.unwrap();
        assert!(matches!(action, Action::AwaitChange), "{action:?}");
        match self.client.get(&self.leases, Some(NODE_LEASE_NAMESPACE), name).await {
            Ok(_) => true,
            Err(RegistryError::NotFound { .. }) => false,
            Err(error) => panic!("{error}"),
        }
    }

    fn deleted(&self) -> u64 {
        self.deletions.get_or_create(&DeletedLabels { kind: "Lease" }).get()
    }
}

#[tokio::test]
async fn a_lease_whose_node_is_there_stays() {
    let w = world().await;
    let uid = w.node("n1").await;
    w.lease("n1", &[("n1", &uid)]).await;
    assert!(w.pass("n1").await);
    assert_eq!(w.deleted(), 0);
}

#[tokio::test]
async fn a_lease_goes_with_its_node() {
    let w = world().await;
    let uid = w.node("n1").await;
    w.lease("n1", &[("n1", &uid)]).await;
    w.delete_node("n1").await;
    assert!(!w.pass("n1").await, "the Lease of a deleted Node is deleted");
    assert_eq!(w.deleted(), 1);
    assert!(!w.pass("n1").await, "a Lease already gone is nothing to do");
}

#[tokio::test]
async fn a_lease_of_a_node_made_again_goes_unless_it_names_the_new_node() {
    let w = world().await;
    let old = w.node("n1").await;
    w.delete_node("n1").await;
    let new = w.node("n1").await;
    assert_ne!(old, new);
    w.lease("n1", &[("n1", &old)]).await;
    assert!(!w.pass("n1").await, "the Lease names the Node that was deleted");
    w.lease("n1", &[("n1", &new)]).await;
    assert!(w.pass("n1").await, "the Lease names the Node as it is now");
}

#[tokio::test]
async fn a_lease_without_a_node_owner_or_with_one_owner_left_stays() {
    let w = world().await;
    w.lease("leader", &[]).await;
    assert!(w.pass("leader").await, "a Lease no Node owns is not the collector's");
    let uid = w.node("n2").await;
    w.lease("shared", &[("gone", "u-gone"), ("n2", &uid)]).await;
    assert!(w.pass("shared").await, "one owner is left");
    assert_eq!(w.deleted(), 0);
}

#[test]
fn only_node_owners_count() {
    let Value::Object(lease) = json!({"metadata": {"ownerReferences": [
        {"apiVersion": "v1", "kind": "Node", "name": "n1", "uid": "u1"},
        {"apiVersion": "fleet.example.com/v1", "kind": "Node", "name": "n2", "uid": "u2"},
        {"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "u3"}]}})
    else {
        unreachable!("an object literal")
    };
    assert_eq!(node_owners(&lease), [("n1".to_owned(), "u1".to_owned())]);
}
