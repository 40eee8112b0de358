//! The catalog's reconciler as this service runs it: the very loop Kayra's controller runs
//! ([`kayra_catalog::reconciler`]: a pass on every change to the catalog and on a period,
//! backing off while passes fail, under an election so replicas sharing a store take turns),
//! with Kayra's plain-HTTP adapters for fetching documents and sending steps
//! ([`kayra_client::gateway::Http`]), and its Events written to this service's log.

use std::sync::Arc;
use std::time::Duration;

use kayra_catalog::Catalog;
use kayra_catalog::reconciler::{Events, Reconciler, SubscriptionEvent};
use kayra_catalog::steps::ReconcilerConfig;
use kayra_client::gateway::Http;
use kayra_loop::runtime::Loop;

/// The reconciler's Events, as log lines.
#[derive(Debug, Clone, Copy, Default)]
pub struct LoggedEvents;

#[async_trait::async_trait]
impl Events for LoggedEvents {
    async fn record(&self, event: &SubscriptionEvent) {
        let (namespace, api) = (&event.namespace, &event.subscription);
        if event.warning {
            tracing::warn!(%namespace, %api, reason = event.reason, "{}", event.message);
        } else {
            tracing::info!(%namespace, %api, reason = event.reason, "{}", event.message);
        }
    }
}

/// The reconciler loop of `catalog`, resyncing every `period`, telling `events` what changed.
/// A rustls crypto provider must be installed first (`main` installs ring's).
pub fn reconciler(
    catalog: Arc<Catalog>,
    config: ReconcilerConfig,
    events: Arc<dyn Events>,
    period: Duration,
) -> Result<Loop, Box<dyn std::error::Error + Send + Sync>> {
    let http = Arc::new(Http::new()?);
    let candidate = format!("embed-catalog-{}", std::process::id());
    Ok(Reconciler::new(catalog, config, http.clone(), http, events).into_loop(candidate).resync(period))
}
