//! `kubectl logs` against real runs: `--tail`, `--timestamps`, `--since`, `--previous`, `-f`
//! across restarts, and a slow reader that loses nothing.

use std::time::Duration;

use futures_util::StreamExt;
use kayra_runtime::runtime::{Desired, LogRequest, Runtime};

use crate::*;

fn request(name: &str) -> LogRequest {
    LogRequest { namespace: "default".into(), name: name.into(), ..LogRequest::default() }
}

/// Follows `name`'s log until `needle` has appeared `times` times; the text so far.
pub(crate) async fn follow_until(runtime: &Runtime, name: &str, needle: &str, times: usize) -> String {
    current_status(runtime, name, "a started run", |s| s.started_at.is_some()).await;
    let mut stream = runtime.logs(LogRequest { follow: true, ..request(name) }).await.expect("the log opens");
    let mut text = String::new();
    let found = tokio::time::timeout(PATIENCE, async {
        while text.matches(needle).count() < times {
            match stream.next().await {
                Some(Ok(chunk)) => text.push_str(&String::from_utf8_lossy(&chunk)),
                Some(Err(error)) => panic!("reading {name}'s log: {error}"),
                None => return false,
            }
        }
        true
    })
    .await;
    assert_eq!(found, Ok(true), "{name}'s log never showed {needle:?} {times} times: {text:?}");
    text
}

/// Reads `request` to its end.
async fn read(runtime: &Runtime, request: LogRequest) -> String {
    let mut stream = runtime.logs(request).await.expect("the log opens");
    let mut text = String::new();
    while let Some(chunk) = stream.next().await {
        text.push_str(&String::from_utf8_lossy(&chunk.expect("a chunk")));
    }
    text
}

#[tokio::test]
async fn tail_timestamps_and_since_select_lines() {
    let node = Node::new("logtail");
    let runtime = node.open().await;
    let (_, mut reports) = runtime.subscribe();
    runtime.apply(Desired {
        applications: vec![application(
            "talker",
            node.shell("for i in 1 2 3 4 5; do echo line $i; done; sleep 0.2; echo oops >&2; sleep 1000"),
        )],
        secrets: vec![],
        tokens: vec![],
    });
    follow_until(&runtime, "talker", "oops", 1).await;

    assert_eq!(
        read(&runtime, request("talker")).await,
        "line 1\nline 2\nline 3\nline 4\nline 5\noops\n",
        "stdout and stderr interleaved"
    );
    assert_eq!(
        read(&runtime, LogRequest { tail_lines: Some(2), ..request("talker") }).await,
        "line 5\noops\n"
    );
    let stamped =
        read(&runtime, LogRequest { tail_lines: Some(1), timestamps: true, ..request("talker") }).await;
    let (time, rest) = stamped.split_once(' ').unwrap();
    assert_eq!(rest, "oops\n");
    assert!(
        time.len() == 30 && time.ends_with('Z') && time.parse::<jiff::Timestamp>().is_ok(),
        "RFC 3339 with nanoseconds: {time}"
    );
    let future = jiff::Timestamp::now() + jiff::SignedDuration::from_secs(60);
    assert_eq!(read(&runtime, LogRequest { since_time: Some(future), ..request("talker") }).await, "");
    assert_eq!(
        read(&runtime, LogRequest { since_seconds: Some(3600), tail_lines: Some(1), ..request("talker") })
            .await,
        "oops\n"
    );
    assert_eq!(read(&runtime, LogRequest { limit_bytes: Some(9), ..request("talker") }).await, "line 1\nli");
    assert!(matches!(
        runtime.logs(LogRequest { previous: true, ..request("talker") }).await.err(),
        Some(kayra_runtime::runtime::RuntimeError::NoPreviousRun { .. })
    ));
    assert!(runtime.logs(request("nobody")).await.is_err());
    runtime.apply(Desired::default());
    wait_gone(&mut reports, "talker").await;
}

#[tokio::test]
async fn follow_goes_across_restarts_and_previous_shows_the_last_run() {
    let node = Node::new("logfollow");
    let runtime = node.open().await;
    let (_, mut reports) = runtime.subscribe();
    runtime.apply(Desired {
        applications: vec![application("phoenix", node.shell("echo rising; sleep 0.2; exit 1"))],
        secrets: vec![],
        tokens: vec![],
    });
    let text = follow_until(&runtime, "phoenix", "rising", 3).await;
    assert!(text.starts_with("rising\nrising\nrising"), "{text:?}");
    wait_status(&mut reports, "phoenix", "a restart", |s| s.restarts >= Some(1)).await;
    assert_eq!(read(&runtime, LogRequest { previous: true, ..request("phoenix") }).await, "rising\n");
    runtime.apply(Desired::default());
    wait_gone(&mut reports, "phoenix").await;
}

#[tokio::test]
async fn a_slow_reader_gets_every_line_and_a_finished_job_ends_the_follow() {
    let node = Node::new("logslow");
    let runtime = node.open().await;
    let (_, mut reports) = runtime.subscribe();
    runtime.apply(Desired {
        applications: vec![application("counter", node.shell("seq 1 1000")).with_policy("Never")],
        secrets: vec![],
        tokens: vec![],
    });
    current_status(&runtime, "counter", "a started run", |s| s.started_at.is_some()).await;
    let mut stream = runtime.logs(LogRequest { follow: true, ..request("counter") }).await.unwrap();
    let mut text = String::new();
    let ended = tokio::time::timeout(PATIENCE, async {
        while let Some(chunk) = stream.next().await {
            text.push_str(&String::from_utf8_lossy(&chunk.unwrap()));
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    assert!(ended.is_ok(), "following a job ends when it has succeeded");
    let lines: Vec<u32> = text.lines().map(|line| line.parse().unwrap()).collect();
    assert!(
        lines == (1..=1000).collect::<Vec<_>>(),
        "every line once, in order: {} lines, last {:?}",
        lines.len(),
        lines.last()
    );
    runtime.apply(Desired::default());
    wait_gone(&mut reports, "counter").await;
}
