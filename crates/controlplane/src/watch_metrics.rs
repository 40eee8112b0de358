//! The watch caches' series, read from the registry at each scrape: per resource (labelled by
//! API group and plural, as many series as stored resources), the revision each cache has
//! reached and the oldest one it can resume a watch from, the changes its window holds and
//! what they weigh, its capacity, and the changes it has received. Kubernetes' names where
//! kube-apiserver's cacher exposes the same thing.

use kayra_registry::{Registry, WatchCacheStatus};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

/// Reads the registry's watch caches at each scrape.
#[derive(Debug)]
pub(crate) struct WatchCacheCollector {
    pub(crate) registry: Registry,
}

/// One resource's cache.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct CacheLabels {
    group: String,
    resource: String,
}

/// A gauge family: its name, help and how each cache's value is read.
type GaugeFamily = (&'static str, &'static str, fn(&WatchCacheStatus) -> i64);

const GAUGES: [GaugeFamily; 5] = [
    (
        "apiserver_watch_cache_resource_version",
        "The revision a resource's watch cache has applied every change up to",
        |status| as_i64(status.revision),
    ),
    (
        "kayra_watch_cache_oldest_resource_version",
        "The oldest revision a resource's watch cache resumes a watch from; older ones are expired",
        |status| as_i64(status.oldest_revision),
    ),
    (
        "kayra_watch_cache_events",
        "Changes a resource's watch cache holds for watches resuming from a revision",
        |status| as_i64(status.events as u64),
    ),
    (
        "kayra_watch_cache_window_bytes",
        "What the changes a resource's watch cache holds weigh, in bytes of stored objects",
        |status| as_i64(status.window_bytes as u64),
    ),
    ("watch_cache_capacity", "The most changes a resource's watch cache holds", |status| {
        as_i64(status.capacity as u64)
    }),
];

fn as_i64(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

impl Collector for WatchCacheCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let mut caches: Vec<(CacheLabels, WatchCacheStatus)> = self
            .registry
            .watch_caches()
            .into_iter()
            .map(|status| {
                (CacheLabels { group: status.group.clone(), resource: status.resource.clone() }, status)
            })
            .collect();
        caches.sort_by(|a, b| (&a.0.group, &a.0.resource).cmp(&(&b.0.group, &b.0.resource)));
        for (name, help, read) in GAUGES {
            let mut family = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
            for (labels, status) in &caches {
                ConstGauge::new(read(status)).encode(family.encode_family(labels)?)?;
            }
        }
        let mut received = encoder.encode_descriptor(
            "apiserver_watch_cache_events_received",
            "Changes a resource's watch cache received from the store",
            None,
            MetricType::Counter,
        )?;
        for (labels, status) in &caches {
            ConstCounter::new(status.received).encode(received.encode_family(labels)?)?;
        }
        Ok(())
    }
}
