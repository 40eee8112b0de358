//! The endpoints loop: one key per namespace (its Services and Applications changed), and one
//! for all namespaces (a Node came, went or changed its addresses); each pass recomputes the namespace's Services and
//! writes the status of those whose endpoints differ.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kayra_api::kinds::application::Application;
use kayra_api::kinds::service::{Service, ServiceStatus};
use kayra_application::client::Client;
use kayra_application::feed::ResourceFeed;
use kayra_loop::runtime::Loop;
use kayra_loop::{Action, Key, ReconcileError, Reconciler};
use kayra_registry::{Object, RegistryError, Resource, meta_str};

use crate::compute::{endpoints, node_address};

/// How often every namespace is recomputed with nothing changed.
const RESYNC: Duration = Duration::from_secs(300);

/// The key that stands for every namespace: a Node's change may concern any of them.
const EVERY_NAMESPACE: &str = "*";

/// Keeps Services' endpoints current.
pub struct EndpointsReconciler {
    client: Client,
    services: Resource,
    applications: Resource,
    nodes: Resource,
}

impl std::fmt::Debug for EndpointsReconciler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EndpointsReconciler").finish_non_exhaustive()
    }
}

impl EndpointsReconciler {
    /// The loop's rules, acting as `client` (which must read Services, Applications and Nodes
    /// and write `services/status`).
    pub fn new(client: Client) -> Result<EndpointsReconciler, RegistryError> {
        let fleet = format!("fleet.{}", client.layer().scheme().domain());
        Ok(EndpointsReconciler {
            services: client.resource(&fleet, "services")?,
            applications: client.resource(&fleet, "applications")?,
            nodes: client.resource("", "nodes")?,
            client,
        })
    }

    /// The loop: Services and Applications wake their namespace, Nodes every namespace.
    pub fn into_loop(self) -> Loop {
        let namespace_of = |object: &Object| vec![Key::new(meta_str(object, "namespace"))];
        let by_namespace = |resource: &Resource| {
            ResourceFeed::mapped(self.client.clone(), resource.clone(), Arc::new(namespace_of))
        };
        let (services, applications) = (by_namespace(&self.services), by_namespace(&self.applications));
        // A Node's heartbeat changes no endpoint; its addresses, or its coming and going, may.
        let addresses: kayra_application::feed::Projection = Arc::new(|node: &Object| {
            node.get("status").and_then(|status| status.get("addresses")).cloned().unwrap_or_default()
        });
        let nodes = ResourceFeed::all_to_when(
            self.client.clone(),
            self.nodes.clone(),
            Key::new(EVERY_NAMESPACE),
            addresses,
        );
        Loop::new("endpoints", self).source(services).source(applications).source(nodes).resync(RESYNC)
    }
}

#[async_trait::async_trait]
impl Reconciler for EndpointsReconciler {
    async fn reconcile(&self, key: &Key) -> Result<Action, ReconcileError> {
        let namespace = Some(key.as_str()).filter(|key| *key != EVERY_NAMESPACE);
        let services: Vec<Service> = self.client.list_as(&self.services, namespace).await?;
        if services.is_empty() {
            return Ok(Action::AwaitChange);
        }
        let applications: Vec<Application> = self.client.list_as(&self.applications, namespace).await?;
        let nodes: Vec<Node> = self.client.list_as(&self.nodes, None).await?;
        let addresses: BTreeMap<String, String> = nodes
            .iter()
            .filter_map(|node| Some((node.metadata.name.clone()?, node_address(node)?)))
            .collect();
        let mut members: BTreeMap<(&str, &str), Vec<&Application>> = BTreeMap::new();
        for application in &applications {
            let (Some(at), Some(service)) =
                (application.metadata.namespace.as_deref(), application.spec.service_name.as_deref())
            else {
                continue;
            };
            members.entry((at, service)).or_default().push(application);
        }
        for service in services {
            let at = service.metadata.namespace.clone().unwrap_or_default();
            let name = service.metadata.name.clone().unwrap_or_default();
            let joined = members.get(&(at.as_str(), name.as_str())).map(Vec::as_slice).unwrap_or_default();
            let wanted = ServiceStatus { endpoints: endpoints(&service.spec, joined, &addresses) };
            let current = service.status.clone().unwrap_or_default();
            if current == wanted {
                continue;
            }
            let count = wanted.endpoints.len();
            let written = Service { status: Some(wanted), ..service };
            match self.client.update_status(&self.services, Some(&at), &name, &written).await {
                Ok(_) => {
                    tracing::debug!(namespace = at, service = name, endpoints = count, "endpoints updated")
                }
                Err(RegistryError::NotFound { .. }) => {}
                Err(error) => return Err(error.into()),
            }
        }
        Ok(Action::AwaitChange)
    }
}

#[cfg(test)]
mod tests;
