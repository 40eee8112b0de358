//! The API's own series, with kube-apiserver's names: requests by verb, group, resource,
//! subresource, scope and code; their latency and their request and response sizes; what is in flight, by kind; and the long-running
//! requests (watches and streams). Labels come from what the route names, never from a name,
//! a namespace or a caller, so the series stay as few as the Kinds served.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// What a request was, for its series.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub(crate) struct RequestLabels {
    pub(crate) verb: &'static str,
    pub(crate) group: String,
    pub(crate) resource: String,
    pub(crate) subresource: String,
    pub(crate) scope: &'static str,
}

/// What a request was and how it was answered.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub(crate) struct AnsweredLabels {
    pub(crate) verb: &'static str,
    pub(crate) group: String,
    pub(crate) resource: String,
    pub(crate) subresource: String,
    pub(crate) scope: &'static str,
    pub(crate) code: u16,
}

/// The Kind a watch watches.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub(crate) struct WatchLabels {
    pub(crate) group: String,
    pub(crate) version: &'static str,
    pub(crate) kind: &'static str,
}

/// Whether a request changes anything.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub(crate) struct KindLabels {
    pub(crate) request_kind: &'static str,
}

fn sizes() -> Histogram {
    // 64 bytes to 64 MiB, as kube-apiserver's size buckets span.
    Histogram::new(exponential_buckets(64.0, 4.0, 11))
}

fn durations() -> Histogram {
    // 1 ms to about 65 s.
    Histogram::new(exponential_buckets(0.001, 2.0, 17))
}

/// The API's request series. Cheap to clone: clones share them.
#[derive(Debug, Clone)]
pub struct RequestMetrics {
    pub(crate) total: Family<AnsweredLabels, Counter>,
    pub(crate) duration: Family<RequestLabels, Histogram, fn() -> Histogram>,
    pub(crate) request_sizes: Family<RequestLabels, Histogram, fn() -> Histogram>,
    pub(crate) response_sizes: Family<RequestLabels, Histogram, fn() -> Histogram>,
    pub(crate) in_flight: Family<KindLabels, Gauge>,
    pub(crate) longrunning: Family<RequestLabels, Gauge>,
    pub(crate) watch_events: Family<WatchLabels, Counter>,
    pub(crate) terminated_watchers: Family<WatchLabels, Counter>,
}

impl RequestMetrics {
    /// The counters of watches of `kind`: events sent, and watchers cut for not reading.
    pub(crate) fn watches(&self, kind: &kayra_api::scheme::KindInfo) -> (Counter, Counter) {
        let labels = WatchLabels { group: kind.group.clone(), version: kind.version, kind: kind.kind };
        // One statement each: a family's lookup holds its lock until the statement ends.
        let sent = self.watch_events.get_or_create(&labels).clone();
        let cut = self.terminated_watchers.get_or_create(&labels).clone();
        (sent, cut)
    }
}

impl RequestMetrics {
    /// Registers the API's series in `registry`.
    pub fn register(registry: &mut Registry) -> RequestMetrics {
        let metrics = RequestMetrics {
            total: Family::default(),
            duration: Family::new_with_constructor(durations),
            request_sizes: Family::new_with_constructor(sizes),
            response_sizes: Family::new_with_constructor(sizes),
            in_flight: Family::default(),
            longrunning: Family::default(),
            watch_events: Family::default(),
            terminated_watchers: Family::default(),
        };
        let apiserver = registry.sub_registry_with_prefix("apiserver");
        apiserver.register(
            "request",
            "Requests answered, by verb, group, resource, subresource, scope and HTTP code",
            metrics.total.clone(),
        );
        apiserver.register(
            "request_duration_seconds",
            "How long requests take to answer (long-running ones aside), by verb, group, resource, subresource and scope",
            metrics.duration.clone(),
        );
        apiserver.register(
            "request_body_size_bytes",
            "Sizes of request bodies that carry one, by verb, group, resource, subresource and scope",
            metrics.request_sizes.clone(),
        );
        apiserver.register(
            "response_sizes",
            "Sizes of response bodies (long-running ones aside), in bytes, by verb, group, resource, subresource and scope",
            metrics.response_sizes.clone(),
        );
        apiserver.register(
            "current_inflight_requests",
            "Requests being answered now (long-running ones aside), by kind: mutating or readOnly",
            metrics.in_flight.clone(),
        );
        apiserver.register(
            "longrunning_requests",
            "Watches and streams (logs, follows) open now, by verb, group, resource, subresource and scope",
            metrics.longrunning.clone(),
        );
        apiserver.register(
            "watch_events",
            "Watch events sent to clients, by the group, version and Kind watched",
            metrics.watch_events.clone(),
        );
        apiserver.register(
            "terminated_watchers",
            "Watches ended because their client stopped taking events, by the group, version and Kind watched",
            metrics.terminated_watchers.clone(),
        );
        metrics
    }
}
