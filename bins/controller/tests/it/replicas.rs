//! Replicas on a real three-member etcd: a second replica served from a copy of the first's
//! data directory answers `kubectl` with what the first wrote, including while an etcd member
//! is dead and when it starts with one dead; a controller initialised for another cluster,
//! pointed at the same etcd, refuses to start and writes nothing; a real agent joined with
//! every replica's URL (one of them dead) and a second one keep their nodes and workloads alive
//! through the others when replicas are killed, and `kubectl logs -f` follows a workload's log
//! through every replica.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use kayra_store_etcd::test_server::{EtcdCluster, StartError, skip_test};

use crate::agents::{Agent, application, join_line, kill_all_with, the_process, unique, wait_for};
use crate::{Controller, free_port, have_kubectl};

/// What the README says a replica needs from the data directory `init` wrote, and the admin's
/// credentials the tests drive kubectl with.
const A_REPLICAS_FILES: [&str; 7] = [
    "pki/ca.crt",
    "pki/ca.key",
    "pki/server.crt",
    "pki/server.key",
    "tokens.csv",
    "admin.token",
    "admin.kubeconfig",
];

/// A replica of `first`: a copy of the files of its data directory a replica needs (copied
/// one by one: `first` is serving, and writes files of its own beside them), served on ports
/// of its own.
pub(crate) fn replica_of(first: &Controller, extra: &[&str]) -> Controller {
    let dir = tempfile::tempdir().unwrap();
    for file in A_REPLICAS_FILES {
        let to = dir.path().join("data").join(file);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(first.dir.path().join("data").join(file), &to).expect("a replica's file copies");
    }
    let mut args = vec!["--no-agent"];
    args.extend_from_slice(extra);
    Controller::launch_in(dir, &args)
}

/// A real three-member etcd cluster, or `None` (the test skipped) where etcd is not installed.
pub(crate) fn three_member_etcd(runtime: &tokio::runtime::Runtime) -> Option<EtcdCluster> {
    match runtime.block_on(EtcdCluster::start(3)) {
        Ok(cluster) => Some(cluster),
        Err(StartError::Missing) => {
            skip_test(StartError::Missing);
            None
        }
        Err(error) => panic!("{error}"),
    }
}

/// The numbers of the first `wanted` `tick N` lines `kubectl logs -f app --tail 1` prints
/// through `through` within `within`; kubectl is stopped then.
fn follow_ticks(through: &Controller, app: &str, wanted: usize, within: Duration) -> Vec<u64> {
    let cache = tempfile::tempdir().unwrap();
    let mut child = Command::new("kubectl")
        .args(["--kubeconfig", "/dev/null", "--server", &through.url(), "--token", &through.token()])
        .arg("--certificate-authority")
        .arg(through.dir.path().join("data/pki/ca.crt"))
        .arg("--cache-dir")
        .arg(cache.path())
        .args(["logs", "-f", app, "--tail", "1"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("kubectl runs");
    let stdout = child.stdout.take().expect("piped");
    let (lines, read) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if lines.send(line).is_err() {
                return;
            }
        }
    });
    let deadline = Instant::now() + within;
    let mut ticks = Vec::new();
    while ticks.len() < wanted {
        let Ok(line) = read.recv_timeout(deadline.saturating_duration_since(Instant::now())) else { break };
        if let Some(n) = line.split_whitespace().nth(1).and_then(|n| n.parse().ok()) {
            ticks.push(n);
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    ticks
}

fn kubectl_ok(controller: &Controller, args: &[&str]) -> String {
    let output = controller.kubectl_with_token(&controller.token(), args);
    let said = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "kubectl {args:?} through {}: {said}", controller.url());
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[test]
fn replicas_share_a_three_member_etcd_and_a_replica_of_another_cluster_is_refused() {
    if !have_kubectl() {
        return;
    }
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let Some(mut etcd) = three_member_etcd(&runtime) else { return };
    let endpoints = etcd.endpoints().join(",");
    let on_etcd = ["--store", "etcd", "--etcd-endpoints", endpoints.as_str()];
    let first = Controller::start(&on_etcd);
    let second = replica_of(&first, &on_etcd);
    kubectl_ok(&first, &["create", "namespace", "written-through-the-first"]);
    let namespaces = kubectl_ok(&second, &["get", "namespaces", "-o", "name"]);
    assert!(namespaces.contains("namespace/written-through-the-first"), "{namespaces}");

    // One member dies: every read through either replica still answers, and a replica starts.
    let leader = runtime.block_on(etcd.leader()).expect("etcd has a leader");
    etcd.kill((leader + 1) % 3);
    for n in 0..10 {
        let through = if n % 2 == 0 { &first } else { &second };
        kubectl_ok(through, &["get", "namespaces", "-o", "name"]);
    }
    let third = replica_of(&first, &on_etcd);
    let namespaces = kubectl_ok(&third, &["get", "namespaces", "-o", "name"]);
    assert!(namespaces.contains("namespace/written-through-the-first"), "{namespaces}");

    // A controller of another cluster (its own `init`, its own CA) on the same etcd stops.
    let stranger = tempfile::tempdir().unwrap();
    let log = std::fs::File::create(stranger.path().join("controller.log")).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_kayra-controller"))
        .arg("--data-dir")
        .arg(stranger.path().join("data"))
        .args(["--listen", &format!("127.0.0.1:{}", free_port()), "--no-agent"])
        .args(on_etcd)
        .stdout(std::process::Stdio::null())
        .stderr(log)
        .spawn()
        .expect("the controller starts");
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = child.try_wait().expect("the child is ours") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("a controller of another cluster kept running on this etcd");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let said = std::fs::read_to_string(stranger.path().join("controller.log")).unwrap_or_default();
    assert!(!status.success(), "{said}");
    assert!(said.contains("the store belongs to another cluster"), "{said}");
    let namespaces = kubectl_ok(&second, &["get", "namespaces", "-o", "name"]);
    assert!(namespaces.contains("namespace/written-through-the-first"), "the cluster is untouched");

    // A node joined with every replica's URL, the first of them dead, joins through another;
    // when the replica holding its session is killed, it moves to the other, where its Lease
    // goes on being renewed.
    let line = join_line(&first);
    let dead = format!("https://127.0.0.1:{}", free_port());
    let servers = format!("{dead},{},{},{}", first.url(), second.url(), third.url());
    let mut words: Vec<String> = line.split_whitespace().map(str::to_owned).collect();
    let at = words.iter().position(|word| word == "--server").expect("the line names the server") + 1;
    words[at] = servers;
    let name = unique("replicated");
    let agent = Agent::join(&words.join(" "), &name);
    // A second node lists the replicas the other way round.
    words[at] = format!("{},{},{}", third.url(), second.url(), first.url());
    let other_name = unique("replicated-too");
    let other = Agent::join(&words.join(" "), &other_name);
    let renewed = |through: &Controller, node: &str| {
        let output = through.kubectl_with_token(
            &through.token(),
            &["get", "lease", "-n", "kube-node-lease", node, "-o", "jsonpath={.spec.renewTime}"],
        );
        String::from_utf8_lossy(&output.stdout).parse::<jiff::Timestamp>().ok()
    };
    for node in [&name, &other_name] {
        wait_for("each node's first Lease", Duration::from_secs(60), || renewed(&second, node));
    }
    let holder = wait_for("the node's session", Duration::from_secs(30), || {
        let log = agent.log();
        let line = log.lines().rev().find(|line| line.contains("the node session is open"))?.to_owned();
        Some(line)
    });
    // A workload's log reads the same through each replica: the one holding the node's session
    // serves it, the others forward it there; only the replicas may ask for a session's log.
    let marker = unique("replicated-talker");
    let script = "import itertools, time; [(print('tick', n, flush=True), time.sleep(0.2)) for n in itertools.count()]";
    let talker = application(
        "talker",
        &name,
        serde_json::json!({"command": ["/usr/bin/python3", "-c", script, &marker]}),
    );
    let manifest = first.scratch().join("talker.json");
    std::fs::write(&manifest, talker.to_string()).unwrap();
    kubectl_ok(&first, &["apply", "-f", manifest.to_str().unwrap()]);
    let sleeper_marker = unique("replicated-sleeper");
    let sleeper = application(
        "sleeper",
        &other_name,
        serde_json::json!({"command": ["/usr/bin/python3", "-c", "import time; time.sleep(1000)", &sleeper_marker]}),
    );
    let manifest = first.scratch().join("sleeper.json");
    std::fs::write(&manifest, sleeper.to_string()).unwrap();
    kubectl_ok(&first, &["apply", "-f", manifest.to_str().unwrap()]);
    for through in [&first, &second, &third] {
        let read = wait_for("the talker's log", Duration::from_secs(60), || {
            let output = through.kubectl_with_token(&through.token(), &["logs", "talker", "--tail", "2"]);
            let text = String::from_utf8_lossy(&output.stdout).into_owned();
            (output.status.success() && text.matches("tick").count() == 2).then_some(text)
        });
        assert_eq!(read.lines().count(), 2, "through {}: {read}", through.url());
    }
    // `kubectl logs -f` through each replica follows the log as it is written: every line, in
    // order, none twice, whichever replica holds the node's session.
    for through in [&first, &second, &third] {
        let ticks = follow_ticks(through, "talker", 5, Duration::from_secs(30));
        let consecutive = ticks.windows(2).all(|pair| pair[1] == pair[0] + 1);
        assert!(ticks.len() == 5 && consecutive, "kubectl logs -f through {}: {ticks:?}", through.url());
    }
    // `kubectl exec` through each replica runs beside the workload, wherever the node holds its
    // session: the others open it at the holder as the client's own upgrade, one more hop.
    for through in [&first, &second, &third] {
        let exec = |script: &str| {
            through.kubectl_with_token(&through.token(), &["exec", "talker", "--", "sh", "-c", script])
        };
        let output = exec("echo through-$((40+2))");
        let said = String::from_utf8_lossy(&output.stdout).into_owned();
        assert_eq!(
            said,
            "through-42\n",
            "through {}: {}",
            through.url(),
            String::from_utf8_lossy(&output.stderr)
        );
        assert_eq!(exec("exit 3").status.code(), Some(3), "the exit code through {}", through.url());
    }
    // `kubectl top` through each replica answers for the node and its workload, wherever the
    // node holds its session: the others ask the holder for the samples it holds.
    for through in [&first, &second, &third] {
        for (what, named) in [("node", name.as_str()), ("pod", "talker")] {
            wait_for("kubectl top through each replica", Duration::from_secs(60), || {
                let output =
                    through.kubectl_with_token(&through.token(), &["top", what, named, "--no-headers"]);
                let text = String::from_utf8_lossy(&output.stdout).into_owned();
                (output.status.success() && text.starts_with(named)).then_some(text)
            });
        }
    }
    let session_log =
        format!("/apis/fleet.example.com/v1/nodes/{name}/sessionlog?namespace=default&name=talker");
    let refused = first.kubectl_with_token(&first.token(), &["get", "--raw", &session_log]);
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success() && said.contains("Forbidden"), "an administrator may not: {said}");
    let usage = "/apis/fleet.example.com/v1/sessionusage";
    let refused = first.kubectl_with_token(&first.token(), &["get", "--raw", usage]);
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success() && said.contains("Forbidden"), "nor read a replica's samples: {said}");

    // As a replica (a certificate of the replicas' group), the replica holding the session
    // serves its log, and one that does not answers that it holds nothing, forwarding nowhere.
    let pki = first.dir.path().join("data/pki");
    let read = |file: &str| std::fs::read_to_string(pki.join(file)).unwrap();
    let ca = kayra_pki::Ca::from_pem(&read("ca.crt"), &read("ca.key")).unwrap();
    let peer = ca
        .issue(
            kayra_pki::Usage::Client,
            "system:kayra:controller:test",
            Some("system:kayra:controllers"),
            &[],
        )
        .unwrap();
    let (cert, key) = (first.scratch().join("peer.crt"), first.scratch().join("peer.key"));
    std::fs::write(&cert, &peer.cert_pem).unwrap();
    std::fs::write(&key, &peer.key_pem).unwrap();
    let as_peer = |through: &Controller, path: &str| {
        let output = Command::new("curl")
            .args(["-s", "-w", "\n%{http_code}", "--cacert"])
            .arg(pki.join("ca.crt"))
            .arg("--cert")
            .arg(&cert)
            .arg("--key")
            .arg(&key)
            .arg(format!("{}{path}", through.url()))
            .output()
            .expect("curl runs");
        String::from_utf8_lossy(&output.stdout).into_owned()
    };
    let holds = [&first, &second, &third]
        .into_iter()
        .find(|c| holder.contains(&c.url()))
        .expect("a replica holds it");
    let elsewhere =
        [&first, &second, &third].into_iter().find(|c| !holder.contains(&c.url())).expect("one does not");
    let served = as_peer(holds, &format!("{session_log}&tailLines=1"));
    assert!(served.ends_with("\n200") && served.contains("tick"), "the holder serves it: {served}");
    let refused = as_peer(elsewhere, &format!("{session_log}&tailLines=1"));
    assert!(
        refused.ends_with("\n503") && refused.contains("holds no session"),
        "never forwarded again: {refused}"
    );
    let held = as_peer(holds, usage);
    assert!(held.ends_with("\n200") && held.contains(&name), "the holder answers its samples: {held}");
    let none = as_peer(elsewhere, usage);
    assert!(none.ends_with("\n200") && !none.contains(&name), "one holding no session, none: {none}");

    let (talker_pid, _) = the_process(&marker);
    let (sleeper_pid, _) = the_process(&sleeper_marker);
    let mut replicas: Vec<Option<Controller>> = vec![Some(first), Some(second), Some(third)];
    let url_of = |replicas: &[Option<Controller>], n: usize| replicas[n].as_ref().map(Controller::url);
    let holding =
        (0..3).find(|n| url_of(&replicas, *n).is_some_and(|url| holder.contains(&url))).expect("a holder");
    // The holder dies; then, if it was not the first (which started alone, so it leads the
    // elected loops), the first dies too: the scheduler's leader.
    let mut killed = Vec::new();
    for n in [holding, 0] {
        if let Some(replica) = replicas[n].take() {
            drop(replica);
            killed.push(jiff::Timestamp::now());
        }
    }
    let killed = *killed.last().expect("a replica was killed");
    let left = replicas.iter().flatten().next().expect("a replica is left");
    let within = Duration::from_secs(60);
    for node in [&name, &other_name] {
        wait_for(
            "each node's renewal through the replica left, within 60 s of the others' death",
            within,
            || renewed(left, node).filter(|at| *at > killed),
        );
    }
    let output = left.kubectl_with_token(&left.token(), &["logs", "talker", "--tail", "1"]);
    assert!(
        String::from_utf8_lossy(&output.stdout).contains("tick"),
        "the log reads through the replica left: {output:?}"
    );

    // Another replica leads the scheduler: an Application created now is placed and runs.
    let later = unique("placed-after");
    let placed = serde_json::json!({"apiVersion": "fleet.example.com/v1", "kind": "Application",
        "metadata": {"name": "placed-after", "namespace": "default"},
        "spec": {"command": ["/usr/bin/python3", "-c", "import time; time.sleep(1000)", &later]}});
    let manifest = left.scratch().join("placed.json");
    std::fs::write(&manifest, placed.to_string()).unwrap();
    kubectl_ok(left, &["apply", "-f", manifest.to_str().unwrap()]);
    let bound = "the scheduler's lease (15 s) plus 10 s after its leader died";
    let status = |name: &str| {
        let got = left.kubectl_with_token(&left.token(), &["get", "app", name, "-o", "json"]);
        serde_json::from_slice::<serde_json::Value>(&got.stdout)
            .map(|app| app["status"].clone())
            .unwrap_or_default()
    };
    wait_for(bound, Duration::from_secs(25), || (status("placed-after")["phase"] == "Running").then_some(()));
    assert_eq!(the_process(&marker).0, talker_pid, "the workload kept its process through both deaths");
    assert_eq!(the_process(&sleeper_marker).0, sleeper_pid, "so did the other node's");
    for app in ["talker", "sleeper"] {
        let status = status(app);
        assert_eq!(status["restarts"].as_i64().unwrap_or(0), 0, "nothing the nodes ran restarted: {status}");
    }
    drop((agent, other, replicas));
    kill_all_with(&marker);
    kill_all_with(&sleeper_marker);
    kill_all_with(&later);
}
