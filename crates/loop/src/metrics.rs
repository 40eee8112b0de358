//! The loops' metrics, registered once in the process's one metrics registry: reconciles by
//! outcome, how long they take, requeues, and how many keys wait.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// Labels naming a loop.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct LoopLabels {
    controller: String,
}

/// Labels naming a loop and how a reconcile ended.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct OutcomeLabels {
    controller: String,
    result: &'static str,
}

type Durations = Family<LoopLabels, Histogram, fn() -> Histogram>;

/// Every loop's metrics. Cheap to clone: clones share the series.
#[derive(Debug, Clone)]
pub struct Metrics {
    reconciles: Family<OutcomeLabels, Counter>,
    durations: Durations,
    requeues: Family<LoopLabels, Counter>,
    depth: Family<LoopLabels, Gauge>,
}

fn durations() -> Histogram {
    // 1 ms to about 33 s.
    Histogram::new(exponential_buckets(0.001, 2.0, 16))
}

impl Metrics {
    /// Registers the loops' metrics in `registry`.
    pub fn register(registry: &mut Registry) -> Metrics {
        let metrics = Metrics {
            reconciles: Family::default(),
            durations: Family::new_with_constructor(durations),
            requeues: Family::default(),
            depth: Family::default(),
        };
        let loops = registry.sub_registry_with_prefix("kayra_loop");
        loops.register(
            "reconciles",
            "Reconciles by loop and result (success, requeue, error)",
            metrics.reconciles.clone(),
        );
        loops.register(
            "reconcile_duration_seconds",
            "How long reconciles take, by loop",
            metrics.durations.clone(),
        );
        loops.register(
            "requeues",
            "Keys queued again after a failure or on request, by loop",
            metrics.requeues.clone(),
        );
        loops.register("queue_depth", "Keys waiting for a worker, by loop", metrics.depth.clone());
        metrics
    }

    /// The metrics of one loop.
    pub(crate) fn of(&self, name: &str) -> LoopMetrics {
        let labels = LoopLabels { controller: name.to_owned() };
        let outcome = |result| OutcomeLabels { controller: name.to_owned(), result };
        // One statement each: a family's lookup holds its lock until the statement ends.
        let success = self.reconciles.get_or_create(&outcome("success")).clone();
        let requeue = self.reconciles.get_or_create(&outcome("requeue")).clone();
        let error = self.reconciles.get_or_create(&outcome("error")).clone();
        let duration = self.durations.get_or_create(&labels).clone();
        let requeues = self.requeues.get_or_create(&labels).clone();
        let depth = self.depth.get_or_create(&labels).clone();
        LoopMetrics { success, requeue, error, duration, requeues, depth }
    }
}

/// One loop's series, resolved once.
#[derive(Debug, Clone)]
pub(crate) struct LoopMetrics {
    pub(crate) success: Counter,
    pub(crate) requeue: Counter,
    pub(crate) error: Counter,
    pub(crate) duration: Histogram,
    pub(crate) requeues: Counter,
    pub(crate) depth: Gauge,
}

impl LoopMetrics {
    /// Series registered nowhere, for a loop run without a metrics registry.
    pub(crate) fn unregistered() -> LoopMetrics {
        LoopMetrics {
            success: Counter::default(),
            requeue: Counter::default(),
            error: Counter::default(),
            duration: durations(),
            requeues: Counter::default(),
            depth: Gauge::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_loops_series_are_encoded_in_the_prometheus_text_format() {
        let mut registry = Registry::default();
        let metrics = Metrics::register(&mut registry);
        let one = metrics.of("namespaces");
        one.success.inc();
        one.error.inc_by(2);
        one.depth.set(3);
        one.duration.observe(0.002);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        for line in [
            "kayra_loop_reconciles_total{controller=\"namespaces\",result=\"success\"} 1",
            "kayra_loop_reconciles_total{controller=\"namespaces\",result=\"error\"} 2",
            "kayra_loop_queue_depth{controller=\"namespaces\"} 3",
            "kayra_loop_reconcile_duration_seconds_count{controller=\"namespaces\"} 1",
        ] {
            assert!(text.contains(line), "{line} missing from:\n{text}");
        }
    }
}
