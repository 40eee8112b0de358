//! The watch and list benchmark, against the real `kayra-controller` binary run as a process of
//! its own (memory store), so that its resident memory is its own:
//!
//! - stuck watchers: watch connections that never read, then writes of 100 KB objects; the
//!   controller's memory growth (peak and after), how many stuck watchers it dropped, and a
//!   reading client's GET latency before and during;
//! - one write delivered to many watchers (p50, p99);
//! - a LIST of many objects in one response: the controller's peak memory growth against the
//!   response's size;
//! - LIST pages (`limit=500`) per second beside a bare handler answering the same bytes from
//!   memory in a process of its own (`kayra-bench http-bare`), over the same kind of
//!   connection.

use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use reqwest::Client;
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;

use crate::nodes::{Process, free_port, rss, sibling, wrapped};
use crate::report::{Report, Size};

const SECRETS: &str = "/apis/fleet.example.com/v1/namespaces/default/secrets";
const PAGE: usize = 500;
const PAGE_CLIENTS: usize = 8;
const CREATORS: usize = 64;

/// What `kayra-bench watch` was asked for.
#[derive(Debug)]
struct Options {
    stuck: usize,
    watchers: usize,
    objects: usize,
    /// 100 KB creates while the watchers are stuck.
    big_writes: usize,
    /// Writes each delivered to every watcher.
    fan_out_writes: usize,
    /// Pages of the LIST each client reads, for each of its two measurements.
    pages_per_client: usize,
    /// GETs of the reading client on an idle controller.
    idle_gets: usize,
    /// The controller's `watchStallTimeoutSeconds`.
    stall_timeout: Duration,
    /// How long the controller is left to settle before its memory is read.
    settle: Duration,
}

fn options(args: &[String], size: Size) -> Result<Options, String> {
    let mut options = size.pick(
        Options {
            stuck: 400,
            watchers: 1000,
            objects: 100_000,
            big_writes: 200,
            fan_out_writes: 20,
            pages_per_client: 50,
            idle_gets: 500,
            stall_timeout: Duration::from_secs(10),
            settle: Duration::from_secs(2),
        },
        Options {
            stuck: 5,
            watchers: 10,
            objects: 300,
            big_writes: 5,
            fan_out_writes: 2,
            pages_per_client: 5,
            idle_gets: 50,
            stall_timeout: Duration::from_secs(1),
            settle: Duration::from_millis(300),
        },
    );
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        let mut value = || -> Result<usize, String> {
            args.next()
                .ok_or_else(|| format!("{arg} needs a value"))?
                .parse()
                .map_err(|e| format!("{arg}: {e}"))
        };
        match arg.as_str() {
            "--stuck" => options.stuck = value()?,
            "--watchers" => options.watchers = value()?,
            "--objects" => options.objects = value()?,
            other => {
                return Err(format!("unknown option {other}; expected --stuck N, --watchers N, --objects N"));
            }
        }
    }
    Ok(options)
}

/// The controller over plain HTTP with the admin's bearer token.
struct Controller {
    process: Process,
    url: String,
    address: std::net::SocketAddr,
    token: String,
    admin: Client,
}

async fn start(dir: &Path, stall_timeout: Duration) -> Result<Controller, String> {
    let (port, http_port) = (free_port()?, free_port()?);
    let config = dir.join("kayra.yaml");
    let settings = format!(
        "maxConnections: 8192\nnodeReadyTimeoutSeconds: 3600\nwatchStallTimeoutSeconds: {}\n",
        stall_timeout.as_secs()
    );
    std::fs::write(&config, settings).map_err(|e| e.to_string())?;
    let log = dir.join("controller.log");
    let data = dir.join("data");
    let child = wrapped(sibling("kayra-controller")?)
        .arg("--config")
        .arg(&config)
        .arg("--data-dir")
        .arg(&data)
        .args(["--store", "memory", "--listen", &format!("127.0.0.1:{port}")])
        .args(["--no-agent", "--http-listen", &format!("127.0.0.1:{http_port}")])
        .env("KAYRA_LOG", std::env::var("KAYRA_LOG").unwrap_or_else(|_| "warn".into()))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).map_err(|e| e.to_string())?)
        .spawn()
        .map_err(|e| format!("cannot start kayra-controller: {e}"))?;
    let process = Process(child);
    let deadline = Instant::now() + Duration::from_secs(60);
    let token = crate::nodes::admin_token(&data, &log, deadline).await?;
    let admin = client(&token, CREATORS)?;
    let address = std::net::SocketAddr::from(([127, 0, 0, 1], http_port));
    let url = format!("http://{address}");
    crate::nodes::answering(admin.get(format!("{url}{SECRETS}")), &log, deadline).await?;
    Ok(Controller { process, url, address, token, admin })
}

fn client(token: &str, pool: usize) -> Result<Client, String> {
    let mut headers = reqwest::header::HeaderMap::new();
    headers.insert(
        reqwest::header::AUTHORIZATION,
        format!("Bearer {token}").parse().map_err(|_| "the admin token is not a header value")?,
    );
    Client::builder()
        .default_headers(headers)
        .http1_only()
        .pool_max_idle_per_host(pool)
        .build()
        .map_err(|e| e.to_string())
}

async fn create(admin: &Client, url: &str, body: &Value) -> Result<(), String> {
    let response = admin.post(url).json(body).send().await.map_err(|e| e.to_string())?;
    let status = response.status();
    if status.as_u16() != 201 {
        return Err(format!("create answered {status}: {}", response.text().await.unwrap_or_default()));
    }
    Ok(())
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

fn percentile(sorted: &[Duration], q: f64) -> f64 {
    sorted[((sorted.len() as f64 - 1.0) * q) as usize].as_secs_f64() * 1e3
}

/// Samples a process's resident memory every 10 ms until stopped; answers the peak.
fn sample_peak(pid: u32) -> (Arc<AtomicU64>, tokio::task::JoinHandle<()>) {
    let peak = Arc::new(AtomicU64::new(rss(pid).unwrap_or(0)));
    let task = {
        let peak = peak.clone();
        tokio::spawn(async move {
            loop {
                if let Ok(now) = rss(pid) {
                    peak.fetch_max(now, Ordering::Relaxed);
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
    };
    (peak, task)
}

pub(crate) async fn run(args: &[String], size: Size) -> Result<(), String> {
    let options = options(args, size)?;
    let _ = rustls::crypto::ring::default_provider().install_default();
    println!("Watch and list benchmark: one run, the controller as a process of its own (memory store)\n");
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let controller = start(dir.path(), options.stall_timeout).await?;
    let mut report = Report::new("watch", size);
    stuck_watchers(&controller, &options, &mut report).await?;
    fan_out(&controller, &options, &mut report).await?;
    lists(&controller, &options, &mut report).await?;
    drop(controller.process);
    report.print();
    Ok(())
}

/// GETs of one object, one after another; answers their latencies.
async fn gets(client: &Client, url: &str, until: impl Fn(usize) -> bool) -> Result<Vec<Duration>, String> {
    let mut latencies = Vec::new();
    while !until(latencies.len()) {
        let started = Instant::now();
        let response = client.get(url).send().await.map_err(|e| e.to_string())?;
        response.bytes().await.map_err(|e| e.to_string())?;
        latencies.push(started.elapsed());
    }
    latencies.sort();
    Ok(latencies)
}

/// How many sockets process `pid` holds open.
fn sockets(pid: u32) -> Result<usize, String> {
    let entries = std::fs::read_dir(format!("/proc/{pid}/fd")).map_err(|e| e.to_string())?;
    Ok(entries
        .flatten()
        .filter(|entry| {
            std::fs::read_link(entry.path()).is_ok_and(|link| link.to_string_lossy().starts_with("socket:"))
        })
        .count())
}

/// Creates `count` 100 KB Secrets named `<prefix>-<n>` while a reading client GETs one
/// object one request after another; answers when the last write was answered and the GETs'
/// latencies.
async fn big_writes(
    controller: &Controller,
    prefix: &str,
    count: usize,
) -> Result<(Instant, Vec<Duration>), String> {
    let victim = client(&controller.token, 1)?;
    let probe = format!("{}/api/v1/namespaces/default", controller.url);
    let blob = "x".repeat(100 * 1024);
    let writing = {
        let (admin, url, prefix) =
            (controller.admin.clone(), format!("{}{SECRETS}", controller.url), prefix.to_owned());
        tokio::spawn(async move {
            for n in 0..count {
                let secret = json!({"apiVersion": "fleet.example.com/v1", "kind": "Secret",
                                    "metadata": {"name": format!("{prefix}-{n}")}, "stringData": {"blob": blob}});
                create(&admin, &url, &secret).await?;
            }
            Ok::<_, String>(Instant::now())
        })
    };
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let during = {
        let done = done.clone();
        tokio::spawn(async move { gets(&victim, &probe, |_| done.load(Ordering::Relaxed)).await })
    };
    let written_at = writing.await.map_err(|e| e.to_string())??;
    done.store(true, Ordering::Relaxed);
    let during = during.await.map_err(|e| e.to_string())??;
    Ok((written_at, during))
}

async fn stuck_watchers(
    controller: &Controller,
    options: &Options,
    report: &mut Report,
) -> Result<(), String> {
    let (count, writes) = (options.stuck, options.big_writes);
    let pid = controller.process.pid();
    let victim = client(&controller.token, 1)?;
    let probe = format!("{}/api/v1/namespaces/default", controller.url);
    let idle = gets(&victim, &probe, |n| n >= options.idle_gets).await?;
    // The control, in the same run: the same writes with no watcher at all.
    let (_, unwatched) = big_writes(controller, "control", writes).await?;
    tokio::time::sleep(options.settle).await;
    let (rss_before, sockets_before) = (rss(pid)?, sockets(pid)?);
    let mut held = Vec::with_capacity(count);
    for _ in 0..count {
        let socket = tokio::net::TcpSocket::new_v4().map_err(|e| e.to_string())?;
        socket.set_recv_buffer_size(4096).map_err(|e| e.to_string())?;
        let mut stream = socket.connect(controller.address).await.map_err(|e| e.to_string())?;
        let request = format!(
            "GET {SECRETS}?watch=true HTTP/1.1\r\nHost: kayra\r\nAuthorization: Bearer {}\r\n\r\n",
            controller.token
        );
        stream.write_all(request.as_bytes()).await.map_err(|e| e.to_string())?;
        held.push(stream);
    }
    let (peak, sampler) = sample_peak(pid);
    let (written_at, during) = big_writes(controller, "big", writes).await?;
    let (rss_written, sockets_written) = (rss(pid)?, sockets(pid)?);
    // The stall timeout and half as much again for slack (at least a second). The stuck
    // clients keep their sockets open all along: a socket the controller no longer holds is
    // one it dropped.
    let dropped_within = options.stall_timeout + (options.stall_timeout / 2).max(Duration::from_secs(1));
    tokio::time::sleep_until((written_at + dropped_within).into()).await;
    let (rss_after, sockets_after) = (rss(pid)?, sockets(pid)?);
    sampler.abort();
    drop(held);
    let later = dropped_within.as_secs_f64();
    println!("{count} watch connections that never read, then {writes} creates of 100 KB Secrets");
    println!(
        "  controller RSS before {:.0} MiB, peak {:.0} MiB (+{:.0}), after the writes {:.0} MiB (+{:.0}), {later:.0} s later {:.0} MiB (+{:.0})",
        mib(rss_before),
        mib(peak.load(Ordering::Relaxed)),
        mib(peak.load(Ordering::Relaxed).saturating_sub(rss_before)),
        mib(rss_written),
        mib(rss_written.saturating_sub(rss_before)),
        mib(rss_after),
        mib(rss_after.saturating_sub(rss_before)),
    );
    println!(
        "  controller sockets: {sockets_before} before, {sockets_written} after the writes, {sockets_after} {later:.0} s later (stuck watchers dropped: {})",
        sockets_written.saturating_sub(sockets_after)
    );
    println!(
        "  a reading client's GET: idle p50 {:.2} ms p99 {:.2} ms; during the same creates without watchers p50 {:.2} ms p99 {:.2} ms; with the stuck watchers p50 {:.2} ms p99 {:.2} ms\n",
        percentile(&idle, 0.5),
        percentile(&idle, 0.99),
        percentile(&unwatched, 0.5),
        percentile(&unwatched, 0.99),
        percentile(&during, 0.5),
        percentile(&during, 0.99),
    );
    let peak_growth = mib(peak.load(Ordering::Relaxed).saturating_sub(rss_before));
    report.figure(
        format!("{count} stuck watchers and {writes} 100 KB creates: RSS growth at peak"),
        peak_growth,
        "MiB",
    );
    report.figure(
        format!("stuck watchers dropped within {later:.0} s of the last write"),
        sockets_written.saturating_sub(sockets_after) as f64,
        "count",
    );
    report
        .figure(
            "a reading client's GET p99 during the creates, of the same without watchers",
            percentile(&during, 0.99),
            "ms",
        )
        .ceiling(percentile(&unwatched, 0.99));
    report.figure("a reading client's GET p99, idle", percentile(&idle, 0.99), "ms");
    Ok(())
}

async fn fan_out(controller: &Controller, options: &Options, report: &mut Report) -> Result<(), String> {
    let (watchers, writes) = (options.watchers, options.fan_out_writes);
    let url = format!("{}{SECRETS}", controller.url);
    let watched = json!({"apiVersion": "fleet.example.com/v1", "kind": "Secret", "metadata": {"name": "watched"},
                         "stringData": {"n": "0"}});
    create(&controller.admin, &url, &watched).await?;
    let watch_client = client(&controller.token, watchers)?;
    let (sender, mut receiver) = tokio::sync::mpsc::unbounded_channel::<(usize, Instant)>();
    let ready = Arc::new(tokio::sync::Semaphore::new(0));
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..watchers {
        let url = format!("{url}?watch=true&fieldSelector=metadata.name%3Dwatched");
        tasks.spawn(crate::api::count_watch_lines(watch_client.clone(), url, sender.clone(), ready.clone()));
    }
    let _ = ready.acquire_many(watchers as u32).await.map_err(|e| e.to_string())?;
    // Each watcher's first line is the ADDED of the current object.
    let mut latencies = Vec::with_capacity(watchers * writes);
    let mut first = 0;
    while first < watchers {
        let (seen, _) = receiver.recv().await.ok_or("the watchers went away")?;
        first += usize::from(seen == 1);
    }
    for write in 1..=writes {
        let patch = format!(r#"{{"metadata":{{"labels":{{"n":"{write}"}}}}}}"#);
        let started = Instant::now();
        controller
            .admin
            .patch(format!("{url}/watched"))
            .header("Content-Type", "application/merge-patch+json")
            .body(patch)
            .send()
            .await
            .map_err(|e| e.to_string())?;
        let mut delivered = 0;
        while delivered < watchers {
            let (seen, at) = tokio::time::timeout(Duration::from_secs(20), receiver.recv())
                .await
                .map_err(|_| format!("write {write}: only {delivered} of {watchers} watchers heard it"))?
                .ok_or("the watchers went away")?;
            if seen > write {
                delivered += 1;
                latencies.push(at - started);
            }
        }
    }
    tasks.abort_all();
    latencies.sort();
    println!(
        "one write delivered to {watchers} watchers over HTTP/1.1 ({writes} writes): p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms (target p99 <= 50 ms)\n",
        percentile(&latencies, 0.5),
        percentile(&latencies, 0.99),
        percentile(&latencies, 1.0)
    );
    report.figure(format!("one write to {watchers} watchers, p50"), percentile(&latencies, 0.5), "ms");
    report.figure(format!("one write to {watchers} watchers, p99"), percentile(&latencies, 0.99), "ms");
    Ok(())
}

async fn lists(controller: &Controller, options: &Options, report: &mut Report) -> Result<(), String> {
    let objects = options.objects;
    let url = format!("{}{SECRETS}", controller.url);
    let existing = 2 * options.big_writes + 1;
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for c in 0..CREATORS {
        let (admin, url) = (controller.admin.clone(), url.clone());
        tasks.spawn(async move {
            for i in (c..objects.saturating_sub(existing)).step_by(CREATORS) {
                let secret = json!({"apiVersion": "fleet.example.com/v1", "kind": "Secret",
                                    "metadata": {"name": format!("s-{i}"), "labels": {"bench": "list"}},
                                    "stringData": {"value": format!("{i:0>200}")}});
                create(&admin, &url, &secret).await?;
            }
            Ok::<_, String>(())
        });
    }
    while let Some(done) = tasks.join_next().await {
        done.map_err(|e| e.to_string())??;
    }
    println!(
        "  created {} Secrets in {:.1} s",
        objects.saturating_sub(existing),
        started.elapsed().as_secs_f64()
    );
    let pid = controller.process.pid();
    println!("LIST of every Secret in one response (the controller's peak RSS growth while answering)");
    for round in ["first", "second"] {
        tokio::time::sleep(options.settle).await;
        let before = rss(pid)?;
        let (peak, sampler) = sample_peak(pid);
        let started = Instant::now();
        let response = controller.admin.get(&url).send().await.map_err(|e| e.to_string())?;
        let mut size = 0u64;
        let mut response = response;
        while let Some(chunk) = response.chunk().await.map_err(|e| e.to_string())? {
            size += chunk.len() as u64;
        }
        let elapsed = started.elapsed();
        tokio::time::sleep(Duration::from_millis(50)).await;
        sampler.abort();
        let growth = peak.load(Ordering::Relaxed).saturating_sub(before);
        println!(
            "  {round}: {:.1} MiB in {:.0} ms; RSS before {:.0} MiB, peak growth {:.1} MiB = {:.2} x the response (target <= 1)",
            mib(size),
            elapsed.as_secs_f64() * 1e3,
            mib(before),
            mib(growth),
            growth as f64 / size as f64
        );
        report
            .figure(
                format!("{round} LIST of every Secret: peak RSS growth, of the response"),
                mib(growth),
                "MiB",
            )
            .ceiling(mib(size));
    }
    // Pages, beside a bare handler answering the same bytes from memory in a process of its
    // own, so that it does not share the load generator's runtime and cores.
    let page_url = format!("{url}?limit={PAGE}");
    let page = controller.admin.get(&page_url).send().await.map_err(|e| e.to_string())?;
    let page = page.bytes().await.map_err(|e| e.to_string())?;
    let bare_dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let page_file = bare_dir.path().join("page.json");
    std::fs::write(&page_file, &page).map_err(|e| e.to_string())?;
    let (bare_process, _, bare_url) = crate::http::start_bare(&page_file, &page_file).await?;
    let pages = client(&controller.token, PAGE_CLIENTS)?;
    let pages_per_client = options.pages_per_client;
    let rate = |url: String| {
        let pages = pages.clone();
        async move {
            let started = Instant::now();
            let mut tasks = tokio::task::JoinSet::new();
            for _ in 0..PAGE_CLIENTS {
                let (pages, url) = (pages.clone(), url.clone());
                tasks.spawn(async move {
                    for _ in 0..pages_per_client {
                        let response = pages.get(&url).send().await.map_err(|e| e.to_string())?;
                        response.bytes().await.map_err(|e| e.to_string())?;
                    }
                    Ok::<_, String>(())
                });
            }
            while let Some(done) = tasks.join_next().await {
                done.map_err(|e| e.to_string())??;
            }
            Ok::<_, String>((PAGE_CLIENTS * pages_per_client) as f64 / started.elapsed().as_secs_f64())
        }
    };
    let bare = rate(bare_url).await?;
    let ours = rate(page_url).await?;
    drop(bare_process);
    println!(
        "LIST pages of {PAGE} ({:.0} KiB), {PAGE_CLIENTS} HTTP/1.1 clients: ours {ours:.0}/s, bare handler with the same bytes {bare:.0}/s, ratio {:.2} (target >= 0.3)",
        page.len() as f64 / 1024.0,
        ours / bare
    );
    report
        .figure(format!("LIST pages of {PAGE}, {PAGE_CLIENTS} clients, of the bare handler"), ours, "pages/s")
        .ceiling(bare);
    Ok(())
}
