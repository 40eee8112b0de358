//! The Consul benchmark, against the real `kayra-controller` binary run as a process of its own
//! (memory store), so that its resident memory is its own: 1 000 Services of 10 members each,
//! one blocking query held on each Service's health (`/v1/health/service/<name>?index=`), then
//! one member's readiness changed in each of 100 Services, one after another:
//!
//! - how long from the start of the status write until the Service's held query answers
//!   (p50, p99), beside the status write's own round trip in the same run (the ceiling: nothing
//!   can answer before the write that caused it is done);
//! - the controller's resident memory per held query: with every connection open and idle
//!   after one answer, then with every connection holding a query.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use reqwest::Client;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::nodes::{Process, free_port, rss, sibling, wrapped};
use crate::report::{Report, Size};

const FLEET: &str = "/apis/fleet.example.com/v1/namespaces/default";
const CREATORS: usize = 32;

/// The fleet, the readiness changes, and how long memory is left to settle before it is read.
#[derive(Debug, Clone, Copy)]
struct Sizes {
    services: usize,
    members: usize,
    nodes: usize,
    flips: usize,
    settle: Duration,
}

const FULL: Sizes =
    Sizes { services: 1000, members: 10, nodes: 10, flips: 100, settle: Duration::from_secs(2) };
const SMOKE: Sizes =
    Sizes { services: 10, members: 2, nodes: 2, flips: 5, settle: Duration::from_millis(300) };

struct Controller {
    _process: Process,
    pid: u32,
    url: String,
    consul: std::net::SocketAddr,
    token: String,
    admin: Client,
}

async fn start(dir: &Path) -> Result<Controller, String> {
    let (port, http_port, consul_port) = (free_port()?, free_port()?, free_port()?);
    let config = dir.join("kayra.yaml");
    std::fs::write(&config, "maxConnections: 8192\nnodeReadyTimeoutSeconds: 3600\n")
        .map_err(|e| e.to_string())?;
    let log = dir.join("controller.log");
    let data = dir.join("data");
    let child = wrapped(sibling("kayra-controller")?)
        .arg("--config")
        .arg(&config)
        .arg("--data-dir")
        .arg(&data)
        .args(["--store", "memory", "--listen", &format!("127.0.0.1:{port}")])
        .args(["--no-agent", "--http-listen", &format!("127.0.0.1:{http_port}")])
        .args(["--consul-listen", &format!("127.0.0.1:{consul_port}")])
        .env("KAYRA_LOG", std::env::var("KAYRA_LOG").unwrap_or_else(|_| "warn".into()))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).map_err(|e| e.to_string())?)
        .spawn()
        .map_err(|e| format!("cannot start kayra-controller: {e}"))?;
    let process = Process(child);
    let pid = process.pid();
    let deadline = Instant::now() + Duration::from_secs(60);
    let token = crate::nodes::admin_token(&data, &log, deadline).await?;
    let admin = crate::nodes::bearer_client(&token)?
        .pool_max_idle_per_host(CREATORS)
        .build()
        .map_err(|e| e.to_string())?;
    let url = format!("http://127.0.0.1:{http_port}");
    crate::nodes::answering(admin.get(format!("{url}{FLEET}/services")), &log, deadline).await?;
    let consul = std::net::SocketAddr::from(([127, 0, 0, 1], consul_port));
    Ok(Controller { _process: process, pid, url, consul, token, admin })
}

async fn send(admin: &Client, method: reqwest::Method, url: String, body: &Value) -> Result<Value, String> {
    let response = admin.request(method, &url).json(body).send().await.map_err(|e| e.to_string())?;
    let status = response.status();
    let answer: Value = response.json().await.unwrap_or(Value::Null);
    if !status.is_success() {
        return Err(format!("{url} answered {status}: {answer}"));
    }
    Ok(answer)
}

/// The Nodes, Ready with an address; the Services; their members, bound, not yet probed.
async fn fleet(controller: &Controller, sizes: Sizes) -> Result<(), String> {
    let Sizes { services, members, nodes, .. } = sizes;
    let now = jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string();
    for n in 0..nodes {
        let name = format!("node-{n}");
        let nodes_url = format!("{}/api/v1/nodes", controller.url);
        let mut node = send(
            &controller.admin,
            reqwest::Method::POST,
            nodes_url.clone(),
            &json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}}),
        )
        .await?;
        node["status"] = json!({"addresses": [{"type": "InternalIP", "address": format!("10.0.0.{}", n + 1)}],
            "conditions": [{"type": "Ready", "status": "True", "lastHeartbeatTime": now, "lastTransitionTime": now}]});
        send(&controller.admin, reqwest::Method::PUT, format!("{nodes_url}/{name}/status"), &node).await?;
    }
    let creators: Vec<_> = (0..CREATORS)
        .map(|c| {
            let (admin, url) = (controller.admin.clone(), controller.url.clone());
            tokio::spawn(async move {
                for s in (c..services).step_by(CREATORS) {
                    let service = json!({"apiVersion": "fleet.example.com/v1", "kind": "Service",
                        "metadata": {"name": format!("svc-{s}")},
                        "spec": {"ports": [{"port": 80, "targetPort": 8080}], "tags": ["traefik.enable=true"]}});
                    send(&admin, reqwest::Method::POST, format!("{url}{FLEET}/services"), &service).await?;
                    for m in 0..members {
                        let member = json!({"apiVersion": "fleet.example.com/v1", "kind": "Application",
                            "metadata": {"name": format!("svc-{s}-{m}")},
                            "spec": {"command": ["/bin/sleep", "1000"], "serviceName": format!("svc-{s}"),
                                     "placement": {"nodeName": format!("node-{}", (s + m) % nodes)}}});
                        send(&admin, reqwest::Method::POST, format!("{url}{FLEET}/applications"), &member).await?;
                    }
                }
                Ok::<_, String>(())
            })
        })
        .collect();
    for creator in creators {
        creator.await.map_err(|e| e.to_string())??;
    }
    Ok(())
}

/// One HTTP/1.1 exchange on an open connection: the status line's code, the index header and
/// the body.
async fn exchange(stream: &mut TcpStream, request: &str) -> Result<(u16, u64, Vec<u8>), String> {
    stream.write_all(request.as_bytes()).await.map_err(|e| e.to_string())?;
    let mut read = Vec::new();
    let mut buffer = [0u8; 16 * 1024];
    loop {
        let n = stream.read(&mut buffer).await.map_err(|e| e.to_string())?;
        if n == 0 {
            return Err("the connection closed".into());
        }
        read.extend_from_slice(&buffer[..n]);
        let Some(end) = read.windows(4).position(|w| w == b"\r\n\r\n") else { continue };
        let head = String::from_utf8_lossy(&read[..end]).to_ascii_lowercase();
        let length: usize = head
            .lines()
            .find_map(|line| line.strip_prefix("content-length:"))
            .and_then(|value| value.trim().parse().ok())
            .unwrap_or(0);
        if read.len() < end + 4 + length {
            continue;
        }
        let code = head.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
        let index = head
            .lines()
            .find_map(|line| line.strip_prefix("x-consul-index:"))
            .and_then(|value| value.trim().parse().ok())
            .unwrap_or(0);
        return Ok((code, index, read[end + 4..end + 4 + length].to_vec()));
    }
}

fn get(path: &str, token: &str) -> String {
    format!("GET {path} HTTP/1.1\r\nHost: consul\r\nX-Consul-Token: {token}\r\n\r\n")
}

fn percentile(sorted: &[Duration], q: f64) -> f64 {
    sorted[((sorted.len() as f64 - 1.0) * q) as usize].as_secs_f64() * 1e3
}

pub(crate) async fn run(size: Size) -> Result<(), String> {
    let sizes = size.pick(FULL, SMOKE);
    let Sizes { services, members, nodes, flips, settle } = sizes;
    let _ = rustls::crypto::ring::default_provider().install_default();
    println!("Consul benchmark: one run; each ratio compares two figures from this run\n");
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let controller = start(dir.path()).await?;
    let created = Instant::now();
    fleet(&controller, sizes).await?;
    println!(
        "fleet: {services} Services x {members} members on {nodes} Nodes, created in {:.1} s",
        created.elapsed().as_secs_f64()
    );
    // Until the projection serves every Service.
    let mut probe = TcpStream::connect(controller.consul).await.map_err(|e| e.to_string())?;
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let (code, _, body) = exchange(&mut probe, &get("/v1/catalog/services", &controller.token)).await?;
        let listed = serde_json::from_slice::<Value>(&body).ok().and_then(|v| v.as_object().map(|o| o.len()));
        if code == 200 && listed == Some(services) {
            break;
        }
        if Instant::now() > deadline {
            return Err(format!("the projection never served {services} Services (answered {code})"));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // The loops' own writes of the members (their conditions) change what the held queries
    // read: they are done before the first answers, so that a held query has nothing to wait
    // for but the flips.
    crate::nodes::quiet(controller.pid, Duration::from_millis(500)).await?;

    // Every connection open and idle after one answer: each one's index, for the held query.
    let mut connections = Vec::with_capacity(services);
    for s in 0..services {
        let mut stream = TcpStream::connect(controller.consul).await.map_err(|e| e.to_string())?;
        let (code, index, _) =
            exchange(&mut stream, &get(&format!("/v1/health/service/svc-{s}"), &controller.token)).await?;
        if code != 200 {
            return Err(format!("health/service answered {code}"));
        }
        connections.push((stream, index));
    }
    tokio::time::sleep(settle / 2).await;
    let idle = rss(controller.pid)?;
    let (answered_tx, mut answered) = tokio::sync::mpsc::unbounded_channel();
    let mut held = Vec::with_capacity(services);
    for (s, (mut stream, index)) in connections.into_iter().enumerate() {
        let (token, answered_tx) = (controller.token.clone(), answered_tx.clone());
        held.push(tokio::spawn(async move {
            let path = format!("/v1/health/service/svc-{s}?index={index}&wait=120s");
            let answer = exchange(&mut stream, &get(&path, &token)).await;
            let _ = answered_tx.send((s, Instant::now(), answer.map(|(code, index, _)| (code, index))));
        }));
    }
    tokio::time::sleep(settle).await;
    let holding = rss(controller.pid)?;
    let early = answered.try_recv().ok();
    if let Some((s, _, answer)) = early {
        return Err(format!("svc-{s}'s held query answered before anything changed: {answer:?}"));
    }

    // One member's readiness in each of 100 Services, one after another.
    let mut writes = Vec::with_capacity(flips);
    let mut wakes = Vec::with_capacity(flips);
    for s in 0..flips {
        let path = format!("{}{FLEET}/applications/svc-{s}-0", controller.url);
        let mut member = send(&controller.admin, reqwest::Method::GET, path.clone(), &Value::Null).await?;
        member["status"] = json!({"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]});
        let started = Instant::now();
        send(&controller.admin, reqwest::Method::PUT, format!("{path}/status"), &member).await?;
        writes.push(started.elapsed());
        let (woken, at, answer) = tokio::time::timeout(Duration::from_secs(30), answered.recv())
            .await
            .map_err(|_| format!("svc-{s}'s held query did not answer within 30 s"))?
            .ok_or("the held queries ended")?;
        if woken != s {
            return Err(format!("svc-{s}'s readiness answered svc-{woken}'s query"));
        }
        match answer {
            Ok((200, _)) => wakes.push(at.duration_since(started)),
            other => return Err(format!("svc-{s}'s held query answered {other:?}")),
        }
    }
    writes.sort();
    wakes.sort();
    let per_held = (holding.saturating_sub(idle)) as f64 / services as f64 / 1024.0;
    println!("held queries: {services}, one per Service; {flips} readiness changes, one after another");
    println!(
        "  status write round trip (ceiling): p50 {:.2} ms, p99 {:.2} ms",
        percentile(&writes, 0.5),
        percentile(&writes, 0.99)
    );
    println!(
        "  write start to held query answered: p50 {:.2} ms, p99 {:.2} ms  (p99 {:.2}x the write's; target p99 <= 1000 ms)",
        percentile(&wakes, 0.5),
        percentile(&wakes, 0.99),
        percentile(&wakes, 0.99) / percentile(&writes, 0.99)
    );
    println!(
        "  controller RSS: {:.1} MiB with {services} idle connections, {:.1} MiB holding a query on each: {per_held:.2} KiB per held query (target <= 8 KiB)",
        idle as f64 / 1048576.0,
        holding as f64 / 1048576.0
    );
    let mut report = Report::new("consul", size);
    report
        .figure("write start to held query answered, p50, of the status write", percentile(&wakes, 0.5), "ms")
        .ceiling(percentile(&writes, 0.5));
    report
        .figure(
            "write start to held query answered, p99, of the status write",
            percentile(&wakes, 0.99),
            "ms",
        )
        .ceiling(percentile(&writes, 0.99));
    report.figure(format!("controller RSS per held query, {services} held"), per_held, "KiB");
    report.print();
    for task in held {
        task.abort();
    }
    Ok(())
}
