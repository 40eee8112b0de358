//! The assembled `/metrics` is a well-formed OpenMetrics exposition, the format Prometheus
//! negotiates first: every family declared once with its TYPE and HELP before its samples, each
//! sample named as its family's type allows, no series twice, and `# EOF` last. The series the
//! issue names are there once the API served a request and a node reported.

use std::collections::{HashMap, HashSet};

use bytes::Bytes;
use http::Request;
use http_body_util::{BodyExt, Empty};
use kayra_api::session::{NodeMessage, NodeReport, UsageSample};
use kayra_apiserver::PeerIdentity;
use kayra_authn::Identity;
use tower::ServiceExt;

use crate::config::{Config, StoreKind};

/// The suffixes a sample of a family of `kind` may carry after the family's name.
fn suffixes(kind: &str) -> &'static [&'static str] {
    match kind {
        "counter" => &["_total", "_created"],
        "histogram" => &["_bucket", "_sum", "_count", "_created"],
        "summary" => &["", "_sum", "_count", "_created"],
        "info" => &["_info"],
        _ => &[""],
    }
}

/// Checks `text` as an OpenMetrics exposition; answers each family's samples as
/// `name{labels}` lines, or what is wrong.
fn parse(text: &str) -> Result<HashMap<String, Vec<String>>, String> {
    let mut families: HashMap<String, Vec<String>> = HashMap::new();
    let (mut typed, mut helped) = (HashMap::<String, String>::new(), HashSet::<String>::new());
    let (mut current, mut series, mut ended) = (None::<String>, HashSet::<String>::new(), false);
    for (number, line) in text.lines().enumerate() {
        let at = |what: &str| format!("line {}: {what}: {line}", number + 1);
        if ended {
            return Err(at("after # EOF"));
        }
        if line == "# EOF" {
            ended = true;
            continue;
        }
        if let Some(rest) = line.strip_prefix("# ") {
            let mut words = rest.splitn(3, ' ');
            let (keyword, name, value) = (words.next(), words.next(), words.next());
            let (Some(name), Some(value)) = (name, value.filter(|v| !v.trim().is_empty())) else {
                return Err(at("a descriptor without a name and a value"));
            };
            match keyword {
                Some("TYPE") => {
                    if typed.insert(name.to_owned(), value.to_owned()).is_some() {
                        return Err(at("a family declared twice"));
                    }
                    families.insert(name.to_owned(), Vec::new());
                    current = Some(name.to_owned());
                }
                Some("HELP") => {
                    helped.insert(name.to_owned());
                }
                Some("UNIT") => {}
                _ => return Err(at("an unknown descriptor")),
            }
            continue;
        }
        let (metric, value) = line.rsplit_once(' ').ok_or_else(|| at("a sample without a value"))?;
        value.parse::<f64>().map_err(|_| at("a value that is not a number"))?;
        let name = metric.split('{').next().unwrap_or_default();
        let family = current.as_ref().ok_or_else(|| at("a sample before any TYPE"))?;
        let kind = &typed[family];
        let suffix = name.strip_prefix(family.as_str()).ok_or_else(|| at("a sample outside its family"))?;
        if !suffixes(kind).contains(&suffix) {
            return Err(at(&format!("a {kind} sample suffixed {suffix:?}")));
        }
        if let Some(labels) = metric.strip_prefix(name) {
            let well_formed = labels.is_empty() || (labels.starts_with('{') && labels.ends_with('}'));
            if !well_formed {
                return Err(at("malformed labels"));
            }
        }
        if !series.insert(metric.to_owned()) {
            return Err(at("a series twice"));
        }
        families.get_mut(family).expect("declared").push(metric.to_owned());
    }
    if !ended {
        return Err("no # EOF at the end".to_owned());
    }
    if let Some(family) = typed.keys().find(|family| !helped.contains(*family)) {
        return Err(format!("{family} has no HELP"));
    }
    Ok(families)
}

#[test]
fn the_checker_refuses_what_prometheus_would() {
    let good =
        "# HELP a_requests Requests.\n# TYPE a_requests counter\na_requests_total{code=\"200\"} 1\n# EOF\n";
    assert!(parse(good).is_ok(), "{:?}", parse(good));
    let cases = [
        ("no help", "# TYPE a counter\na_total 1\n# EOF\n"),
        ("twice", "# HELP a A.\n# TYPE a gauge\na{x=\"1\"} 1\na{x=\"1\"} 2\n# EOF\n"),
        ("no type", "a 1\n# EOF\n"),
        ("wrong suffix", "# HELP a A.\n# TYPE a gauge\na_total 1\n# EOF\n"),
        ("no eof", "# HELP a A.\n# TYPE a gauge\na 1\n"),
        ("declared twice", "# HELP a A.\n# TYPE a gauge\n# TYPE a gauge\n# EOF\n"),
    ];
    for (case, text) in cases {
        assert!(parse(text).is_err(), "{case} passed");
    }
}

#[tokio::test]
async fn metrics_parse_with_help_and_type_for_every_family_and_no_series_twice() {
    let dir = tempfile::tempdir().unwrap();
    let config = Config { data_dir: dir.path().join("data"), store: StoreKind::Memory, ..Config::default() };
    let store = crate::store::open_store(&config).await.unwrap();
    let plane = super::assemble(&config, store).await.unwrap();
    let node = Identity::new("system:node:n1", "", vec!["system:nodes".to_owned()]);
    let session = plane.nodes.open(&node).unwrap();
    session.receive(NodeMessage::Status(NodeReport::default())).await.unwrap();
    let sample = UsageSample {
        cpu_usage_usec: 5,
        memory_total_bytes: 1 << 30,
        timestamp: jiff::Timestamp::now().to_string(),
        ..UsageSample::default()
    };
    session.receive(NodeMessage::Usage(sample)).await.unwrap();
    let router = kayra_apiserver::router(plane.state.clone());
    let admin = Identity::new("admin", "", vec!["system:masters".to_owned()]);
    let get = |path: &str| {
        let mut request = Request::get(path).body(Empty::<Bytes>::new()).unwrap();
        request.extensions_mut().insert(PeerIdentity(admin.clone()));
        request
    };
    for path in ["/api/v1/namespaces/default", "/api/v1/namespaces", "/api/v1/nodes/absent"] {
        router.clone().oneshot(get(path)).await.unwrap();
    }
    // A watch held open while the metrics are read: long-running, not in flight.
    let watch = router.clone().oneshot(get("/api/v1/namespaces?watch=true")).await.unwrap();
    let response = router.clone().oneshot(get("/metrics")).await.unwrap();
    let text = String::from_utf8(response.into_body().collect().await.unwrap().to_bytes().to_vec()).unwrap();
    let families = parse(&text).unwrap_or_else(|error| panic!("{error}\n{text}"));
    for family in [
        "apiserver_request",
        "apiserver_request_duration_seconds",
        "apiserver_response_sizes",
        "apiserver_current_inflight_requests",
        "apiserver_longrunning_requests",
        "apiserver_watch_events",
        "apiserver_terminated_watchers",
        "kayra_store_operation_duration_seconds",
        "kayra_store_compactions",
        "kayra_store_commit_batch_size",
        "kayra_store_background_writes",
        "apiserver_watch_cache_resource_version",
        "apiserver_watch_cache_events_received",
        "kayra_watch_cache_oldest_resource_version",
        "kayra_watch_cache_events",
        "kayra_watch_cache_window_bytes",
        "watch_cache_capacity",
        "kayra_node_sessions",
        "scheduler_pending_pods",
        "kayra_node_heartbeats",
        "kayra_node_pushes",
        "kayra_node_push_duration_seconds",
        "kayra_node_cpu_seconds",
        "kayra_node_memory_total_bytes",
        "kayra_workload_cpu_seconds",
        "process_cpu_seconds",
        "process_resident_memory_bytes",
        "process_open_fds",
        "process_threads",
        "process_start_time_seconds",
    ] {
        assert!(families.contains_key(family), "{family} missing from\n{text}");
    }
    let requests = &families["apiserver_request"];
    let expected = "apiserver_request_total{verb=\"GET\",group=\"\",resource=\"nodes\",subresource=\"\",scope=\"resource\",code=\"404\"}";
    assert!(requests.iter().any(|series| series == expected), "{requests:?}");
    let listed = "apiserver_request_total{verb=\"LIST\",group=\"\",resource=\"namespaces\",subresource=\"\",scope=\"cluster\",code=\"200\"}";
    assert!(requests.iter().any(|series| series == listed), "{requests:?}");
    assert!(families["kayra_node_memory_total_bytes"].iter().any(|series| series.contains("node=\"n1\"")));
    let open = "apiserver_longrunning_requests{verb=\"WATCH\",group=\"\",resource=\"namespaces\",subresource=\"\",scope=\"cluster\"} 1";
    assert!(text.lines().any(|line| line == open), "{open} missing from\n{text}");
    let listed_watch = "apiserver_watch_events_total{group=\"\",version=\"v1\",kind=\"Namespace\"}";
    assert!(families["apiserver_watch_events"].iter().any(|series| series == listed_watch), "{text}");
    let namespaces_cache = "apiserver_watch_cache_resource_version{group=\"\",resource=\"namespaces\"}";
    let caches = &families["apiserver_watch_cache_resource_version"];
    assert!(caches.iter().any(|series| series == namespaces_cache), "{caches:?}");
    let leases_capacity = "watch_cache_capacity{group=\"coordination.k8s.io\",resource=\"leases\"} 4096";
    assert!(text.lines().any(|line| line == leases_capacity), "{leases_capacity} missing from\n{text}");
    assert!(
        text.lines().any(|line| line.starts_with("kayra_store_commit_batch_size_bucket{le=\"+Inf\"}")),
        "{text}"
    );
    drop(watch);
}

/// What the assembled control plane holds forms no cycle: once it is dropped, nothing holds
/// the store, so a restarted controller can open an embedded store's files again.
#[tokio::test]
async fn a_dropped_control_plane_lets_go_of_its_store() {
    let dir = tempfile::tempdir().unwrap();
    let config = Config { data_dir: dir.path().join("data"), store: StoreKind::Memory, ..Config::default() };
    // With a local CA the replica's peers and the replicated usage source are assembled too.
    let _ = rustls::crypto::ring::default_provider().install_default();
    crate::pki::init(&config).unwrap();
    let store = crate::store::open_store(&config).await.unwrap();
    let held = std::sync::Arc::downgrade(&store);
    let plane = super::assemble(&config, store).await.unwrap();
    drop(plane);
    for _ in 0..100 {
        if held.strong_count() == 0 {
            return;
        }
        tokio::task::yield_now().await;
    }
    panic!("{} holders of the store outlive the control plane", held.strong_count());
}
