//! The scheduler's series, with kube-scheduler's names: attempts by result, how long an
//! attempt takes to decide, and how many Applications wait in its queue.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// How an attempt ended: `scheduled`, `unschedulable` (it fits nowhere) or `error` (its bind
/// failed).
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub(crate) struct ResultLabels {
    pub(crate) result: &'static str,
}

fn durations() -> Histogram {
    // 10 µs to about 5 s.
    Histogram::new(exponential_buckets(0.00001, 2.0, 20))
}

/// The scheduler's series. Cheap to clone: clones share them.
#[derive(Debug, Clone)]
pub struct SchedulerMetrics {
    pub(crate) attempts: Family<ResultLabels, Counter>,
    pub(crate) duration: Family<ResultLabels, Histogram, fn() -> Histogram>,
    pub(crate) pending: Gauge,
}

impl Default for SchedulerMetrics {
    /// Series registered nowhere.
    fn default() -> SchedulerMetrics {
        SchedulerMetrics {
            attempts: Family::default(),
            duration: Family::new_with_constructor(durations),
            pending: Gauge::default(),
        }
    }
}

impl SchedulerMetrics {
    /// Registers the scheduler's series in `registry`.
    pub fn register(registry: &mut Registry) -> SchedulerMetrics {
        let metrics = SchedulerMetrics::default();
        let scheduler = registry.sub_registry_with_prefix("scheduler");
        scheduler.register(
            "schedule_attempts",
            "Attempts to place an Application, by result (scheduled, unschedulable, error)",
            metrics.attempts.clone(),
        );
        scheduler.register(
            "scheduling_attempt_duration_seconds",
            "How long an attempt takes to decide (filter, score, reserve), by result",
            metrics.duration.clone(),
        );
        scheduler.register(
            "pending_pods",
            "Applications waiting in the scheduler's queue to be placed",
            metrics.pending.clone(),
        );
        metrics
    }

    /// Counts an attempt that ended as `result` after `seconds` of deciding.
    pub(crate) fn attempt(&self, result: &'static str, seconds: f64) {
        let labels = ResultLabels { result };
        self.attempts.get_or_create(&labels).inc();
        self.duration.get_or_create(&labels).observe(seconds);
    }
}
