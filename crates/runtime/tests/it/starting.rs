//! Starting a process: a run whose exec fails (here, a working directory its user may not
//! enter) is a failed start, never a running process, and says why; and working directories go
//! where the workload's user can reach them wherever the data directory is.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use kayra_api::kinds::application::{Application, ApplicationStatus};
use kayra_runtime::runtime::{Desired, Runtime, RuntimeError};
use tokio::sync::broadcast::error::{RecvError, TryRecvError};

use crate::*;

fn desired(applications: Vec<Application>) -> Desired {
    Desired { applications, ..Desired::default() }
}

/// A directory under `parent` with mode `mode`.
fn directory(parent: &Path, name: &str, mode: u32) -> PathBuf {
    let dir = parent.join(name);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(mode)).unwrap();
    dir
}

fn running_or_ready(status: &ApplicationStatus) -> bool {
    status.phase.as_deref() == Some("Running")
        || status.started_at.is_some()
        || status.conditions.iter().any(|c| c.type_ == "Ready" && c.status == "True")
}

#[tokio::test]
async fn a_working_directory_its_user_may_not_enter_is_a_failed_start_never_running() {
    let node = Node::new("chdir");
    let runtime = node.open().await;
    let (_, mut reports) = runtime.subscribe();
    let mut events = runtime.events();
    // Root's own, closed to the workload's user (65532).
    let closed = directory(node.dir.path(), "closed", 0o700);
    let mut app = application("walled", node.shell("echo inside; sleep 1000"));
    app.spec.working_dir = Some(closed.display().to_string());
    runtime.apply(desired(vec![app]));

    let why = format!("chdir {}: permission denied", closed.display());
    // Every status and event until its second failed start, none of them saying it ran.
    let mut seen = Vec::new();
    let status = tokio::time::timeout(PATIENCE, async {
        loop {
            match reports.recv().await {
                Ok(report) if report.name == "walled" => {
                    let Some(status) = report.status else { continue };
                    seen.push(status.clone());
                    if status.restarts >= Some(2) {
                        return status;
                    }
                }
                Ok(_) | Err(RecvError::Lagged(_)) => {}
                Err(RecvError::Closed) => panic!("the reports closed"),
            }
        }
    })
    .await
    .expect("two failed starts in time");
    assert!(!seen.iter().any(running_or_ready), "reported running or ready: {seen:?}");
    assert!(status.message.as_deref().unwrap_or_default().contains(&why), "{status:?}");
    assert_eq!(status.phase.as_deref(), Some("Pending"), "never started, so still pending: {status:?}");
    assert_eq!(status.exit_code, None, "nothing ran, so nothing exited: {status:?}");
    let ready = status.conditions.iter().find(|c| c.type_ == "Ready").expect("a Ready condition");
    assert_eq!(ready.status, "False", "{status:?}");
    let mut failures = Vec::new();
    loop {
        match events.try_recv() {
            Ok(event) => {
                assert_ne!(event.reason, "Started", "a process that never started is not Started: {event:?}");
                if event.reason == "Failed" {
                    failures.push(event.message);
                }
            }
            Err(TryRecvError::Lagged(_)) => {}
            Err(_) => break,
        }
    }
    assert!(
        failures.len() >= 2 && failures.iter().all(|m| m.contains(&why)),
        "the events say why: {failures:?}"
    );
    runtime.apply(desired(vec![]));
    wait_gone(&mut reports, "walled").await;
}

/// A node whose data directory is inside a directory only root may enter.
fn private_config(node: &Node, work_root: &Path) -> kayra_runtime::runtime::RuntimeConfig {
    let private = directory(node.dir.path(), "private", 0o700);
    let mut config = config_for(&private, &node.cgroup_parent);
    config.work_root = Some(work_root.to_owned());
    config
}

#[tokio::test]
async fn with_the_data_directory_inside_a_private_directory_the_work_root_holds_working_directories() {
    let node = Node::new("private");
    let work_root = node.dir.path().join("work");
    let runtime = Runtime::open(private_config(&node, &work_root)).await.expect("the runtime opens");
    let (_, mut reports) = runtime.subscribe();
    let mut events = runtime.events();
    let app = application("homed", node.shell("echo \"in $(pwd) home $HOME\"; sleep 1000"));
    let uid = app.metadata.uid.clone().unwrap();
    runtime.apply(desired(vec![app]));

    let pid = started_pid(&wait_event(&mut events, "homed", "Started").await);
    let work = work_root.join("test-node").join(&uid);
    let text = crate::logs::follow_until(&runtime, "homed", "home ", 1).await;
    let expect = format!("in {dir} home {dir}", dir = work.display());
    assert!(text.contains(&expect), "{expect:?} in {text:?}");
    let cwd = std::fs::read_link(format!("/proc/{pid}/cwd")).unwrap();
    assert_eq!(cwd, work);
    for dir in [work_root.clone(), work_root.join("test-node")] {
        let meta = std::fs::metadata(&dir).unwrap();
        assert_eq!(
            meta.permissions().mode() & 0o7777,
            0o711,
            "{} is root's, entered by anyone",
            dir.display()
        );
    }

    runtime.apply(desired(vec![]));
    wait_gone(&mut reports, "homed").await;
    assert!(!work.exists(), "a forgotten application's working directory goes with it");
}

#[tokio::test]
async fn a_runtime_whose_working_directories_no_user_could_reach_refuses_to_open() {
    let node = Node::new("walled-in");
    let closed_root = directory(node.dir.path(), "closed-root", 0o700);
    let config = private_config(&node, &closed_root.join("work"));
    let refused = Runtime::open(config).await.err().expect("the runtime refuses to open");
    assert!(matches!(refused, RuntimeError::WorkDirsUnreachable { .. }), "{refused}");
    let said = refused.to_string();
    let private = node.dir.path().join("private");
    for named in [private.display().to_string(), closed_root.display().to_string(), "chmod o+x".to_owned()] {
        assert!(said.contains(&named), "{named:?} in {said:?}");
    }
    assert!(!refused.is_retryable());
}
