//! Streams to a running workload, with real processes: a command run beside it as its user, in
//! its cgroup and mount namespace, with its environment; on a pseudo-terminal that can be
//! resized; stdin to its end; a hang-up that ends what the client left; an attach to the
//! workload's own stdin and output; and a connection to a declared port, an undeclared one
//! refused.

use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt;
use kayra_api::kinds::application::{EnvVar, Port};
use kayra_runtime::runtime::{Desired, ExecCommand, Output, OutputStream, Runtime, RuntimeError};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::*;

/// Reads `output` until it ends (or `needle` appears), within the test's patience.
async fn read_output(output: &mut OutputStream, needle: Option<&str>) -> (String, String) {
    let (mut out, mut err) = (String::new(), String::new());
    let read = tokio::time::timeout(PATIENCE, async {
        while let Some(chunk) = output.next().await {
            let (which, bytes): (Output, Bytes) = chunk.expect("output reads");
            let text = String::from_utf8_lossy(&bytes);
            match which {
                Output::Stdout => out.push_str(&text),
                Output::Stderr => err.push_str(&text),
            }
            if needle.is_some_and(|needle| out.contains(needle)) {
                return;
            }
        }
    })
    .await;
    assert!(read.is_ok(), "the output did not end within {PATIENCE:?}: {out:?} {err:?}");
    (out, err)
}

fn exec(uid: &str, command: &[&str]) -> ExecCommand {
    ExecCommand {
        uid: uid.to_owned(),
        command: command.iter().map(|word| (*word).to_owned()).collect(),
        stdout: true,
        stderr: true,
        ..ExecCommand::default()
    }
}

async fn running(
    node: &Node,
    runtime: &Runtime,
    name: &str,
    edit: impl FnOnce(&mut kayra_api::kinds::application::Application),
) -> String {
    let mut app = application(name, node.shell("sleep 1000"));
    edit(&mut app);
    let uid = app.metadata.uid.clone().expect("a uid");
    runtime.apply(Desired { applications: vec![app], ..Desired::default() });
    current_status(runtime, name, "running", |s| s.phase.as_deref() == Some("Running")).await;
    uid
}

#[tokio::test]
async fn a_command_runs_beside_the_workload_as_it_runs() {
    let node = Node::new("exec");
    let runtime = node.open().await;
    let uid = running(&node, &runtime, "host", |app| {
        app.spec.env =
            vec![EnvVar { name: "GREETING".into(), value: Some("hello".into()), ..EnvVar::default() }];
        app.spec.working_dir = Some("/tmp".into());
    })
    .await;
    let script = "echo uid=$(id -u) gid=$(id -g) greeting=$GREETING pwd=$(pwd); cat /proc/self/cgroup; echo oops >&2; exit 3";
    let mut execution = runtime.exec(exec(&uid, &["sh", "-c", script])).await.expect("the command starts");
    let (out, err) = read_output(&mut execution.output, None).await;
    assert_eq!(execution.wait().await.expect("it ends"), 3, "{out} {err}");
    let expected_id =
        if rustix::process::geteuid().is_root() { 65532 } else { rustix::process::getuid().as_raw() };
    assert!(out.contains(&format!("uid={expected_id} gid=")), "{out}");
    assert!(out.contains("greeting=hello pwd=/tmp"), "{out}");
    assert_eq!(err, "oops\n");
    // In the workload's own cgroup, where its limits apply.
    if runtime.enforcement() != kayra_runtime::cgroup::Enforcement::Rlimit {
        assert!(out.contains(&uid), "the command's cgroup is the application's: {out}");
    }
    // A program that is not there, as a shell says it.
    let mut missing = runtime.exec(exec(&uid, &["no-such-program"])).await.expect("the shim starts");
    let (_, err) = read_output(&mut missing.output, None).await;
    assert_eq!(missing.wait().await.expect("it ends"), 127, "{err}");
    assert!(err.contains("no-such-program"), "{err}");
    runtime.close().await;
}

#[tokio::test]
async fn stdin_reaches_the_command_to_its_end_and_a_terminal_takes_a_size() {
    let node = Node::new("exec-io");
    let runtime = node.open().await;
    let uid = running(&node, &runtime, "io", |_| {}).await;
    let mut cat =
        runtime.exec(ExecCommand { stdin: true, ..exec(&uid, &["cat"]) }).await.expect("cat starts");
    let mut stdin = cat.stdin.take().expect("a stdin");
    stdin.write_all(b"one\ntwo\n").await.expect("written");
    drop(stdin);
    let (out, _) = read_output(&mut cat.output, None).await;
    assert_eq!((out.as_str(), cat.wait().await.expect("cat ends")), ("one\ntwo\n", 0));

    let command = ExecCommand { stdin: true, tty: true, stderr: false, ..exec(&uid, &["sh"]) };
    let mut shell = runtime.exec(command).await.expect("a shell starts");
    shell.terminal.as_ref().expect("a terminal").resize(123, 45);
    let mut stdin = shell.stdin.take().expect("the terminal");
    stdin.write_all(b"tty >/dev/null && echo on-a-tty; stty size; exit 5\n").await.expect("typed");
    let (out, _) = read_output(&mut shell.output, None).await;
    assert!(out.contains("on-a-tty") && out.contains("45 123"), "{out:?}");
    assert_eq!(shell.wait().await.expect("the shell ends"), 5);
    runtime.close().await;
}

#[tokio::test]
async fn a_hang_up_ends_what_its_client_left() {
    let node = Node::new("exec-hup");
    let runtime = node.open().await;
    let uid = running(&node, &runtime, "hup", |_| {}).await;
    for tty in [false, true] {
        // Ignores SIGHUP and never reads its stdin: only the kill after the grace ends it.
        let command = ExecCommand {
            stdin: true,
            tty,
            stderr: !tty,
            ..exec(&uid, &["sh", "-c", "trap '' HUP; sleep 1000"])
        };
        let mut execution = runtime.exec(command).await.expect("it starts");
        tokio::time::sleep(Duration::from_millis(300)).await;
        execution.hang_up(Duration::from_millis(500));
        let code = tokio::time::timeout(PATIENCE, execution.wait())
            .await
            .expect("ended by the kill")
            .expect("waited");
        assert_eq!(code, 137, "tty {tty}");
        // A command that heeds the hang-up ends with it, at once.
        let command =
            ExecCommand { stdin: true, tty, stderr: !tty, ..exec(&uid, &["sh", "-c", "read line"]) };
        let mut execution = runtime.exec(command).await.expect("it starts");
        tokio::time::sleep(Duration::from_millis(300)).await;
        execution.hang_up(Duration::from_secs(600));
        let code = tokio::time::timeout(PATIENCE, execution.wait())
            .await
            .expect("ended by the hang-up")
            .expect("waited");
        assert_ne!(code, 137, "tty {tty}: the hang-up, not the kill, ended it");
    }
    runtime.close().await;
}

#[tokio::test]
async fn an_attach_writes_to_the_workloads_own_stdin_and_reads_what_it_says_from_then_on() {
    let node = Node::new("attach");
    let runtime = node.open().await;
    let mut app = application(
        "reader",
        node.shell("echo before; while read line; do echo got-$line; echo err-$line >&2; done"),
    );
    app.spec.stdin = true;
    let uid = app.metadata.uid.clone().expect("a uid");
    runtime.apply(Desired { applications: vec![app], ..Desired::default() });
    crate::logs::follow_until(&runtime, "reader", "before", 1).await;
    let mut attached = runtime.attach(&uid, true).await.expect("attached");
    attached.stdin.as_mut().expect("its stdin").write_all(b"one\n").await.expect("written");
    let (out, _) = read_output(&mut attached.output, Some("got-one\n")).await;
    assert_eq!(out, "got-one\n", "only what came after the attach");
    // The workload's stdin outlives an attach.
    drop(attached);
    let mut again = runtime.attach(&uid, true).await.expect("attached again");
    again.stdin.as_mut().expect("its stdin").write_all(b"two\n").await.expect("written");
    let (out, _) = read_output(&mut again.output, Some("got-two\n")).await;
    assert_eq!(out, "got-two\n");

    let plain = running(&node, &runtime, "plain", |_| {}).await;
    assert!(matches!(runtime.attach(&plain, true).await, Err(RuntimeError::NoStdin { .. })));
    runtime.close().await;
}

#[tokio::test]
async fn a_declared_port_is_reached_and_another_refused() {
    let node = Node::new("forward");
    let runtime = node.open().await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("a port");
    let port = listener.local_addr().expect("its address").port();
    let uid = running(&node, &runtime, "server", |app| {
        app.spec.ports = vec![Port { name: None, port: i64::from(port), protocol: "TCP".into() }];
    })
    .await;
    let mut connection = runtime.forward(&uid, port).await.expect("connected");
    let (mut accepted, _) = listener.accept().await.expect("accepted");
    connection.write_all(b"ping").await.expect("sent");
    let mut got = [0; 4];
    accepted.read_exact(&mut got).await.expect("received");
    assert_eq!(&got, b"ping");
    match runtime.forward(&uid, port.wrapping_add(1)).await {
        Err(RuntimeError::PortNotDeclared { declared, .. }) => assert_eq!(declared, vec![port]),
        other => panic!("an undeclared port is refused: {other:?}"),
    }
    runtime.close().await;
}
