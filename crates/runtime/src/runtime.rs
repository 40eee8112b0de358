//! The runtime: the node's Applications as supervised processes, one task per Application
//! driving its runs through [`crate::lifecycle`], reattaching after the agent restarts.
//!
//! On disk, under the data directory (mode 0711: traversable by the workload's user on the way
//! to its working directory, listable by none but root):
//!
//! ```text
//! apps/<uid>/app.json       the Application last applied, its status and counters (0600)
//! apps/<uid>/run/           the current run: spec.json, state.json, control.sock (0700)
//! apps/<uid>/logs/          <run>.log and its rotated pieces, this run's and the one before (0700)
//! apps/<uid>/work/          the default working directory and HOME, owned by the run-as user
//! ```
//!
//! The working directories live there only when the workloads' users can reach them: when a
//! directory on the data directory's path lets no other user through (`/root`, a home
//! directory made 0700), they live under a root-owned root of work directories instead,
//! `/var/lib/kayra/work/<node>/<uid>` by default ([`RuntimeConfig::work_root`]; the rules are
//! in `workdirs.rs`), and the runtime refuses to open when neither place can be reached.

mod app;
mod follow;
mod streams;

pub use streams::{Attachment, ExecCommand, Execution, Output, OutputStream, Terminal};

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::Bytes;
use jiff::Timestamp;
use kayra_api::kinds::application::{Application, ApplicationStatus, WorkloadIdentity};
use kayra_api::kinds::secret::Secret;
use kayra_api::session::ProjectedToken;
use tokio::sync::{broadcast, mpsc};

use crate::backoff::Backoff;
use crate::cgroup::{Cgroups, Enforcement};
use crate::launch::AgentUser;
use crate::workdirs::WorkDirs;

/// How the runtime is set up.
#[derive(Debug, Clone)]
pub struct RuntimeConfig {
    /// The node's name: the cgroup parent and `HOSTNAME` carry it.
    pub node_name: String,
    /// Where per-Application state, logs and working directories live.
    pub data_dir: PathBuf,
    /// The argv prefix that runs the supervisor program, such as `[current_exe, "supervise"]`.
    pub supervisor: Vec<String>,
    /// Where the cgroup filesystem is mounted; `None` is `/sys/fs/cgroup`. A directory with no
    /// cgroup filesystem in it makes the runtime fall back to rlimits.
    pub cgroup_mount: Option<PathBuf>,
    /// The cgroup under which each Application gets its own, relative to each hierarchy;
    /// `None` is `kayra/<node_name>`.
    pub cgroup_parent: Option<PathBuf>,
    /// The largest a log file grows before it rotates: 10 MiB by default.
    pub log_max_bytes: u64,
    /// How many files one run's log keeps (the live one included): 2 by default.
    pub log_files: u32,
    /// The restart back-off: kubelet's by default.
    pub backoff: Backoff,
    /// The process cap every Application gets: 4096 by default.
    pub pids_limit: Option<u64>,
    /// The root-owned directory the working directories go under (as `<root>/<node>/<uid>`)
    /// when the data directory's path lets no other user through; `None` is
    /// `/var/lib/kayra/work`. Absolute.
    pub work_root: Option<PathBuf>,
    /// How workloads reach the controller's API: set, each gets `KUBERNETES_SERVICE_HOST` and
    /// `KUBERNETES_SERVICE_PORT`, and its identity directory holds the CA as `ca.crt`.
    pub api: Option<ApiAccess>,
}

/// The controller's API as a workload reaches it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiAccess {
    /// An address the controller's serving certificate names.
    pub host: String,
    /// Its port.
    pub port: u16,
    /// The cluster's CA certificate, PEM.
    pub ca_pem: String,
}

impl RuntimeConfig {
    /// The default setup for `node_name`, storing under `data_dir`, starting supervisors with
    /// `supervisor`.
    pub fn new(
        node_name: impl Into<String>,
        data_dir: impl Into<PathBuf>,
        supervisor: Vec<String>,
    ) -> RuntimeConfig {
        RuntimeConfig {
            node_name: node_name.into(),
            data_dir: data_dir.into(),
            supervisor,
            cgroup_mount: None,
            cgroup_parent: None,
            log_max_bytes: 10 << 20,
            log_files: 2,
            backoff: Backoff::default(),
            pids_limit: Some(4096),
            work_root: None,
            api: None,
        }
    }
}

/// The node's whole desired state.
#[derive(Debug, Clone, Default)]
pub struct Desired {
    /// Every Application bound to the node, identified by `metadata.uid`.
    pub applications: Vec<Application>,
    /// The Secrets those Applications reference.
    pub secrets: Vec<Secret>,
    /// The service-account tokens of those Applications, each for a file of its identity
    /// directory.
    pub tokens: Vec<ProjectedToken>,
}

/// One Application's status, as it changes.
#[derive(Debug, Clone, PartialEq)]
pub struct AppReport {
    /// The Application's namespace.
    pub namespace: String,
    /// The Application's name.
    pub name: String,
    /// The Application's `metadata.uid`.
    pub uid: String,
    /// Its status; `None` once it is stopped and forgotten (it was absent from the desired
    /// state).
    pub status: Option<ApplicationStatus>,
}

/// Whether an event is routine or calls for attention.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    /// Routine: `Started`, `Killing`.
    Normal,
    /// Attention: `BackOff`, `Unhealthy`, `Failed`, `OOMKilled`.
    Warning,
}

/// Something that happened to an Application, as kubelet reports events.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeEvent {
    /// The Application's namespace.
    pub namespace: String,
    /// The Application's name.
    pub name: String,
    /// The Application's `metadata.uid`.
    pub uid: String,
    /// Routine or attention.
    pub type_: EventType,
    /// `Started`, `BackOff`, `Killing`, `Unhealthy`, `Failed`, `OOMKilled`, `DeadlineExceeded`.
    pub reason: String,
    /// For people.
    pub message: String,
    /// When it happened.
    pub at: Timestamp,
}

/// One Application's resource use, from its cgroup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageSample {
    /// The Application's namespace.
    pub namespace: String,
    /// The Application's name.
    pub name: String,
    /// The Application's `metadata.uid`.
    pub uid: String,
    /// CPU time used so far, in microseconds.
    pub cpu_usec: u64,
    /// Time the CPU limit held the Application back so far, in microseconds.
    pub cpu_throttled_usec: u64,
    /// Memory in use, in bytes.
    pub memory_bytes: u64,
    /// The most memory in use so far, in bytes.
    pub memory_peak_bytes: u64,
    /// Processes and threads.
    pub pids: u64,
    /// Out-of-memory kills so far.
    pub oom_kills: u64,
    /// When it was read.
    pub at: Timestamp,
}

/// A request for one Application's log, as `kubectl logs` makes it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogRequest {
    /// The Application's namespace.
    pub namespace: String,
    /// The Application's name.
    pub name: String,
    /// Only the last lines.
    pub tail_lines: Option<usize>,
    /// Only lines written in the last seconds.
    pub since_seconds: Option<u64>,
    /// Only lines written at or after this time.
    pub since_time: Option<Timestamp>,
    /// Each line prefixed with its RFC 3339 time.
    pub timestamps: bool,
    /// The previous run's log instead of the current one's.
    pub previous: bool,
    /// Keep streaming new lines, across restarts, until the Application ends.
    pub follow: bool,
    /// Stop after this many bytes.
    pub limit_bytes: Option<u64>,
}

/// What went wrong in the runtime.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// A file or directory of the runtime could not be used.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// Why it failed.
        #[source]
        source: std::io::Error,
    },
    /// No Application of that name runs on this node.
    #[error("application \"{name}\" in namespace \"{namespace}\" is not on this node")]
    NotFound {
        /// The namespace asked for.
        namespace: String,
        /// The name asked for.
        name: String,
    },
    /// Neither the data directory nor the root of work directories can be reached by the
    /// workloads' users, so no working directory could be.
    #[error(
        "the workloads' users could not reach their working directories: {data_dir_closed} (mode {data_dir_mode:04o}) lets no other user through on the way to the data directory {data_dir}, nor does {work_root_closed} (mode {work_root_mode:04o}) on the way to {work_root}; let them through one of these (chmod o+x {work_root_closed}), or choose a data directory whose every parent does"
    )]
    WorkDirsUnreachable {
        /// The agent's data directory.
        data_dir: PathBuf,
        /// The directory that stops other users on the way to it.
        data_dir_closed: PathBuf,
        /// Its permission bits.
        data_dir_mode: u32,
        /// The root of work directories.
        work_root: PathBuf,
        /// The directory that stops other users on the way to it.
        work_root_closed: PathBuf,
        /// Its permission bits.
        work_root_mode: u32,
    },
    /// An exec or attach found no running process of the Application.
    #[error("application {application} has no running process: {why}")]
    NotRunning {
        /// The Application: `namespace/name`, or its uid when this node does not know it.
        application: String,
        /// Why not.
        why: String,
    },
    /// An attach asked to write to a process that keeps no stdin.
    #[error("the process of application {uid} keeps no stdin to attach to: set spec.stdin to true")]
    NoStdin {
        /// The Application's uid.
        uid: String,
    },
    /// A port-forward asked for a port the Application does not declare.
    #[error(
        "port {port} is not declared in spec.ports (declared: {declared:?}); only declared ports may be forwarded"
    )]
    PortNotDeclared {
        /// The port asked for.
        port: u16,
        /// The TCP ports declared.
        declared: Vec<u16>,
    },
    /// `previous` was asked for an Application that has not restarted.
    #[error("previous terminated process of application \"{name}\" in namespace \"{namespace}\" not found")]
    NoPreviousRun {
        /// The namespace asked for.
        namespace: String,
        /// The name asked for.
        name: String,
    },
}

impl RuntimeError {
    /// Whether trying again later may succeed.
    pub fn is_retryable(&self) -> bool {
        matches!(self, RuntimeError::Io { .. })
    }

    pub(crate) fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> RuntimeError {
        let what = what.into();
        move |source| RuntimeError::Io { what, source }
    }
}

/// The node's process runtime.
pub struct Runtime {
    shared: Arc<Shared>,
}

/// What the runtime and its Application tasks share.
struct Shared {
    config: RuntimeConfig,
    cgroups: Cgroups,
    agent: AgentUser,
    agent_path: String,
    work: WorkDirs,
    apps: Mutex<BTreeMap<String, AppEntry>>,
    secrets: Mutex<Arc<Vec<Secret>>>,
    reports: broadcast::Sender<AppReport>,
    events: broadcast::Sender<NodeEvent>,
    closed: AtomicBool,
}

/// An Application the runtime knows, as its task last reported it.
struct AppEntry {
    namespace: String,
    name: String,
    commands: mpsc::UnboundedSender<app::Command>,
    status: ApplicationStatus,
    run: u64,
    /// The TCP ports its latest desired state declares: the only ones forwarded to.
    ports: Vec<u16>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl AppEntry {
    /// The entry of an Application whose task takes `commands`, as it stands.
    fn new(
        names: &app::Names,
        commands: mpsc::UnboundedSender<app::Command>,
        status: &ApplicationStatus,
        run: u64,
        application: &Application,
    ) -> AppEntry {
        AppEntry {
            namespace: names.namespace.clone(),
            name: names.name.clone(),
            commands,
            status: status.clone(),
            run,
            ports: application.tcp_ports(),
            task: None,
        }
    }
}

impl Shared {
    fn app_dir(&self, uid: &str) -> PathBuf {
        self.config.data_dir.join("apps").join(uid)
    }

    /// Where `application`'s identity directory is on the host, and where its process sees
    /// it; `None` when it asks for no token.
    pub(crate) fn identity_dir(&self, uid: &str, application: &Application) -> Option<(PathBuf, PathBuf)> {
        if WorkloadIdentity::projections(application.spec.identity.as_ref()).is_empty() {
            return None;
        }
        let host = self.app_dir(uid).join(crate::identity::DIR_NAME);
        let seen =
            if self.agent.uid == 0 { PathBuf::from(crate::identity::MOUNT_PATH) } else { host.clone() };
        Some((host, seen))
    }

    /// Brings `application`'s identity directory up to date with `tokens` (those of every
    /// Application on the node; only its own are written).
    fn write_identity(&self, uid: &str, application: &Application, tokens: &[ProjectedToken]) {
        let Some((dir, _)) = self.identity_dir(uid, application) else {
            let _ = std::fs::remove_dir_all(self.app_dir(uid).join(crate::identity::DIR_NAME));
            return;
        };
        let wanted = WorkloadIdentity::projections(application.spec.identity.as_ref());
        let mut files: Vec<(String, Vec<u8>)> = tokens
            .iter()
            .filter(|token| token.uid == uid && wanted.iter().any(|p| p.path == token.path))
            .map(|token| (token.path.clone(), token.token.clone().into_bytes()))
            .collect();
        if let Some(api) = &self.config.api {
            files.push(("ca.crt".to_owned(), api.ca_pem.clone().into_bytes()));
        }
        let namespace = application.metadata.namespace.as_deref().unwrap_or("default");
        files.push(("namespace".to_owned(), namespace.as_bytes().to_vec()));
        let owner = if self.agent.uid == 0 {
            crate::launch::user(application, self.agent).ok().flatten()
        } else {
            None
        };
        if let Err(error) = crate::identity::sync(&dir, &files, owner) {
            tracing::warn!(uid, %error, "could not write the identity directory {}", dir.display());
        }
    }

    /// The Application's default working directory and `HOME`.
    fn work_dir(&self, uid: &str) -> PathBuf {
        match &self.work {
            WorkDirs::InDataDir => self.app_dir(uid).join("work"),
            WorkDirs::Under(node_dir) => node_dir.join(uid),
        }
    }

    fn emit(&self, app: &app::Names, type_: EventType, reason: &str, message: String) {
        let _ = self.events.send(NodeEvent {
            namespace: app.namespace.clone(),
            name: app.name.clone(),
            uid: app.uid.clone(),
            type_,
            reason: reason.to_owned(),
            message,
            at: Timestamp::now(),
        });
    }

    fn report(&self, app: &app::Names, status: Option<&ApplicationStatus>, run: u64) {
        {
            let mut apps = self.apps.lock().expect("the app table is never poisoned");
            match (apps.get_mut(&app.uid), status) {
                (Some(entry), Some(status)) => {
                    entry.status = status.clone();
                    entry.run = run;
                }
                (Some(_), None) => {
                    apps.remove(&app.uid);
                }
                (None, _) => {}
            }
        }
        let _ = self.reports.send(AppReport {
            namespace: app.namespace.clone(),
            name: app.name.clone(),
            uid: app.uid.clone(),
            status: status.cloned(),
        });
    }
}

impl Runtime {
    /// Opens the runtime, reattaching to the supervisors a previous agent process left (even
    /// one killed by SIGKILL): nothing is stopped and nothing is started twice; runs that
    /// ended while no runtime was open are reported with their exit codes.
    pub async fn open(config: RuntimeConfig) -> Result<Runtime, RuntimeError> {
        let apps_dir = config.data_dir.join("apps");
        create_dir(&config.data_dir, 0o711)?;
        create_dir(&apps_dir, 0o711)?;
        let mount = config.cgroup_mount.clone().unwrap_or_else(|| PathBuf::from("/sys/fs/cgroup"));
        let parent =
            config.cgroup_parent.clone().unwrap_or_else(|| Path::new("kayra").join(&config.node_name));
        let cgroups = Cgroups::detect(&mount, &parent);
        let agent =
            AgentUser { uid: rustix::process::geteuid().as_raw(), gid: rustix::process::getegid().as_raw() };
        let agent_path = std::env::var("PATH").unwrap_or_else(|_| crate::launch::DEFAULT_PATH.to_owned());
        let work_root =
            config.work_root.clone().unwrap_or_else(|| PathBuf::from(crate::workdirs::DEFAULT_WORK_ROOT));
        let work = crate::workdirs::open(agent.uid == 0, &config.data_dir, &work_root, &config.node_name)?;
        let shared = Arc::new(Shared {
            config,
            cgroups,
            agent,
            agent_path,
            work,
            apps: Mutex::new(BTreeMap::new()),
            secrets: Mutex::new(Arc::new(Vec::new())),
            reports: broadcast::channel(1024).0,
            events: broadcast::channel(1024).0,
            closed: AtomicBool::new(false),
        });
        let entries = std::fs::read_dir(&apps_dir)
            .map_err(RuntimeError::io(format!("reading {}", apps_dir.display())))?;
        for entry in entries.flatten() {
            let Some(record) = app::Record::load(&entry.path()) else { continue };
            app::spawn(&shared, record, true);
        }
        Ok(Runtime { shared })
    }

    /// Sets the node's whole desired state: starts what is new, restarts what changed
    /// generation (stop, then start with the new spec), stops and forgets what is absent.
    /// Secrets are read when a process starts; changing one restarts nothing. An Application
    /// with no `metadata.uid` (or one that is not UUID-shaped) is ignored. Call it from within
    /// a tokio runtime: each Application's task is spawned on it. An Application that comes
    /// back while it is still being forgotten is started by the next `apply` after its
    /// `AppReport` with no status.
    pub fn apply(&self, desired: Desired) {
        *self.shared.secrets.lock().expect("the secrets are never poisoned") = Arc::new(desired.secrets);
        let mut wanted = BTreeMap::new();
        for application in desired.applications {
            if let Some(uid) = application.metadata.uid.clone().filter(|uid| is_safe_uid(uid)) {
                wanted.insert(uid, application);
            }
        }
        for (uid, application) in &wanted {
            self.shared.write_identity(uid, application, &desired.tokens);
        }
        let mut fresh = Vec::new();
        {
            let mut apps = self.shared.apps.lock().expect("the app table is never poisoned");
            for (uid, entry) in apps.iter() {
                if !wanted.contains_key(uid) {
                    let _ = entry.commands.send(app::Command::Forget);
                }
            }
            for (uid, application) in wanted {
                match apps.get_mut(&uid) {
                    Some(entry) => {
                        entry.ports = application.tcp_ports();
                        let _ = entry.commands.send(app::Command::Apply(Box::new(application)));
                    }
                    None => fresh.push(application),
                }
            }
        }
        for application in fresh {
            app::spawn(&self.shared, app::Record::new(application), false);
        }
    }

    /// The status of every Application the runtime knows, and a receiver of every change
    /// after it. A receiver that lags behind loses reports (`RecvError::Lagged`) and should
    /// subscribe again.
    pub fn subscribe(&self) -> (Vec<AppReport>, broadcast::Receiver<AppReport>) {
        let receiver = self.shared.reports.subscribe();
        let apps = self.shared.apps.lock().expect("the app table is never poisoned");
        let now = apps
            .iter()
            .map(|(uid, entry)| AppReport {
                namespace: entry.namespace.clone(),
                name: entry.name.clone(),
                uid: uid.clone(),
                status: Some(entry.status.clone()),
            })
            .collect();
        (now, receiver)
    }

    /// A receiver of events from now on.
    pub fn events(&self) -> broadcast::Receiver<NodeEvent> {
        self.shared.events.subscribe()
    }

    /// What limits processes on this node.
    pub fn enforcement(&self) -> Enforcement {
        self.shared.cgroups.enforcement()
    }

    /// A usage sample of every Application with a cgroup.
    pub fn usage(&self) -> Vec<UsageSample> {
        let apps: Vec<(String, String, String)> = {
            let apps = self.shared.apps.lock().expect("the app table is never poisoned");
            apps.iter().map(|(uid, e)| (uid.clone(), e.namespace.clone(), e.name.clone())).collect()
        };
        apps.into_iter()
            .filter_map(|(uid, namespace, name)| {
                let usage = self.shared.cgroups.usage(&uid)?;
                Some(UsageSample {
                    namespace,
                    name,
                    uid,
                    cpu_usec: usage.cpu_usec,
                    cpu_throttled_usec: usage.cpu_throttled_usec,
                    memory_bytes: usage.memory_bytes,
                    memory_peak_bytes: usage.memory_peak_bytes,
                    pids: usage.pids,
                    oom_kills: usage.oom_kills,
                    at: Timestamp::now(),
                })
            })
            .collect()
    }

    /// One Application's log as a stream of byte chunks. The stream is bounded: a consumer
    /// that pulls slowly slows the reading, nothing is skipped; dropping the stream cancels it.
    pub async fn logs(&self, request: LogRequest) -> Result<LogStream, RuntimeError> {
        let (uid, run) = {
            let apps = self.shared.apps.lock().expect("the app table is never poisoned");
            apps.iter()
                .find(|(_, e)| e.namespace == request.namespace && e.name == request.name)
                .map(|(uid, e)| (uid.clone(), e.run))
                .ok_or_else(|| RuntimeError::NotFound {
                    namespace: request.namespace.clone(),
                    name: request.name.clone(),
                })?
        };
        let run = if request.previous { run.saturating_sub(1) } else { run };
        let logs_dir = self.shared.app_dir(&uid).join("logs");
        if run == 0 || (request.previous && !crate::logs::run_log_path(&logs_dir, run).exists()) {
            if request.previous {
                return Err(RuntimeError::NoPreviousRun { namespace: request.namespace, name: request.name });
            }
            return Ok(LogStream { chunks: mpsc::channel(1).1 });
        }
        let (sender, chunks) = mpsc::channel(8);
        let shared = self.shared.clone();
        tokio::task::spawn_blocking(move || follow::stream(&shared, &uid, &logs_dir, run, &request, &sender));
        Ok(LogStream { chunks })
    }

    /// Facts about this host for the Node's status.
    pub fn node_facts() -> crate::facts::NodeFacts {
        crate::facts::node_facts()
    }

    /// Stops supervising without stopping any workload (agent shutdown): each Application's
    /// task ends, its supervisor and process go on.
    pub async fn close(self) {
        let tasks = self.detach();
        for task in tasks {
            let _ = task.await;
        }
    }

    fn detach(&self) -> Vec<tokio::task::JoinHandle<()>> {
        self.shared.closed.store(true, Ordering::SeqCst);
        let mut apps = self.shared.apps.lock().expect("the app table is never poisoned");
        apps.values_mut()
            .filter_map(|entry| {
                let _ = entry.commands.send(app::Command::Detach);
                entry.task.take()
            })
            .collect()
    }
}

impl Drop for Runtime {
    /// Dropping the runtime detaches from every workload, as [`Runtime::close`] does, without
    /// waiting for the tasks to notice.
    fn drop(&mut self) {
        let _ = self.detach();
    }
}

/// One Application's log, chunk by chunk.
pub struct LogStream {
    chunks: mpsc::Receiver<Result<Bytes, RuntimeError>>,
}

impl futures_util::Stream for LogStream {
    type Item = Result<Bytes, RuntimeError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.chunks.poll_recv(cx)
    }
}

/// A uid names a directory: only the characters a UUID has.
fn is_safe_uid(uid: &str) -> bool {
    !uid.is_empty() && uid.len() <= 64 && uid.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
}

/// Makes `path` (and what is missing above it) a directory with mode `mode`.
pub(crate) fn create_dir(path: &Path, mode: u32) -> Result<(), RuntimeError> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(mode)
        .create(path)
        .and_then(|()| std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)))
        .map_err(RuntimeError::io(format!("creating {}", path.display())))
}

#[cfg(test)]
mod tests;
