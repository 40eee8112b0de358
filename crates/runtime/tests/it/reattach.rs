//! The agent goes away and comes back: dropping the runtime, or SIGKILL of the process that
//! holds it, leaves every workload running; the reopened runtime reports the same process with
//! no restart, and the exit code of a process that ended meanwhile.

use std::io::{BufRead, BufReader};

use kayra_api::kinds::application::Application;
use kayra_runtime::runtime::{Desired, NodeEvent, Runtime};

use crate::*;

fn running(status: &kayra_api::kinds::application::ApplicationStatus) -> bool {
    status.phase.as_deref() == Some("Running")
}

/// Forgets `name` and returns what `events` received up to its report that it is forgotten.
/// The Application's task handles its commands in order, so everything an earlier `apply` of it
/// caused (a restart's `Killing` and `Started`) was emitted before the `Killing` this stop
/// emits and the report that follows it.
async fn forget_and_collect(
    runtime: &Runtime,
    events: &mut tokio::sync::broadcast::Receiver<NodeEvent>,
    name: &str,
) -> Vec<(String, String)> {
    let (_, mut reports) = runtime.subscribe();
    runtime.apply(Desired::default());
    wait_gone(&mut reports, name).await;
    let mut seen = Vec::new();
    while let Ok(event) = events.try_recv() {
        if event.name == name {
            seen.push((event.reason, event.message));
        }
    }
    seen
}

/// The events of a process that ran on, untouched, until it was forgotten.
fn forgotten_only() -> Vec<(String, String)> {
    vec![("Killing".to_owned(), "Stopping process: the application is gone from this node".to_owned())]
}

#[tokio::test]
async fn dropping_the_runtime_leaves_the_process_and_reopening_reattaches() {
    let node = Node::new("drop");
    let runtime = node.open().await;
    let mut events = runtime.events();
    runtime.apply(Desired {
        applications: vec![application("steady", node.shell("echo up; sleep 1000"))],
        secrets: vec![],
        tokens: vec![],
    });
    let pid = started_pid(&wait_event(&mut events, "steady", "Started").await);
    let before = current_status(&runtime, "steady", "Running", running).await;
    drop(runtime);

    let runtime = node.open().await;
    let mut events = runtime.events();
    let after = current_status(&runtime, "steady", "Running", running).await;
    assert_eq!((after.started_at, after.restarts), (before.started_at, Some(0)));
    assert!(alive_with_marker(pid, &node.marker));
    runtime.apply(Desired {
        applications: vec![application("steady", node.shell("echo up; sleep 1000"))],
        secrets: vec![],
        tokens: vec![],
    });
    let seen = forget_and_collect(&runtime, &mut events, "steady").await;
    assert_eq!(seen, forgotten_only(), "the same process, neither stopped nor started again");
    assert!(!alive_with_marker(pid, &node.marker), "the reattached runtime stops it");
}

#[tokio::test]
async fn sigkill_of_the_agent_leaves_the_process_and_reopening_reattaches() {
    let node = Node::new("sigkill");
    let app = application("survivor", node.shell("sleep 1000"));
    let mut host = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["helper_process_hosting_a_runtime", "--exact", "--nocapture", "--test-threads=1"])
        .env("KAYRA_IT_HOST", node.dir.path())
        .env("KAYRA_IT_CGROUP", &node.cgroup_parent)
        .env("KAYRA_IT_APP", serde_json::to_string(&app).unwrap())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let lines = BufReader::new(host.stdout.take().unwrap());
    let pid: u32 = lines
        .lines()
        .map_while(Result::ok)
        .find_map(|line| line.split_once("hosting ").and_then(|(_, pid)| pid.trim().parse().ok()))
        .expect("the host reports its workload");
    host.kill().unwrap();
    let killed = host.wait().unwrap();
    assert_eq!(std::os::unix::process::ExitStatusExt::signal(&killed), Some(9));
    assert!(alive_with_marker(pid, &node.marker), "SIGKILL of the agent leaves the workload");

    let runtime = node.open().await;
    let mut events = runtime.events();
    let status = current_status(&runtime, "survivor", "Running", running).await;
    assert_eq!(status.restarts, Some(0));
    runtime.apply(Desired { applications: vec![app], secrets: vec![], tokens: vec![] });
    let seen = forget_and_collect(&runtime, &mut events, "survivor").await;
    assert_eq!(seen, forgotten_only(), "the same process, neither stopped nor started again");
    assert!(!alive_with_marker(pid, &node.marker), "the reattached runtime stops it");
}

#[tokio::test]
async fn an_exit_while_no_runtime_was_open_is_reported_on_reopen() {
    let node = Node::new("offline");
    let runtime = node.open().await;
    let mut events = runtime.events();
    let app = application("brief", node.shell("read line; exit 5")).with_policy("Never");
    let uid = app.metadata.uid.clone().unwrap();
    runtime.apply(Desired { applications: vec![app], secrets: vec![], tokens: vec![] });
    let pid = started_pid(&wait_event(&mut events, "brief", "Started").await);
    current_status(&runtime, "brief", "Running", running).await;
    runtime.close().await;

    // stdin is /dev/null, so `read` sees its end at once; but the process is started by the
    // time the runtime reports it, and whether it has ended yet is what this test controls:
    // it waits for the process and then for its supervisor, both gone while no runtime runs.
    wait_process_gone(pid, &node.marker).await;
    let state: serde_json::Value = serde_json::from_slice(
        &std::fs::read(node.dir.path().join("data/apps").join(&uid).join("run/state.json")).unwrap(),
    )
    .unwrap();
    let supervisor = state["supervisor"]["pid"].as_u64().unwrap() as u32;
    wait_process_gone(supervisor, "kayra-runtime-supervisor").await;

    let runtime = node.open().await;
    let status =
        current_status(&runtime, "brief", "phase Failed", |s| s.phase.as_deref() == Some("Failed")).await;
    assert_eq!(status.exit_code, Some(5));
    assert!(status.finished_at.is_some());
}

/// Hosts a runtime for the SIGKILL test, when asked: opens it in the directory
/// `KAYRA_IT_HOST`, applies the Application in `KAYRA_IT_APP`, prints `hosting <pid>` once it
/// runs, and waits to be killed.
pub(crate) async fn host_when_asked() {
    let (Ok(dir), Ok(cgroup), Ok(app)) =
        (std::env::var("KAYRA_IT_HOST"), std::env::var("KAYRA_IT_CGROUP"), std::env::var("KAYRA_IT_APP"))
    else {
        return;
    };
    let app: Application = serde_json::from_str(&app).expect("an Application");
    let runtime = Runtime::open(config_for(std::path::Path::new(&dir), std::path::Path::new(&cgroup)))
        .await
        .expect("the runtime opens");
    let mut events = runtime.events();
    let name = app.metadata.name.clone().unwrap_or_default();
    runtime.apply(Desired { applications: vec![app], secrets: vec![], tokens: vec![] });
    let pid = started_pid(&wait_event(&mut events, &name, "Started").await);
    current_status(&runtime, &name, "Running", running).await;
    #[allow(clippy::print_stdout)]
    {
        println!("hosting {pid}");
    }
    std::future::pending::<()>().await;
}
