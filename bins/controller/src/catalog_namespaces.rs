//! The catalog's namespaces port over Kayra's own `v1` Namespaces, read through the registry:
//! a namespace takes new subscriptions while it exists and is not being deleted, the rule the
//! registry applies to every other namespaced object.

use kayra_catalog::ports::{NamespaceState, Namespaces};
use kayra_registry::{Registry, RegistryError, Resource, meta_str};
use kayra_store::StoreError;

/// Namespaces as the registry stores them.
pub(crate) struct RegistryNamespaces {
    /// The registry.
    pub(crate) registry: Registry,
    /// The registry resource of `v1` Namespaces.
    pub(crate) namespaces: Resource,
}

#[async_trait::async_trait]
impl Namespaces for RegistryNamespaces {
    async fn state(&self, name: &str) -> Result<NamespaceState, StoreError> {
        let namespace = match self.registry.get(&self.namespaces, None, name).await {
            Ok(namespace) => namespace,
            Err(RegistryError::NotFound { .. }) => return Ok(NamespaceState::Absent),
            Err(RegistryError::Store(error)) => return Err(error),
            Err(other) => return Err(StoreError::engine(format!("read namespace {name}"), other)),
        };
        let phase = namespace.get("status").and_then(|status| status.get("phase"));
        if !meta_str(&namespace, "deletionTimestamp").is_empty()
            || phase.and_then(serde_json::Value::as_str) == Some("Terminating")
        {
            return Ok(NamespaceState::Terminating);
        }
        Ok(NamespaceState::Active)
    }
}
