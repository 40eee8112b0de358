//! The external HTTP benchmark: the `kayra-controller` built beside this binary (release under
//! `cargo xtask bench http`; sled, `--no-agent`) driven over
//! its plain-HTTP bearer-token listener by a load generator running as a process of its own
//! (`kayra-bench http-load`), as an operator's tools see it. Every figure is printed beside a
//! ceiling measured in the same run by the same load generator: GET and LIST against a bare
//! axum handler in another process (`kayra-bench http-bare`) serving the very bytes the
//! controller answered; CREATE of an Application (which the scheduler follows with a condition
//! and an Event when no node can take it) and of a Secret (one stored write, no loop follows)
//! against the durable-HTTP ceiling, a bare handler in another process whose POST is one
//! group-committed sled insert (`kayra-bench http-durable`). Every row and its ceiling run in
//! alternating rounds, each pair started once the controller is quiet (its follow-up writes
//! done); the median ratio and the spread over the rounds are printed. A user's Secret creates are
//! then timed on a quiet controller and again right after a burst of Applications that no node
//! can take, in the scheduler's tail of follow-up writes. It also reports the controller's idle
//! memory, empty and holding the objects it created.

mod durable;
mod load;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

pub(crate) use durable::serve as durable;
pub(crate) use load::run as load;

use crate::report::{Report, Size, profile};

/// Concurrent connections of the loaded runs.
const MANY: usize = 64;
/// The LIST page size.
const PAGE: usize = 500;
const NAMESPACE: &str = "bench";

/// How much work each measurement does, and how long the benchmark waits for quiet.
#[derive(Debug, Clone, Copy)]
struct Sizes {
    /// How long each GET and LIST run lasts.
    span: Duration,
    /// Creates of each Kind per round at one connection, then at [`MANY`].
    creates_one: usize,
    creates_many: usize,
    /// Alternating rounds of the creates and their ceiling.
    rounds: usize,
    /// How long memory is left to settle before it is read.
    settle: Duration,
    /// Over how long the controller's CPU is read to tell whether it is quiet.
    quiet_sample: Duration,
    /// Applications created at [`MANY`] connections in the burst whose scheduler tail a
    /// user's Secret creates are timed in, and how many Secret creates each timing makes.
    burst: usize,
    probe: usize,
}

/// 10 200 Applications and as many Secrets in the rounds, then 2 000 Secrets around a burst of
/// 40 000 Applications.
const FULL: Sizes = Sizes {
    span: Duration::from_secs(4),
    creates_one: 700,
    creates_many: 2_700,
    rounds: 3,
    settle: Duration::from_secs(3),
    quiet_sample: Duration::from_secs(1),
    burst: 40_000,
    probe: 1_000,
};

const SMOKE: Sizes = Sizes {
    span: Duration::from_millis(300),
    creates_one: 10,
    creates_many: MANY,
    rounds: 1,
    settle: Duration::from_millis(300),
    quiet_sample: Duration::from_millis(300),
    burst: MANY,
    probe: 10,
};

/// A child process this benchmark started, killed (by its own id) when dropped.
pub(crate) struct Process(Child);

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Resident memory of process `pid`, in MiB.
fn rss_mib(pid: u32) -> Result<f64, String> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).map_err(|e| e.to_string())?;
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map(|kib| kib as f64 / 1024.0)
        .ok_or_else(|| format!("no VmRSS for process {pid}"))
}

fn free_port() -> Result<u16, String> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    Ok(listener.local_addr().map_err(|e| e.to_string())?.port())
}

fn sibling(binary: &str) -> Result<PathBuf, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let path = exe.with_file_name(binary);
    if path.exists() {
        Ok(path)
    } else {
        Err(format!("{} is not built; `cargo xtask bench http` builds it", path.display()))
    }
}

/// The controller, on a data directory, answering on plain HTTP.
struct Controller {
    process: Process,
    url: String,
    token: String,
}

async fn start_controller(dir: &Path) -> Result<Controller, String> {
    let (tls_port, http_port) = (free_port()?, free_port()?);
    let data = dir.join("data");
    let log = dir.join("controller.log");
    let child = Command::new(sibling("kayra-controller")?)
        .arg("--data-dir")
        .arg(&data)
        .args(["--store", "sled", "--listen", &format!("127.0.0.1:{tls_port}")])
        .args(["--http-listen", &format!("127.0.0.1:{http_port}"), "--no-agent"])
        .env("KAYRA_LOG", std::env::var("KAYRA_LOG").unwrap_or_else(|_| "warn".into()))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::OpenOptions::new().create(true).append(true).open(&log).map_err(|e| e.to_string())?)
        .spawn()
        .map_err(|e| format!("cannot start kayra-controller: {e}"))?;
    let process = Process(child);
    let url = format!("http://127.0.0.1:{http_port}");
    let deadline = Instant::now() + Duration::from_secs(60);
    let token = crate::nodes::admin_token(&data, &log, deadline).await?;
    let client = reqwest::Client::new();
    let namespaces = client.get(format!("{url}/api/v1/namespaces")).bearer_auth(&token);
    crate::nodes::answering(namespaces, &log, deadline).await?;
    Ok(Controller { process, url, token })
}

/// This benchmark's own binary run as `subcommand` with `args`, a ceiling in a process of its
/// own; answers it and the ports it printed on its first line (`listening PORT...`).
async fn start_ceiling(subcommand: &str, args: &[&Path]) -> Result<(Process, Vec<u16>), String> {
    let mut child = Command::new(std::env::current_exe().map_err(|e| e.to_string())?)
        .arg(subcommand)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start kayra-bench {subcommand}: {e}"))?;
    let stdout = child.stdout.take().ok_or_else(|| format!("kayra-bench {subcommand} has no stdout"))?;
    let process = Process(child);
    let line = tokio::task::spawn_blocking(move || {
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line).map(|_| line)
    })
    .await
    .map_err(|e| e.to_string())?
    .map_err(|e| e.to_string())?;
    let ports: Option<Vec<u16>> = line
        .trim()
        .strip_prefix("listening ")
        .map(|ports| ports.split(' ').map(str::parse).collect::<Result<_, _>>().ok())
        .unwrap_or_default();
    match ports {
        Some(ports) => Ok((process, ports)),
        None => Err(format!("kayra-bench {subcommand} said {line:?}")),
    }
}

/// The bare axum handler: a process answering `get` on one port and `list` on another.
pub(crate) async fn start_bare(get: &Path, list: &Path) -> Result<(Process, String, String), String> {
    match start_ceiling("http-bare", &[get, list]).await? {
        (process, ports) if ports.len() == 2 => Ok((
            process,
            format!("http://127.0.0.1:{}/get", ports[0]),
            format!("http://127.0.0.1:{}/list", ports[1]),
        )),
        (_, ports) => Err(format!("the bare handler listens on {ports:?}, not two ports")),
    }
}

/// The durable-HTTP ceiling: a process answering a durable create, on data in `dir`.
async fn start_durable(dir: &Path) -> Result<(Process, String), String> {
    match start_ceiling("http-durable", &[dir]).await? {
        (process, ports) if ports.len() == 1 => {
            Ok((process, format!("http://127.0.0.1:{}/create", ports[0])))
        }
        (_, ports) => Err(format!("the durable handler listens on {ports:?}, not one port")),
    }
}

/// `kayra-bench http-bare GET_FILE LIST_FILE`: serves each file's bytes from memory on a port
/// of its own and prints `listening GET_PORT LIST_PORT`.
pub(crate) async fn bare(args: &[String]) -> Result<(), String> {
    let [get, list] = args else { return Err("usage: kayra-bench http-bare GET_FILE LIST_FILE".into()) };
    let mut ports = Vec::new();
    for file in [get, list] {
        let body = bytes::Bytes::from(std::fs::read(file).map_err(|e| format!("{file}: {e}"))?);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.map_err(|e| e.to_string())?;
        ports.push(listener.local_addr().map_err(|e| e.to_string())?.port());
        tokio::spawn(kayra_apiserver::serve(
            listener,
            None,
            kayra_apiserver::bare_router(body),
            Default::default(),
            std::future::pending(),
        ));
    }
    println!("listening {} {}", ports[0], ports[1]);
    // Until the benchmark kills this process.
    std::future::pending::<()>().await;
    Ok(())
}

/// What one load run measured (the load generator's JSON line).
#[derive(Debug, Clone, Copy)]
struct Figures {
    rate: f64,
    p50: f64,
    p99: f64,
}

/// Runs the load generator as a process of its own with `args`; answers its figures.
async fn measure(args: Vec<String>) -> Result<Figures, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let output = tokio::process::Command::new(exe)
        .arg("http-load")
        .args(&args)
        .stdin(Stdio::null())
        .output()
        .await
        .map_err(|e| format!("cannot run the load generator: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "the load generator ({}) failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    let answer: Value = serde_json::from_slice(&output.stdout).map_err(|e| format!("load generator: {e}"))?;
    let number = |key: &str| answer[key].as_f64().ok_or_else(|| format!("the load generator said {answer}"));
    Ok(Figures { rate: number("rate")?, p50: number("p50_ms")?, p99: number("p99_ms")? })
}

fn http_args(url: &str, token: Option<&str>, connections: usize) -> Vec<String> {
    let mut args = vec!["--url".into(), url.into(), "--connections".into(), connections.to_string()];
    if let Some(token) = token {
        args.extend(["--token".into(), token.into()]);
    }
    args
}

fn timed(mut args: Vec<String>, span: Duration) -> Vec<String> {
    args.extend(["--seconds".into(), span.as_secs_f64().to_string()]);
    args
}

fn counted(mut args: Vec<String>, count: usize) -> Vec<String> {
    args.extend(["--count".into(), count.to_string()]);
    args
}

/// The Application every CREATE sends, `{NAME}` standing for its unique name.
fn application_template() -> Value {
    json!({"apiVersion": "fleet.example.com/v1", "kind": "Application",
           "metadata": {"name": "{NAME}", "labels": {"tier": "bench"}},
           "spec": {"command": ["/bin/sleep", "3600"],
                    "resources": {"cpu": "100m", "memory": "64Mi"}}})
}

/// The Secret every Secret CREATE sends: one stored write that no loop follows.
fn secret_template() -> Value {
    json!({"apiVersion": "fleet.example.com/v1", "kind": "Secret",
           "metadata": {"name": "{NAME}", "labels": {"tier": "bench"}},
           "stringData": {"password": "correct-horse-battery-staple"}})
}

/// One row's rounds: ours and its ceiling, measured alternately.
struct Rounds {
    label: String,
    /// What the ceiling is, as the printed figure names it ("durable HTTP").
    ceiling_name: &'static str,
    ours: Vec<Figures>,
    ceiling: Vec<Figures>,
}

impl Rounds {
    fn new(label: String, ceiling_name: &'static str) -> Rounds {
        Rounds { label, ceiling_name, ours: Vec::new(), ceiling: Vec::new() }
    }

    fn push(&mut self, ours: Figures, ceiling: Figures) {
        self.ours.push(ours);
        self.ceiling.push(ceiling);
    }

    /// Prints the median of each figure, and the ratio's median and spread over the rounds;
    /// adds the medians to `report`.
    fn print(&self, report: &mut Report) {
        let median = |values: &mut Vec<f64>| {
            values.sort_by(f64::total_cmp);
            values[values.len() / 2]
        };
        let of =
            |figures: &[Figures], pick: fn(&Figures) -> f64| figures.iter().map(pick).collect::<Vec<_>>();
        let mut ratios: Vec<f64> =
            self.ours.iter().zip(&self.ceiling).map(|(o, c)| o.rate / c.rate).collect();
        let (low, high) = ratios.iter().fold((f64::MAX, f64::MIN), |(l, h), r| (l.min(*r), h.max(*r)));
        println!(
            "  {:<22} ours {:>7.0}/s p50 {:>6.2} ms p99 {:>6.2} ms | {} {:>7.0}/s p50 {:>6.2} ms p99 {:>6.2} ms | ratio median {:.2}, spread {low:.2}-{high:.2}",
            self.label,
            median(&mut of(&self.ours, |f| f.rate)),
            median(&mut of(&self.ours, |f| f.p50)),
            median(&mut of(&self.ours, |f| f.p99)),
            self.ceiling_name,
            median(&mut of(&self.ceiling, |f| f.rate)),
            median(&mut of(&self.ceiling, |f| f.p50)),
            median(&mut of(&self.ceiling, |f| f.p99)),
            median(&mut ratios),
        );
        let ours_rate = median(&mut of(&self.ours, |f| f.rate));
        let ceiling_rate = median(&mut of(&self.ceiling, |f| f.rate));
        report
            .figure(format!("{}, of {}, median of rounds", self.label, self.ceiling_name), ours_rate, "req/s")
            .ceiling(ceiling_rate)
            .ratio(median(&mut ratios));
        report
            .figure(
                format!("{}, p50, median of rounds", self.label),
                median(&mut of(&self.ours, |f| f.p50)),
                "ms",
            )
            .ceiling(median(&mut of(&self.ceiling, |f| f.p50)));
    }
}

async fn get_json(client: &reqwest::Client, url: &str, token: &str) -> Result<(Value, bytes::Bytes), String> {
    let response = client.get(url).bearer_auth(token).send().await.map_err(|e| e.to_string())?;
    let status = response.status();
    let body = response.bytes().await.map_err(|e| e.to_string())?;
    if !status.is_success() {
        return Err(format!("GET {url} answered {status}: {}", String::from_utf8_lossy(&body)));
    }
    Ok((serde_json::from_slice(&body).map_err(|e| e.to_string())?, body))
}

async fn post(client: &reqwest::Client, url: &str, token: &str, body: &Value) -> Result<(), String> {
    let response = client.post(url).bearer_auth(token).json(body).send().await.map_err(|e| e.to_string())?;
    if response.status().as_u16() != 201 {
        return Err(format!("POST {url} answered {}", response.status()));
    }
    Ok(())
}

/// `kayra-bench http`.
pub(crate) async fn run(size: Size) -> Result<(), String> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let Sizes {
        span,
        creates_one,
        creates_many,
        rounds: round_count,
        settle,
        quiet_sample,
        burst,
        probe: probes,
    } = size.pick(FULL, SMOKE);
    let mut report = Report::new("http", size);
    println!("external HTTP benchmark: one run; each ratio compares two figures from this run");
    println!(
        "  kayra-controller ({}, sled, --no-agent) over plain HTTP with a bearer token; load from `kayra-bench http-load`, a process of its own (HTTP/1.1 keep-alive)\n",
        profile()
    );
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let controller = start_controller(dir.path()).await?;
    tokio::time::sleep(settle).await;
    let empty_rss = rss_mib(controller.process.0.id())?;
    let (url, token) = (controller.url.clone(), controller.token.clone());
    let client = reqwest::Client::new();
    post(
        &client,
        &format!("{url}/api/v1/namespaces"),
        &token,
        &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}),
    )
    .await?;
    let apps = format!("{url}/apis/fleet.example.com/v1/namespaces/{NAMESPACE}/applications");
    let secrets = format!("{url}/apis/fleet.example.com/v1/namespaces/{NAMESPACE}/secrets");
    let templates = dir.path().join("templates");
    std::fs::create_dir_all(&templates).map_err(|e| e.to_string())?;
    let write_template = |name: &str, body: Value| -> Result<String, String> {
        let path = templates.join(name);
        std::fs::write(&path, body.to_string()).map_err(|e| e.to_string())?;
        Ok(path.display().to_string())
    };
    let application = write_template("application.json", application_template())?;
    let secret = write_template("secret.json", secret_template())?;
    let creating = |target: &str, template: &str, connections: usize, count: usize, prefix: String| {
        let mut args = counted(http_args(target, Some(&token), connections), count);
        args.extend(["--post".into(), template.to_owned(), "--prefix".into(), prefix]);
        args
    };
    let (durable_process, durable_url) = start_durable(&dir.path().join("durable")).await?;

    let (_, before) = get_json(&client, &format!("{apps}?limit=1"), &token).await?;
    let revision = |body: &[u8]| -> u64 {
        serde_json::from_slice::<Value>(body)
            .ok()
            .and_then(|v| v["metadata"]["resourceVersion"].as_str()?.parse().ok())
            .unwrap_or(0)
    };
    // Each figure of a round is measured once the controller is quiet, so that neither the
    // ceiling nor our row runs beside the scheduler's follow-up writes of the row before.
    let pid = controller.process.0.id();
    let mut creates: Vec<Rounds> = Vec::new();
    let mut waited = Duration::ZERO;
    for round in 1..=round_count {
        let mut at = 0;
        for (kind, target, template) in [("Secret", &secrets, &secret), ("Application", &apps, &application)]
        {
            for (connections, count) in [(1, creates_one), (MANY, creates_many)] {
                waited += crate::nodes::quiet(pid, quiet_sample).await?;
                // The same body as ours, so that the ceiling reads and stores as many bytes.
                let mut durable = counted(http_args(&durable_url, None, connections), count);
                durable.extend(["--post".into(), template.to_string(), "--prefix".into(), "durable".into()]);
                let ceiling = measure(durable).await?;
                waited += crate::nodes::quiet(pid, quiet_sample).await?;
                let prefix = format!("{}-{connections}-{round}", kind.to_lowercase());
                let ours = measure(creating(target, template, connections, count, prefix)).await?;
                if round == 1 {
                    creates.push(Rounds::new(format!("CREATE-{connections} {kind}"), "durable HTTP"));
                }
                creates[at].push(ours, ceiling);
                at += 1;
            }
        }
    }
    drop(durable_process);
    let busy = crate::nodes::quiet(pid, quiet_sample).await?;
    let (_, after) = get_json(&client, &format!("{apps}?limit=1"), &token).await?;
    let writes = revision(&after).saturating_sub(revision(&before));
    let created = 2 * round_count * (creates_one + creates_many);

    // A user's Secret creates, one connection, on a quiet controller and then right after a
    // burst of Applications that no node can take, while the scheduler writes a condition and
    // an Event for each: the loops' follow-up writes must not crowd out the API's own.
    let quiet_probe = measure(creating(&secrets, &secret, 1, probes, "probe-quiet".into())).await?;
    let bursting = Instant::now();
    measure(creating(&apps, &application, MANY, burst, "burst".into())).await?;
    let burst_took = bursting.elapsed();
    let tail_probe = measure(creating(&secrets, &secret, 1, probes, "probe-tail".into())).await?;
    let probe_took = bursting.elapsed() - burst_took;
    let tail = crate::nodes::quiet(pid, quiet_sample).await?;

    // The bare handler serves what the controller answers: one Application, one LIST page.
    let probe = format!("{apps}/application-{MANY}-1-0");
    let page = format!("{apps}?limit={PAGE}");
    let (_, object) = get_json(&client, &probe, &token).await?;
    let (listed, list_body) = get_json(&client, &page, &token).await?;
    let items = listed["items"].as_array().map_or(0, Vec::len);
    let (get_file, list_file) = (dir.path().join("get.json"), dir.path().join("list.json"));
    std::fs::write(&get_file, &object).map_err(|e| e.to_string())?;
    std::fs::write(&list_file, &list_body).map_err(|e| e.to_string())?;
    let (bare_process, bare_get, bare_list) = start_bare(&get_file, &list_file).await?;

    // The reads, as the creates: alternating rounds, each run started once the controller is
    // quiet, so that a slow moment of the machine falls on one round and not on one side.
    let mut reads: Vec<Rounds> = Vec::new();
    let mut read_waited = Duration::ZERO;
    for round in 1..=round_count {
        let rows = [
            ("GET", &bare_get, &probe, "the bare axum handler"),
            ("LIST", &bare_list, &page, "the same bytes from memory"),
        ];
        let mut at = 0;
        for (verb, ceiling_url, our_url, ceiling_name) in rows {
            for connections in [1, MANY] {
                read_waited += crate::nodes::quiet(pid, quiet_sample).await?;
                let ceiling = measure(timed(http_args(ceiling_url, None, connections), span)).await?;
                let ours = measure(timed(http_args(our_url, Some(&token), connections), span)).await?;
                if round == 1 {
                    reads.push(Rounds::new(format!("{verb}-{connections}"), ceiling_name));
                }
                reads[at].push(ours, ceiling);
                at += 1;
            }
        }
    }
    drop(bare_process);

    println!(
        "GET by name: {} bytes; LIST: limit={PAGE}, {items} Applications, {} KiB",
        object.len(),
        list_body.len() / 1024
    );
    println!(
        "{round_count} alternating rounds of {:.1} s runs, each pair started once the controller was quiet ({:.1} s waited in all):",
        span.as_secs_f64(),
        read_waited.as_secs_f64()
    );
    for rounds in &reads {
        rounds.print(&mut report);
    }
    println!(
        "\nCREATE, {round_count} alternating rounds of {creates_one} creates at 1 connection and {creates_many} at {MANY}, against the durable-HTTP ceiling (a bare handler's group-committed sled insert, another process); each run started once the controller was quiet ({:.1} s waited in all):",
        waited.as_secs_f64()
    );
    for rounds in &creates {
        rounds.print(&mut report);
    }
    println!(
        "  stored writes for the {created} CREATEs: {writes} once the controller was quiet ({:.1} s after the last): the rest are the scheduler's (an Unschedulable condition and an Event for each Application no Node can take)",
        busy.as_secs_f64()
    );

    println!(
        "\na user's Secret CREATE-1, {probes} creates: quiet p50 {:.2} ms p99 {:.2} ms; right after {burst} Applications created at {MANY} connections in {:.1} s, p50 {:.2} ms p99 {:.2} ms ({:.1} s; the controller was quiet {:.1} s after them): p99 ratio {:.2} (target <= 2)",
        quiet_probe.p50,
        quiet_probe.p99,
        burst_took.as_secs_f64(),
        tail_probe.p50,
        tail_probe.p99,
        probe_took.as_secs_f64(),
        tail.as_secs_f64(),
        tail_probe.p99 / quiet_probe.p99
    );
    report
        .figure(
            format!("Secret CREATE-1 p99 in the scheduler's tail after {burst} Applications"),
            tail_probe.p99,
            "ms",
        )
        .ceiling(quiet_probe.p99);
    report.figure(
        "the scheduler's tail after the burst, to quiet",
        probe_took.as_secs_f64() + tail.as_secs_f64(),
        "s",
    );

    let (held_apps, held_secrets) = (created / 2 + burst, created / 2 + 2 * probes);
    tokio::time::sleep(settle).await;
    let full_rss = rss_mib(controller.process.0.id())?;
    drop(controller);
    let restarted = start_controller(dir.path()).await?;
    tokio::time::sleep(settle).await;
    let restarted_rss = rss_mib(restarted.process.0.id())?;
    println!(
        "\nidle controller RSS: empty {empty_rss:.1} MiB; holding {held_apps} Applications and {held_secrets} Secrets {full_rss:.1} MiB after creating them, {restarted_rss:.1} MiB after a restart"
    );
    report.figure(
        format!("stored writes per CREATE, {created} CREATEs"),
        writes as f64 / created as f64,
        "count",
    );
    report.figure("idle controller RSS, empty", empty_rss, "MiB");
    report.figure(
        format!("idle controller RSS, {held_apps} Applications and {held_secrets} Secrets"),
        full_rss,
        "MiB",
    );
    report.figure("idle controller RSS, the same after a restart", restarted_rss, "MiB");
    report.print();
    Ok(())
}
