//! The namespace finalizer loop: every terminating namespace has its contents deleted and its
//! `kubernetes` finalizer removed, level-driven from what is stored (woken by namespace
//! changes, and every few seconds regardless).

use std::sync::Arc;
use std::time::Duration;

use kayra_apiserver::ApiState;
use kayra_registry::{ListOptions, Resource, WatchOptions, meta_str};

const RESYNC: Duration = Duration::from_secs(2);

/// Runs until the process ends.
/// Ends every catalog subscription of a namespace being deleted.
async fn unsubscribe_all(state: &ApiState, namespace: &str) -> Result<(), kayra_catalog::CatalogError> {
    let Some(catalog) = state.catalog() else { return Ok(()) };
    for subscription in catalog.all_subscriptions().await? {
        if subscription.object.namespace == namespace {
            match catalog.unsubscribe(namespace, &subscription.object.api).await {
                Ok(_) | Err(kayra_catalog::CatalogError::NotFound(_)) => {}
                Err(error) => return Err(error),
            }
        }
    }
    Ok(())
}

pub(crate) async fn run(state: Arc<ApiState>) {
    let scheme = state.scheme();
    let namespaces =
        state.resource_for(scheme.find("", "v1", "namespaces").expect("namespaces are served")).clone();
    let contents: Vec<Resource> = scheme
        .kinds()
        .iter()
        .filter(|k| k.namespaced && k.stored())
        .map(|k| state.resource_for(k).clone())
        .collect();
    let registry = state.registry().clone();
    let mut stream = None;
    loop {
        match registry.list(&namespaces, None, &ListOptions::default()).await {
            Ok(list) => {
                for namespace in list.items.iter().filter(|n| !meta_str(n, "deletionTimestamp").is_empty()) {
                    let name = meta_str(namespace, "name");
                    if let Err(error) = unsubscribe_all(&state, name).await {
                        tracing::warn!(%error, namespace = name, "ending a namespace's subscriptions failed; will retry");
                        continue;
                    }
                    if let Err(error) = registry.finalize_namespace(&namespaces, &contents, name).await {
                        tracing::warn!(%error, namespace = name, "finalizing a namespace failed; will retry");
                    }
                }
            }
            Err(error) => tracing::warn!(%error, "listing namespaces failed; will retry"),
        }
        if stream.is_none() {
            stream = registry.watch(&namespaces, &WatchOptions::default()).await.ok();
        }
        let woken = async {
            match stream.as_mut() {
                Some(stream) => stream.next().await.is_ok(),
                None => std::future::pending().await,
            }
        };
        match tokio::time::timeout(RESYNC, woken).await {
            Ok(true) | Err(_) => {}
            Ok(false) => stream = None,
        }
    }
}
