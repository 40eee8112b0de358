//! The RBAC index loop: whenever a role, a binding or a namespace changes, the index every
//! authorization decision is made over is rebuilt from what is stored and swapped in whole.

use std::time::Duration;

use kayra_api::kinds::rbac::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use kayra_authz::Rbac;
use kayra_loop::runtime::Loop;
use kayra_loop::source::Fixed;
use kayra_loop::{Action, Key, ReconcileError, Reconciler};
use kayra_registry::{RegistryError, Resource, meta_str};

use crate::client::Client;
use crate::feed::ResourceFeed;

/// The one key of the index loop: the index is rebuilt whole.
const INDEX: &str = "rbac-index";

/// How often the index is rebuilt with nothing changed.
const RESYNC: Duration = Duration::from_secs(60);

/// Rebuilds the RBAC index of `client`'s layer from the stored roles, bindings and namespaces.
#[derive(Debug, Clone)]
pub struct IndexReconciler {
    client: Client,
    resources: [Resource; 5],
}

impl IndexReconciler {
    /// The reconciler, reading as `client`.
    pub fn new(client: Client) -> Result<IndexReconciler, RegistryError> {
        let group = format!("authorization.{}", client.layer().scheme().domain());
        let resources = [
            client.resource(&group, "clusterroles")?,
            client.resource(&group, "roles")?,
            client.resource(&group, "clusterrolebindings")?,
            client.resource(&group, "rolebindings")?,
            client.resource("", "namespaces")?,
        ];
        Ok(IndexReconciler { client, resources })
    }

    /// The loop: woken by any change to the five resources, and every minute regardless.
    pub fn into_loop(self) -> Loop {
        let key = Key::new(INDEX);
        let mut lp = Loop::new("rbac-index", self.clone()).source(Fixed::new([key.clone()])).resync(RESYNC);
        for resource in self.resources {
            lp = lp.source(ResourceFeed::all_to(self.client.clone(), resource, key.clone()));
        }
        lp
    }

    /// Reads every role, binding and namespace into a fresh index.
    pub async fn rebuild(&self) -> Result<Rbac, RegistryError> {
        let mut rbac = Rbac::default();
        let [cluster_roles, roles, cluster_bindings, bindings, namespaces] = &self.resources;
        for role in self.client.list_as::<ClusterRole>(cluster_roles, None).await? {
            rbac.add_cluster_role(role);
        }
        for role in self.client.list_as::<Role>(roles, None).await? {
            rbac.add_role(role);
        }
        for binding in self.client.list_as::<ClusterRoleBinding>(cluster_bindings, None).await? {
            rbac.add_cluster_binding(binding);
        }
        for binding in self.client.list_as::<RoleBinding>(bindings, None).await? {
            rbac.add_binding(binding);
        }
        for namespace in self.client.list_all(namespaces, None).await? {
            rbac.add_namespace(meta_str(&namespace, "name"));
        }
        Ok(rbac)
    }
}

#[async_trait::async_trait]
impl Reconciler for IndexReconciler {
    async fn reconcile(&self, _key: &Key) -> Result<Action, ReconcileError> {
        let rbac = self.rebuild().await?;
        self.client.layer().set_rbac(rbac);
        Ok(Action::AwaitChange)
    }
}
