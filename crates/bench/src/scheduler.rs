//! The scheduler benchmark (`kayra-bench scheduler`): 10 000 Applications placed onto 1 000
//! Node objects (capacity and labels, no agents) by the real scheduler loop, in process over
//! the application layer on an in-memory store (or sled with `--store sled`), next to writing the same 10 000 bindings
//! directly through the application layer in the same run.
//!
//! - Nodes: 16 cores and 64 GiB each, labels `zone` (10 zones), `disk` (ssd on a third),
//!   `kubernetes.io/hostname`; Ready with a fresh heartbeat.
//! - Applications: each requests 100m and 128Mi; a third select a zone (`nodeSelector`), a
//!   tenth prefer ssd (preferred node affinity), a fifth are in groups of ten that keep one per
//!   node (required anti-affinity over `kubernetes.io/hostname`).
//! - Placements: the scheduler runs from the start; the Applications are created as fast as
//!   32 concurrent writers can; a watch takes each bind's time. Placements/s is 10 000 over the
//!   time from the first create to the last bind; the latency is from a create's answer to the
//!   watch's sight of its bind (p50, p99).
//! - A backlog: the same number of Applications created while no scheduler runs, then a
//!   scheduler started; placements/s is 10 000 over the time from its start to the last bind.
//!   This is the scheduler's own throughput, without the creates competing for the store.
//! - Bindings: the same number of unbound Applications, created first, then bound by
//!   32 concurrent writers with the scheduler's own write (a Binding through the `binding`
//!   subresource: nodeName, annotation and `Scheduled=True`, on the version read), timed
//!   alone: the ceiling of what any scheduler binding through the application layer could
//!   reach here.
//! - Rounds: a full run alternates three rounds of the three (direct bindings, live placements,
//!   placements from a backlog), each on a fresh store with its own Nodes and on namespaces of
//!   its own within it, so that a ceiling and the rows it bounds are measured beside each other
//!   and every round does the same work. Each ratio is a round's placements over the same
//!   round's direct bindings; the median and the spread over the rounds are printed.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kayra_api::clock::SystemClock;
use kayra_api::kinds::application::{SCHEDULER, scheduled_by_annotation};
use kayra_api::scheme::Scheme;
use kayra_application::ApplicationLayer;
use kayra_application::client::Client;
use kayra_registry::{Registry, Resource, WatchEvent, WatchOptions, meta_str};
use kayra_store::mvcc::{MvccStore, Options};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::report::{Report, Size};

const WRITERS: usize = 32;

/// How many Nodes, and how many Applications are placed onto them.
#[derive(Debug, Clone, Copy)]
struct Sizes {
    nodes: usize,
    applications: usize,
}

const FULL: Sizes = Sizes { nodes: 1_000, applications: 10_000 };
/// Ten Nodes per zone, as many as an anti-affine group has members: a member that selects a
/// zone always finds a Node there that the rest of its group left free.
const SMOKE: Sizes = Sizes { nodes: 100, applications: 100 };

/// The application layer over an in-memory store, or sled under `sled`.
pub(crate) fn control(sled: Option<&std::path::Path>) -> Result<Arc<ApplicationLayer>, String> {
    let store = Arc::new(match sled {
        Some(path) => kayra_store_sled::open(path, Options::default()).map_err(|e| e.to_string())?,
        None => MvccStore::in_memory(Options::default()).map_err(|e| e.to_string())?,
    });
    let registry = Registry::new(store, Arc::new(SystemClock), "/registry/");
    Ok(Arc::new(ApplicationLayer::new(Arc::new(Scheme::new("example.com")), registry)))
}

fn node(i: usize) -> Value {
    let now = jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string();
    let name = format!("node-{i:04}");
    json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {
            "zone": format!("z{}", i % 10), "disk": if i.is_multiple_of(3) { "ssd" } else { "hdd" },
            "kubernetes.io/hostname": name,
        }},
        "spec": {},
        "status": {
            "capacity": {"cpu": "16", "memory": "64Gi"},
            "allocatable": {"cpu": "16", "memory": "64Gi"},
            "conditions": [{"type": "Ready", "status": "True", "reason": "KayraAgentReady",
                            "lastHeartbeatTime": now, "lastTransitionTime": now}],
        },
    })
}

fn application(namespace: &str, i: usize) -> Value {
    let mut placement = serde_json::Map::new();
    let mut labels = serde_json::Map::new();
    if i.is_multiple_of(3) {
        placement.insert("nodeSelector".into(), json!({"zone": format!("z{}", i % 10)}));
    }
    if i % 10 == 1 {
        placement.insert("affinity".into(), json!({"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 50, "preference": {"matchExpressions": [{"key": "disk", "operator": "In", "values": ["ssd"]}]}}]}}));
    }
    if i % 5 == 2 {
        let group = format!("g{}", i / 50);
        labels.insert("group".into(), json!(group));
        placement.insert(
            "affinity".into(),
            json!({"workloadAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"group": group}}, "topologyKey": "kubernetes.io/hostname"}]}}),
        );
    }
    json!({
        "apiVersion": "fleet.example.com/v1", "kind": "Application",
        "metadata": {"name": format!("app-{i:05}"), "namespace": namespace, "labels": labels},
        "spec": {"command": ["/bin/true"], "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}},
                 "placement": placement},
    })
}

/// Runs `count` jobs on `WRITERS` tasks; answers each job's result in order.
pub(crate) async fn concurrently<T: Send + 'static, F>(
    count: usize,
    job: impl Fn(usize) -> F + Send + Sync + 'static,
) -> Result<Vec<T>, String>
where
    F: std::future::Future<Output = Result<T, String>> + Send + 'static,
{
    let job = Arc::new(job);
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..WRITERS {
        let (job, next) = (job.clone(), next.clone());
        tasks.spawn(async move {
            let mut done = Vec::new();
            loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if i >= count {
                    return Ok::<_, String>(done);
                }
                done.push((i, job(i).await?));
            }
        });
    }
    let mut all: Vec<(usize, T)> = Vec::with_capacity(count);
    while let Some(joined) = tasks.join_next().await {
        all.extend(joined.map_err(|e| e.to_string())??);
    }
    all.sort_by_key(|(i, _)| *i);
    Ok(all.into_iter().map(|(_, t)| t).collect())
}

async fn create_nodes(client: &Client, count: usize) -> Result<(), String> {
    let nodes = client.resource("", "nodes").map_err(|e| e.to_string())?;
    let client = client.clone();
    concurrently(count, move |i| {
        let (client, nodes) = (client.clone(), nodes.clone());
        async move { client.create(&nodes, None, node(i)).await.map(|_| ()).map_err(|e| e.to_string()) }
    })
    .await?;
    Ok(())
}

async fn namespace(client: &Client, name: &str) -> Result<(), String> {
    let namespaces = client.resource("", "namespaces").map_err(|e| e.to_string())?;
    client
        .create(
            &namespaces,
            None,
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}),
        )
        .await
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// Writes as many bindings directly as the scheduler makes: answers bindings per second.
async fn direct_bindings(
    client: &Client,
    applications: &Resource,
    namespace: &str,
    sizes: Sizes,
) -> Result<f64, String> {
    self::namespace(client, namespace).await?;
    let (c, r, ns) = (client.clone(), applications.clone(), Arc::<str>::from(namespace));
    let versions: Vec<String> = concurrently(sizes.applications, move |i| {
        let (client, resource, namespace) = (c.clone(), r.clone(), ns.clone());
        async move {
            let created = client
                .create(&resource, Some(&namespace), application(&namespace, i))
                .await
                .map_err(|e| e.to_string())?;
            Ok(meta_str(&created, "resourceVersion").to_owned())
        }
    })
    .await?;
    let versions = Arc::new(versions);
    let annotation = scheduled_by_annotation("example.com");
    let (c, ns) = (client.clone(), Arc::<str>::from(namespace));
    let started = Instant::now();
    concurrently(sizes.applications, move |i| {
        let (client, versions, annotation, namespace) =
            (c.clone(), versions.clone(), annotation.clone(), ns.clone());
        async move {
            let mut annotations = serde_json::Map::new();
            annotations.insert(annotation, json!(SCHEDULER));
            let name = format!("app-{i:05}");
            let node = format!("node-{:04}", i % sizes.nodes);
            let binding =
                kayra_application::binding::binding_to(&name, &node, Some(&versions[i]), annotations);
            client.bind(&namespace, &name, &binding).await.map(|_| ()).map_err(|e| e.to_string())
        }
    })
    .await?;
    Ok(sizes.applications as f64 / started.elapsed().as_secs_f64())
}

/// How many rounds a full run alternates: direct bindings, then live placements, then
/// placements from a backlog, each round on a fresh store.
const ROUNDS: usize = 3;

/// What one round measured.
struct Round {
    /// Direct bindings per second: the ceiling of this round.
    bindings: f64,
    live: Placed,
    backlog: Placed,
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// What one placement run measured.
struct Placed {
    /// Placements per second: from the first create (or, for a backlog, from the scheduler's
    /// start) to the last bind.
    rate: f64,
    /// Create→bind of each Application, sorted.
    latencies: Vec<Duration>,
    /// How long the creates took.
    create_time: Duration,
}

/// Creates `count` Applications in `namespace` from [`WRITERS`] writers; answers when each
/// create was answered.
async fn create_all(
    client: &Client,
    applications: &Resource,
    namespace: &str,
    count: usize,
) -> Result<Vec<Instant>, String> {
    let (c, r, ns) = (client.clone(), applications.clone(), Arc::<str>::from(namespace));
    concurrently(count, move |i| {
        let (client, resource, namespace) = (c.clone(), r.clone(), ns.clone());
        async move {
            client
                .create(&resource, Some(&namespace), application(&namespace, i))
                .await
                .map_err(|e| e.to_string())?;
            Ok(Instant::now())
        }
    })
    .await
}

/// Placements by the scheduler in `namespace`. With `backlog`, every Application exists before
/// the scheduler starts (its own throughput); else they are created while it runs.
async fn placements(
    client: &Client,
    applications: &Resource,
    namespace: &str,
    backlog: bool,
    count: usize,
) -> Result<Placed, String> {
    self::namespace(client, namespace).await?;
    let mut created = Vec::new();
    let mut create_time = Duration::ZERO;
    if backlog {
        let started = Instant::now();
        created = create_all(client, applications, namespace, count).await?;
        create_time = started.elapsed();
    }
    let watching = WatchOptions { namespace: Some(namespace.into()), ..WatchOptions::default() };
    let mut watch = client.watch(applications, &watching).await.map_err(|e| e.to_string())?;
    let scheduler = kayra_scheduler::Scheduler::new(
        kayra_application::controller_identity("scheduler").pipe(|id| client.layer().client(id)),
        kayra_scheduler::Policy::Spread,
    )
    .map_err(|e| e.to_string())?;
    let stop = CancellationToken::new();
    let scheduler_started = Instant::now();
    let running = tokio::spawn(scheduler.into_loop().run(stop.clone()));
    if !backlog {
        // Let the scheduler list the nodes first, as a running controller's would have.
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let (watch_client, watched) = (client.clone(), applications.clone());
    let watcher = tokio::spawn(async move {
        let mut bound: HashMap<String, Instant> = HashMap::with_capacity(count);
        while bound.len() < count {
            let event = match tokio::time::timeout(Duration::from_secs(120), watch.next()).await {
                Ok(Ok(event)) => event,
                // Fell behind the writers: watch again from now; the new watch starts with
                // every Application as it is (a bind seen that way is timed a little late).
                Ok(Err(_)) => match watch_client.watch(&watched, &watching).await {
                    Ok(resumed) => {
                        watch = resumed;
                        continue;
                    }
                    Err(error) => {
                        eprintln!("the benchmark's watch could not resume: {error}");
                        break;
                    }
                },
                Err(_) => break,
            };
            if let WatchEvent::Added(object) | WatchEvent::Modified(object) = &event
                && is_bound(object)
            {
                bound.entry(meta_str(object, "name").to_owned()).or_insert_with(Instant::now);
            }
        }
        bound
    });
    let mut started = scheduler_started;
    if !backlog {
        started = Instant::now();
        created = create_all(client, applications, namespace, count).await?;
        create_time = started.elapsed();
    }
    let bound = watcher.await.map_err(|e| e.to_string())?;
    stop.cancel();
    let _ = running.await;
    if bound.len() < count {
        return Err(format!("only {} of {count} Applications were bound within the time", bound.len()));
    }
    let last = bound.values().max().copied().unwrap_or(started);
    let mut latencies: Vec<Duration> =
        (0..count).map(|i| bound[&format!("app-{i:05}")].saturating_duration_since(created[i])).collect();
    latencies.sort();
    Ok(Placed { rate: count as f64 / last.duration_since(started).as_secs_f64(), latencies, create_time })
}

fn is_bound(object: &kayra_registry::Object) -> bool {
    object.get("spec").and_then(|s| s.pointer("/placement/nodeName")).and_then(Value::as_str).is_some()
}

trait Pipe: Sized {
    fn pipe<T>(self, f: impl FnOnce(Self) -> T) -> T {
        f(self)
    }
}

impl<T> Pipe for T {}

/// Checks what the scheduler placed in `namespace`: no node over its 16 cores, anti-affinity
/// groups apart.
async fn check(client: &Client, applications: &Resource, namespace: &str) -> Result<(), String> {
    let placed = client.list_all(applications, Some(namespace)).await.map_err(|e| e.to_string())?;
    let mut per_node: HashMap<String, usize> = HashMap::new();
    let mut groups: HashMap<(String, String), usize> = HashMap::new();
    for app in &placed {
        let node = app
            .get("spec")
            .and_then(|s| s.pointer("/placement/nodeName"))
            .and_then(Value::as_str)
            .unwrap_or_default();
        *per_node.entry(node.to_owned()).or_default() += 1;
        let labels = kayra_registry::object_labels(app);
        if let Some(group) = labels.get("group") {
            *groups.entry((group.clone(), node.to_owned())).or_default() += 1;
        }
    }
    if per_node.values().any(|n| *n > 160) {
        return Err("a node holds more than its 16 cores allow".into());
    }
    if groups.values().any(|n| *n > 1) {
        return Err("two Applications of an anti-affine group share a node".into());
    }
    Ok(())
}

/// The store an in-process benchmark `which` runs on: `--store memory` (the default) or `sled`.
pub(crate) fn store_option<'a>(args: &'a [String], which: &str) -> Result<&'a str, String> {
    match args {
        [] => Ok("memory"),
        [flag, store] if flag == "--store" && (store == "memory" || store == "sled") => Ok(store.as_str()),
        _ => Err(format!("usage: kayra-bench {which} [--store memory|sled]")),
    }
}

/// The benchmark.
pub(crate) async fn run(args: &[String], size: Size) -> Result<(), String> {
    let Sizes { nodes, applications: count } = size.pick(FULL, SMOKE);
    let store = store_option(args, "scheduler")?;
    println!("store: {store}");
    let mut rounds = Vec::new();
    for round in 0..size.pick(ROUNDS, 1) {
        // Each round on a store of its own, so that every round lists and places the same
        // objects: a scheduler started in a later round would otherwise list every earlier
        // round's Applications too, which no direct binding pays.
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let control = control((store == "sled").then(|| dir.path().join("kayra")).as_deref())?;
        let client = control.client(kayra_application::controller_identity("bench"));
        let applications = client.resource("fleet.example.com", "applications").map_err(|e| e.to_string())?;
        let started = Instant::now();
        create_nodes(&client, nodes).await?;
        println!("  round {}: {nodes} nodes created in {:.1} s", round + 1, started.elapsed().as_secs_f64());
        let sizes = Sizes { nodes, applications: count };
        let bindings = direct_bindings(&client, &applications, "direct", sizes).await?;
        let live = placements(&client, &applications, "placed", false, count).await?;
        check(&client, &applications, "placed").await?;
        let backlog = placements(&client, &applications, "backlog", true, count).await?;
        check(&client, &applications, "backlog").await?;
        println!(
            "  round {}: direct bindings {:.0}/s; placements live {:.0}/s ({:.2}), from a backlog {:.0}/s ({:.2}); creates {:.0}/s live, {:.0}/s for the backlog",
            round + 1,
            bindings,
            live.rate,
            live.rate / bindings,
            backlog.rate,
            backlog.rate / bindings,
            count as f64 / live.create_time.as_secs_f64(),
            count as f64 / backlog.create_time.as_secs_f64(),
        );
        rounds.push(Round { bindings, live, backlog });
    }
    println!(
        "scheduler: {count} Applications onto {nodes} nodes (a third with nodeSelector, a tenth preferring ssd, a fifth anti-affine in groups of ten), {} rounds, each of direct bindings by {WRITERS} writers, then live placements, then placements from a backlog (target ratio >= 0.5)",
        rounds.len()
    );
    let mut report = Report::new("scheduler", size);
    let bindings = median(rounds.iter().map(|round| round.bindings).collect());
    for (label, from_backlog) in [("live", false), ("from a backlog", true)] {
        let placed = |round: &Round| if from_backlog { round.backlog.rate } else { round.live.rate };
        let ratios: Vec<f64> = rounds.iter().map(|round| placed(round) / round.bindings).collect();
        let (low, high) =
            ratios.iter().fold((f64::MAX, f64::MIN), |(low, high), r| (low.min(*r), high.max(*r)));
        println!(
            "  placements {label}: ratio median {:.2}, spread {low:.2}-{high:.2}",
            median(ratios.clone())
        );
        report
            .figure(
                format!("placements, {label}, of direct bindings, median of rounds"),
                median(rounds.iter().map(placed).collect()),
                "/s",
            )
            .ceiling(bindings)
            .ratio(median(ratios));
    }
    let mut latencies: Vec<Duration> =
        rounds.iter().flat_map(|round| round.live.latencies.iter().copied()).collect();
    latencies.sort();
    let percentile = |p: f64| latencies[((latencies.len() as f64 * p) as usize).min(latencies.len() - 1)];
    report.figure("create to bind, live, p50", percentile(0.50).as_secs_f64() * 1e3, "ms");
    report.figure("create to bind, live, p99", percentile(0.99).as_secs_f64() * 1e3, "ms");
    report.print();
    Ok(())
}
