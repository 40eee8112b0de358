//! The node side's series: sessions open, heartbeats, desired states pushed and how long each
//! took to compute and hand over, and what every workload and node consumes, read from the
//! samples this replica's sessions hold at each scrape. Workload series are labelled by
//! namespace, application and node, and node series by node: as many as what runs, no more.

use std::sync::{Arc, Weak};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::family::Family as Series;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::{Inner, NodeServer};

/// The counters the sessions and the push loop move.
#[derive(Debug, Clone)]
pub(crate) struct FleetMetrics {
    pub(crate) heartbeats: Counter,
    pub(crate) pushes: Counter,
    pub(crate) push_duration: Histogram,
    streams_opened: Series<StreamLabels, Counter>,
    streams_open: Series<StreamLabels, Gauge>,
    stream_bytes: Series<StreamBytesLabels, Counter>,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct StreamLabels {
    kind: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct StreamBytesLabels {
    kind: &'static str,
    direction: &'static str,
}

impl FleetMetrics {
    /// A stream of `kind` (`exec`, `attach`, `portforward`) opened.
    pub(crate) fn streams_opened(&self, kind: &'static str) {
        self.streams_opened.get_or_create(&StreamLabels { kind }).inc();
        self.streams_open.get_or_create(&StreamLabels { kind }).inc();
    }

    /// A stream of `kind` closed.
    pub(crate) fn streams_closed(&self, kind: &'static str) {
        self.streams_open.get_or_create(&StreamLabels { kind }).dec();
    }

    /// `bytes` went through a stream of `kind`, `in` (to the process) or `out` (to the client).
    pub(crate) fn stream_bytes(&self, kind: &'static str, direction: &'static str, bytes: usize) {
        self.stream_bytes.get_or_create(&StreamBytesLabels { kind, direction }).inc_by(bytes as u64);
    }
}

impl Default for FleetMetrics {
    fn default() -> FleetMetrics {
        FleetMetrics {
            heartbeats: Counter::default(),
            pushes: Counter::default(),
            // 10 µs to about 5 s.
            push_duration: Histogram::new(exponential_buckets(0.00001, 2.0, 20)),
            streams_opened: Series::default(),
            streams_open: Series::default(),
            stream_bytes: Series::default(),
        }
    }
}

impl NodeServer {
    /// Registers the node side's series in `registry`.
    pub fn register_metrics(&self, registry: &mut Registry) {
        let metrics = &self.inner.metrics;
        let node = registry.sub_registry_with_prefix("kayra_node");
        node.register("heartbeats", "Node status reports (heartbeats) received", metrics.heartbeats.clone());
        node.register("pushes", "Desired states sent to nodes", metrics.pushes.clone());
        node.register(
            "push_duration_seconds",
            "How long a node's desired state takes to compute and hand to its session",
            metrics.push_duration.clone(),
        );
        let streams = registry.sub_registry_with_prefix("kayra_stream");
        streams.register(
            "opened",
            "Exec, attach and port-forward streams opened to nodes, by kind",
            metrics.streams_opened.clone(),
        );
        streams.register(
            "open",
            "Exec, attach and port-forward streams open now, by kind",
            metrics.streams_open.clone(),
        );
        streams.register(
            "bytes",
            "Bytes relayed by exec, attach and port-forward streams, by kind and direction (in: to the process)",
            metrics.stream_bytes.clone(),
        );
        registry.register_collector(Box::new(Usage { inner: Arc::downgrade(&self.inner) }));
    }
}

/// Reads the sessions at each scrape.
#[derive(Debug)]
struct Usage {
    inner: Weak<Inner>,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct WorkloadLabels {
    namespace: String,
    application: String,
    node: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct NodeLabels {
    node: String,
}

/// One family: its name, help, type, and each series' labels and value.
struct Family<L> {
    name: &'static str,
    help: &'static str,
    counter: bool,
    series: Vec<(L, f64)>,
}

impl<L: EncodeLabelSet> Family<L> {
    fn new(name: &'static str, help: &'static str, counter: bool) -> Family<L> {
        Family { name, help, counter, series: Vec::new() }
    }

    fn encode(&self, encoder: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let kind = if self.counter { MetricType::Counter } else { MetricType::Gauge };
        let mut family = encoder.encode_descriptor(self.name, self.help, None, kind)?;
        for (labels, value) in &self.series {
            let series = family.encode_family(labels)?;
            match self.counter {
                true => ConstCounter::new(*value).encode(series)?,
                false => ConstGauge::new(*value).encode(series)?,
            }
        }
        Ok(())
    }
}

impl Collector for Usage {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let Some(inner) = self.inner.upgrade() else { return Ok(()) };
        let sessions: Vec<_> = inner.sessions().values().cloned().collect();
        let sessions_open = sessions.len();
        let mut cpu =
            Family::new("kayra_workload_cpu_seconds", "CPU time a workload used since it started", true);
        let mut throttled = Family::new(
            "kayra_workload_cpu_throttled_seconds",
            "Time a workload's CPU limit held it back",
            true,
        );
        let mut memory =
            Family::new("kayra_workload_memory_working_set_bytes", "Memory a workload has in use", false);
        let mut peak =
            Family::new("kayra_workload_memory_peak_bytes", "The most memory a workload had in use", false);
        let mut pids = Family::new("kayra_workload_pids", "Processes and threads of a workload", false);
        let mut ooms = Family::new(
            "kayra_workload_oom_kills",
            "Processes of a workload the kernel killed for memory",
            true,
        );
        let mut restarts =
            Family::new("kayra_workload_restarts", "Times a workload's process was started again", true);
        let mut node_cpu =
            Family::new("kayra_node_cpu_seconds", "CPU time the node's host used, all of it", true);
        let mut node_used =
            Family::new("kayra_node_memory_used_bytes", "Memory in use on the node's host", false);
        let mut node_total = Family::new("kayra_node_memory_total_bytes", "Memory of the node's host", false);
        for live in sessions {
            let usage = live.usage();
            for ((namespace, name), samples) in usage.iter() {
                let sample = &samples.latest;
                if name.is_empty() {
                    let labels = NodeLabels { node: live.node.clone() };
                    node_cpu.series.push((labels.clone(), sample.cpu_usage_usec as f64 / 1e6));
                    node_used.series.push((labels.clone(), sample.memory_bytes as f64));
                    node_total.series.push((labels, sample.memory_total_bytes as f64));
                    continue;
                }
                let labels = WorkloadLabels {
                    namespace: namespace.clone(),
                    application: name.clone(),
                    node: live.node.clone(),
                };
                cpu.series.push((labels.clone(), sample.cpu_usage_usec as f64 / 1e6));
                throttled.series.push((labels.clone(), sample.cpu_throttled_usec as f64 / 1e6));
                memory.series.push((labels.clone(), sample.memory_bytes as f64));
                peak.series.push((labels.clone(), sample.memory_peak_bytes as f64));
                pids.series.push((labels.clone(), sample.pids as f64));
                ooms.series.push((labels.clone(), sample.oom_kills as f64));
                let restarted = inner
                    .cache
                    .application(namespace, name)
                    .and_then(|application| application.get("status")?.get("restarts")?.as_u64());
                restarts.series.push((labels, restarted.unwrap_or(0) as f64));
            }
        }
        let open = encoder.encode_descriptor(
            "kayra_node_sessions",
            "Node sessions this replica holds",
            None,
            MetricType::Gauge,
        )?;
        ConstGauge::new(i64::try_from(sessions_open).unwrap_or(i64::MAX)).encode(open)?;
        for family in [&cpu, &throttled, &memory, &peak, &pids, &ooms, &restarts] {
            family.encode(&mut encoder)?;
        }
        for family in [&node_cpu, &node_used, &node_total] {
            family.encode(&mut encoder)?;
        }
        Ok(())
    }
}
