//! Where the catalog meets the rest of the control plane: its namespaces port answered from
//! Kayra's own `v1` Namespaces, its Events written as core Events, and its subscriptions ended
//! with the namespace that holds them. Each is a few lines of translation between two domain
//! crates' ports.

use std::sync::Arc;

use kayra_application::client::Client;
use kayra_application::events::{Involved, Recorder, Severity};
use kayra_application::loops::namespaces::NamespaceContent;
use kayra_catalog::ports::{NamespaceState, Namespaces};
use kayra_catalog::reconciler::{Events, SubscriptionEvent};
use kayra_catalog::{Catalog, CatalogError};
use kayra_loop::ReconcileError;
use kayra_registry::{RegistryError, Resource};
use kayra_store::StoreError;

/// Namespaces as the registry stores them: a namespace takes new subscriptions while it exists
/// and is not being deleted, the rule the registry applies to every other namespaced object.
pub(crate) struct RegistryNamespaces {
    pub(crate) client: Client,
    pub(crate) namespaces: Resource,
}

#[async_trait::async_trait]
impl Namespaces for RegistryNamespaces {
    async fn state(&self, name: &str) -> Result<NamespaceState, StoreError> {
        let namespace = match self.client.get(&self.namespaces, None, name).await {
            Ok(namespace) => namespace,
            Err(RegistryError::NotFound { .. }) => return Ok(NamespaceState::Absent),
            Err(RegistryError::Store(error)) => return Err(error),
            Err(other) => return Err(StoreError::engine(format!("read namespace {name}"), other)),
        };
        if kayra_registry::namespace_terminating(&namespace) {
            return Ok(NamespaceState::Terminating);
        }
        Ok(NamespaceState::Active)
    }
}

/// The reconciler's Events, as core Events about the Subscription.
pub(crate) struct CoreEvents(pub(crate) Recorder);

#[async_trait::async_trait]
impl Events for CoreEvents {
    async fn record(&self, event: &SubscriptionEvent) {
        let involved = Involved {
            api_version: event.api_version.clone(),
            kind: "Subscription".to_owned(),
            namespace: event.namespace.clone(),
            name: event.subscription.clone(),
            uid: String::new(),
        };
        let severity = if event.warning { Severity::Warning } else { Severity::Normal };
        if let Err(error) = self.0.record(&involved, severity, event.reason, &event.message).await {
            tracing::debug!(%error, namespace = %event.namespace, "the reconciler's event was not recorded");
        }
    }
}

/// A namespace's subscriptions end with it.
pub(crate) struct Subscriptions(pub(crate) Arc<Catalog>);

#[async_trait::async_trait]
impl NamespaceContent for Subscriptions {
    async fn remove_all(&self, namespace: &str) -> Result<(), ReconcileError> {
        for subscription in self.0.all_subscriptions().await? {
            if subscription.object.namespace == namespace {
                match self.0.unsubscribe(namespace, &subscription.object.api).await {
                    Ok(_) | Err(CatalogError::NotFound(_)) => {}
                    Err(error) => return Err(error.into()),
                }
            }
        }
        Ok(())
    }
}

/// The node certificate signer's CA: the cluster's, read from the data directory.
pub(crate) struct CaSigner(pub(crate) kayra_pki::Ca);

impl kayra_nodecsr::ports::Signer for CaSigner {
    fn read_request(
        &self,
        request_pem: &str,
    ) -> Result<kayra_nodecsr::ports::RequestedSubject, kayra_nodecsr::NodeCsrError> {
        let read = kayra_pki::read_certificate_request(request_pem)
            .map_err(|error| kayra_nodecsr::NodeCsrError::UnreadableRequest { source: Box::new(error) })?;
        Ok(kayra_nodecsr::ports::RequestedSubject {
            common_name: read.subject.common_name,
            organizations: read.subject.organizations,
        })
    }

    fn sign_client(
        &self,
        request_pem: &str,
        subject: &kayra_nodecsr::ports::RequestedSubject,
        ttl: std::time::Duration,
    ) -> Result<String, kayra_nodecsr::NodeCsrError> {
        let subject = kayra_pki::Subject {
            common_name: subject.common_name.clone(),
            organizations: subject.organizations.clone(),
        };
        self.0
            .sign_request(request_pem, &subject, kayra_pki::Usage::Client, ttl)
            .map_err(|error| kayra_nodecsr::NodeCsrError::Signing { source: Box::new(error) })
    }
}
