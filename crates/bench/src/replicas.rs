//! The replicas benchmark: three real `kayra-controller` processes on a real three-member etcd,
//! written to through all three in turn (as through a balancer: a failed request goes to the
//! next), measuring over `--rounds` rounds (10 by default):
//!
//! - etcd's own election time after its leader is killed (the ceiling: no write through any
//!   replica can be acknowledged before etcd has a leader again);
//! - the write-unavailability window after the etcd leader is killed, and after a replica is
//!   killed: the longest wait for an acknowledged write from the kill on, p50 and p99, each as a
//!   ratio to the election time's p50;
//! - how long a write through one replica takes to reach a watch on another (p50, p99, beside
//!   the same replica's own watch, over a thousand writes).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kayra_store_etcd::test_server::{EtcdCluster, StartError};
use reqwest::Client;
use serde_json::{Value, json};

use crate::nodes::{Process, answering, free_port, quantile, sibling};
use crate::report::{Report, Size};

const SECRETS: &str = "/apis/fleet.example.com/v1/namespaces/default/secrets";

/// How much each measurement does, and how long it waits.
#[derive(Debug, Clone, Copy)]
struct Sizes {
    /// Rounds of each kill, unless `--rounds` says.
    rounds: usize,
    /// Writes timed to a watch, on another replica and on the same.
    delays: usize,
    /// How long after a kill writes are watched for, and the writer warms up before the first.
    settle: Duration,
}

const FULL: Sizes = Sizes { rounds: 10, delays: 1000, settle: Duration::from_secs(5) };
const SMOKE: Sizes = Sizes { rounds: 1, delays: 20, settle: Duration::from_secs(2) };

/// One controller replica: its data directory, its ports and, while it runs, its process.
struct Replica {
    data: PathBuf,
    log: PathBuf,
    https: u16,
    http: u16,
    process: Option<Process>,
}

impl Replica {
    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.http)
    }

    fn spawn(&mut self, endpoints: &str) -> Result<(), String> {
        let child = std::process::Command::new(sibling("kayra-controller")?)
            .arg("--data-dir")
            .arg(&self.data)
            .args(["--store", "etcd", "--etcd-endpoints", endpoints, "--no-agent"])
            .args(["--listen", &format!("127.0.0.1:{}", self.https)])
            .args(["--http-listen", &format!("127.0.0.1:{}", self.http)])
            .env("KAYRA_LOG", std::env::var("KAYRA_LOG").unwrap_or_else(|_| "warn".into()))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&self.log)
                    .map_err(|e| e.to_string())?,
            )
            .spawn()
            .map_err(|e| format!("cannot start kayra-controller: {e}"))?;
        self.process = Some(Process(child));
        Ok(())
    }

    async fn serving(&self, admin: &Client) -> Result<(), String> {
        let deadline = Instant::now() + Duration::from_secs(60);
        answering(admin.get(format!("{}{SECRETS}", self.url())), &self.log, deadline).await
    }
}

/// Three replicas, as the README starts them: one `init`, then each replica serves its own
/// copy of that data directory.
async fn replicas(dir: &Path, endpoints: &str) -> Result<(Vec<Replica>, Client), String> {
    let initialised = dir.join("init");
    let init = std::process::Command::new(sibling("kayra-controller")?)
        .arg("init")
        .arg("--data-dir")
        .arg(&initialised)
        .output()
        .map_err(|e| format!("cannot run kayra-controller init: {e}"))?;
    if !init.status.success() {
        return Err(format!("kayra-controller init failed: {}", String::from_utf8_lossy(&init.stderr)));
    }
    let token = std::fs::read_to_string(initialised.join("admin.token")).map_err(|e| e.to_string())?;
    let admin = crate::nodes::bearer_client(token.trim())?
        .connect_timeout(Duration::from_secs(1))
        .build()
        .map_err(|e| e.to_string())?;
    let mut all = Vec::new();
    for n in 0..3 {
        let home = dir.join(format!("replica-{n}"));
        std::fs::create_dir_all(&home).map_err(|e| e.to_string())?;
        let mut next = Replica {
            data: home.join("data"),
            log: home.join("controller.log"),
            https: free_port()?,
            http: free_port()?,
            process: None,
        };
        let copied = std::process::Command::new("cp").arg("-a").arg(&initialised).arg(&next.data).status();
        if !copied.is_ok_and(|status| status.success()) {
            return Err("cannot copy the initialised data directory".into());
        }
        next.spawn(endpoints)?;
        next.serving(&admin).await?;
        all.push(next);
    }
    Ok((all, admin))
}

/// Writes Secrets through each replica in turn until told to stop, noting when each create
/// was acknowledged; a failed create goes to the next replica.
fn writer(
    admin: Client,
    urls: Vec<String>,
    acks: Arc<Mutex<Vec<Instant>>>,
    stop: Arc<std::sync::atomic::AtomicBool>,
) {
    tokio::spawn(async move {
        let mut at = 0;
        let mut n = 0u64;
        while !stop.load(std::sync::atomic::Ordering::SeqCst) {
            at += 1;
            let url = format!("{}{SECRETS}", urls[at % urls.len()]);
            let body = json!({"apiVersion": "fleet.example.com/v1", "kind": "Secret",
                "metadata": {"name": format!("w-{n}")}, "stringData": {"n": n.to_string()}});
            let sent = admin.post(url).json(&body).timeout(Duration::from_secs(10)).send().await;
            match sent.map(|response| response.status().as_u16()) {
                Ok(201) => {
                    acks.lock().expect("the writer's record").push(Instant::now());
                    n += 1;
                }
                // Applied by an attempt whose answer was lost: the next name.
                Ok(409) => n += 1,
                _ => tokio::time::sleep(Duration::from_millis(10)).await,
            }
        }
    });
}

/// The longest wait for an acknowledgement from `from` until `until`.
fn window(acks: &[Instant], from: Instant, until: Instant) -> Duration {
    let after: Vec<Instant> = acks.iter().copied().filter(|at| *at > from && *at <= until).collect();
    if after.is_empty() {
        return until - from;
    }
    std::iter::once(from)
        .chain(after.iter().copied())
        .zip(after.iter().copied())
        .map(|(a, b)| b - a)
        .max()
        .unwrap_or_default()
}

/// How long writes through `writer_url` take to reach a watch through `watch_url`.
async fn watch_delays(
    admin: &Client,
    writer_url: &str,
    watch_url: &str,
    prefix: &str,
    count: usize,
) -> Result<Vec<Duration>, String> {
    let list: Value = admin
        .get(format!("{watch_url}{SECRETS}"))
        .send()
        .await
        .map_err(|e| e.to_string())?
        .json()
        .await
        .map_err(|e| e.to_string())?;
    let from = list["metadata"]["resourceVersion"].as_str().unwrap_or("0").to_owned();
    let mut response = admin
        .get(format!("{watch_url}{SECRETS}?watch=true&resourceVersion={from}"))
        .send()
        .await
        .map_err(|e| e.to_string())?;
    let arrivals: Arc<Mutex<Vec<(String, Instant)>>> = Arc::default();
    let seen = arrivals.clone();
    let reader = tokio::spawn(async move {
        let mut pending = Vec::new();
        while let Ok(Some(chunk)) = response.chunk().await {
            let now = Instant::now();
            pending.extend_from_slice(&chunk);
            while let Some(end) = pending.iter().position(|byte| *byte == b'\n') {
                let line: Vec<u8> = pending.drain(..=end).collect();
                if let Ok(event) = serde_json::from_slice::<Value>(&line)
                    && event["type"] == "ADDED"
                {
                    let name = event["object"]["metadata"]["name"].as_str().unwrap_or_default().to_owned();
                    seen.lock().expect("the watch's record").push((name, now));
                }
            }
        }
    });
    let mut sent = Vec::with_capacity(count);
    for n in 0..count {
        let name = format!("{prefix}-{n}");
        let body =
            json!({"apiVersion": "fleet.example.com/v1", "kind": "Secret", "metadata": {"name": name}});
        let at = Instant::now();
        let response = admin
            .post(format!("{writer_url}{SECRETS}"))
            .json(&body)
            .send()
            .await
            .map_err(|e| e.to_string())?;
        if response.status().as_u16() != 201 {
            return Err(format!("a create answered {}", response.status()));
        }
        sent.push((name, at));
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    while arrivals.lock().expect("the watch's record").len() < count && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    reader.abort();
    let arrived: std::collections::HashMap<String, Instant> =
        arrivals.lock().expect("the watch's record").iter().cloned().collect();
    let mut delays: Vec<Duration> = Vec::with_capacity(count);
    for (name, at) in sent {
        let Some(arrival) = arrived.get(&name) else {
            return Err(format!("the watch through {watch_url} never saw {name}"));
        };
        delays.push(arrival.saturating_duration_since(at));
    }
    delays.sort();
    Ok(delays)
}

fn rounds_of(args: &[String], default: usize) -> Result<usize, String> {
    match args {
        [] => Ok(default),
        [flag, value] if flag == "--rounds" => match value.parse::<usize>() {
            Ok(rounds) if rounds > 0 => Ok(rounds),
            _ => Err("--rounds needs a number of at least 1".into()),
        },
        _ => Err("usage: kayra-bench replicas [--rounds R] [--smoke]".into()),
    }
}

fn line(label: &str, sorted: &[Duration], election: f64) {
    let (p50, p99) = (quantile(sorted, 0.5), quantile(sorted, 0.99));
    println!(
        "  {label:<46} p50 {p50:>8.1} ms  p99 {p99:>8.1} ms  ratio to the election p50: {:.2} / {:.2}",
        p50 / election,
        p99 / election
    );
}

pub(crate) async fn run(args: &[String], size: Size) -> Result<(), String> {
    let Sizes { rounds, delays, settle } = size.pick(FULL, SMOKE);
    let rounds = rounds_of(args, rounds)?;
    let mut report = Report::new("replicas", size);
    let _ = rustls::crypto::ring::default_provider().install_default();
    println!(
        "Replicas benchmark: one run of {rounds} rounds; each ratio compares two figures from this run\n"
    );
    let mut etcd = match EtcdCluster::start(3).await {
        Ok(etcd) => etcd,
        Err(StartError::Missing) => {
            // How a benchmark says it could not run for want of a tool; `cargo xtask bench
            // --smoke` records it as a skip.
            println!("skipped: replicas: {}", StartError::Missing);
            return Ok(());
        }
        Err(error) => return Err(format!("a three-member etcd: {error}")),
    };
    let endpoints = etcd.endpoints().join(",");
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let (mut replicas, admin) = replicas(dir.path(), &endpoints).await?;
    let urls: Vec<String> = replicas.iter().map(Replica::url).collect();

    let cross = watch_delays(&admin, &urls[0], &urls[1], "cross", delays).await?;
    let same = watch_delays(&admin, &urls[0], &urls[0], "same", delays).await?;

    let acks: Arc<Mutex<Vec<Instant>>> = Arc::default();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    writer(admin.clone(), urls.clone(), acks.clone(), stop.clone());
    tokio::time::sleep(settle / 2).await;
    let (mut elections, mut etcd_windows, mut replica_windows) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..rounds {
        let leader = etcd.leader().await.ok_or("etcd has no leader")?;
        let killed = Instant::now();
        etcd.kill(leader);
        let elected = loop {
            if etcd.leader().await.is_some_and(|new| new != leader) {
                break killed.elapsed();
            }
            if killed.elapsed() > Duration::from_secs(30) {
                return Err("etcd elected no other leader within 30 s".into());
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        };
        tokio::time::sleep(settle.saturating_sub(killed.elapsed())).await;
        elections.push(elected);
        etcd_windows.push(window(&acks.lock().expect("the writer's record"), killed, killed + settle));
        etcd.restart(leader).await.map_err(|e| format!("etcd member {leader} restarts: {e}"))?;
        tokio::time::sleep(Duration::from_secs(1)).await;

        let replica = &mut replicas[round % 3];
        let killed = Instant::now();
        replica.process = None;
        tokio::time::sleep(settle).await;
        replica_windows.push(window(&acks.lock().expect("the writer's record"), killed, killed + settle));
        replica.spawn(&endpoints)?;
        replica.serving(&admin).await?;
    }
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let written = acks.lock().expect("the writer's record").len();
    for figures in [&mut elections, &mut etcd_windows, &mut replica_windows] {
        figures.sort();
    }
    let election = quantile(&elections, 0.5);
    println!(
        "write unavailability ({written} writes acknowledged through three replicas, {rounds} rounds of each kill):"
    );
    line("etcd's own election after its leader's kill", &elections, election);
    line("writes after the etcd leader's kill", &etcd_windows, election);
    line("writes after a replica's kill", &replica_windows, election);
    println!("\na write through one replica seen by a watch ({delays} writes each):");
    line("on another replica", &cross, election);
    line("on the same replica (the ceiling)", &same, election);
    println!(
        "  cross-replica p99 over the same replica's: {:.2}; target p99 at most 1000 ms: {}",
        quantile(&cross, 0.99) / quantile(&same, 0.99),
        if quantile(&cross, 0.99) <= 1000.0 { "met" } else { "NOT met" }
    );
    report.figure("etcd's own election after its leader's kill, p50", election, "ms");
    for (label, windows) in [("the etcd leader's", &etcd_windows), ("a replica's", &replica_windows)] {
        for (quantile_name, q) in [("p50", 0.5), ("p99", 0.99)] {
            let name =
                format!("write unavailability after {label} kill, {quantile_name}, of etcd's election p50");
            report.figure(name, quantile(windows, q), "ms").ceiling(election);
        }
    }
    for (quantile_name, q) in [("p50", 0.5), ("p99", 0.99)] {
        let name =
            format!("a write seen by a watch on another replica, {quantile_name}, of the same replica's");
        report.figure(name, quantile(&cross, q), "ms").ceiling(quantile(&same, q));
    }
    report.print();
    Ok(())
}
