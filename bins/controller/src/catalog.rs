//! The catalog's reconciler: a loop that runs a reconciliation pass whenever anything in the
//! catalog changes (and every half minute regardless, so a failed fetch or step is retried),
//! with HTTP adapters for its ports, and an Event per attempt in the subscriber's namespace.

use std::sync::Arc;
use std::time::Duration;

use kayra_apiserver::ApiState;
use kayra_catalog::steps::{ReconcilerConfig, StepRequest, StepRunner};
use kayra_catalog::{Attempt, Catalog, SpecFetcher};
use kayra_registry::WriteOptions;
use serde_json::json;

/// How often a pass runs with nothing changed.
const RESYNC: Duration = Duration::from_secs(30);

/// The first pause after a pass with failures; it doubles up to [`MAX_BACKOFF`] while passes
/// keep failing, so that a broken gateway or step is retried, not hammered.
const FIRST_BACKOFF: Duration = Duration::from_secs(2);

/// The longest pause between failing passes.
const MAX_BACKOFF: Duration = Duration::from_secs(300);

/// How many subscribers are reconciled at once.
const CONCURRENCY: usize = 16;

/// How long fetching a document may take.
const FETCH_TIMEOUT: Duration = Duration::from_secs(30);

/// Plain HTTP(S) for documents and steps, to the gateway and whatever steps name.
struct Http(reqwest::Client);

#[async_trait::async_trait]
impl SpecFetcher for Http {
    async fn fetch(&self, url: &str, limit: usize) -> Result<(u16, Vec<u8>), String> {
        let mut response = self.0.get(url).timeout(FETCH_TIMEOUT).send().await.map_err(|e| e.to_string())?;
        let status = response.status().as_u16();
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(|e| e.to_string())? {
            body.extend_from_slice(&chunk);
            if body.len() > limit {
                break;
            }
        }
        Ok((status, body))
    }
}

#[async_trait::async_trait]
impl StepRunner for Http {
    async fn send(&self, request: &StepRequest) -> Result<u16, String> {
        let method = reqwest::Method::from_bytes(request.method.as_bytes()).map_err(|e| e.to_string())?;
        let mut builder = self.0.request(method, &request.url).timeout(request.timeout);
        for (name, value) in &request.headers {
            builder = builder.header(name, value);
        }
        if !request.body.is_empty() {
            builder = builder.body(request.body.clone());
        }
        let response = builder.send().await.map_err(|e| e.to_string())?;
        Ok(response.status().as_u16())
    }
}

/// How long a crashed leader's reconciler keeps others waiting.
const LEADERSHIP_TTL: Duration = Duration::from_secs(15);

/// Runs passes while this replica leads its scope's reconciler (so of several replicas sharing
/// a store, one reconciles at a time), until the process ends.
pub(crate) async fn run(state: Arc<ApiState>, catalog: Arc<Catalog>, config: ReconcilerConfig) {
    // Redirects are not followed: a document or a step answers where it was asked.
    let http = match reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build() {
        Ok(client) => Http(client),
        Err(error) => {
            tracing::error!(%error, "the catalog reconciler has no HTTP client and does not run");
            return;
        }
    };
    let candidate = format!("{}-{}", std::process::id(), uuid::Uuid::new_v4());
    let election = kayra_loop::Election::new(
        catalog.store(),
        catalog.election_key("catalog-reconciler"),
        candidate,
        LEADERSHIP_TTL,
    );
    loop {
        let mut leadership = match election.campaign().await {
            Ok(leadership) => leadership,
            Err(error) => {
                tracing::warn!(%error, "campaigning to lead the catalog reconciler failed; trying again");
                tokio::time::sleep(RESYNC).await;
                continue;
            }
        };
        tokio::select! {
            () = passes(&state, &catalog, &config, &http) => {}
            () = leadership.lost() => tracing::warn!("the catalog reconciler lost its leadership; campaigning again"),
        }
    }
}

/// Reconciliation passes, on every change and every [`RESYNC`], backing off while they fail.
async fn passes(state: &ApiState, catalog: &Catalog, config: &ReconcilerConfig, http: &Http) {
    let mut backoff = Duration::ZERO;
    loop {
        if !backoff.is_zero() {
            tokio::time::sleep(backoff).await;
        }
        let mut changes = match catalog.changes().await {
            Ok(changes) => Some(changes),
            Err(error) => {
                tracing::warn!(%error, "cannot watch the catalog; reconciling on a timer only");
                None
            }
        };
        match catalog.reconcile(config, http, http, CONCURRENCY).await {
            Ok(report) => {
                // An Event when a subscription's state changes; a repeated failure is not news.
                for attempt in report.attempts.iter().filter(|attempt| attempt.changed) {
                    record_event(state, catalog, attempt).await;
                }
                backoff = if report.attempts.iter().any(|attempt| attempt.failure.is_some()) {
                    (backoff * 2).clamp(FIRST_BACKOFF, MAX_BACKOFF)
                } else {
                    Duration::ZERO
                };
            }
            Err(error) => {
                tracing::warn!(%error, "a catalog reconciliation pass failed");
                backoff = (backoff * 2).clamp(FIRST_BACKOFF, MAX_BACKOFF);
            }
        }
        match &mut changes {
            Some(changes) => {
                let _ = tokio::time::timeout(RESYNC, changes.next()).await;
            }
            None => tokio::time::sleep(RESYNC).await,
        }
    }
}

/// An Event on the subscription: `Synced`, or `SyncFailed` with the reason.
async fn record_event(state: &ApiState, catalog: &Catalog, attempt: &Attempt) {
    let Some(kind) = state.scheme().find("", "v1", "events") else { return };
    let (kind_of, reason, message) = match &attempt.failure {
        None => ("Normal", "Synced", format!("reconciled to {} {}", attempt.api, attempt.sync_id)),
        Some(failure) => (
            "Warning",
            "SyncFailed",
            format!("reconciling to {} {}: {failure}", attempt.api, attempt.sync_id),
        ),
    };
    let now = jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string();
    let event = json!({
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"generateName": format!("{}.", attempt.api), "namespace": attempt.namespace},
        "involvedObject": {"apiVersion": catalog.api_version(), "kind": "Subscription", "name": attempt.api, "namespace": attempt.namespace},
        "reason": reason, "message": message, "type": kind_of,
        "source": {"component": "kayra-catalog-reconciler"},
        "firstTimestamp": now, "lastTimestamp": now, "count": 1,
    });
    let resource = state.resource_for(kind);
    if let Err(error) =
        state.registry().create(resource, Some(&attempt.namespace), event, WriteOptions::default()).await
    {
        tracing::debug!(%error, namespace = %attempt.namespace, "the reconciler's event was not recorded");
    }
}
