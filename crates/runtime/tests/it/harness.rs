//! Test support: a runtime in a private data directory and cgroup parent, Applications and
//! Secrets to give it, and waits for what it reports.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use base64::Engine;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kayra_api::kinds::application::{Application, ApplicationSpec, ApplicationStatus};
use kayra_api::kinds::secret::Secret;
use kayra_runtime::backoff::Backoff;
use kayra_runtime::runtime::{AppReport, NodeEvent, Runtime, RuntimeConfig};
use tokio::sync::broadcast;

/// How long a test waits for something it expects.
pub(crate) const PATIENCE: Duration = Duration::from_secs(20);

/// A private place to run a runtime: its data directory and cgroup parent go when it drops.
pub(crate) struct Node {
    pub(crate) dir: tempfile::TempDir,
    pub(crate) cgroup_parent: PathBuf,
    pub(crate) marker: String,
}

static NEXT: AtomicU32 = AtomicU32::new(0);

impl Node {
    /// A fresh node for the test `name`.
    pub(crate) fn new(name: &str) -> Node {
        let dir = tempfile::tempdir().expect("a temporary directory");
        // The workload's user must reach its working directory inside.
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o711)).expect("chmod");
        let n = NEXT.fetch_add(1, Ordering::SeqCst);
        let marker = format!("kayra-it-{name}-{}-{n}", std::process::id());
        Node { dir, cgroup_parent: PathBuf::from(format!("{marker}/node")), marker }
    }

    /// The runtime's configuration: fast back-off, small logs.
    pub(crate) fn config(&self) -> RuntimeConfig {
        config_for(self.dir.path(), &self.cgroup_parent)
    }

    /// Opens a runtime here.
    pub(crate) async fn open(&self) -> Runtime {
        Runtime::open(self.config()).await.expect("the runtime opens")
    }

    /// `sh -c script`, with this node's marker as `$0`.
    pub(crate) fn shell(&self, script: &str) -> Vec<String> {
        vec!["sh".into(), "-c".into(), script.into(), self.marker.clone()]
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        let top =
            self.cgroup_parent.components().next().map(|c| PathBuf::from(c.as_os_str())).unwrap_or_default();
        for hierarchy in ["", "memory", "cpu", "cpuacct", "pids", "freezer"] {
            let root = Path::new("/sys/fs/cgroup").join(hierarchy).join(&top);
            remove_cgroup_tree(&root);
        }
    }
}

/// Removes a cgroup tree deepest first, killing what this test left in it.
fn remove_cgroup_tree(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            remove_cgroup_tree(&entry.path());
        }
    }
    for _ in 0..50 {
        for pid in std::fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default().lines() {
            if let Some(pid) = pid.trim().parse().ok().and_then(rustix::process::Pid::from_raw) {
                let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
            }
        }
        if std::fs::remove_dir(dir).is_ok() || !dir.exists() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The configuration of a test runtime in `dir` with cgroups under `cgroup_parent`: fast
/// back-off, small logs.
pub(crate) fn config_for(dir: &Path, cgroup_parent: &Path) -> RuntimeConfig {
    let mut config = RuntimeConfig::new("test-node", dir.join("data"), vec![supervisor()]);
    config.cgroup_parent = Some(cgroup_parent.to_owned());
    config.backoff = Backoff {
        initial: Duration::from_millis(200),
        max: Duration::from_secs(1),
        reset_after: Duration::from_secs(600),
    };
    config.log_max_bytes = 64 * 1024;
    config
}

/// The status of `name` now, or the first one after that satisfies `want`.
pub(crate) async fn current_status(
    runtime: &Runtime,
    name: &str,
    what: &str,
    want: impl Fn(&ApplicationStatus) -> bool,
) -> ApplicationStatus {
    let (now, mut reports) = runtime.subscribe();
    if let Some(status) = now.into_iter().find(|r| r.name == name).and_then(|r| r.status).filter(|s| want(s))
    {
        return status;
    }
    wait_status(&mut reports, name, what, want).await
}

/// The supervisor program cargo built for these tests.
pub(crate) fn supervisor() -> String {
    env!("CARGO_BIN_EXE_kayra-runtime-supervisor").to_owned()
}

/// An Application named `name` in `default`, generation 1, running `command`.
pub(crate) fn application(name: &str, command: Vec<String>) -> Application {
    Application {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("default".into()),
            uid: Some(format!("00000000-0000-4000-8000-{:012}", fxhash(name))),
            generation: Some(1),
            ..ObjectMeta::default()
        },
        spec: ApplicationSpec { command, ..ApplicationSpec::default() },
        ..Application::default()
    }
    .with_grace(1)
}

fn fxhash(name: &str) -> u64 {
    name.bytes().fold(7u64, |hash, b| hash.wrapping_mul(31).wrapping_add(u64::from(b))) % 1_000_000_000_000
}

/// Small edits to a test Application.
pub(crate) trait Edit {
    /// With this grace period.
    fn with_grace(self, seconds: i64) -> Self;
    /// With this restart policy.
    fn with_policy(self, policy: &str) -> Self;
}

impl Edit for Application {
    fn with_grace(mut self, seconds: i64) -> Self {
        self.spec.lifecycle.termination_grace_period_seconds = Some(seconds);
        self
    }

    fn with_policy(mut self, policy: &str) -> Self {
        self.spec.lifecycle.restart_policy = Some(policy.into());
        self
    }
}

/// A Secret in `default`.
pub(crate) fn secret(name: &str, data: &[(&str, &str)]) -> Secret {
    Secret {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("default".into()),
            ..ObjectMeta::default()
        },
        data: data
            .iter()
            .map(|(k, v)| (k.to_string(), base64::engine::general_purpose::STANDARD.encode(v)))
            .collect(),
        ..Secret::default()
    }
}

/// Waits for a report of `name` whose status satisfies `want`; returns that status.
pub(crate) async fn wait_status(
    reports: &mut broadcast::Receiver<AppReport>,
    name: &str,
    what: &str,
    want: impl Fn(&ApplicationStatus) -> bool,
) -> ApplicationStatus {
    let found = tokio::time::timeout(PATIENCE, async {
        loop {
            match reports.recv().await {
                Ok(report) if report.name == name => {
                    if let Some(status) = report.status.filter(|status| want(status)) {
                        return status;
                    }
                }
                Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {}
                Err(broadcast::error::RecvError::Closed) => {
                    panic!("reports closed waiting for {name}: {what}")
                }
            }
        }
    })
    .await;
    found.unwrap_or_else(|_| panic!("{name}: no status with {what} within {PATIENCE:?}"))
}

/// Waits for the report that `name` is forgotten.
pub(crate) async fn wait_gone(reports: &mut broadcast::Receiver<AppReport>, name: &str) {
    let gone = tokio::time::timeout(PATIENCE, async {
        loop {
            if let Ok(report) = reports.recv().await
                && report.name == name
                && report.status.is_none()
            {
                return;
            }
        }
    })
    .await;
    gone.unwrap_or_else(|_| panic!("{name} was not forgotten within {PATIENCE:?}"));
}

/// Waits for an event of `name` with `reason`.
pub(crate) async fn wait_event(
    events: &mut broadcast::Receiver<NodeEvent>,
    name: &str,
    reason: &str,
) -> NodeEvent {
    let found = tokio::time::timeout(PATIENCE, async {
        loop {
            if let Ok(event) = events.recv().await
                && event.name == name
                && event.reason == reason
            {
                return event;
            }
        }
    })
    .await;
    found.unwrap_or_else(|_| panic!("{name}: no {reason} event within {PATIENCE:?}"))
}

/// The workload pid a `Started` event names.
pub(crate) fn started_pid(event: &NodeEvent) -> u32 {
    event
        .message
        .rsplit(' ')
        .next()
        .and_then(|pid| pid.parse().ok())
        .unwrap_or_else(|| panic!("no pid in {event:?}"))
}

/// Whether `pid` is a live (not zombie) process whose argv carries `marker`.
pub(crate) fn alive_with_marker(pid: u32, marker: &str) -> bool {
    let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else { return false };
    let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let zombie = state.rsplit(')').next().is_some_and(|rest| rest.trim_start().starts_with('Z'));
    !zombie && String::from_utf8_lossy(&cmdline).contains(marker)
}

/// Waits until `pid` (which must carry `marker`) has ended, on its pidfd; how long that took.
pub(crate) async fn wait_process_gone(pid: u32, marker: &str) -> Duration {
    let start = std::time::Instant::now();
    let raw = rustix::process::Pid::from_raw(pid as i32).expect("a positive pid");
    let Ok(fd) = rustix::process::pidfd_open(raw, rustix::process::PidfdFlags::empty()) else {
        return start.elapsed();
    };
    if !alive_with_marker(pid, marker) {
        return start.elapsed();
    }
    // An `OwnedFd` stays open for the `AsyncFd`'s whole life.
    #[allow(deprecated)]
    let fd = tokio::io::unix::AsyncFd::new(fd).expect("a pidfd can be polled");
    let _ended = tokio::time::timeout(PATIENCE, fd.readable())
        .await
        .expect("the process ends in time")
        .expect("pidfd readable");
    start.elapsed()
}
