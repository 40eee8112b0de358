//! Node Leases go with their Node: a Lease in `kube-node-lease` whose owner references name
//! Nodes (`v1` `Node`, by name and uid) is deleted once none of them exists any more with that
//! uid — deleted, or deleted and made again under the same name — as Kubernetes' garbage
//! collector deletes kubelet's Lease with its Node. The Node is a cluster-scoped owner of a
//! namespaced dependent, which owner references allow for exactly this case.
//!
//! One key per Lease, woken when a Lease appears or its owners change (not by its renewals),
//! and when a Node appears or goes (the Lease named after it, which is the one its node server
//! renews). The Lease is read before its owners and deleted only on the version read, so a
//! Lease renewed for a Node made again meanwhile is looked at again, not deleted.

use std::sync::Arc;
use std::time::Duration;

use kayra_api::kinds::lease::NODE_LEASE_NAMESPACE;
use kayra_application::client::Client;
use kayra_application::feed::ResourceFeed;
use kayra_application::options::DeleteRequest;
use kayra_loop::runtime::Loop;
use kayra_loop::{Action, Key, ReconcileError, Reconciler};
use kayra_registry::{Object, RegistryError, Resource, meta_str};
use serde_json::{Value, json};

use crate::reconciler::{DeletedLabels, GcMetrics};

/// How often every Lease is looked at with nothing changed.
const RESYNC: Duration = Duration::from_secs(600);

/// How soon a Lease that changed while it was being deleted is looked at again.
const MOVED: Duration = Duration::from_secs(1);

/// Deletes the Leases of Nodes that are gone.
pub struct NodeLeaseCollector {
    client: Client,
    nodes: Resource,
    leases: Resource,
    deletions: GcMetrics,
}

impl std::fmt::Debug for NodeLeaseCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeLeaseCollector").finish_non_exhaustive()
    }
}

/// The Nodes a Lease's owner references name: each one's name and uid.
pub fn node_owners(lease: &Object) -> Vec<(String, String)> {
    lease
        .get("metadata")
        .and_then(|metadata| metadata.get("ownerReferences"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|owner| owner["apiVersion"] == "v1" && owner["kind"] == "Node")
        .filter_map(|owner| Some((owner["name"].as_str()?.to_owned(), owner["uid"].as_str()?.to_owned())))
        .collect()
}

impl NodeLeaseCollector {
    /// The collector, acting as `client` (which must read Nodes, and read and delete Leases in
    /// `kube-node-lease`).
    pub fn new(client: Client) -> Result<NodeLeaseCollector, RegistryError> {
        Ok(NodeLeaseCollector {
            nodes: client.resource("", "nodes")?,
            leases: client.resource("coordination.k8s.io", "leases")?,
            client,
            deletions: GcMetrics::default(),
        })
    }

    /// The same collector, counting the Leases it deletes in `deletions` (as kind `Lease`).
    pub fn with_metrics(mut self, deletions: GcMetrics) -> NodeLeaseCollector {
        self.deletions = deletions;
        self
    }

    /// The loop: one key per Lease, woken by the Leases' owners and by Nodes coming and going.
    pub fn into_loop(self) -> Loop {
        let lease_key = |object: &Object| -> Vec<Key> {
            match meta_str(object, "namespace") {
                NODE_LEASE_NAMESPACE => {
                    vec![Key::object(Some(NODE_LEASE_NAMESPACE), meta_str(object, "name"))]
                }
                _ => Vec::new(),
            }
        };
        let leases = ResourceFeed::mapped_when(
            self.client.clone(),
            self.leases.clone(),
            Arc::new(lease_key),
            Arc::new(|lease: &Object| json!(node_owners(lease))),
        );
        let node_lease =
            |node: &Object| vec![Key::object(Some(NODE_LEASE_NAMESPACE), meta_str(node, "name"))];
        let nodes = ResourceFeed::mapped_when(
            self.client.clone(),
            self.nodes.clone(),
            Arc::new(node_lease),
            Arc::new(|node: &Object| json!(meta_str(node, "uid"))),
        );
        Loop::new("node-lease-collector", self).source(leases).source(nodes).resync(RESYNC)
    }

    /// Whether Node `name` exists with uid `uid`.
    async fn owner_exists(&self, name: &str, uid: &str) -> Result<bool, RegistryError> {
        match self.client.get(&self.nodes, None, name).await {
            Ok(node) => Ok(meta_str(&node, "uid") == uid),
            Err(RegistryError::NotFound { .. }) => Ok(false),
            Err(error) => Err(error),
        }
    }
}

#[async_trait::async_trait]
impl Reconciler for NodeLeaseCollector {
    async fn reconcile(&self, key: &Key) -> Result<Action, ReconcileError> {
        let Some(namespace) = key.namespace() else { return Ok(Action::AwaitChange) };
        let lease = match self.client.get(&self.leases, Some(namespace), key.name()).await {
            Ok(lease) => lease,
            Err(RegistryError::NotFound { .. }) => return Ok(Action::AwaitChange),
            Err(error) => return Err(error.into()),
        };
        let owners = node_owners(&lease);
        if owners.is_empty() || !meta_str(&lease, "deletionTimestamp").is_empty() {
            return Ok(Action::AwaitChange);
        }
        for (name, uid) in &owners {
            if self.owner_exists(name, uid).await? {
                return Ok(Action::AwaitChange);
            }
        }
        let options = DeleteRequest {
            uid: Some(meta_str(&lease, "uid").to_owned()),
            resource_version: Some(meta_str(&lease, "resourceVersion").to_owned()),
            propagation_policy: Some("Background".to_owned()),
            ..DeleteRequest::default()
        };
        match self.client.delete(&self.leases, Some(namespace), key.name(), &options).await {
            Ok(_) => {
                self.deletions.get_or_create(&DeletedLabels { kind: "Lease" }).inc();
                tracing::info!(lease = %key, "deleted the Lease of a Node that is gone");
                Ok(Action::AwaitChange)
            }
            Err(RegistryError::NotFound { .. }) => Ok(Action::AwaitChange),
            // Renewed meanwhile, perhaps for a Node made again: look again.
            Err(RegistryError::Conflict { .. }) => Ok(Action::RequeueAfter(MOVED)),
            Err(error) => Err(error.into()),
        }
    }
}

#[cfg(test)]
mod tests;
