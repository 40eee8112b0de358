//! `kubectl exec`, `cp`, `attach` and `port-forward` into Applications run by a real
//! `kayra-agent`, driven by the stock kubectl: over WebSocket (kubectl's default) and over
//! plain SPDY (where kubectl falls back), an interactive shell in tmux, a port declared and one
//! not, a `view` user refused; a client that stops reading blocks the workload, not the
//! controller's memory; a client killed mid-stream ends the process it ran.

use std::io::Write;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::agents::{
    Agent, app_status, application, apply, is_root, join_line, processes_with, unique, wait_for,
};
use crate::{Controller, free_port, have_kubectl};

/// One agent joined and Ready; answers it.
fn one_node(controller: &Controller) -> Agent {
    let agent = Agent::join(&join_line(controller), &unique("streams"));
    wait_for("the node to be Ready", Duration::from_secs(30), || {
        let output = controller.kubectl(&[
            "get",
            "node",
            &agent.name,
            "-o",
            "jsonpath={.status.conditions[?(@.type==\"Ready\")].status}",
        ]);
        (String::from_utf8_lossy(&output.stdout) == "True").then_some(())
    });
    agent
}

/// kubectl with this controller's kubeconfig, a fresh cache, `env` set and `input` on its stdin.
fn kubectl_in(controller: &Controller, env: &[(&str, &str)], input: &[u8], args: &[&str]) -> Output {
    let cache = tempfile::tempdir().unwrap();
    let mut child = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(controller.kubeconfig())
        .arg("--cache-dir")
        .arg(cache.path())
        .args(args)
        .envs(env.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kubectl runs");
    let mut stdin = child.stdin.take().expect("its stdin");
    stdin.write_all(input).expect("kubectl takes its input");
    drop(stdin);
    child.wait_with_output().expect("kubectl ends")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// `kubectl port-forward` in the background, its output in `log`.
fn port_forward(controller: &Controller, env: &[(&str, &str)], spec: &str, log: &Path) -> Child {
    let cache = tempfile::tempdir().unwrap().keep();
    Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(controller.kubeconfig())
        .arg("--cache-dir")
        .arg(cache)
        .args(["port-forward", "pod/web", spec])
        .envs(env.iter().copied())
        .stdout(std::fs::File::create(log).unwrap())
        .stderr(std::fs::File::create(log.with_extension("err")).unwrap())
        .spawn()
        .expect("kubectl runs")
}

/// `curl http://127.0.0.1:<port>/`: its status code and body, once kubectl listens there.
fn curl(port: u16) -> Option<(String, String)> {
    let output = Command::new("curl")
        .args(["-s", "-m", "10", "-w", "\n%{http_code}", &format!("http://127.0.0.1:{port}/")])
        .output()
        .expect("curl runs");
    let said = text(&output.stdout);
    let (body, code) = said.rsplit_once('\n')?;
    output.status.success().then(|| (code.to_owned(), body.to_owned()))
}

#[test]
fn exec_cp_attach_and_port_forward_reach_a_running_application() {
    if !have_kubectl() {
        return;
    }
    let controller = Controller::start(&["--store", "sled"]);
    let agent = one_node(&controller);
    let marker = unique("web");
    let port = free_port();
    let server = format!(
        "import http.server, sys; http.server.test(HandlerClass=http.server.SimpleHTTPRequestHandler, port={port}, bind='127.0.0.1')  # {marker}"
    );
    apply(
        &controller,
        &application(
            "web",
            &agent.name,
            json!({"command": ["/usr/bin/python3", "-c", server], "workingDir": "/etc", "ports": [{"name": "http", "port": port}]}),
        ),
    );
    apply(
        &controller,
        &application(
            "reader",
            &agent.name,
            json!({"command": ["/bin/sh", "-c", format!("while read line; do echo got-$line; done # {marker}")], "stdin": true}),
        ),
    );
    for name in ["web", "reader"] {
        wait_for(&format!("{name} to run"), Duration::from_secs(30), || {
            (app_status(&controller, name)["phase"] == "Running").then_some(())
        });
    }
    // Running is the process started, not its server listening; kubectl ends a whole
    // port-forward once one connection fails, so the server must listen before the first.
    wait_for("the workload's server to listen", Duration::from_secs(30), || {
        std::net::TcpStream::connect(("127.0.0.1", port)).ok()
    });
    let websocket: &[(&str, &str)] = &[];
    let spdy: &[(&str, &str)] =
        &[("KUBECTL_REMOTE_COMMAND_WEBSOCKETS", "false"), ("KUBECTL_PORT_FORWARD_WEBSOCKETS", "false")];
    for (protocol, env) in [("WebSocket", websocket), ("SPDY", spdy)] {
        // The Application's own user.
        let id = kubectl_in(&controller, env, b"", &["exec", "web", "--", "id", "-u"]);
        let expected = if is_root() {
            "65532".to_owned()
        } else {
            text(&Command::new("id").arg("-u").output().unwrap().stdout).trim().to_owned()
        };
        assert_eq!(
            (text(&id.stdout).trim(), id.status.code()),
            (expected.as_str(), Some(0)),
            "{protocol}: {}",
            text(&id.stderr)
        );
        // Its exit code is kubectl's.
        let three = kubectl_in(
            &controller,
            env,
            b"",
            &["exec", "web", "--", "sh", "-c", "echo out; echo err >&2; exit 3"],
        );
        assert_eq!(three.status.code(), Some(3), "{protocol}: {}", text(&three.stderr));
        assert_eq!(text(&three.stdout), "out\n", "{protocol}");
        assert!(
            text(&three.stderr).contains("err\ncommand terminated with exit code 3"),
            "{protocol}: {}",
            text(&three.stderr)
        );
        // stdin to its end.
        let cat = kubectl_in(&controller, env, b"first\nsecond\n", &["exec", "-i", "web", "--", "cat"]);
        assert_eq!(
            (text(&cat.stdout).as_str(), cat.status.code()),
            ("first\nsecond\n", Some(0)),
            "{protocol}: {}",
            text(&cat.stderr)
        );
        // kubectl cp is tar through exec, both ways.
        let copied = controller.scratch().join(format!("hostname-{protocol}"));
        let cp = kubectl_in(&controller, env, b"", &["cp", "web:/etc/hostname", copied.to_str().unwrap()]);
        assert!(cp.status.success(), "{protocol}: {}", text(&cp.stderr));
        assert_eq!(
            std::fs::read_to_string(&copied).unwrap(),
            std::fs::read_to_string("/etc/hostname").unwrap()
        );
        let local = controller.scratch().join("upload.txt");
        std::fs::write(&local, format!("uploaded over {protocol}\n")).unwrap();
        let up = kubectl_in(
            &controller,
            env,
            b"",
            &[
                "cp",
                local.to_str().unwrap(),
                "web:/tmp/upload-{protocol}.txt".replace("{protocol}", protocol).as_str(),
            ],
        );
        assert!(up.status.success(), "{protocol}: {}", text(&up.stderr));
        let back = kubectl_in(
            &controller,
            env,
            b"",
            &["exec", "web", "--", "cat", &format!("/tmp/upload-{protocol}.txt")],
        );
        assert_eq!(text(&back.stdout), format!("uploaded over {protocol}\n"));
        // Port-forward to the declared port reaches the workload's server.
        let local_port = free_port();
        let log = controller.scratch().join(format!("forward-{protocol}.log"));
        let mut forward = port_forward(&controller, env, &format!("{local_port}:{port}"), &log);
        let deadline = Instant::now() + Duration::from_secs(30);
        let (code, body) = loop {
            if let Some(answer) = curl(local_port) {
                break answer;
            }
            assert!(
                Instant::now() < deadline,
                "{protocol}: the forwarded server did not answer within 30s; kubectl said {:?} {:?}\n--- controller log ---\n{}\n--- agent log ---\n{}",
                std::fs::read_to_string(&log).unwrap_or_default(),
                std::fs::read_to_string(log.with_extension("err")).unwrap_or_default(),
                controller.log(),
                agent.log()
            );
            std::thread::sleep(Duration::from_millis(200));
        };
        assert_eq!(code, "200", "{protocol}");
        assert!(body.contains("Directory listing for /"), "{protocol}: {body}");
        assert!(
            curl(local_port).is_some_and(|(code, _)| code == "200"),
            "a second connection on the same session"
        );
        let _ = forward.kill();
        let _ = forward.wait();
        // A port the Application does not declare is refused, naming the ones it does.
        let other_port = free_port();
        let log = controller.scratch().join(format!("refused-{protocol}.log"));
        let mut refused =
            port_forward(&controller, env, &format!("{other_port}:{}", port.wrapping_add(1)), &log);
        wait_for("kubectl to listen", Duration::from_secs(30), || {
            std::fs::read_to_string(&log).unwrap_or_default().contains("Forwarding from").then_some(())
        });
        assert!(curl(other_port).is_none_or(|(code, _)| code != "200"));
        let said = wait_for("the refusal", Duration::from_secs(30), || {
            let said = std::fs::read_to_string(log.with_extension("err")).unwrap_or_default();
            said.contains("only declared ports may be forwarded").then_some(said)
        });
        assert!(said.contains(&format!("it declares {port} in spec.ports")), "{protocol}: {said}");
        let _ = refused.kill();
        let _ = refused.wait();
    }
    // An Application that declares no port takes no port-forward at all: 403 before any upgrade.
    let refused = controller.kubectl(&["port-forward", "pod/reader", &format!("{}:80", free_port())]);
    let said = text(&refused.stderr);
    assert!(!refused.status.success() && said.contains("is forbidden: it declares no TCP port"), "{said}");
    // attach: what the workload says from now on, and what is typed reaches its stdin.
    let mut attach = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(controller.kubeconfig())
        .arg("--cache-dir")
        .arg(tempfile::tempdir().unwrap().keep())
        .args(["attach", "-i", "reader"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("kubectl runs");
    let mut typed = attach.stdin.take().unwrap();
    let reading = std::thread::spawn({
        let mut out = attach.stdout.take().unwrap();
        move || {
            let mut seen = Vec::new();
            let mut chunk = [0u8; 4096];
            while let Ok(read) = std::io::Read::read(&mut out, &mut chunk) {
                if read == 0 {
                    break;
                }
                seen.extend_from_slice(&chunk[..read]);
                if String::from_utf8_lossy(&seen).contains("got-typed") {
                    break;
                }
            }
            String::from_utf8_lossy(&seen).into_owned()
        }
    });
    // The attach is open once kubectl has it; what is typed before would go nowhere.
    let deadline = Instant::now() + Duration::from_secs(30);
    while !reading.is_finished() && Instant::now() < deadline {
        let _ = typed.write_all(b"typed\n");
        std::thread::sleep(Duration::from_millis(500));
    }
    let _ = attach.kill();
    let _ = attach.wait();
    let seen = reading.join().unwrap();
    assert!(seen.contains("got-typed"), "{seen:?}");

    // An interactive shell on a terminal, in tmux: a prompt, a command, its output.
    let session = unique("exec-tty");
    let kubectl_line = format!(
        "kubectl --kubeconfig {} --cache-dir {} exec -it web -- sh",
        controller.kubeconfig().display(),
        tempfile::tempdir().unwrap().keep().display()
    );
    let tmux = |args: &[&str]| Command::new("tmux").args(args).output().expect("tmux runs");
    assert!(
        tmux(&["new-session", "-d", "-s", &session, "-x", "100", "-y", "30", &kubectl_line]).status.success()
    );
    let screen = || text(&tmux(&["capture-pane", "-t", &session, "-p"]).stdout);
    let deadline = Instant::now() + Duration::from_secs(30);
    while !screen().trim_start().starts_with('$') {
        assert!(Instant::now() < deadline, "no prompt within 30 s: {:?}", screen());
        std::thread::sleep(Duration::from_millis(200));
    }
    tmux(&["send-keys", "-t", &session, "echo shell-$((6*7)); stty size", "Enter"]);
    let shown = wait_for("the command's output", Duration::from_secs(30), || {
        let shown = screen();
        (shown.contains("shell-42") && shown.contains("30 100")).then_some(shown)
    });
    assert!(shown.contains("shell-42"), "{shown}");
    // Killing the client hangs the shell up.
    let shells_before = processes_with(&marker).len();
    tmux(&["send-keys", "-t", &session, "echo pid=$$=", "Enter"]);
    let shell = wait_for("the shell's pid", Duration::from_secs(30), || {
        let shown = screen();
        let at = shown.find("\npid=")?;
        shown[at + 5..].split('=').next().map(str::to_owned)
    });
    assert!(Path::new(&format!("/proc/{shell}")).exists(), "the shell {shell} runs");
    tmux(&["kill-session", "-t", &session]);
    wait_for("the shell to end with its client", Duration::from_secs(15), || {
        (!Path::new(&format!("/proc/{shell}")).exists()).then_some(())
    });
    assert_eq!(processes_with(&marker).len(), shells_before, "the workloads go on");

    // A `view` user may read the Application but not run anything in it, nor forward to it.
    controller.add_token("viewer-token", "viewer");
    let binding = json!({"apiVersion": "authorization.example.com/v1", "kind": "RoleBinding",
        "metadata": {"name": "viewer", "namespace": "default"},
        "subjects": [{"kind": "User", "name": "viewer"}], "roleRef": {"kind": "ClusterRole", "name": "view"}});
    apply(&controller, &binding);
    wait_for("the viewer's grant", Duration::from_secs(30), || {
        controller.kubectl_with_token("viewer-token", &["get", "pod", "web"]).status.success().then_some(())
    });
    let refused = controller.kubectl_with_token("viewer-token", &["exec", "web", "--", "id"]);
    let said = text(&refused.stderr);
    assert!(!refused.status.success() && said.contains("Forbidden") && said.contains("pods/exec"), "{said}");
    let refused_port = free_port();
    let log = controller.scratch().join("viewer-forward.log");
    let cache = tempfile::tempdir().unwrap();
    let refused = Command::new("kubectl")
        .args(["--kubeconfig", "/dev/null", "--server", &controller.url(), "--token", "viewer-token"])
        .arg("--certificate-authority")
        .arg(controller.scratch().join("data/pki/ca.crt"))
        .arg("--cache-dir")
        .arg(cache.path())
        .args(["port-forward", "pod/web", &format!("{refused_port}:{port}")])
        .stdout(std::fs::File::create(&log).unwrap())
        .stderr(Stdio::piped())
        .output()
        .expect("kubectl runs");
    let said = text(&refused.stderr);
    assert!(
        !refused.status.success() && said.contains("is forbidden") && said.contains("pods/portforward"),
        "{said}"
    );

    // Every exec is audited with its command line.
    let audit = std::fs::read_to_string(controller.scratch().join("data/audit.log")).unwrap();
    assert!(
        audit.lines().any(|line| line.contains("/pods/web/exec")
            && line.contains(r#""command":["sh","-c","echo out; echo err >&2; exit 3"]"#)),
        "{audit}"
    );
}

/// The controller's resident memory, in bytes.
fn resident(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kib: u64 = status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|kib| kib.parse().ok())
        .unwrap();
    kib * 1024
}

/// How many bytes a process has written so far.
fn written(pid: u32) -> Option<u64> {
    let io = std::fs::read_to_string(format!("/proc/{pid}/io")).ok()?;
    io.lines().find_map(|line| line.strip_prefix("wchar:")).and_then(|bytes| bytes.trim().parse().ok())
}

#[test]
fn a_stalled_exec_client_blocks_the_workload_and_a_killed_one_ends_it() {
    if !have_kubectl() {
        return;
    }
    let controller = Controller::start(&["--store", "sled"]);
    let agent = one_node(&controller);
    let marker = unique("stall");
    apply(
        &controller,
        &application("host", &agent.name, json!({"command": ["/bin/sh", "-c", "sleep 100000", &marker]})),
    );
    wait_for("host to run", Duration::from_secs(30), || {
        (app_status(&controller, "host")["phase"] == "Running").then_some(())
    });
    let before = resident(controller.pid());
    // 1 GiB of output into a kubectl whose stdout nobody reads.
    let writer = unique("writer");
    let cache = tempfile::tempdir().unwrap();
    let mut stalled = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(controller.kubeconfig())
        .arg("--cache-dir")
        .arg(cache.path())
        .args([
            "exec",
            "host",
            "--",
            "/usr/bin/python3",
            "-c",
            "import sys\nfor _ in range(1024): sys.stdout.buffer.write(bytes(1 << 20))",
            &writer,
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("kubectl runs");
    let head = wait_for("the writer", Duration::from_secs(30), || {
        processes_with(&writer).into_iter().map(|(pid, _)| pid).find(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm"))
                .is_ok_and(|comm| comm.trim().starts_with("python"))
        })
    });
    // Wait until the writer stops getting anywhere: every buffer on the way is full.
    let mut last = 0;
    let blocked_at = wait_for("the writer to block", Duration::from_secs(60), || {
        std::thread::sleep(Duration::from_secs(2));
        let now = written(head)?;
        let stuck = now == last;
        last = now;
        stuck.then_some(now)
    });
    std::thread::sleep(Duration::from_secs(5));
    let after = resident(controller.pid());
    let grew = after.saturating_sub(before);
    eprintln!(
        "a stalled exec client: the writer blocked after {} KiB of 1 GiB; the controller's RSS grew {} KiB ({} KiB to {} KiB)",
        blocked_at / 1024,
        grew / 1024,
        before / 1024,
        after / 1024
    );
    assert_eq!(written(head), Some(blocked_at), "the writer stays blocked");
    assert!(
        blocked_at < 64 << 20,
        "flow control held the writer to the buffers on its way: {blocked_at} bytes"
    );
    assert!(grew < 16 << 20, "the controller's memory grew by {grew} bytes");
    // Killing the stalled client ends the command, which SIGHUP does not reach: SIGKILL after a
    // grace.
    let _ = stalled.kill();
    let _ = stalled.wait();
    wait_for("the writer to end with its client", Duration::from_secs(30), || {
        (!Path::new(&format!("/proc/{head}")).exists()).then_some(())
    });
    // A quiet command whose client is killed goes too, and the workload stays.
    let sleeper = unique("sleeper");
    let mut client = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(controller.kubeconfig())
        .arg("--cache-dir")
        .arg(cache.path())
        .args(["exec", "-i", "host", "--", "sh", "-c", "sleep 1000", &sleeper])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("kubectl runs");
    let pid = wait_for("the exec'd sleep", Duration::from_secs(30), || {
        processes_with(&sleeper).first().map(|(pid, _)| *pid)
    });
    let _ = client.kill();
    let _ = client.wait();
    wait_for("the exec'd sleep to end with its client", Duration::from_secs(30), || {
        (!Path::new(&format!("/proc/{pid}")).exists()).then_some(())
    });
    assert_eq!(processes_with(&marker).len(), 1, "the workload itself runs on");
    let open = controller.metric_sum("kayra_stream_open{kind=\"exec\"");
    assert_eq!(open, 0.0, "both streams are freed on the controller");
}
