//! A fleet of real `kayra-agent` processes against the real controller binary, on sled and on
//! a real etcd: joining with a token and the CA's pin, Applications running as real processes
//! (as the right user), `kubectl logs`, the agent killed with SIGKILL and the controller
//! restarted without disturbing a workload, deletion within the grace period, restart
//! policies, jobs, memory limits, liveness probes, and what a node's certificate may not do.
//!
//! Every workload's argv carries a marker unique to its test; a test stops only the processes
//! it started, found by that marker or by its agents' own data directories.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::{Controller, Store, have_kubectl, on_store};

/// The `kayra-agent` binary: built beside the controller by the workspace's test run.
pub(crate) fn agent_binary() -> PathBuf {
    let path = Path::new(env!("CARGO_BIN_EXE_kayra-controller")).with_file_name("kayra-agent");
    assert!(path.exists(), "{} is missing: build it with `cargo build -p kayra-agent`", path.display());
    path
}

pub(crate) fn unique(prefix: &str) -> String {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
    format!("{prefix}-{}-{}", std::process::id(), nanos % 1_000_000_000)
}

/// The processes whose command line contains `needle`: `(pid, real uid)`.
pub(crate) fn processes_with(needle: &str) -> Vec<(u32, u32)> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else { continue };
        if pid == std::process::id() {
            continue;
        }
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else { continue };
        if !String::from_utf8_lossy(&cmdline).contains(needle) {
            continue;
        }
        let status = std::fs::read_to_string(entry.path().join("status")).unwrap_or_default();
        let uid = status
            .lines()
            .find(|line| line.starts_with("Uid:"))
            .and_then(|line| line.split_whitespace().nth(1))
            .and_then(|uid| uid.parse().ok())
            .unwrap_or(u32::MAX);
        found.push((pid, uid));
    }
    found
}

pub(crate) fn kill_all_with(needle: &str) {
    for (pid, _) in processes_with(needle) {
        let _ = Command::new("kill").args(["-KILL", &pid.to_string()]).status();
    }
}

pub(crate) fn wait_for<T>(what: &str, within: Duration, mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + within;
    loop {
        if let Some(value) = check() {
            return value;
        }
        assert!(Instant::now() < deadline, "{what} did not happen within {within:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// A `kayra-agent` process with its own name and data directory; on drop it is killed, and
/// so is everything its supervisors run (found by its data directory, which is in their argv).
pub(crate) struct Agent {
    child: Option<Child>,
    pub(crate) name: String,
    dir: tempfile::TempDir,
}

impl Agent {
    /// `kayra-agent join` with the line `token create --print-join-command` printed, plus a
    /// name and a data directory; it goes straight on to run.
    pub(crate) fn join(join_line: &str, name: &str) -> Agent {
        Agent::join_with(join_line, name, &[])
    }

    /// As [`Agent::join`], with `extra` arguments for `join`.
    pub(crate) fn join_with(join_line: &str, name: &str, extra: &[&str]) -> Agent {
        let dir = tempfile::tempdir().unwrap();
        let mut words = join_line.split_whitespace();
        assert_eq!((words.next(), words.next()), (Some("kayra-agent"), Some("join")), "{join_line}");
        let child = Command::new(agent_binary())
            .arg("join")
            .args(words)
            .args(["--name", name, "--data-dir"])
            .arg(dir.path().join("data"))
            .args(extra)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.path().join("agent.log")).unwrap())
            .spawn()
            .expect("the agent starts");
        Agent { child: Some(child), name: name.to_owned(), dir }
    }

    /// Waits for the agent process to end.
    pub(crate) fn exit_status(&mut self) -> std::process::ExitStatus {
        self.child.take().expect("the agent was started").wait().unwrap()
    }

    pub(crate) fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("agent.log")).unwrap_or_default()
    }

    pub(crate) fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// SIGKILL: no chance to clean up.
    pub(crate) fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// `kayra-agent run` on the same data directory.
    pub(crate) fn run(&mut self) {
        self.start(&["run", "--name", &self.name.clone()]);
    }

    /// `kayra-agent run` with the data directory alone, as the README says later starts are.
    pub(crate) fn run_from_data_dir(&mut self) {
        self.start(&["run"]);
    }

    fn start(&mut self, args: &[&str]) {
        let log = std::fs::OpenOptions::new().append(true).open(self.dir.path().join("agent.log")).unwrap();
        let child = Command::new(agent_binary())
            .args(args)
            .arg("--data-dir")
            .arg(self.data())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("the agent starts");
        self.child = Some(child);
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        self.kill();
        kill_all_with(&self.data().display().to_string());
    }
}

pub(crate) fn join_line(controller: &Controller) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_kayra-controller"))
        .arg("--data-dir")
        .arg(controller.scratch().join("data"))
        .args(["--listen", controller.url().trim_start_matches("https://")])
        .args(["token", "create", "--print-join-command"])
        .output()
        .expect("the controller binary runs");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout).unwrap().trim().to_owned()
}

pub(crate) fn kubectl_ok(controller: &Controller, args: &[&str]) -> String {
    let output = controller.kubectl(args);
    assert!(output.status.success(), "kubectl {args:?}: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8_lossy(&output.stdout).into_owned()
}

pub(crate) fn get_json(controller: &Controller, args: &[&str]) -> Option<Value> {
    let mut all = args.to_vec();
    all.extend(["-o", "json"]);
    let output = controller.kubectl(&all);
    output.status.success().then(|| serde_json::from_slice(&output.stdout).ok()).flatten()
}

pub(crate) fn apply(controller: &Controller, manifest: &Value) {
    let path = controller.scratch().join(format!("{}.json", unique("manifest")));
    std::fs::write(&path, manifest.to_string()).unwrap();
    kubectl_ok(controller, &["apply", "-f", path.to_str().unwrap()]);
}

pub(crate) fn application(name: &str, node: &str, spec: Value) -> Value {
    let mut spec = spec;
    spec["placement"] = json!({"nodeName": node});
    json!({"apiVersion": "fleet.example.com/v1", "kind": "Application", "metadata": {"name": name, "namespace": "default"}, "spec": spec})
}

pub(crate) fn app_status(controller: &Controller, name: &str) -> Value {
    get_json(controller, &["get", "app", name]).map(|app| app["status"].clone()).unwrap_or(Value::Null)
}

/// Two agents joined, and schedulable as they registered; answers them.
pub(crate) fn two_nodes(controller: &Controller) -> (Agent, Agent) {
    let line = join_line(controller);
    let a = Agent::join(&line, &unique("node-a"));
    let b = Agent::join(&line, &unique("node-b"));
    for agent in [&a, &b] {
        wait_for(&format!("node {} to be Ready", agent.name), Duration::from_secs(30), || {
            let node = get_json(controller, &["get", "node", &agent.name])?;
            let ready = node["status"]["conditions"]
                .as_array()?
                .iter()
                .any(|c| c["type"] == "Ready" && c["status"] == "True");
            ready.then_some(())
        });
        // A node's first registration takes work at once.
        let node = get_json(controller, &["get", "node", &agent.name]).unwrap();
        assert_eq!(node["spec"]["unschedulable"], Value::Null, "{}", agent.log());
    }
    (a, b)
}

pub(crate) fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0"))
}

/// The one process of a workload, by its marker, once it runs.
pub(crate) fn the_process(marker: &str) -> (u32, u32) {
    wait_for(&format!("the process of {marker}"), Duration::from_secs(30), || {
        let found: Vec<(u32, u32)> =
            processes_with(marker).into_iter().filter(|(pid, _)| !is_supervisor(*pid)).collect();
        (found.len() == 1).then(|| found[0])
    })
}

pub(crate) fn is_supervisor(pid: u32) -> bool {
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    String::from_utf8_lossy(&cmdline).contains("supervise")
}

pub(crate) fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit(')').next().and_then(|rest| rest.split_whitespace().next()) != Some("Z")
    })
}

fn a_fleet_runs_applications(controller: &mut Controller) {
    let (mut a, b) = two_nodes(controller);
    let marker = unique("tick");
    let script = format!("echo started-{marker}; while true; do echo tick-{marker}; sleep 1; done");
    apply(
        controller,
        &application(
            "ticker",
            &a.name,
            json!({"command": ["/bin/sh", "-c", script], "lifecycle": {"terminationGracePeriodSeconds": 30}}),
        ),
    );
    wait_for("ticker to run", Duration::from_secs(30), || {
        (app_status(controller, "ticker")["phase"] == "Running").then_some(())
    });
    let (pid, uid) = the_process(&marker);
    if is_root() {
        assert_eq!(uid, 65532, "a root agent runs the workload as the default runAsUser");
    }
    // The pods view: ready once running (no readiness probe), the node, and its address as IP.
    let node = get_json(controller, &["get", "node", &a.name]).unwrap();
    let address = node["status"]["addresses"]
        .as_array()
        .and_then(|addresses| addresses.iter().find(|a| a["type"] == "InternalIP"))
        .and_then(|address| address["address"].as_str())
        .unwrap_or_else(|| panic!("node {} reports no InternalIP: {node}", a.name))
        .to_owned();
    let pods = wait_for("ticker to be 1/1 in get pods -o wide", Duration::from_secs(15), || {
        let pods = kubectl_ok(controller, &["get", "pods", "-o", "wide"]);
        let line = pods.lines().find(|line| line.starts_with("ticker "))?.to_owned();
        line.split_whitespace().any(|column| column == "1/1").then_some(line)
    });
    for expected in ["Running", a.name.as_str(), address.as_str()] {
        assert!(pods.split_whitespace().any(|column| column == expected), "{expected} in {pods}");
    }
    // What `kubectl describe node` and drain ask for: the node's pods, by field selector.
    let described = kubectl_ok(controller, &["describe", "node", &a.name]);
    let listed = described.split("Non-terminated Pods:").nth(1).unwrap_or_default();
    assert!(listed.contains("ticker"), "{described}");
    let on_a = format!("spec.nodeName={}", a.name);
    let selected = kubectl_ok(controller, &["get", "pods", "--field-selector", &on_a]);
    assert!(selected.contains("ticker"), "{selected}");
    let not_running = format!("{on_a},status.phase!=Running");
    let selected = kubectl_ok(controller, &["get", "pods", "--field-selector", &not_running]);
    assert!(!selected.contains("ticker"), "{selected}");
    let elsewhere = format!("spec.nodeName={}", b.name);
    let selected = kubectl_ok(controller, &["get", "pods", "--field-selector", &elsewhere]);
    assert!(!selected.contains("ticker"), "{selected}");

    // `kubectl logs` and `logs -f`.
    let logs = wait_for("ticker's output", Duration::from_secs(15), || {
        let logs = kubectl_ok(controller, &["logs", "ticker"]);
        logs.contains(&format!("started-{marker}")).then_some(logs)
    });
    assert!(logs.contains(&format!("tick-{marker}")), "{logs}");
    let followed = controller.scratch().join("followed.txt");
    let mut follow = controller.kubectl_background(&["logs", "-f", "--tail=1", "ticker"], &followed);
    // `--tail=1` gives one tick; a second is one the follow brought. The ticks come a second
    // apart, so a quiet machine has both within two seconds; 30 s leaves a busy one its margin.
    let ticks =
        || std::fs::read_to_string(&followed).unwrap_or_default().matches(&format!("tick-{marker}")).count();
    let deadline = Instant::now() + Duration::from_secs(30);
    while ticks() < 2 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(200));
    }
    let _ = follow.kill();
    let _ = follow.wait();
    assert!(
        ticks() >= 2,
        "logs -f follows new lines within 30 s: {:?}",
        std::fs::read_to_string(&followed).unwrap_or_default()
    );

    // SIGKILL of the agent leaves the workload running; the restarted agent reports the same
    // process, not restarted. Whatever the agent's death did to its workload is done once the
    // restarted agent, which comes up only after that death, has its session open again.
    a.kill();
    a.run();
    wait_for("the agent to be back", Duration::from_secs(30), || {
        let log = a.log();
        (log.matches("the node session is open").count() >= 2).then_some(())
    });
    assert!(alive(pid), "killing the agent killed its workload");
    assert_eq!(the_process(&marker), (pid, uid), "the same process, not a new one");
    let status = app_status(controller, "ticker");
    assert_eq!(
        (status["phase"].as_str(), status["restarts"].as_i64()),
        (Some("Running"), Some(0)),
        "{status}"
    );

    // A restart of the controller changes nothing on the nodes. The reconnected agent applies
    // the desired state the restarted controller sends before any later one; so once an
    // Application created after the reconnection runs on the same node, whatever that first
    // state did to the workload is done.
    controller.restart();
    wait_for("the agent to reconnect", Duration::from_secs(30), || {
        (a.log().matches("the node session is open").count() >= 3).then_some(())
    });
    let later = unique("later");
    apply(
        controller,
        &application("later", &a.name, json!({"command": ["/bin/sh", "-c", format!("sleep 600 # {later}")]})),
    );
    the_process(&later);
    assert_eq!(the_process(&marker), (pid, uid), "the controller's restart disturbed the workload");
    assert_eq!(app_status(controller, "ticker")["restarts"], 0);
    kubectl_ok(controller, &["delete", "app", "later", "--wait=false"]);
    kill_all_with(&later);

    // Deleting stops the process with SIGTERM, which the shell dies of, without waiting out
    // its 30 s grace; and the object goes. kubectl's delete and the stop take about a quarter
    // of a second on a quiet machine; 15 s leaves a busy one its margin and is half the grace.
    let deleted = Instant::now();
    kubectl_ok(controller, &["delete", "app", "ticker"]);
    wait_for("ticker's process to stop", Duration::from_secs(15), || (!alive(pid)).then_some(()));
    let took = deleted.elapsed();
    eprintln!("kubectl delete and the stop of ticker took {took:?}");
    assert!(
        took < Duration::from_secs(15),
        "stopped within 15 s (a quarter of a second on a quiet machine): {took:?}"
    );
    assert!(get_json(controller, &["get", "app", "ticker"]).is_none(), "the object is gone");
}

#[test]
fn a_fleet_of_agents_runs_applications_on_sled() {
    if have_kubectl() {
        on_store(Store::Sled, &[], a_fleet_runs_applications);
    }
}

#[test]
fn a_fleet_of_agents_runs_applications_on_etcd() {
    if have_kubectl() {
        on_store(Store::Etcd, &[], a_fleet_runs_applications);
    }
}

#[test]
fn restart_policies_jobs_limits_and_probes_behave_as_kubelet_does_on_sled() {
    if have_kubectl() {
        on_store(Store::Sled, &[], lifecycles);
    }
}

#[test]
fn restart_policies_jobs_limits_and_probes_behave_as_kubelet_does_on_etcd() {
    if have_kubectl() {
        on_store(Store::Etcd, &[], lifecycles);
    }
}

fn lifecycles(controller: &mut Controller) {
    let controller = &*controller;
    let (a, b) = two_nodes(controller);
    let marker = unique("life");
    let sh = |script: &str| json!(["/bin/sh", "-c", format!("{script} # {marker}")]);
    apply(
        controller,
        &application(
            "flaky",
            &a.name,
            json!({"command": sh("echo once; exit 3"), "lifecycle": {"restartPolicy": "OnFailure"}}),
        ),
    );
    apply(
        controller,
        &application(
            "job",
            &a.name,
            json!({"command": sh("exit 7"), "lifecycle": {"restartPolicy": "Never"}}),
        ),
    );
    apply(
        controller,
        &application(
            "hog",
            &a.name,
            json!({"command": ["/usr/bin/python3", "-c", format!("x = bytearray(256 << 20); import time; time.sleep(60)  # {marker}")],
                   "lifecycle": {"restartPolicy": "Never"}, "resources": {"limits": {"memory": "64Mi"}}}),
        ),
    );
    apply(
        controller,
        &application(
            "unhealthy",
            &b.name,
            json!({"command": sh("sleep 600"),
                   "probes": {"liveness": {"exec": {"command": ["/bin/false"]}, "periodSeconds": 1, "failureThreshold": 1}}}),
        ),
    );
    // A job reports Failed with its exit code.
    let job = wait_for("the job to fail", Duration::from_secs(30), || {
        let status = app_status(controller, "job");
        (status["phase"] == "Failed").then_some(status)
    });
    assert_eq!(job["exitCode"], 7, "{job}");
    // A process that exceeds its memory limit is killed, and reported as OOMKilled.
    let hog = wait_for("the hog to be killed", Duration::from_secs(60), || {
        let status = app_status(controller, "hog");
        (status["phase"] == "Failed").then_some(status)
    });
    assert_eq!(hog["exitCode"], 137, "{hog}");
    assert!(hog["message"].as_str().unwrap_or_default().contains("OOMKilled"), "{hog}");
    let described = kubectl_ok(controller, &["describe", "pod", "hog"]);
    assert!(described.contains("OOMKilled"), "{described}");
    // `kubectl get pods` says how a job's process ended, as kubectl prints a container's end.
    for (name, reason) in [("job", "Error"), ("hog", "OOMKilled")] {
        let listed = kubectl_ok(controller, &["get", "pod", name, "--no-headers"]);
        assert_eq!(listed.split_whitespace().nth(2), Some(reason), "{listed}");
    }
    // OnFailure restarts with back-off (kubelet's: 10 s first).
    let flaky = wait_for("flaky to be restarted", Duration::from_secs(45), || {
        let status = app_status(controller, "flaky");
        (status["restarts"].as_i64().unwrap_or(0) >= 1).then_some(status)
    });
    assert_ne!(flaky["phase"], "Succeeded", "{flaky}");
    // The restart waited out kubelet's first back-off: its two starts are 10 s apart.
    let starts = wait_for("flaky's two Started events", Duration::from_secs(15), || {
        let selector = "involvedObject.name=flaky,reason=Started";
        let events = get_json(controller, &["get", "events", "--field-selector", selector])?;
        let mut starts: Vec<jiff::Timestamp> = events["items"]
            .as_array()?
            .iter()
            .filter_map(|event| event["firstTimestamp"].as_str()?.parse().ok())
            .collect();
        starts.sort();
        (starts.len() >= 2).then_some(starts)
    });
    let waited = starts[1].duration_since(starts[0]);
    assert!(waited >= jiff::SignedDuration::from_secs(9), "restarted after {waited:?}: {starts:?}");
    // Waiting out its back-off, it is a crash-looping pod to kubectl.
    let listed = wait_for("flaky to show CrashLoopBackOff", Duration::from_secs(45), || {
        let listed = kubectl_ok(controller, &["get", "pod", "flaky", "--no-headers"]);
        (listed.split_whitespace().nth(2) == Some("CrashLoopBackOff")).then_some(listed)
    });
    assert!(listed.starts_with("flaky"), "{listed}");
    let described = kubectl_ok(controller, &["describe", "pod", "flaky"]);
    assert!(described.contains("Waiting") && described.contains("CrashLoopBackOff"), "{described}");
    // A failing liveness probe restarts the process, with Events saying so.
    wait_for("unhealthy to be restarted", Duration::from_secs(45), || {
        (app_status(controller, "unhealthy")["restarts"].as_i64().unwrap_or(0) >= 1).then_some(())
    });
    let events =
        kubectl_ok(controller, &["get", "events", "--field-selector", "involvedObject.name=unhealthy"]);
    assert!(events.contains("Unhealthy") && events.contains("Killing"), "{events}");
    let events = kubectl_ok(controller, &["get", "events", "--field-selector", "involvedObject.name=flaky"]);
    assert!(events.contains("BackOff"), "{events}");
    // `kubectl describe` shows them, of the pod (found by the pod's uid) as of the Application.
    let described = kubectl_ok(controller, &["describe", "pod", "flaky"]);
    assert!(described.contains("BackOff"), "{described}");
    // The crash loop keeps one BackOff Event whose count grows, and describe says how often.
    let backoffs = wait_for("flaky's BackOff Event to count a repeat", Duration::from_secs(60), || {
        let selector = "involvedObject.name=flaky,reason=BackOff";
        let events = get_json(controller, &["get", "events", "--field-selector", selector])?;
        let items = events["items"].as_array()?.clone();
        items.iter().any(|event| event["count"].as_i64() >= Some(2)).then_some(items)
    });
    assert_eq!(backoffs.len(), 1, "a repeat is no new Event: {backoffs:#?}");
    let described = kubectl_ok(controller, &["describe", "pod", "flaky"]);
    assert!(described.contains(" (x"), "the count in describe's Age column: {described}");
    let selector = "involvedObject.name=flaky,reason=BackOff";
    let wide = kubectl_ok(controller, &["get", "events", "-o", "wide", "--field-selector", selector]);
    let header: Vec<&str> = wide.lines().next().unwrap_or_default().split_whitespace().collect();
    assert!(header.contains(&"COUNT") && header.contains(&"SOURCE"), "{wide}");
    assert!(wide.contains(&format!("kayra-agent, {}", a.name)), "the source names the node: {wide}");
    for what in ["pod", "app"] {
        let described = kubectl_ok(controller, &["describe", what, "unhealthy"]);
        assert!(described.contains("Unhealthy") && described.contains("Killing"), "{described}");
    }
    for name in ["flaky", "job", "hog", "unhealthy"] {
        kubectl_ok(controller, &["delete", "app", name]);
    }
    kill_all_with(&marker);
}

/// `curl` with node `agent`'s own certificate: the HTTP status.
pub(crate) fn curl_as_node(
    controller: &Controller,
    agent: &Agent,
    method: &str,
    path: &str,
    body: Option<&Value>,
) -> u16 {
    let pki = agent.data().join("pki");
    let mut command = Command::new("curl");
    command
        .args(["-s", "-o", "/dev/null", "-w", "%{http_code}", "-X", method, "--cacert"])
        .arg(pki.join("ca.crt"))
        .arg("--cert")
        .arg(pki.join("node.crt"))
        .arg("--key")
        .arg(pki.join("node.key"))
        .args(["-H", "Content-Type: application/merge-patch+json"]);
    if let Some(body) = body {
        command.args(["-d", &body.to_string()]);
    }
    let output = command.arg(format!("{}{path}", controller.url())).output().expect("curl runs");
    String::from_utf8_lossy(&output.stdout).trim().parse().unwrap_or(0)
}

#[test]
fn a_node_certificate_reaches_nothing_beyond_its_node_on_sled() {
    if have_kubectl() {
        on_store(Store::Sled, &[], confinement);
    }
}

#[test]
fn a_node_certificate_reaches_nothing_beyond_its_node_on_etcd() {
    if have_kubectl() {
        on_store(Store::Etcd, &[], confinement);
    }
}

fn confinement(controller: &mut Controller) {
    let controller = &*controller;
    let (a, b) = two_nodes(controller);
    let marker = unique("confined");
    let secret = json!({"apiVersion": "fleet.example.com/v1", "kind": "Secret", "metadata": {"name": "db", "namespace": "default"}, "stringData": {"password": "x"}});
    apply(controller, &secret);
    let on_b = json!({"command": ["/bin/sh", "-c", format!("sleep 600 # {marker}")]});
    apply(controller, &application("theirs", &b.name, on_b.clone()));
    apply(controller, &application("ours", &a.name, on_b));
    wait_for("both to run", Duration::from_secs(30), || {
        (app_status(controller, "theirs")["phase"] == "Running"
            && app_status(controller, "ours")["phase"] == "Running")
            .then_some(())
    });
    let apps = "/apis/fleet.example.com/v1/namespaces/default/applications";
    let patch = json!({"status": {"phase": "Failed"}});
    let cases: Vec<(&str, String, Option<Value>, &str)> = vec![
        ("GET", format!("{apps}/ours"), None, "read an Application, even its own"),
        ("GET", apps.to_owned(), None, "list Applications"),
        ("GET", "/apis/fleet.example.com/v1/namespaces/default/secrets/db".to_owned(), None, "read a Secret"),
        (
            "PATCH",
            format!("{apps}/ours"),
            Some(json!({"spec": {"args": ["x"]}})),
            "change an Application's spec",
        ),
        (
            "PATCH",
            format!("{apps}/theirs/status"),
            Some(patch.clone()),
            "write another node's Application's status",
        ),
        (
            "PATCH",
            format!("/api/v1/nodes/{}/status", b.name),
            Some(json!({"status": {"capacity": {"cpu": "64"}}})),
            "write another node's status",
        ),
        (
            "PATCH",
            format!("/api/v1/nodes/{}", a.name),
            Some(json!({"spec": {"unschedulable": false}, "metadata": {"labels": {"x": "y"}}})),
            "label itself",
        ),
        ("GET", format!("/api/v1/nodes/{}", b.name), None, "read another node"),
        ("GET", format!("/api/v1/nodes/{}/status", b.name), None, "read another node's status"),
        ("GET", "/api/v1/nodes".to_owned(), None, "list every node"),
        ("GET", "/api/v1/nodes?watch=true&timeoutSeconds=1".to_owned(), None, "watch every node"),
        (
            "GET",
            format!("/api/v1/nodes?fieldSelector=metadata.name%3D{}", b.name),
            None,
            "list another node by name",
        ),
    ];
    for (method, path, body, what) in cases {
        let code = curl_as_node(controller, &a, method, &path, body.as_ref());
        assert_eq!(code, 403, "a node's certificate may not {what} ({method} {path})");
    }
    // What it may do: read its own Node and status, alone.
    for path in [
        format!("/api/v1/nodes/{}", a.name),
        format!("/api/v1/nodes/{}/status", a.name),
        format!("/api/v1/nodes?fieldSelector=metadata.name%3D{}", a.name),
    ] {
        assert_eq!(curl_as_node(controller, &a, "GET", &path, None), 200, "GET {path}");
    }
    for name in ["theirs", "ours"] {
        kubectl_ok(controller, &["delete", "app", name]);
    }
    kill_all_with(&marker);
}

#[test]
fn join_refuses_a_controller_whose_ca_does_not_match_the_pin() {
    let controller = Controller::start(&["--store", "memory"]);
    let line = join_line(&controller);
    let wrong = format!("sha256:{}", "0".repeat(64));
    let pinned = line.split_whitespace().skip_while(|w| *w != "--ca-cert-hash").nth(1).unwrap().to_owned();
    let line = line.replace(&pinned, &wrong);
    let mut agent = Agent::join(&line, &unique("impostor"));
    let status = agent.child.take().unwrap().wait().unwrap();
    assert!(!status.success());
    let log = agent.log();
    assert!(log.contains("pin") || log.contains("hash"), "{log}");
    // Whatever a bootstrap token does (its certificate request) is audited under its identity.
    let audit = || std::fs::read_to_string(controller.scratch().join("data/audit.log")).unwrap_or_default();
    assert!(!audit().contains("system:bootstrap:"), "the token reached the controller: {}", audit());
    // The same token with the right pin is used at once, so the check above could have failed.
    let mut joined = Agent::join(&line.replace(&wrong, &pinned), &unique("joiner"));
    wait_for("the right pin's join to reach the controller", Duration::from_secs(30), || {
        audit().contains("system:bootstrap:").then_some(())
    });
    joined.kill();
}

#[test]
fn the_controller_alone_is_a_fleet_of_one() {
    if !have_kubectl() {
        return;
    }
    let controller = Controller::start_with_local_node(&["--store", "sled"]);
    let marker = unique("local");
    let app = json!({"apiVersion": "fleet.example.com/v1", "kind": "Application", "metadata": {"name": "hello", "namespace": "default"},
                     "spec": {"command": ["/bin/sh", "-c", format!("echo hello-{marker}; sleep 600")]}});
    apply(&controller, &app);
    kubectl_ok(&controller, &["wait", "--for=condition=Ready", "app/hello", "--timeout=60s"]);
    // The README's tour ends with the pod Running on the local node.
    let pods = kubectl_ok(&controller, &["get", "pods"]);
    let line = pods.lines().find(|line| line.starts_with("hello ")).unwrap_or_else(|| panic!("{pods}"));
    assert!(line.contains("1/1") && line.contains("Running"), "{pods}");
    let logs = wait_for("hello's output", Duration::from_secs(15), || {
        let logs = kubectl_ok(&controller, &["logs", "hello"]);
        logs.contains(&format!("hello-{marker}")).then_some(logs)
    });
    assert!(logs.contains("hello-"), "{logs}");
    let (pid, _) = the_process(&marker);
    kubectl_ok(&controller, &["delete", "app", "hello"]);
    wait_for("hello to stop", Duration::from_secs(40), || (!alive(pid)).then_some(()));
    kill_all_with(&controller.scratch().join("data/agent").display().to_string());
}

#[test]
fn a_silent_node_becomes_ready_unknown_with_an_event() {
    if !have_kubectl() {
        return;
    }
    let settings = tempfile::tempdir().unwrap();
    let config = settings.path().join("kayra.yaml");
    std::fs::write(&config, "nodeReadyTimeoutSeconds: 12\n").unwrap();
    let controller = Controller::start(&["--store", "memory", "--config", config.to_str().unwrap()]);
    let mut agent = Agent::join(&join_line(&controller), &unique("silent"));
    let name = agent.name.clone();
    let ready = |status: &str| {
        let node = get_json(&controller, &["get", "node", &name])?;
        let conditions = node["status"]["conditions"].as_array()?.clone();
        conditions.iter().any(|c| c["type"] == "Ready" && c["status"] == status).then_some(())
    };
    wait_for("the node to be Ready", Duration::from_secs(30), || ready("True"));
    agent.kill();
    wait_for("the node to be Ready=Unknown", Duration::from_secs(40), || ready("Unknown"));
    let events = kubectl_ok(
        &controller,
        &["get", "events", "-n", "default", "--field-selector", &format!("involvedObject.name={name}")],
    );
    assert!(events.contains("NodeNotReady"), "{events}");
}

/// An agent renews its own certificate once most of its life has passed, as kubelet does, and
/// holds its session with the new one.
#[test]
fn an_agent_renews_its_certificate_before_it_expires() {
    let controller = Controller::start(&["--store", "memory"]);
    let mut agent = Agent::join(&join_line(&controller), &unique("renewer"));
    let pki = agent.data().join("pki");
    wait_for("the agent's first certificate", Duration::from_secs(30), || {
        pki.join("node.crt").exists().then_some(())
    });
    agent.kill();
    // The same key, certified for six minutes of which most have passed (the signer back-dates
    // five minutes): renewal is due at once.
    let request = Command::new("openssl")
        .args(["req", "-new", "-key"])
        .arg(pki.join("node.key"))
        .args(["-subj", &format!("/O=system:nodes/CN=system:node:{}", agent.name)])
        .output()
        .expect("openssl runs");
    assert!(request.status.success(), "{}", String::from_utf8_lossy(&request.stderr));
    let data = controller.scratch().join("data/pki");
    let read = |name: &str| std::fs::read_to_string(data.join(name)).unwrap();
    let ca = kayra_pki::Ca::from_pem(&read("ca.crt"), &read("ca.key")).unwrap();
    let subject = kayra_pki::Subject {
        common_name: format!("system:node:{}", agent.name),
        organizations: vec!["system:nodes".to_owned()],
    };
    let short = ca
        .sign_request(
            &String::from_utf8(request.stdout).unwrap(),
            &subject,
            kayra_pki::Usage::Client,
            Duration::from_secs(60),
        )
        .unwrap();
    std::fs::write(pki.join("node.crt"), &short).unwrap();
    agent.run();
    let renewed = wait_for("the agent to renew its certificate", Duration::from_secs(60), || {
        let current = std::fs::read_to_string(pki.join("node.crt")).ok()?;
        (current != short).then_some(current)
    });
    let (_, not_after) = kayra_pki::certificate_validity(&renewed).unwrap();
    assert!(
        not_after > std::time::SystemTime::now() + Duration::from_secs(3600),
        "the renewed certificate is long-lived"
    );
    // The line is written just after the certificate is kept: wait for it rather than race it.
    wait_for("the renewal in the agent's log", Duration::from_secs(10), || {
        agent.log().contains("renewed the node's certificate").then_some(())
    });
    // The renewed certificate opens the next session.
    let opened = agent.log().matches("the node session is open").count();
    agent.kill();
    agent.run();
    wait_for("a session with the renewed certificate", Duration::from_secs(30), || {
        (agent.log().matches("the node session is open").count() > opened).then_some(())
    });
}

/// Later starts are `kayra-agent run` (a systemd unit written from the README says no more):
/// the data directory knows the node it joined as, and only a `--name` that contradicts it is
/// refused.
#[test]
fn a_joined_agent_runs_again_from_its_data_directory_alone() {
    let controller = Controller::start(&["--store", "memory"]);
    let mut agent = Agent::join(&join_line(&controller), &unique("rejoin"));
    let sessions = |agent: &Agent| agent.log().matches("the node session is open").count();
    wait_for("the joined agent's session", Duration::from_secs(30), || (sessions(&agent) >= 1).then_some(()));
    agent.kill();
    let refused = Command::new(agent_binary())
        .args(["run", "--name", "someone-else", "--data-dir"])
        .arg(agent.data())
        .output()
        .expect("the agent runs");
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success(), "another name was accepted: {said}");
    assert!(said.contains(&format!("belongs to node \"{}\"", agent.name)), "{said}");
    agent.run_from_data_dir();
    wait_for("the agent to be back as the node it joined as", Duration::from_secs(30), || {
        (sessions(&agent) >= 2).then_some(())
    });
    let status = agent.child.as_mut().unwrap().try_wait().unwrap();
    assert!(status.is_none(), "the agent exited: {}", agent.log());
}
