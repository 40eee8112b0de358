//! The projection's copy of the fleet: a loop that follows Services, Applications and Nodes
//! through the application layer's watch caches and recomputes a namespace when one of its
//! objects changes (every namespace when a Node's address or readiness does), and the signal
//! held queries wait on.

use std::collections::BTreeSet;
use std::sync::{Arc, RwLock, RwLockReadGuard};

use k8s_openapi::api::core::v1::Node;
use kayra_api::kinds::application::Application;
use kayra_api::kinds::service::Service;
use kayra_application::client::Client;
use kayra_application::feed::{Projection as Project, ResourceFeed};
use kayra_loop::runtime::Loop;
use kayra_loop::source::Fixed;
use kayra_loop::{Action, Key, ReconcileError, Reconciler};
use kayra_registry::{Object, RegistryError, Resource, meta_str};
use serde_json::Value;
use tokio::sync::watch;

use crate::model::{NamespaceView, Snapshot, consul_nodes};

/// The key that stands for every namespace: a Node's change may concern any of them.
const EVERY_NAMESPACE: &str = "*";

/// What the projection serves, kept current by its loop; cheap to clone.
#[derive(Debug, Clone)]
pub struct Projection {
    snapshot: Arc<RwLock<Snapshot>>,
    changes: watch::Sender<u64>,
}

impl Default for Projection {
    fn default() -> Projection {
        Projection { snapshot: Arc::default(), changes: watch::channel(0).0 }
    }
}

impl Projection {
    /// What is served now.
    pub fn snapshot(&self) -> RwLockReadGuard<'_, Snapshot> {
        self.snapshot.read().expect("the snapshot's lock is never held across a panic")
    }

    /// A receiver told of every change, for a held query to wait on.
    pub fn changes(&self) -> watch::Receiver<u64> {
        self.changes.subscribe()
    }

    /// Whether the loop has read the fleet once.
    pub fn ready(&self) -> bool {
        self.snapshot().base_index > 0
    }

    fn publish(&self, change: impl FnOnce(&mut Snapshot)) {
        let mut snapshot = self.snapshot.write().expect("the snapshot's lock is never held across a panic");
        change(&mut snapshot);
        drop(snapshot);
        self.changes.send_modify(|generation| *generation += 1);
    }

    /// The loop keeping the projection current, reading as `client` (which must list and watch
    /// Services, Applications and Nodes).
    pub fn follow(&self, client: Client) -> Result<Loop, RegistryError> {
        let fleet = format!("fleet.{}", client.layer().scheme().domain());
        let follower = Follower {
            projection: self.clone(),
            services: client.resource(&fleet, "services")?,
            applications: client.resource(&fleet, "applications")?,
            nodes: client.resource("", "nodes")?,
            client,
        };
        let namespace_of = |object: &Object| vec![Key::new(meta_str(object, "namespace"))];
        let by_namespace = |resource: &Resource| {
            ResourceFeed::mapped(follower.client.clone(), resource.clone(), Arc::new(namespace_of))
        };
        let (services, applications) =
            (by_namespace(&follower.services), by_namespace(&follower.applications));
        // A heartbeat changes nothing served; an address, the readiness, or the uid may.
        let served: Project = Arc::new(|node: &Object| {
            let status = node.get("status");
            let ready = status
                .and_then(|status| status.get("conditions"))
                .and_then(Value::as_array)
                .and_then(|conditions| conditions.iter().find(|c| c["type"] == "Ready"))
                .map(|ready| ready["status"].clone());
            serde_json::json!([
                status.and_then(|status| status.get("addresses")),
                ready,
                node.get("metadata").and_then(|m| m.get("uid")),
            ])
        });
        let nodes = ResourceFeed::all_to_when(
            follower.client.clone(),
            follower.nodes.clone(),
            Key::new(EVERY_NAMESPACE),
            served,
        );
        // One pass at a time: each reads the snapshot it replaces.
        // Every namespace once at start, so that an empty fleet is served too.
        let start = Fixed::new([Key::new(EVERY_NAMESPACE)]);
        Ok(Loop::new("consul-projection", follower)
            .source(start)
            .source(services)
            .source(applications)
            .source(nodes)
            .concurrency(1))
    }
}

struct Follower {
    projection: Projection,
    client: Client,
    services: Resource,
    applications: Resource,
    nodes: Resource,
}

impl Follower {
    async fn list<T: serde::de::DeserializeOwned>(
        &self,
        resource: &Resource,
        namespace: Option<&str>,
    ) -> Result<(u64, Vec<T>), ReconcileError> {
        let (revision, objects) = self.client.list_all_with_revision(resource, namespace).await?;
        let typed = objects
            .into_iter()
            .filter_map(|object| serde_json::from_value(Value::Object(object)).ok())
            .collect();
        Ok((revision, typed))
    }
}

#[async_trait::async_trait]
impl Reconciler for Follower {
    async fn reconcile(&self, key: &Key) -> Result<Action, ReconcileError> {
        let (nodes_revision, nodes) = self.list::<Node>(&self.nodes, None).await?;
        let nodes = consul_nodes(&nodes);
        let namespaces: BTreeSet<String> = if key.as_str() == EVERY_NAMESPACE {
            let (_, services) = self.list::<Service>(&self.services, None).await?;
            let known = self.projection.snapshot().namespaces.keys().cloned().collect::<BTreeSet<_>>();
            known.into_iter().chain(services.into_iter().filter_map(|s| s.metadata.namespace)).collect()
        } else {
            BTreeSet::from([key.as_str().to_owned()])
        };
        let mut computed = Vec::new();
        let mut revision = nodes_revision;
        for namespace in namespaces {
            let (services_revision, services) =
                self.list::<Service>(&self.services, Some(&namespace)).await?;
            let (applications_revision, applications) =
                self.list::<Application>(&self.applications, Some(&namespace)).await?;
            revision = revision.max(services_revision).max(applications_revision);
            computed.push((namespace, services, applications));
        }
        let revision = revision.max(1);
        let mut changed = false;
        let snapshot = self.projection.snapshot().clone();
        let mut next = snapshot.clone();
        if next.base_index == 0 {
            next.base_index = revision;
            changed = true;
        }
        if next.nodes != nodes {
            next.nodes = nodes;
            next.nodes_index = revision;
            changed = true;
        }
        next.nodes_index = next.nodes_index.max(next.base_index);
        for (namespace, services, applications) in computed {
            let old = snapshot.namespaces.get(&namespace).cloned().unwrap_or_else(|| NamespaceView {
                catalog_index: next.base_index,
                health_index: next.base_index,
                ..NamespaceView::default()
            });
            let view = old.next(&services, &applications, &next.nodes, revision);
            if view.catalog_index != old.catalog_index || view.health_index != old.health_index {
                changed = true;
            }
            next.namespaces.insert(namespace, view);
        }
        if changed {
            self.projection.publish(|snapshot| *snapshot = next);
        }
        Ok(Action::AwaitChange)
    }
}
