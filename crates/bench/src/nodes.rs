//! The node benchmark: N simulated agents, each with its own node certificate, hold one node
//! session each over real gRPC and mutual TLS against the real `kayra-controller` binary, run
//! as a process of its own. Figures: sessions held, the controller's resident memory per
//! session, and the delay from one write that concerns every node (the Secret all their
//! Applications reference) to each node receiving it; then, with every node heartbeating as
//! the real agent does, the controller's CPU and its store writes per node per minute. The
//! ceiling, in the same run: a bare tonic service behind the same TLS listener in a process of
//! its own, pushing a message of the same size to as many streams and taking as many
//! heartbeats (which it reads and drops: no store behind it).
//!
//! Three processes, so that no one of them needs more than one file descriptor per session:
//! the controller, this one (the agents), and then the bare server.

mod agents;
pub(crate) mod bare;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use reqwest::Client;
use serde_json::{Value, json};

use agents::Fleet;

use crate::report::{Report, Size};

const FLEET: &str = "/apis/fleet.example.com/v1/namespaces/default";
/// Concurrent HTTP/1.1 clients creating the Applications.
const CREATORS: usize = 64;
/// How long opening every session may take.
const OPENING_DEADLINE: Duration = Duration::from_secs(600);
/// How long one push may take to reach every node before the round counts the rest as lost.
const ROUND_DEADLINE: Duration = Duration::from_secs(60);

/// What `kayra-bench nodes` was asked for.
#[derive(Debug)]
struct Options {
    nodes: usize,
    rounds: usize,
    store: String,
    /// How long the heartbeats are measured for.
    heartbeats: Duration,
    /// How often each node heartbeats: the real agent's interval, shorter in a smoke run.
    interval: Duration,
    /// Over how long a server's CPU is read to tell it is quiet: its memory is read, and its
    /// pushes timed, once it is.
    settle: Duration,
}

fn options(args: &[String], size: Size) -> Result<Options, String> {
    let mut options = size.pick(
        Options {
            nodes: 10_000,
            rounds: 5,
            store: "memory".into(),
            heartbeats: Duration::from_secs(120),
            interval: agents::HEARTBEAT,
            settle: Duration::from_secs(3),
        },
        Options {
            nodes: 20,
            rounds: 1,
            store: "memory".into(),
            heartbeats: Duration::from_secs(1),
            interval: Duration::from_secs(1),
            settle: Duration::from_millis(300),
        },
    );
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        let mut value = || args.next().ok_or_else(|| format!("{arg} needs a value"));
        match arg.as_str() {
            "--nodes" => options.nodes = value()?.parse().map_err(|e| format!("--nodes: {e}"))?,
            "--rounds" => options.rounds = value()?.parse().map_err(|e| format!("--rounds: {e}"))?,
            "--store" => options.store = value()?.clone(),
            "--heartbeat-seconds" => {
                let seconds = value()?.parse().map_err(|e| format!("--heartbeat-seconds: {e}"))?;
                options.heartbeats = Duration::from_secs(seconds);
            }
            other => {
                return Err(format!(
                    "unknown option {other}; expected --nodes N, --rounds R, --store memory|sled, --heartbeat-seconds S"
                ));
            }
        }
    }
    if options.nodes == 0 || options.rounds == 0 || options.heartbeats.is_zero() {
        return Err("--nodes, --rounds and --heartbeat-seconds must be at least 1".into());
    }
    Ok(options)
}

/// A child process this benchmark started, killed (by its own id) when dropped.
pub(crate) struct Process(pub(crate) Child);

impl Process {
    pub(crate) fn pid(&self) -> u32 {
        self.0.id()
    }
}

/// The controller's `binary`, run under `KAYRA_BENCH_WRAP` if set (a profiler such as
/// `heaptrack -o <file>`; its figures then are the profiler's, and the controller is left
/// running for a SIGTERM by hand, so that the profiler writes its data).
pub(crate) fn wrapped(binary: PathBuf) -> Command {
    let wrapper = std::env::var("KAYRA_BENCH_WRAP").unwrap_or_default();
    let mut words = wrapper.split_whitespace();
    match words.next() {
        Some(first) => {
            let mut command = Command::new(first);
            command.args(words).arg(binary);
            command
        }
        None => Command::new(binary),
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        if std::env::var_os("KAYRA_BENCH_WRAP").is_some() {
            // Under a profiler: the profiled process gets SIGTERM by hand and writes its data.
            return;
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Resident memory of process `pid`, in bytes (`VmRSS` of `/proc/<pid>/status`).
pub(crate) fn rss(pid: u32) -> Result<u64, String> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).map_err(|e| e.to_string())?;
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map(|kib| kib * 1024)
        .ok_or_else(|| format!("no VmRSS for process {pid}"))
}

pub(crate) fn free_port() -> Result<u16, String> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    Ok(listener.local_addr().map_err(|e| e.to_string())?.port())
}

pub(crate) fn sibling(binary: &str) -> Result<PathBuf, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let path = exe.with_file_name(binary);
    if path.exists() {
        Ok(path)
    } else {
        Err(format!("{} is not built; `cargo xtask bench nodes` (or `watch`) builds it", path.display()))
    }
}

/// CPU time process `pid` has used so far, user and system, in seconds (`/proc/<pid>/stat`).
pub(crate) fn cpu_seconds(pid: u32) -> Result<f64, String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).map_err(|e| e.to_string())?;
    // The command name may hold spaces; the fields after it are space-separated.
    let after_name = stat.rsplit_once(')').map(|(_, rest)| rest).ok_or("no command name in stat")?;
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name.
    let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<u64>().ok()).ok_or("a short stat line");
    let per_second = rustix::param::clock_ticks_per_second() as f64;
    Ok((ticks(11)? + ticks(12)?) as f64 / per_second)
}

/// Waits until process `pid` uses under a tenth of a core over `sample` (at most two
/// minutes); answers how long that took.
pub(crate) async fn quiet(pid: u32, sample: Duration) -> Result<Duration, String> {
    let started = Instant::now();
    let mut before = cpu_seconds(pid)?;
    while started.elapsed() < Duration::from_secs(120) {
        tokio::time::sleep(sample).await;
        let now = cpu_seconds(pid)?;
        if now - before < 0.1 * sample.as_secs_f64() {
            break;
        }
        before = now;
    }
    Ok(started.elapsed())
}

fn open_files_limit() -> Option<u64> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits.lines().find(|line| line.starts_with("Max open files"))?;
    line.split_whitespace().nth(3)?.parse().ok()
}

/// The controller, started on a fresh data directory and ready to answer.
struct Controller {
    process: Process,
    url: String,
    admin: Client,
    pki: PathBuf,
    log: PathBuf,
}

async fn start_controller(dir: &Path, options: &Options) -> Result<Controller, String> {
    let port = free_port()?;
    let config = dir.join("kayra.yaml");
    // The default ready timeout (40 s), so that heartbeats are written as a deployment writes
    // them (a longer one would space the writes out with it). Nodes heartbeat only while the
    // heartbeats are measured, so the liveness loop marks them Unknown before that, and the
    // first interval of heartbeats, which brings them back, is left out of the measurement.
    std::fs::write(&config, format!("maxConnections: {}\nhttpListen: null\n", options.nodes + 1024))
        .map_err(|e| e.to_string())?;
    let log = dir.join("controller.log");
    let data = dir.join("data");
    let child = wrapped(sibling("kayra-controller")?)
        .arg("--config")
        .arg(&config)
        .arg("--data-dir")
        .arg(&data)
        .args(["--store", &options.store, "--listen", &format!("127.0.0.1:{port}")])
        // Only the simulated nodes hold sessions.
        .args(["--no-agent", "--http-listen", "off"])
        .env("KAYRA_LOG", std::env::var("KAYRA_LOG").unwrap_or_else(|_| "warn".into()))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).map_err(|e| e.to_string())?)
        .spawn()
        .map_err(|e| format!("cannot start kayra-controller: {e}"))?;
    let process = Process(child);
    let url = format!("https://127.0.0.1:{port}");
    let pki = data.join("pki");
    let deadline = Instant::now() + Duration::from_secs(60);
    let token = admin_token(&data, &log, deadline).await?;
    let ca = std::fs::read(pki.join("ca.crt")).map_err(|e| e.to_string())?;
    let mut headers = reqwest::header::HeaderMap::new();
    headers.insert(
        reqwest::header::AUTHORIZATION,
        format!("Bearer {token}").parse().map_err(|_| "the admin token is not a header value")?,
    );
    let admin = Client::builder()
        .tls_certs_only([reqwest::Certificate::from_pem(&ca).map_err(|e| e.to_string())?])
        .default_headers(headers)
        .http1_only()
        .pool_max_idle_per_host(CREATORS)
        .build()
        .map_err(|e| e.to_string())?;
    answering(admin.get(format!("{url}{FLEET}/secrets")), &log, deadline).await?;
    Ok(Controller { process, url, admin, pki, log })
}

/// The admin bearer token a starting controller writes into `data`, waited for until
/// `deadline`; the error points at its `log`.
pub(crate) async fn admin_token(data: &Path, log: &Path, deadline: Instant) -> Result<String, String> {
    loop {
        if let Ok(token) = std::fs::read_to_string(data.join("admin.token"))
            && !token.trim().is_empty()
        {
            return Ok(token.trim().to_owned());
        }
        if Instant::now() > deadline {
            return Err(format!("the controller wrote no admin token; see {}", log.display()));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// An HTTP/1.1 client sending `token` as its bearer credential, to finish building.
pub(crate) fn bearer_client(token: &str) -> Result<reqwest::ClientBuilder, String> {
    let mut headers = reqwest::header::HeaderMap::new();
    let bearer = format!("Bearer {token}").parse().map_err(|_| "the admin token is not a header value")?;
    headers.insert(reqwest::header::AUTHORIZATION, bearer);
    Ok(reqwest::Client::builder().default_headers(headers).http1_only())
}

/// Waits until `request` (a read a started controller answers once it serves) succeeds, up to
/// `deadline`; the error points at the controller's `log`.
pub(crate) async fn answering(
    request: reqwest::RequestBuilder,
    log: &Path,
    deadline: Instant,
) -> Result<(), String> {
    loop {
        let attempt = request.try_clone().ok_or("the readiness request cannot be repeated")?;
        if let Ok(response) = attempt.send().await
            && response.status().is_success()
        {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!("the controller never answered; see {}", log.display()));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn create(admin: &Client, url: String, body: Value) -> Result<Value, String> {
    let response = admin.post(url).json(&body).send().await.map_err(|e| e.to_string())?;
    let status = response.status();
    let answer: Value = response.json().await.map_err(|e| e.to_string())?;
    if status.as_u16() != 201 {
        return Err(format!("create answered {status}: {answer}"));
    }
    Ok(answer)
}

/// The store's revision now: a list's resourceVersion, which every store write moves by one.
async fn store_revision(controller: &Controller) -> Result<u64, String> {
    let response = controller
        .admin
        .get(format!("{}/api/v1/namespaces?limit=1", controller.url))
        .send()
        .await
        .map_err(|e| e.to_string())?;
    let answer: Value = response.json().await.map_err(|e| e.to_string())?;
    answer["metadata"]["resourceVersion"]
        .as_str()
        .and_then(|version| version.parse().ok())
        .ok_or_else(|| format!("a list without a numeric resourceVersion: {answer}"))
}

/// What the heartbeats cost a server: its CPU per node per minute (ms) and, for the
/// controller, the store writes per node per minute.
#[derive(Debug, Clone, Copy)]
struct Heartbeats {
    cpu_ms_per_node_minute: f64,
    cores: f64,
    writes_per_node_minute: Option<f64>,
}

/// Lets every node heartbeat for one interval (so each has), then measures `pid`'s CPU and,
/// with `controller`, the store's revision over `window`.
async fn heartbeats(
    fleet: &Fleet,
    pid: u32,
    controller: Option<&Controller>,
    window: Duration,
) -> Result<Heartbeats, String> {
    fleet.heartbeats(true);
    tokio::time::sleep(fleet.interval).await;
    let revision = match controller {
        Some(controller) => Some(store_revision(controller).await?),
        None => None,
    };
    let (cpu, started) = (cpu_seconds(pid)?, Instant::now());
    tokio::time::sleep(window).await;
    let (cpu, elapsed) = (cpu_seconds(pid)? - cpu, started.elapsed().as_secs_f64());
    let writes = match (controller, revision) {
        (Some(controller), Some(revision)) => {
            Some(store_revision(controller).await?.saturating_sub(revision))
        }
        _ => None,
    };
    fleet.heartbeats(false);
    let node_minutes = fleet.held.max(1) as f64 * elapsed / 60.0;
    let measured = Heartbeats {
        cpu_ms_per_node_minute: cpu * 1e3 / node_minutes,
        cores: cpu / elapsed,
        writes_per_node_minute: writes.map(|writes| writes as f64 / node_minutes),
    };
    println!(
        "  {} nodes heartbeating every {} s for {elapsed:.0} s: {:.2} cores, {:.3} ms CPU per node per minute{}",
        fleet.held,
        fleet.interval.as_secs_f64(),
        measured.cores,
        measured.cpu_ms_per_node_minute,
        match (writes, measured.writes_per_node_minute) {
            (Some(writes), Some(per)) => format!(", {writes} store writes: {per:.2} per node per minute"),
            _ => String::new(),
        }
    );
    Ok(measured)
}

fn application(i: usize) -> Value {
    json!({"apiVersion": "fleet.example.com/v1", "kind": "Application",
           "metadata": {"name": format!("app-{i}")},
           "spec": {"command": ["/bin/sleep", "infinity"],
                    "env": [{"name": "TOKEN", "secretRef": {"name": "shared", "key": "token"}}],
                    "placement": {"nodeName": agents::node_name(i)}}})
}

/// Creates `count` objects, `make(i)` for each `i`, at `path` from [`CREATORS`] concurrent
/// clients, and prints how long it took; answers the first one created.
async fn create_all(
    controller: &Controller,
    path: &str,
    what: &str,
    count: usize,
    make: fn(usize) -> Value,
) -> Result<Value, String> {
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for c in 0..CREATORS {
        let (admin, url) = (controller.admin.clone(), format!("{}{path}", controller.url));
        tasks.spawn(async move {
            let mut first = None;
            for i in (c..count).step_by(CREATORS) {
                let created = create(&admin, url.clone(), make(i)).await?;
                first.get_or_insert(created);
            }
            Ok::<_, String>(first)
        });
    }
    let mut sample = None;
    while let Some(done) = tasks.join_next().await {
        if let Some(created) = done.map_err(|e| e.to_string())?? {
            sample.get_or_insert(created);
        }
    }
    let elapsed = started.elapsed();
    println!(
        "  created {count} {what} in {:.1} s ({:.0}/s, {CREATORS} HTTP/1.1 clients)",
        elapsed.as_secs_f64(),
        count as f64 / elapsed.as_secs_f64()
    );
    sample.ok_or_else(|| format!("no {what} was created"))
}

/// A Node object for simulated node `i`: an Application may name only a Node that exists.
fn node(i: usize) -> Value {
    json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": agents::node_name(i)}})
}

/// Creates the shared Secret, one Node per simulated node and one Application per node, bound
/// to it and referencing the Secret; answers the Application and Secret as stored (the bare
/// server sends copies).
async fn populate(controller: &Controller, nodes: usize) -> Result<(Value, Value), String> {
    let secret = json!({"apiVersion": "fleet.example.com/v1", "kind": "Secret",
                        "metadata": {"name": "shared"}, "stringData": {"token": "round-0"}});
    let secret = create(&controller.admin, format!("{}{FLEET}/secrets", controller.url), secret).await?;
    create_all(controller, "/api/v1/nodes", "Nodes", nodes, node).await?;
    let sample =
        create_all(controller, &format!("{FLEET}/applications"), "Applications", nodes, application).await?;
    Ok((sample, secret))
}

/// Patches the shared Secret's data; answers its new resourceVersion.
async fn patch_secret(controller: &Controller, round: usize) -> Result<String, String> {
    let response = controller
        .admin
        .patch(format!("{}{FLEET}/secrets/shared", controller.url))
        .header("Content-Type", "application/merge-patch+json")
        .body(format!(r#"{{"stringData":{{"token":"round-{round}"}}}}"#))
        .send()
        .await
        .map_err(|e| e.to_string())?;
    let status = response.status();
    let answer: Value = response.json().await.map_err(|e| e.to_string())?;
    if !status.is_success() {
        return Err(format!("the Secret's patch answered {status}: {answer}"));
    }
    answer["metadata"]["resourceVersion"]
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| format!("the patched Secret has no resourceVersion: {answer}"))
}

/// One round's delays, and how many nodes never got the push: each of those counts as the
/// round's deadline in the delays, so that a lost push raises the quantiles rather than
/// leaving them.
#[derive(Debug, Default)]
struct Round {
    delays: Vec<Duration>,
    lost: usize,
}

impl Round {
    fn of(delays: Vec<Option<Duration>>) -> Round {
        let lost = delays.iter().filter(|d| d.is_none()).count();
        let mut delays: Vec<Duration> =
            delays.into_iter().map(|delay| delay.unwrap_or(ROUND_DEADLINE)).collect();
        delays.sort();
        Round { delays, lost }
    }
}

pub(crate) fn quantile(sorted: &[Duration], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() as f64 - 1.0) * q).round() as usize].as_secs_f64() * 1e3
}

fn print_rounds(label: &str, rounds: &[Round]) -> (f64, f64, usize) {
    for (i, round) in rounds.iter().enumerate() {
        println!(
            "    {label} round {}: p50 {:>7.1} ms  p99 {:>7.1} ms  max {:>7.1} ms{}",
            i + 1,
            quantile(&round.delays, 0.5),
            quantile(&round.delays, 0.99),
            quantile(&round.delays, 1.0),
            if round.lost > 0 { format!("  ({} nodes never got it)", round.lost) } else { String::new() }
        );
    }
    let mut all: Vec<Duration> = rounds.iter().flat_map(|r| r.delays.iter().copied()).collect();
    all.sort();
    let (p50, p99) = (quantile(&all, 0.5), quantile(&all, 0.99));
    let lost: usize = rounds.iter().map(|round| round.lost).sum();
    println!(
        "    {label} all rounds: p50 {p50:>7.1} ms  p99 {p99:>7.1} ms  max {:>7.1} ms  ({lost} pushes lost, counted as the {ROUND_DEADLINE:?} deadline)",
        quantile(&all, 1.0)
    );
    (p50, p99, lost)
}

/// What one server (ours or the bare one) measured.
struct Measured {
    held: usize,
    /// Pushes that never reached their node within the round's deadline.
    lost: usize,
    per_session: f64,
    p50: f64,
    p99: f64,
    heartbeats: Heartbeats,
    /// How long after the last session opened the controller went quiet.
    settling: Duration,
}

fn print_fleet(fleet: &Fleet, nodes: usize) {
    println!(
        "  sessions held: {} of {nodes} in {:.1} s ({:.0}/s)",
        fleet.held,
        fleet.opened_in.as_secs_f64(),
        fleet.held as f64 / fleet.opened_in.as_secs_f64()
    );
    for (kind, count) in &fleet.failures {
        println!("    {count} failed: {kind} ...");
    }
}

async fn ours(options: &Options, dir: &Path) -> Result<(Measured, Value, Value, PathBuf), String> {
    println!("kayra-controller ({} store), {} nodes", options.store, options.nodes);
    let controller = start_controller(dir, options).await?;
    let (application, secret) = populate(&controller, options.nodes).await?;
    let ca_pem = std::fs::read_to_string(controller.pki.join("ca.crt")).map_err(|e| e.to_string())?;
    let ca_key = std::fs::read_to_string(controller.pki.join("ca.key")).map_err(|e| e.to_string())?;
    let started = Instant::now();
    let certificates = agents::issue(&ca_pem, &ca_key, options.nodes).await?;
    println!(
        "  issued {} node certificates (a P-256 key each) in {:.1} s",
        certificates.len(),
        started.elapsed().as_secs_f64()
    );
    tokio::time::sleep(options.settle).await;
    let before = rss(controller.process.pid())?;
    let mut fleet =
        agents::open(&controller.url, &ca_pem, &certificates, OPENING_DEADLINE, options.interval).await;
    print_fleet(&fleet, options.nodes);
    // Each new session writes its Node's status and Lease and gets its first push: memory is
    // read, and the pushes timed, once those are done.
    let settling = quiet(controller.process.pid(), options.settle).await?;
    println!(
        "  the controller was quiet {:.1} s after the last session opened (under a tenth of a core for {:.1} s)",
        settling.as_secs_f64(),
        options.settle.as_secs_f64()
    );
    let after = rss(controller.process.pid())?;
    let per_session = after.saturating_sub(before) as f64 / fleet.held.max(1) as f64;
    println!(
        "  controller RSS: {:.1} MiB before the sessions, {:.1} MiB with them: {:.1} KiB per session (target <= 16 KiB)",
        before as f64 / 1048576.0,
        after as f64 / 1048576.0,
        per_session / 1024.0
    );
    println!("  agents' process RSS: {:.1} MiB", rss(std::process::id())? as f64 / 1048576.0);
    fleet.drain();
    let mut rounds = Vec::new();
    let mut patches = Vec::new();
    for round in 1..=options.rounds {
        let started = Instant::now();
        let version = patch_secret(&controller, round).await?;
        patches.push(started.elapsed());
        rounds.push(Round::of(fleet.delivered(fleet.held, &version, started, ROUND_DEADLINE).await));
        fleet.drain();
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    patches.sort();
    println!(
        "  a patch of the Secret every node's Application references, to each node's receipt of it (from just before the PATCH; the PATCH itself took p50 {:.1} ms):",
        quantile(&patches, 0.5)
    );
    let (p50, p99, lost) = print_rounds("ours", &rounds);
    let heartbeats =
        heartbeats(&fleet, controller.process.pid(), Some(&controller), options.heartbeats).await?;
    let held = fleet.held;
    fleet.close().await;
    if held < options.nodes {
        println!("  the controller's log: {}", controller.log.display());
    }
    Ok((
        Measured { held, per_session, p50, p99, lost, heartbeats, settling },
        application,
        secret,
        controller.pki.clone(),
    ))
}

async fn bare_ceiling(
    options: &Options,
    dir: &Path,
    pki: &Path,
    application: &Value,
    secret: &Value,
) -> Result<Measured, String> {
    println!("\nbare tonic NodeService, same TLS listener, {} streams", options.nodes);
    let (application_path, secret_path) = (dir.join("application.json"), dir.join("secret.json"));
    std::fs::write(&application_path, serde_json::to_vec(application).map_err(|e| e.to_string())?)
        .map_err(|e| e.to_string())?;
    std::fs::write(&secret_path, serde_json::to_vec(secret).map_err(|e| e.to_string())?)
        .map_err(|e| e.to_string())?;
    let mut child = Command::new(std::env::current_exe().map_err(|e| e.to_string())?)
        .arg("nodes-bare-server")
        .arg(pki)
        .arg(&application_path)
        .arg(&secret_path)
        .arg((options.nodes + 1024).to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start the bare server: {e}"))?;
    let stdout = child.stdout.take().ok_or("the bare server has no stdout")?;
    let mut stdin = child.stdin.take().ok_or("the bare server has no stdin")?;
    let process = Process(child);
    let port = tokio::task::spawn_blocking(move || {
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line).map_err(|e| e.to_string())?;
        line.trim()
            .strip_prefix("listening ")
            .and_then(|p| p.parse::<u16>().ok())
            .ok_or(format!("the bare server said {line:?}"))
    })
    .await
    .map_err(|e| e.to_string())??;
    let url = format!("https://127.0.0.1:{port}");
    let ca_pem = std::fs::read_to_string(pki.join("ca.crt")).map_err(|e| e.to_string())?;
    let ca_key = std::fs::read_to_string(pki.join("ca.key")).map_err(|e| e.to_string())?;
    let certificates = agents::issue(&ca_pem, &ca_key, options.nodes).await?;
    tokio::time::sleep(options.settle).await;
    let before = rss(process.pid())?;
    let mut fleet = agents::open(&url, &ca_pem, &certificates, OPENING_DEADLINE, options.interval).await;
    print_fleet(&fleet, options.nodes);
    let settling = quiet(process.pid(), options.settle).await?;
    let after = rss(process.pid())?;
    let per_session = after.saturating_sub(before) as f64 / fleet.held.max(1) as f64;
    println!(
        "  bare server RSS: {:.1} MiB before the streams, {:.1} MiB with them: {:.1} KiB per stream",
        before as f64 / 1048576.0,
        after as f64 / 1048576.0,
        per_session / 1024.0
    );
    fleet.drain();
    let mut rounds = Vec::new();
    for round in 1..=options.rounds {
        let version = format!("bare-{round}");
        let started = Instant::now();
        writeln!(stdin, "push {version}").map_err(|e| e.to_string())?;
        rounds.push(Round::of(fleet.delivered(fleet.held, &version, started, ROUND_DEADLINE).await));
        fleet.drain();
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    println!("  one message of the same size pushed to every stream, to each client's receipt of it:");
    let (p50, p99, lost) = print_rounds("bare", &rounds);
    let heartbeats = heartbeats(&fleet, process.pid(), None, options.heartbeats).await?;
    let held = fleet.held;
    fleet.close().await;
    drop(stdin);
    drop(process);
    Ok(Measured { held, per_session, p50, p99, lost, heartbeats, settling })
}

pub(crate) async fn run(args: &[String], size: Size) -> Result<(), String> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let options = options(args, size)?;
    println!("node benchmark: one run; each ratio compares two figures from this run");
    if let Some(limit) = open_files_limit() {
        println!("  open files allowed per process: {limit} (each process here needs one per session)");
        if (limit as usize) < options.nodes + 512 {
            return Err(format!(
                "{} sessions need more open files than `ulimit -n` allows ({limit})",
                options.nodes
            ));
        }
    }
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let (ours, application, secret, pki) = ours(&options, dir.path()).await?;
    let bare = bare_ceiling(&options, dir.path(), &pki, &application, &secret).await?;
    println!("\nsummary, {} nodes", options.nodes);
    println!("  sessions held        ours {:>8}   bare {:>8}   (target >= 10 000)", ours.held, bare.held);
    println!(
        "  RSS per session      ours {:>6.1} KiB   bare {:>6.1} KiB   ratio {:.2} (target ours <= 16 KiB)",
        ours.per_session / 1024.0,
        bare.per_session / 1024.0,
        ours.per_session / bare.per_session
    );
    println!(
        "  push to every node   ours p50 {:>6.1} ms p99 {:>6.1} ms   bare p50 {:>6.1} ms p99 {:>6.1} ms   ratio p99 {:.2} (target ours p99 <= 1000 ms)",
        ours.p50,
        ours.p99,
        bare.p50,
        bare.p99,
        ours.p99 / bare.p99
    );
    println!(
        "  heartbeats' CPU      ours {:>6.3} ms   bare {:>6.3} ms per node per minute   ratio {:.2} ({:.2} cores beside {:.2})",
        ours.heartbeats.cpu_ms_per_node_minute,
        bare.heartbeats.cpu_ms_per_node_minute,
        ours.heartbeats.cpu_ms_per_node_minute / bare.heartbeats.cpu_ms_per_node_minute,
        ours.heartbeats.cores,
        bare.heartbeats.cores
    );
    if let Some(writes) = ours.heartbeats.writes_per_node_minute {
        println!(
            "  store writes         ours {writes:>6.2} per node per minute (the bare server has no store)"
        );
    }
    let mut report = Report::new("nodes", size);
    let nodes = options.nodes;
    report.figure(format!("sessions held of {nodes}"), ours.held as f64, "count").ceiling(bare.held as f64);
    report.figure("RSS per session", ours.per_session / 1024.0, "KiB").ceiling(bare.per_session / 1024.0);
    report.figure(format!("push to every node, p50, {nodes} nodes"), ours.p50, "ms").ceiling(bare.p50);
    report.figure(format!("push to every node, p99, {nodes} nodes"), ours.p99, "ms").ceiling(bare.p99);
    report.figure("pushes lost", ours.lost as f64, "count");
    report
        .figure("quiet after the last session opened", ours.settling.as_secs_f64(), "s")
        .ceiling(bare.settling.as_secs_f64());
    report.figure("pushes lost by the bare server", bare.lost as f64, "count");
    report
        .figure("heartbeats' CPU per node per minute", ours.heartbeats.cpu_ms_per_node_minute, "ms")
        .ceiling(bare.heartbeats.cpu_ms_per_node_minute);
    if let Some(writes) = ours.heartbeats.writes_per_node_minute {
        report.figure("heartbeats' store writes per node per minute", writes, "count");
    }
    report.print();
    // A push that never arrived is a failure of what is measured, not a slow sample.
    if ours.lost > 0 || bare.lost > 0 {
        return Err(format!(
            "pushes never reached their node within {ROUND_DEADLINE:?}: ours {}, bare {}",
            ours.lost, bare.lost
        ));
    }
    Ok(())
}
