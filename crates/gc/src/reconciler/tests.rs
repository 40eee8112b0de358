//! The collector's passes over an in-memory application layer: each pass does what
//! [`crate::decision`] says, in order (Applications, then Services, then the finalizer).

use std::sync::Arc;

use kayra_api::clock::SystemClock;
use kayra_api::scheme::Scheme;
use kayra_application::ApplicationLayer;
use kayra_application::client::Client;
use kayra_application::options::DeleteRequest;
use kayra_loop::{Key, Reconciler};
use kayra_registry::{Deleted, Registry, RegistryError, meta_str};
use kayra_store::mvcc::{MvccStore, Options};
use serde_json::{Value, json};

use super::GarbageCollector;

struct World {
    /// The set loop's identity: the control plane, allowed to mark children.
    appset: Client,
    collector: GarbageCollector,
}

async fn world() -> World {
    let store = Arc::new(MvccStore::in_memory(Options::default()).unwrap());
    let registry = Registry::new(store, Arc::new(SystemClock), "/registry/");
    let control = Arc::new(ApplicationLayer::new(Arc::new(Scheme::new("example.com")), registry));
    let appset = control.client(kayra_application::controller_identity("appset"));
    let namespaces = appset.resource("", "namespaces").unwrap();
    let namespace = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "demo"}});
    appset.create(&namespaces, None, namespace).await.unwrap();
    let collector =
        GarbageCollector::new(control.client(kayra_application::controller_identity("garbage-collector")))
            .unwrap();
    World { appset, collector }
}

impl World {
    /// Set `name`; answers its uid.
    async fn set(&self, name: &str) -> String {
        let set = json!({"apiVersion": "fleet.example.com/v1", "kind": "ApplicationSet",
            "metadata": {"name": name, "namespace": "demo"},
            "spec": {"applications": [{"name": "c", "spec": {"command": ["/bin/true"]}}]}});
        let created = self
            .appset
            .create(&self.appset.resource("fleet.example.com", "applicationsets").unwrap(), Some("demo"), set)
            .await
            .unwrap();
        meta_str(&created, "uid").to_owned()
    }

    /// A child of `set` (uid `uid`): an Application `<set>-<n>` joining Service `<set>-svc`, or
    /// that Service.
    async fn child(&self, plural: &str, name: &str, set: &str, uid: &str) {
        let metadata = json!({"name": name, "namespace": "demo",
            "labels": {"fleet.example.com/application-set": set, "fleet.example.com/component": "c"},
            "annotations": {"fleet.example.com/appset-spec-hash": "h"},
            "ownerReferences": [{"apiVersion": "fleet.example.com/v1", "kind": "ApplicationSet", "name": set,
                                 "uid": uid, "controller": true, "blockOwnerDeletion": true}]});
        let object = if plural == "services" {
            json!({"apiVersion": "fleet.example.com/v1", "kind": "Service", "metadata": metadata,
                   "spec": {"ports": [{"port": 80}]}})
        } else {
            json!({"apiVersion": "fleet.example.com/v1", "kind": "Application", "metadata": metadata,
                   "spec": {"command": ["/bin/true"], "serviceName": format!("{set}-svc")}})
        };
        self.appset
            .create(&self.appset.resource("fleet.example.com", plural).unwrap(), Some("demo"), object)
            .await
            .unwrap();
    }

    async fn get(&self, plural: &str, name: &str) -> Option<Value> {
        let resource = self.appset.resource("fleet.example.com", plural).unwrap();
        match self.appset.get(&resource, Some("demo"), name).await {
            Ok(object) => Some(Value::Object(object)),
            Err(RegistryError::NotFound { .. }) => None,
            Err(error) => panic!("{error}"),
        }
    }

    async fn delete_set(&self, name: &str, policy: &str) -> Deleted {
        let sets = self.appset.resource("fleet.example.com", "applicationsets").unwrap();
        let options =
            DeleteRequest { propagation_policy: Some(policy.to_owned()), ..DeleteRequest::default() };
        self.appset.delete(&sets, Some("demo"), name, &options).await.unwrap()
    }

    async fn pass(&self, set: &str) {
        self.collector.reconcile(&Key::object(Some("demo"), set)).await.unwrap();
    }
}

#[tokio::test]
async fn dependents_of_a_set_gone_or_made_again_are_deleted_applications_first() {
    let w = world().await;
    let uid = w.set("web").await;
    w.child("applications", "web-0", "web", &uid).await;
    w.child("applications", "web-stale", "web", "an-older-set").await;
    w.child("services", "web-svc", "web", &uid).await;
    w.pass("web").await;
    assert!(w.get("applications", "web-stale").await.is_none(), "an older set's child goes");
    assert!(w.get("applications", "web-0").await.is_some(), "the live set's child stays");

    // The set goes (background): its Application first, then, in the next pass, its Service.
    assert!(matches!(w.delete_set("web", "Background").await, Deleted::Gone(_)));
    w.pass("web").await;
    assert!(w.get("applications", "web-0").await.is_none());
    assert!(w.get("services", "web-svc").await.is_some(), "the Service waits for its members");
    w.pass("web").await;
    assert!(w.get("services", "web-svc").await.is_none());
}

#[tokio::test]
async fn foreground_waits_for_the_dependents_and_orphan_releases_them() {
    let w = world().await;
    let uid = w.set("fg").await;
    w.child("applications", "fg-0", "fg", &uid).await;
    w.child("services", "fg-svc", "fg", &uid).await;
    assert!(matches!(w.delete_set("fg", "Foreground").await, Deleted::Pending(_)));
    w.pass("fg").await;
    assert!(w.get("applications", "fg-0").await.is_none());
    assert!(w.get("applicationsets", "fg").await.is_some(), "the set waits");
    w.pass("fg").await;
    assert!(w.get("services", "fg-svc").await.is_none());
    assert!(w.get("applicationsets", "fg").await.is_some(), "the set waits for the Service too");
    w.pass("fg").await;
    assert!(w.get("applicationsets", "fg").await.is_none(), "the finalizer went, and the set with it");

    let uid = w.set("kept").await;
    w.child("applications", "kept-0", "kept", &uid).await;
    w.child("services", "kept-svc", "kept", &uid).await;
    assert!(matches!(w.delete_set("kept", "Orphan").await, Deleted::Pending(_)));
    w.pass("kept").await;
    for (plural, name) in [("applications", "kept-0"), ("services", "kept-svc")] {
        let released = w.get(plural, name).await.expect("a released child stays");
        let metadata = &released["metadata"];
        assert!(metadata["ownerReferences"].is_null(), "{released}");
        assert!(
            metadata.get("labels").is_none_or(|labels| labels.as_object().is_none_or(|l| l.is_empty())),
            "{released}"
        );
        assert!(
            metadata.get("annotations").is_none_or(|a| a.as_object().is_none_or(|a| a.is_empty())),
            "{released}"
        );
    }
    w.pass("kept").await;
    assert!(w.get("applicationsets", "kept").await.is_none(), "released, the set goes");
}
