//! One reconciliation pass: every active subscription behind its registration's sync_id (inside
//! the canary when one is pending) runs the registration's mode, once the registration's OpenAPI
//! document for that sync_id is stored. Level-driven: a pass reads what is stored and moves it
//! toward what should be, so a pass after a restart resumes wherever the store says things are.
//!
//! A document that cannot be fetched is asked for again on its own back-off ([`backoff`]), not
//! on every pass: meanwhile its subscriptions are not attempted, so their `last_attempt` is the
//! last fetch.

use std::time::{Duration, SystemTime};

use futures_util::StreamExt;
use kayra_store::{Compare, Op, Txn, TxnResult};
use serde::{Deserialize, Serialize};

use super::{Catalog, CatalogError, Stored, timestamp};
use crate::openapi::{self, ApiResource};
use crate::steps::{self, Outcome, ReconcilerConfig, StepContext, StepRunner};
use crate::{ApiRegistration, Subscription, SubscriptionState, due};

pub(super) mod backoff;

use backoff::{FetchBackoff, Occasion};

/// Fetches an API's OpenAPI document through the gateway.
#[async_trait::async_trait]
pub trait SpecFetcher: Send + Sync {
    /// GETs `url`; answers the status and at most `limit + 1` bytes of the body, or why there
    /// was no answer.
    async fn fetch(&self, url: &str, limit: usize) -> Result<(u16, Vec<u8>), String>;
}

/// What a registration's stored OpenAPI document serves, and the build it was fetched for. The
/// document itself is kept apart, byte for byte (see [`Catalog::document`]), so that discovery
/// reads only this.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredSpec {
    /// The sync_id it was fetched for.
    pub sync_id: String,
    /// The resources derived from its paths.
    pub resources: Vec<ApiResource>,
}

/// What one pass did, for the caller to report (as Events) and log.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    /// Each subscription attempted: namespace, api, and the failure if it failed.
    pub attempts: Vec<Attempt>,
    /// While a document that could not be fetched waits out its back-off: how soon the first
    /// of them may be fetched again, when a pass should run even if nothing changes.
    pub retry_after: Option<Duration>,
}

/// One subscription's attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attempt {
    /// The subscriber.
    pub namespace: String,
    /// The registration.
    pub api: String,
    /// The build attempted.
    pub sync_id: String,
    /// `None` on success, else why it failed.
    pub failure: Option<String>,
    /// Whether it failed for want of the registration's document: it is tried again when the
    /// document is fetched again ([`Report::retry_after`]), not sooner.
    pub awaits_document: bool,
    /// Whether the subscription's state or message changed (a repeated failure does not).
    pub changed: bool,
}

/// Where a registration's document for its build stands, for one pass.
enum Document {
    /// Stored: its subscriptions may be reconciled.
    Stored,
    /// Fetched just now, and the fetch failed: why, and when it may be fetched again.
    Failed { reason: String, retry_at: SystemTime },
    /// An earlier fetch failed and its back-off lasts until `until`: nothing is attempted.
    Waiting { until: SystemTime },
}

impl Report {
    /// Notes that a document may be fetched again at `at` (it is `now`).
    fn retry_at(&mut self, at: SystemTime, now: SystemTime) {
        let after = at.duration_since(now).unwrap_or_default();
        self.retry_after = Some(self.retry_after.map_or(after, |sooner| sooner.min(after)));
    }
}

impl Catalog {
    pub(super) fn spec_key(&self, name: &str) -> String {
        format!("{}{}{name}", self.folder("specs"), self.scope_path())
    }

    pub(super) fn document_key(&self, name: &str) -> String {
        format!("{}{}{name}", self.folder("documents"), self.scope_path())
    }

    /// What a registration's stored document serves, if one was fetched.
    pub async fn spec(&self, name: &str) -> Result<Option<StoredSpec>, CatalogError> {
        let key = self.spec_key(name);
        let Some(kv) = self.store.get(&key).await? else { return Ok(None) };
        decode_spec(&kv).map(Some)
    }

    /// What every registration of this scope with a stored document serves, by name, in one
    /// read.
    pub async fn specs(&self) -> Result<std::collections::BTreeMap<String, StoredSpec>, CatalogError> {
        let prefix = format!("{}{}", self.folder("specs"), self.scope_path());
        let range = self.store.range(&kayra_store::RangeRequest::prefix(&prefix)).await?;
        range.kvs.iter().map(|kv| Ok((kv.key[prefix.len()..].to_owned(), decode_spec(kv)?))).collect()
    }

    /// A registration's stored OpenAPI document, exactly as its app served it.
    pub async fn document(&self, name: &str) -> Result<Option<Vec<u8>>, CatalogError> {
        Ok(self.store.get(&self.document_key(name)).await?.map(|kv| kv.value))
    }

    /// Reconciles every due subscription of this scope, `concurrency` at a time.
    pub async fn reconcile(
        &self,
        config: &ReconcilerConfig,
        fetcher: &dyn SpecFetcher,
        runner: &dyn StepRunner,
        concurrency: usize,
    ) -> Result<Report, CatalogError> {
        let mut report = Report::default();
        // One read of every subscription for the whole pass, grouped by the API they name.
        let mut subscriptions: std::collections::HashMap<String, Vec<Stored<Subscription>>> =
            std::collections::HashMap::new();
        for subscription in self.all_subscriptions().await? {
            subscriptions.entry(subscription.object.api.clone()).or_default().push(subscription);
        }
        let registrations = self.registrations().await?;
        self.backoff().retain(|name| registrations.iter().any(|stored| stored.object.name == name));
        for stored in registrations {
            let registration = stored.object;
            if registration.sync_id.is_empty() {
                continue;
            }
            let subscribers = subscriptions.remove(&registration.name).unwrap_or_default();
            let occasion = Occasion {
                sync_id: registration.sync_id.clone(),
                revision: stored.revision,
                subscriptions: subscribers
                    .iter()
                    .map(|s| {
                        let uid =
                            s.metadata.get("uid").and_then(serde_json::Value::as_str).unwrap_or_default();
                        (s.object.namespace.clone(), uid.to_owned(), s.object.active)
                    })
                    .collect(),
            };
            let (due_now, waiting): (Vec<Stored<Subscription>>, Vec<Stored<Subscription>>) = subscribers
                .into_iter()
                .filter(|subscription| subscription.object.active)
                .filter(|subscription| subscription.object.status.current_sync_id != registration.sync_id)
                .partition(|subscription| due(&registration, &subscription.object));
            // Those a canary holds back show the build they wait for.
            for subscription in waiting {
                if subscription.object.status.expected_sync_id != registration.sync_id {
                    self.expect(&subscription.object.namespace, &registration.name, &registration.sync_id)
                        .await?;
                }
            }
            // The document is fetched whenever the build changes, subscribers or not.
            let spec = match self.ensure_spec(&registration, occasion, config, fetcher).await? {
                Document::Stored => Ok(()),
                Document::Failed { reason, retry_at } => {
                    report.retry_at(retry_at, self.clock.now());
                    Err(reason)
                }
                // Nothing is attempted until the document may be fetched again.
                Document::Waiting { until } => {
                    report.retry_at(until, self.clock.now());
                    continue;
                }
            };
            if due_now.is_empty() {
                continue;
            }
            let attempts = futures_util::stream::iter(due_now)
                .map(|subscription| {
                    let registration = &registration;
                    let spec = &spec;
                    async move {
                        let failure = match spec {
                            Err(reason) => Some(reason.clone()),
                            Ok(()) => {
                                let gateway = config.gateway_url.as_deref().unwrap_or_default();
                                let context =
                                    StepContext { registration, subscription: &subscription.object, gateway };
                                match steps::run(config, &context, runner).await {
                                    Outcome::Success => None,
                                    Outcome::Failed(reason) => Some(reason),
                                }
                            }
                        };
                        let mut attempt = Attempt {
                            namespace: subscription.object.namespace.clone(),
                            api: registration.name.clone(),
                            sync_id: registration.sync_id.clone(),
                            awaits_document: spec.is_err(),
                            failure,
                            changed: false,
                        };
                        self.record(&mut attempt).await.map(|()| attempt)
                    }
                })
                .buffer_unordered(concurrency.max(1))
                .collect::<Vec<_>>()
                .await;
            for attempt in attempts {
                report.attempts.push(attempt?);
            }
        }
        report.attempts.sort_by(|a, b| (&a.api, &a.namespace).cmp(&(&b.api, &b.namespace)));
        Ok(report)
    }

    /// Makes sure the registration's document for its sync_id is stored, fetching it once,
    /// unless an earlier fetch for the same `occasion` failed and its back-off is not over.
    async fn ensure_spec(
        &self,
        registration: &ApiRegistration,
        occasion: Occasion,
        config: &ReconcilerConfig,
        fetcher: &dyn SpecFetcher,
    ) -> Result<Document, CatalogError> {
        let name = registration.name.as_str();
        if self.spec(name).await?.is_some_and(|spec| spec.sync_id == registration.sync_id) {
            self.backoff().succeeded(name);
            return Ok(Document::Stored);
        }
        if let Some(until) = self.backoff().wait_until(name, &occasion, self.clock.now()) {
            return Ok(Document::Waiting { until });
        }
        match self.fetch(registration, config, fetcher).await? {
            Ok(()) => {
                self.backoff().succeeded(name);
                Ok(Document::Stored)
            }
            Err(reason) => {
                let retry_at = self.backoff().failed(name, occasion, self.clock.now());
                Ok(Document::Failed { reason, retry_at })
            }
        }
    }

    /// The fetch back-off, for a moment: never held across a wait.
    fn backoff(&self) -> std::sync::MutexGuard<'_, FetchBackoff> {
        self.fetches.lock().expect("the fetch back-off's lock is never held across a panic")
    }

    /// Fetches the registration's document for its sync_id and stores it; `Err` with the reason
    /// when it cannot be had (nothing is stored then).
    async fn fetch(
        &self,
        registration: &ApiRegistration,
        config: &ReconcilerConfig,
        fetcher: &dyn SpecFetcher,
    ) -> Result<Result<(), String>, CatalogError> {
        let Some(gateway) = config.gateway_url.as_deref().filter(|url| !url.is_empty()) else {
            return Ok(Err(
                "the OpenAPI document cannot be fetched: reconciler.gateway_url is not set".to_owned()
            ));
        };
        let url = format!("{}/apis/{}/-/openapi.json", gateway.trim_end_matches('/'), registration.name);
        let document = match fetcher.fetch(&url, openapi::MAX_DOCUMENT).await {
            Err(reason) => return Ok(Err(format!("fetching {url}: {reason}"))),
            Ok((200, body)) => body,
            Ok((status, _)) => return Ok(Err(format!("fetching {url}: answered {status}"))),
        };
        let resources = match openapi::resources(&registration.name, &document) {
            Ok(resources) => resources,
            Err(error) => return Ok(Err(format!("fetching {url}: {error}"))),
        };
        let spec = StoredSpec { sync_id: registration.sync_id.clone(), resources };
        let value = serde_json::to_vec(&spec).expect("a spec serializes");
        let txn = Txn {
            compares: Vec::new(),
            ops: vec![
                Op::put(self.document_key(&registration.name), document),
                Op::put(self.spec_key(&registration.name), value),
            ],
        };
        self.store.txn(txn).await?;
        Ok(Ok(()))
    }

    /// Sets the build a subscription waits for, leaving the rest as it is.
    async fn expect(&self, namespace: &str, api: &str, sync_id: &str) -> Result<(), CatalogError> {
        let key = self.subscription_key(namespace, api);
        for _ in 0..super::RETRIES {
            let current = match self.subscription(namespace, api).await {
                Ok(current) => current,
                Err(CatalogError::NotFound(_)) => return Ok(()),
                Err(error) => return Err(error),
            };
            let mut next = current.object.clone();
            next.status.expected_sync_id = sync_id.to_owned();
            let value = super::encode(&self.api_version(), "Subscription", &next, &current.metadata);
            let txn = Txn {
                compares: vec![Compare::ModifiedAt(key.clone(), current.revision)],
                ops: vec![Op::put(&key, value)],
            };
            if let TxnResult::Applied { .. } = self.store.txn(txn).await? {
                return Ok(());
            }
        }
        Err(CatalogError::Conflict(format!("subscription {api} in {namespace} kept changing")))
    }

    /// Writes an attempt's result into its subscription, unless the subscription went away.
    async fn record(&self, attempt: &mut Attempt) -> Result<(), CatalogError> {
        let key = self.subscription_key(&attempt.namespace, &attempt.api);
        for _ in 0..super::RETRIES {
            let current = match self.subscription(&attempt.namespace, &attempt.api).await {
                Ok(current) => current,
                Err(CatalogError::NotFound(_)) => return Ok(()),
                Err(error) => return Err(error),
            };
            let mut next = current.object.clone();
            let before = (
                current.object.status.state.clone(),
                current.object.status.current_sync_id.clone(),
                current.object.status.message.clone(),
            );
            next.status = SubscriptionState {
                state: if attempt.failure.is_some() { "error" } else { "success" }.to_owned(),
                current_sync_id: match attempt.failure {
                    Some(_) => current.object.status.current_sync_id.clone(),
                    None => attempt.sync_id.clone(),
                },
                expected_sync_id: attempt.sync_id.clone(),
                message: attempt.failure.clone().unwrap_or_default(),
                last_attempt: timestamp(self.clock.now()),
            };
            let value = super::encode(&self.api_version(), "Subscription", &next, &current.metadata);
            let txn = Txn {
                compares: vec![Compare::ModifiedAt(key.clone(), current.revision)],
                ops: vec![Op::put(&key, value)],
            };
            if let TxnResult::Applied { .. } = self.store.txn(txn).await? {
                let after = (next.status.state, next.status.current_sync_id, next.status.message);
                attempt.changed = before != after;
                return Ok(());
            }
        }
        Err(CatalogError::Conflict(format!(
            "subscription {} in {} kept changing",
            attempt.api, attempt.namespace
        )))
    }
}

fn decode_spec(kv: &kayra_store::KeyValue) -> Result<StoredSpec, CatalogError> {
    serde_json::from_slice(&kv.value)
        .map_err(|error| CatalogError::Corrupt { key: kv.key.clone(), reason: error.to_string() })
}

#[cfg(test)]
mod tests;
