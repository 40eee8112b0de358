//! The ApplicationSet benchmark (`kayra-bench appset`): 100 sets of 100 replicas each over
//! 100 Node objects, in process over the application layer on an in-memory store (or sled with
//! `--store sled`), with the real set loop and scheduler running and a simulated agent that
//! marks every bound Application Ready at its generation as soon as it sees it.
//!
//! - Rollout: once every set has converged, the template of all 100 sets changes at once
//!   (25% may be unavailable, the default); timed from the first change to the last set
//!   reporting `Converged` for its new generation. Reported with the set loop's reconciles
//!   per child replaced.
//! - Child writes: the same 10 000 spec replacements and 10 000 status writes, made directly
//!   through the application layer by 32 writers after the loops stop: the ceiling of what any
//!   loop could reach here.

use std::sync::Arc;
use std::time::{Duration, Instant};

use kayra_application::client::Client;
use kayra_registry::{Object, RegistryError, Resource, WatchEvent, WatchOptions, meta_str};
use serde_json::{Value, json};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use crate::report::{Report, Size};
use crate::scheduler::{concurrently, control, store_option};

const WRITERS: usize = 32;

/// How many Nodes, sets, and replicas in each set.
#[derive(Debug, Clone, Copy)]
struct Sizes {
    nodes: usize,
    sets: usize,
    replicas: usize,
}

impl Sizes {
    fn children(self) -> usize {
        self.sets * self.replicas
    }
}

const FULL: Sizes = Sizes { nodes: 100, sets: 100, replicas: 100 };
const SMOKE: Sizes = Sizes { nodes: 10, sets: 4, replicas: 5 };
const NAMESPACE: &str = "bench";

fn text(error: impl std::fmt::Display) -> String {
    error.to_string()
}

fn node(i: usize) -> Value {
    let now = jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string();
    json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": format!("node-{i:03}")},
        "spec": {},
        "status": {
            "capacity": {"cpu": "64", "memory": "256Gi"},
            "allocatable": {"cpu": "64", "memory": "256Gi"},
            "conditions": [{"type": "Ready", "status": "True", "reason": "KayraAgentReady",
                            "lastHeartbeatTime": now, "lastTransitionTime": now}],
        },
    })
}

fn set(i: usize, version: &str, replicas: usize) -> Value {
    json!({
        "apiVersion": "fleet.example.com/v1", "kind": "ApplicationSet",
        "metadata": {"name": format!("set-{i:03}"), "namespace": NAMESPACE},
        "spec": {"applications": [{"name": "api", "scale": {"replicas": replicas},
                                   "spec": {"command": ["/bin/server", "--version", version]}}]},
    })
}

/// The status a node's agent reports for a running, ready Application.
fn ready_status(object: &mut Object) {
    let generation = object.get("metadata").and_then(|m| m.get("generation")).cloned().unwrap_or(json!(1));
    object.insert(
        "status".into(),
        json!({"phase": "Running", "observedGeneration": generation,
               "conditions": [{"type": "Ready", "status": "True", "reason": "ProcessRunning"}]}),
    );
}

fn needs_report(object: &Object) -> bool {
    let bound = object
        .get("spec")
        .and_then(|s| s.pointer("/placement/nodeName"))
        .and_then(Value::as_str)
        .is_some_and(|n| !n.is_empty());
    let generation = object.get("metadata").and_then(|m| m.get("generation"));
    let observed = object.get("status").and_then(|s| s.get("observedGeneration"));
    bound && generation != observed
}

/// The simulated agents: every bound Application at a generation not yet reported is written
/// Ready at it, through the application layer, by up to 32 writers.
async fn agents(client: Client, applications: Resource, stop: CancellationToken) {
    let writers = Arc::new(Semaphore::new(WRITERS));
    let options = WatchOptions { namespace: Some(NAMESPACE.into()), ..WatchOptions::default() };
    'watch: loop {
        let Ok(mut watch) = client.watch(&applications, &options).await else { return };
        loop {
            let event = tokio::select! {
                () = stop.cancelled() => return,
                event = watch.next() => event,
            };
            let Ok(event) = event else { continue 'watch };
            let (WatchEvent::Added(object) | WatchEvent::Modified(object)) = event else { continue };
            if !needs_report(&object) {
                continue;
            }
            let Ok(permit) = writers.clone().acquire_owned().await else { return };
            let (client, applications) = (client.clone(), applications.clone());
            tokio::spawn(async move {
                let mut object = Arc::unwrap_or_clone(object);
                ready_status(&mut object);
                let name = meta_str(&object, "name").to_owned();
                // A conflict means a newer version is on its way through the watch.
                let _ = client.update_status(&applications, Some(NAMESPACE), &name, &object).await;
                drop(permit);
            });
        }
    }
}

/// The reconciles the set loop has made so far, read from its metrics.
fn reconciles(registry: &prometheus_client::registry::Registry) -> u64 {
    let mut encoded = String::new();
    prometheus_client::encoding::text::encode(&mut encoded, registry).expect("metrics encode");
    encoded
        .lines()
        .filter(|line| {
            line.starts_with("kayra_loop_reconciles_total") && line.contains("controller=\"applicationsets\"")
        })
        .filter_map(|line| line.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

/// Waits until every one of `count` sets reports Converged for its current generation.
async fn all_converged(
    client: &Client,
    sets: &Resource,
    count: usize,
    within: Duration,
) -> Result<(), String> {
    let deadline = Instant::now() + within;
    loop {
        let listed = client.list_all(sets, Some(NAMESPACE)).await.map_err(text)?;
        let done = listed.iter().filter(|set| converged(set)).count();
        if done == count {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!("only {done} of {count} sets converged within {within:?}"));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn converged(set: &Object) -> bool {
    let status = set.get("status");
    let generation = set.get("metadata").and_then(|m| m.get("generation"));
    status.and_then(|s| s.get("observedGeneration")) == generation
        && status
            .and_then(|s| s.get("conditions"))
            .and_then(Value::as_array)
            .is_some_and(|c| c.iter().any(|c| c["type"] == "Converged" && c["status"] == "True"))
}

/// The same child writes made directly: each child's spec replaced, then its status written.
/// Answers writes per second of each.
async fn direct_writes(client: &Client, applications: &Resource, sizes: Sizes) -> Result<(f64, f64), String> {
    let children_count = sizes.children();
    let children: Vec<Object> = client.list_all(applications, Some(NAMESPACE)).await.map_err(text)?;
    let children = Arc::new(children);
    let (c, r, list) = (client.clone(), applications.clone(), children.clone());
    let started = Instant::now();
    concurrently(children_count, move |i| {
        let (client, resource, children) = (c.clone(), r.clone(), list.clone());
        async move {
            let mut object = children[i % children.len()].clone();
            if let Some(spec) = object.get_mut("spec") {
                spec["command"] = json!(["/bin/server", "--version", "direct"]);
            }
            let name = meta_str(&object, "name").to_owned();
            client.update(&resource, Some(NAMESPACE), &name, &object).await.map(|_| ()).map_err(text)
        }
    })
    .await?;
    let updates = children_count as f64 / started.elapsed().as_secs_f64();
    let (c, r) = (client.clone(), applications.clone());
    let started = Instant::now();
    concurrently(children_count, move |i| {
        let (client, resource) = (c.clone(), r.clone());
        async move {
            let name = format!("set-{:03}-api-{}", i / sizes.replicas, i % sizes.replicas);
            let mut object = client.get(&resource, Some(NAMESPACE), &name).await.map_err(text)?;
            ready_status(&mut object);
            match client.update_status(&resource, Some(NAMESPACE), &name, &object).await {
                Ok(_) | Err(RegistryError::Conflict { .. }) => Ok(()),
                Err(error) => Err(error.to_string()),
            }
        }
    })
    .await?;
    let statuses = children_count as f64 / started.elapsed().as_secs_f64();
    Ok((updates, statuses))
}

/// The benchmark.
pub(crate) async fn run(args: &[String], size: Size) -> Result<(), String> {
    let sizes = size.pick(FULL, SMOKE);
    let Sizes { nodes: node_count, sets: set_count, replicas } = sizes;
    let children = sizes.children();
    let dir = tempfile::tempdir().map_err(text)?;
    let store = store_option(args, "appset")?;
    let control = control((store == "sled").then(|| dir.path().join("kayra")).as_deref())?;
    println!("store: {store}");
    let client = control.client(kayra_application::controller_identity("bench"));
    let nodes = client.resource("", "nodes").map_err(text)?;
    let namespaces = client.resource("", "namespaces").map_err(text)?;
    let applications = client.resource("fleet.example.com", "applications").map_err(text)?;
    let sets = client.resource("fleet.example.com", "applicationsets").map_err(text)?;
    for i in 0..node_count {
        client.create(&nodes, None, node(i)).await.map_err(text)?;
    }
    client
        .create(
            &namespaces,
            None,
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}),
        )
        .await
        .map_err(text)?;

    let mut registry = prometheus_client::registry::Registry::default();
    let metrics = kayra_loop::metrics::Metrics::register(&mut registry);
    let stop = CancellationToken::new();
    let as_loop = |name: &str| control.client(kayra_application::controller_identity(name));
    let set_loop = kayra_appset::reconciler::SetLoop::new(as_loop("appset")).map_err(text)?;
    let scheduler = kayra_scheduler::Scheduler::new(as_loop("scheduler"), kayra_scheduler::Policy::Spread)
        .map_err(text)?;
    let mut running = vec![
        tokio::spawn(set_loop.into_loop().metrics(&metrics).run(stop.clone())),
        tokio::spawn(scheduler.into_loop().run(stop.clone())),
    ];
    running.push(tokio::spawn(agents(as_loop("bench-agent"), applications.clone(), stop.clone())));

    let started = Instant::now();
    for i in 0..set_count {
        client.create(&sets, Some(NAMESPACE), set(i, "v1", replicas)).await.map_err(text)?;
    }
    all_converged(&client, &sets, set_count, Duration::from_secs(600)).await?;
    let first = started.elapsed();

    let before = reconciles(&registry);
    let started = Instant::now();
    for i in 0..set_count {
        let mut object = client.get(&sets, Some(NAMESPACE), &format!("set-{i:03}")).await.map_err(text)?;
        object["spec"]["applications"][0]["spec"]["command"] = json!(["/bin/server", "--version", "v2"]);
        client.update(&sets, Some(NAMESPACE), &format!("set-{i:03}"), &object).await.map_err(text)?;
    }
    all_converged(&client, &sets, set_count, Duration::from_secs(600)).await?;
    let rollout = started.elapsed();
    let passes = reconciles(&registry) - before;
    stop.cancel();
    for task in running {
        let _ = task.await;
    }
    let (updates, statuses) = direct_writes(&client, &applications, sizes).await?;

    println!(
        "appset: {set_count} sets x {replicas} replicas over {node_count} nodes, scheduler and simulated agents running; the rollout is a template change of every set, to all Converged (maxUnavailable 25%); the ceiling is the direct spec+status rate of {WRITERS} writers"
    );
    let ceiling = 1.0 / (1.0 / updates + 1.0 / statuses);
    let mut report = Report::new("appset", size);
    report.figure("created and converged", first.as_secs_f64(), "s");
    report.figure("rollout of every set", rollout.as_secs_f64(), "s");
    report
        .figure(
            "children replaced, of direct spec+status writes",
            children as f64 / rollout.as_secs_f64(),
            "/s",
        )
        .ceiling(ceiling);
    report.figure("reconciles per child replaced", passes as f64 / children as f64, "count");
    report.figure("direct spec writes", updates, "/s");
    report.figure("direct status writes, read then write", statuses, "/s");
    report.print();
    Ok(())
}
