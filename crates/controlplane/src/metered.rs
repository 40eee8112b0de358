//! The store as the controller holds it: every operation timed by operation and engine, and
//! compactions counted, in the process's metrics registry; what the store answers is passed on
//! untouched. What the engine counts of its own work (the size of each group commit, its
//! background writes, the compactions it runs by itself) is read from it at each scrape.

use std::sync::Arc;
use std::time::{Duration, Instant};

use kayra_store::{
    EngineStatistics, Lease, LeaseId, RangeRequest, RangeResult, Revision, Store, StoreError, Txn, TxnResult,
    Watcher,
};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// One operation on one engine.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct OperationLabels {
    operation: &'static str,
    engine: &'static str,
}

fn durations() -> Histogram {
    // 50 µs to about 26 s.
    Histogram::new(exponential_buckets(0.00005, 2.0, 20))
}

/// A store whose operations are timed.
struct Metered {
    inner: Arc<dyn Store>,
    engine: &'static str,
    latency: Family<OperationLabels, Histogram, fn() -> Histogram>,
    compactions: Counter,
}

/// `store`, timed in `registry` as engine `engine` (`sled`, `etcd`, `memory`).
pub(crate) fn metered(
    store: Arc<dyn Store>,
    engine: &'static str,
    registry: &mut Registry,
) -> Arc<dyn Store> {
    let latency: Family<OperationLabels, Histogram, fn() -> Histogram> =
        Family::new_with_constructor(durations);
    let compactions = Counter::default();
    let prefix = registry.sub_registry_with_prefix("kayra_store");
    prefix.register(
        "operation_duration_seconds",
        "How long store operations take, by operation (get, range, txn, watch, compact, revision, lease) and engine",
        latency.clone(),
    );
    registry.register_collector(Box::new(EngineCollector {
        requested: compactions.clone(),
        engine: store.engine_statistics(),
    }));
    Arc::new(Metered { inner: store, engine, latency, compactions })
}

/// The store's own counts, read at each scrape: compactions (asked through the port, counted
/// by [`Metered`], and run by the engine itself) and the sizes of the engine's group commits.
#[derive(Debug)]
struct EngineCollector {
    requested: Counter,
    engine: Option<Arc<EngineStatistics>>,
}

impl Collector for EngineCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let automatic = self.engine.as_ref().map_or(0, |engine| engine.automatic_compactions());
        let compactions = encoder.encode_descriptor(
            "kayra_store_compactions",
            "History compactions, asked of the store or run by the embedded engine to bound its history",
            None,
            MetricType::Counter,
        )?;
        ConstCounter::new(self.requested.get() + automatic).encode(compactions)?;
        let Some(engine) = &self.engine else { return Ok(()) };
        let background = encoder.encode_descriptor(
            "kayra_store_background_writes",
            "Writes of the control loops that the embedded engine let ride the flushes of the API's writes",
            None,
            MetricType::Counter,
        )?;
        ConstCounter::new(engine.background_writes()).encode(background)?;
        let batches = engine.commit_batches();
        let buckets: Vec<(f64, u64)> = batches
            .buckets
            .iter()
            .map(|(bound, count)| (bound.map_or(f64::INFINITY, |bound| bound as f64), *count))
            .collect();
        let mut sizes = encoder.encode_descriptor(
            "kayra_store_commit_batch_size",
            "Writes each group commit of the embedded engine made durable together",
            None,
            MetricType::Histogram,
        )?;
        sizes.encode_histogram::<NoLabelSet>(batches.writes as f64, batches.commits, &buckets, None)
    }
}

impl Metered {
    fn observe(&self, operation: &'static str, started: Instant) {
        let labels = OperationLabels { operation, engine: self.engine };
        self.latency.get_or_create(&labels).observe(started.elapsed().as_secs_f64());
    }
}

#[async_trait::async_trait]
impl Store for Metered {
    async fn get(&self, key: &str) -> Result<Option<kayra_store::KeyValue>, StoreError> {
        let started = Instant::now();
        let answer = self.inner.get(key).await;
        self.observe("get", started);
        answer
    }

    async fn range(&self, request: &RangeRequest) -> Result<RangeResult, StoreError> {
        let started = Instant::now();
        let answer = self.inner.range(request).await;
        self.observe("range", started);
        answer
    }

    async fn txn(&self, txn: Txn) -> Result<TxnResult, StoreError> {
        let started = Instant::now();
        let answer = self.inner.txn(txn).await;
        self.observe("txn", started);
        answer
    }

    async fn txn_all(&self, txns: Vec<Txn>) -> Vec<Result<TxnResult, StoreError>> {
        let started = Instant::now();
        let answers = self.inner.txn_all(txns).await;
        self.observe("txn", started);
        answers
    }

    async fn watch(&self, prefix: &str, after: Revision) -> Result<Watcher, StoreError> {
        let started = Instant::now();
        let answer = self.inner.watch(prefix, after).await;
        self.observe("watch", started);
        answer
    }

    async fn compact(&self, revision: Revision) -> Result<(), StoreError> {
        let started = Instant::now();
        let answer = self.inner.compact(revision).await;
        self.observe("compact", started);
        if answer.is_ok() {
            self.compactions.inc();
        }
        answer
    }

    async fn revision(&self) -> Result<Revision, StoreError> {
        let started = Instant::now();
        let answer = self.inner.revision().await;
        self.observe("revision", started);
        answer
    }

    async fn grant_lease(&self, ttl: Duration) -> Result<Lease, StoreError> {
        let started = Instant::now();
        let answer = self.inner.grant_lease(ttl).await;
        self.observe("lease", started);
        answer
    }

    async fn keep_alive(&self, lease: LeaseId) -> Result<Duration, StoreError> {
        let started = Instant::now();
        let answer = self.inner.keep_alive(lease).await;
        self.observe("lease", started);
        answer
    }

    async fn revoke_lease(&self, lease: LeaseId) -> Result<(), StoreError> {
        let started = Instant::now();
        let answer = self.inner.revoke_lease(lease).await;
        self.observe("lease", started);
        answer
    }

    fn engine_statistics(&self) -> Option<Arc<EngineStatistics>> {
        self.inner.engine_statistics()
    }
}
