//! The catalog's reconciler as a loop on the loop runtime: one reconciliation pass of this
//! instance's scope whenever anything in the catalog changes, every half minute regardless, and
//! after a pass whose steps failed not before its backoff (2 s doubling to 5 min). A document
//! that cannot be fetched is not the pass's failure: it is fetched again on its own back-off
//! (5 s doubling to 5 min, per registration and build, started over by a change to the
//! registration or its subscriptions), and the pass runs again when that is over. Of several
//! replicas sharing a store, the one leading the scope's election reconciles. Each attempt that
//! changes a subscription's state is told to the embedder's [`Events`] port.

use std::sync::Arc;
use std::time::Duration;

use kayra_loop::election::Election;
use kayra_loop::queue::Backoff;
use kayra_loop::runtime::Loop;
use kayra_loop::source::{Fixed, ListWatch, StoreFeed};
use kayra_loop::{Action, Key, ReconcileError};

use crate::steps::{ReconcilerConfig, StepRunner};
use crate::{Attempt, Catalog, SpecFetcher};

/// How often a pass runs with nothing changed.
const RESYNC: Duration = Duration::from_secs(30);

/// How failing passes are spaced out.
const BACKOFF: Backoff = Backoff { first: Duration::from_secs(2), max: Duration::from_secs(300) };

/// How many subscribers are reconciled at once.
const CONCURRENCY: usize = 16;

/// How long a crashed leader's reconciler keeps others waiting.
const LEADERSHIP_TTL: Duration = Duration::from_secs(15);

/// The one key of the loop: a pass covers the whole scope.
const PASS: &str = "pass";

/// Something worth telling an operator about a subscription.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubscriptionEvent {
    /// The subscriber's namespace.
    pub namespace: String,
    /// The subscription's name: the registered API.
    pub subscription: String,
    /// `catalog.<domain>/v1`.
    pub api_version: String,
    /// Whether it went wrong.
    pub warning: bool,
    /// `Synced` or `SyncFailed`.
    pub reason: &'static str,
    /// What happened.
    pub message: String,
}

/// Where the reconciler's Events go (Kayra writes core `v1` Events).
#[async_trait::async_trait]
pub trait Events: Send + Sync + 'static {
    /// Records one Event; a failure to record is the recorder's to log.
    async fn record(&self, event: &SubscriptionEvent);
}

/// The reconciler: one pass per wake-up.
pub struct Reconciler {
    catalog: Arc<Catalog>,
    config: ReconcilerConfig,
    fetcher: Arc<dyn SpecFetcher>,
    runner: Arc<dyn StepRunner>,
    events: Arc<dyn Events>,
}

impl std::fmt::Debug for Reconciler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reconciler").field("config", &self.config).finish_non_exhaustive()
    }
}

impl Reconciler {
    /// The reconciler of `catalog`'s scope, fetching documents through `fetcher`, running
    /// steps through `runner`, telling `events` what changed.
    pub fn new(
        catalog: Arc<Catalog>,
        config: ReconcilerConfig,
        fetcher: Arc<dyn SpecFetcher>,
        runner: Arc<dyn StepRunner>,
        events: Arc<dyn Events>,
    ) -> Reconciler {
        Reconciler { catalog, config, fetcher, runner, events }
    }

    /// The loop, campaigning as `candidate` in the scope's election.
    pub fn into_loop(self, candidate: impl Into<String>) -> Loop {
        let store = self.catalog.store();
        let key = Key::new(PASS);
        let every_change = {
            let key = key.clone();
            Arc::new(move |_: &kayra_store::KeyValue| vec![key.clone()])
        };
        let changes =
            ListWatch::new(StoreFeed::new(store.clone(), self.catalog.changes_prefix(), every_change));
        let election =
            Election::new(store, self.catalog.election_key("catalog-reconciler"), candidate, LEADERSHIP_TTL);
        Loop::new("catalog-reconciler", self)
            .source(Fixed::new([key]))
            .source(changes)
            .resync(RESYNC)
            .backoff(BACKOFF)
            .changes_wait_out_backoff()
            .elected(election)
    }

    fn event(&self, attempt: &Attempt) -> SubscriptionEvent {
        let (warning, reason, message) = match &attempt.failure {
            None => (false, "Synced", format!("reconciled to {} {}", attempt.api, attempt.sync_id)),
            Some(failure) => {
                (true, "SyncFailed", format!("reconciling to {} {}: {failure}", attempt.api, attempt.sync_id))
            }
        };
        SubscriptionEvent {
            namespace: attempt.namespace.clone(),
            subscription: attempt.api.clone(),
            api_version: self.catalog.api_version(),
            warning,
            reason,
            message,
        }
    }
}

/// Why a pass counts as failed.
#[derive(Debug, thiserror::Error)]
#[error("{failed} of {attempted} subscriptions failed to reconcile")]
struct FailedAttempts {
    failed: usize,
    attempted: usize,
}

#[async_trait::async_trait]
impl kayra_loop::Reconciler for Reconciler {
    async fn reconcile(&self, _key: &Key) -> Result<Action, ReconcileError> {
        let report = self
            .catalog
            .reconcile(&self.config, self.fetcher.as_ref(), self.runner.as_ref(), CONCURRENCY)
            .await?;
        // An Event when a subscription's state changes; a repeated failure is not news.
        for attempt in report.attempts.iter().filter(|attempt| attempt.changed) {
            self.events.record(&self.event(attempt)).await;
        }
        // A step that failed is retried on the pass's backoff; an attempt that waits for its
        // document, when the document's own back-off is over.
        let failed = report
            .attempts
            .iter()
            .filter(|attempt| attempt.failure.is_some() && !attempt.awaits_document)
            .count();
        if failed > 0 {
            return Err(FailedAttempts { failed, attempted: report.attempts.len() }.into());
        }
        Ok(report.retry_after.map_or(Action::AwaitChange, Action::RequeueAfter))
    }
}

#[cfg(test)]
mod tests;
