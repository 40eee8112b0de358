//! The namespace finalizer: a terminating namespace has everything in it deleted — the
//! registry's namespaced objects, and whatever else lives in namespaces (catalog subscriptions)
//! through [`NamespaceContent`] — and then its `kubernetes` finalizer removed, so it goes.

use std::sync::Arc;
use std::time::Duration;

use kayra_loop::runtime::Loop;
use kayra_loop::{Action, Key, ReconcileError, Reconciler};
use kayra_registry::{RegistryError, Resource, meta_str};

use crate::client::Client;
use crate::feed::ResourceFeed;

/// Something other than the registry's objects that lives in namespaces and must go with them.
#[async_trait::async_trait]
pub trait NamespaceContent: Send + Sync + 'static {
    /// Removes everything of this kind in `namespace`.
    async fn remove_all(&self, namespace: &str) -> Result<(), ReconcileError>;
}

/// How soon a namespace still emptying is looked at again.
const EMPTYING: Duration = Duration::from_secs(2);

/// How often every namespace is looked at with nothing changed.
const RESYNC: Duration = Duration::from_secs(60);

/// Finalizes terminating namespaces.
pub struct FinalizerReconciler {
    client: Client,
    namespaces: Resource,
    contents: Vec<Resource>,
    others: Vec<Arc<dyn NamespaceContent>>,
}

impl std::fmt::Debug for FinalizerReconciler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FinalizerReconciler").field("contents", &self.contents.len()).finish_non_exhaustive()
    }
}

impl FinalizerReconciler {
    /// The finalizer, acting as `client`, also emptying each of `others`.
    pub fn new(
        client: Client,
        others: Vec<Arc<dyn NamespaceContent>>,
    ) -> Result<FinalizerReconciler, RegistryError> {
        let namespaces = client.resource("", "namespaces")?;
        let control = client.layer().clone();
        let contents = control.stored_resources().filter(|resource| resource.namespaced).cloned().collect();
        Ok(FinalizerReconciler { client, namespaces, contents, others })
    }

    /// The loop: one key per namespace, woken by namespace changes.
    pub fn into_loop(self) -> Loop {
        let source = ResourceFeed::objects(self.client.clone(), self.namespaces.clone());
        Loop::new("namespace-finalizer", self).source(source).resync(RESYNC).concurrency(2)
    }
}

#[async_trait::async_trait]
impl Reconciler for FinalizerReconciler {
    async fn reconcile(&self, key: &Key) -> Result<Action, ReconcileError> {
        let name = key.name();
        let namespace = match self.client.get(&self.namespaces, None, name).await {
            Ok(namespace) => namespace,
            Err(RegistryError::NotFound { .. }) => return Ok(Action::AwaitChange),
            Err(error) => return Err(error.into()),
        };
        if meta_str(&namespace, "deletionTimestamp").is_empty() {
            return Ok(Action::AwaitChange);
        }
        for other in &self.others {
            other.remove_all(name).await?;
        }
        let gone =
            self.client.layer().registry().finalize_namespace(&self.namespaces, &self.contents, name).await?;
        // Objects with finalizers of their own are waited for; their changes do not wake this
        // loop, so it looks again shortly.
        Ok(if gone { Action::AwaitChange } else { Action::RequeueAfter(EMPTYING) })
    }
}
