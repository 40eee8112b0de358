//! One Application's task: starts its runs, waits on its supervisor (a pidfd, so the kernel
//! says when it ends), applies the restart policy and back-off, runs its probes, stops it on a
//! new spec or when it is forgotten, freezes and thaws it as `spec.frozen` says (by its cgroup,
//! else by stopping its process group; probes suspended meanwhile, nothing restarted), and
//! reports each change.

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use jiff::Timestamp;
use kayra_api::kinds::application::{Application, ApplicationSpec, ApplicationStatus};
use serde::{Deserialize, Serialize};
use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::{AppEntry, EventType, Shared, create_dir};
use crate::launch::{self, Refused};
use crate::lifecycle::{self, History, Next, Outcome, Phase, RestartPolicy};
use crate::probe::ExecContext;
use crate::proc::ProcessId;
use crate::supervisor::{self, Exit, RunSpec, RunState};

mod frozen;
mod probes;
mod status;

use frozen::Held;
use probes::{AbortOnDrop, ProbeSignal};
use status::{rfc3339, says_otherwise, set_condition};

/// What the runtime asks of an Application's task.
#[derive(Debug)]
pub(super) enum Command {
    /// The Application as now desired.
    Apply(Box<Application>),
    /// It is no longer desired: stop it and forget it.
    Forget,
    /// The runtime closes: leave everything running.
    Detach,
}

/// Who an Application is.
#[derive(Debug, Clone)]
pub(super) struct Names {
    pub(super) namespace: String,
    pub(super) name: String,
    pub(super) uid: String,
}

impl Names {
    fn of(application: &Application) -> Names {
        let meta = &application.metadata;
        Names {
            namespace: meta.namespace.clone().unwrap_or_else(|| "default".to_owned()),
            name: meta.name.clone().unwrap_or_default(),
            uid: meta.uid.clone().unwrap_or_default(),
        }
    }
}

/// What the runtime keeps about an Application across its own restarts, in `app.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct Record {
    application: Application,
    status: ApplicationStatus,
    history: History,
    /// The latest run started; 0 before the first.
    run: u64,
    /// The latest run whose end is accounted for.
    handled: u64,
    /// When a job first started, for its active deadline.
    job_started_at: Option<Timestamp>,
    /// How the current run's processes are held while the Application is frozen; `None` when
    /// they are not held.
    #[serde(default)]
    frozen: Option<Held>,
}

impl Record {
    /// A record for an Application seen for the first time.
    pub(super) fn new(application: Application) -> Record {
        let status = ApplicationStatus {
            phase: Some(Phase::Pending.word().to_owned()),
            observed_generation: application.metadata.generation,
            ..ApplicationStatus::default()
        };
        Record {
            application,
            status,
            history: History::default(),
            run: 0,
            handled: 0,
            job_started_at: None,
            frozen: None,
        }
    }

    /// The record kept in `dir`, when there is a readable one.
    pub(super) fn load(dir: &Path) -> Option<Record> {
        let record: Record = serde_json::from_slice(&std::fs::read(dir.join("app.json")).ok()?).ok()?;
        let uid = record.application.metadata.uid.as_deref()?;
        (dir.file_name()?.to_str()? == uid).then_some(record)
    }
}

/// Starts the task of the Application `record` holds; `reopened` when it is found on disk.
pub(super) fn spawn(shared: &Arc<Shared>, record: Record, reopened: bool) {
    let names = Names::of(&record.application);
    let (commands, receiver) = mpsc::unbounded_channel();
    let mut apps = shared.apps.lock().expect("the app table is never poisoned");
    let entry = AppEntry::new(&names, commands, &record.status, record.run, &record.application);
    apps.insert(names.uid.clone(), entry);
    let task = Task {
        shared: shared.clone(),
        dir: shared.app_dir(&names.uid),
        names: names.clone(),
        record,
        commands: receiver,
    };
    let handle = tokio::spawn(task.run(reopened));
    if let Some(entry) = apps.get_mut(&names.uid) {
        entry.task = Some(handle);
    }
}

struct Task {
    shared: Arc<Shared>,
    names: Names,
    dir: PathBuf,
    record: Record,
    commands: mpsc::UnboundedReceiver<Command>,
}

/// Where an Application's task stands.
enum State {
    /// Start a run now.
    Start,
    /// Start a run at this instant (back-off).
    Waiting(Instant),
    /// A run is on.
    Running(Box<Run>),
    /// Done: a job that ended, or one that cannot go on.
    Finished,
    /// Frozen while no process runs: none is started until the Application is thawed.
    Held,
    /// The task ends.
    Gone,
}

/// A run in progress.
struct Run {
    state: RunState,
    supervisor: AsyncFd<OwnedFd>,
    /// The probe tasks, aborted when the run is dropped or frozen.
    probes: Vec<AbortOnDrop>,
    /// What the probes check with, to start them again on thaw.
    context: Option<ExecContext>,
    /// Held so the channel stays open while no probe runs: a closed one would answer the run's
    /// loop at once, again and again.
    sender: mpsc::Sender<ProbeSignal>,
    signals: mpsc::Receiver<ProbeSignal>,
}

impl Task {
    async fn run(mut self, reopened: bool) {
        let mut state = if reopened { self.reattach() } else { State::Start };
        loop {
            if self.shared.closed.load(Ordering::SeqCst) {
                return;
            }
            state = match state {
                State::Start => self.start().await,
                State::Waiting(until) => {
                    let deadline = self.deadline();
                    tokio::select! {
                        () = tokio::time::sleep_until(until) => State::Start,
                        () = sleep_until_some(deadline) => self.deadline_exceeded(),
                        command = self.commands.recv() => self.idle_command(command, State::Waiting(until)).await,
                    }
                }
                State::Running(mut run) => {
                    // Started, reattached or adopted: its processes as `spec.frozen` says.
                    self.hold(&mut run).await;
                    self.running(run).await
                }
                State::Finished => {
                    let command = self.commands.recv().await;
                    self.idle_command(command, State::Finished).await
                }
                State::Held => {
                    let command = self.commands.recv().await;
                    self.idle_command(command, State::Held).await
                }
                State::Gone => return,
            };
        }
    }

    /// Picks up where the previous runtime left: a live supervisor is waited on again, a run
    /// that ended meanwhile is accounted for from its state file.
    fn reattach(&mut self) -> State {
        let run_dir = self.dir.join("run");
        if self.record.run > self.record.handled {
            match supervisor::read_state(&run_dir) {
                Some(state) if state.run == self.record.run => {
                    if let Some(exit) = state.exit.clone() {
                        return self.ended(&state, exit);
                    }
                    if let Some(fd) = open_pidfd(state.supervisor) {
                        return State::Running(Box::new(self.attach(state, fd, None)));
                    }
                    // The supervisor died without recording the end: its workload, if it is
                    // still there, has no one to report it, so it goes.
                    if state.workload.is_alive()
                        && let Some(pid) = rustix::process::Pid::from_raw(state.workload.pid as i32)
                    {
                        let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
                    }
                    let exit = Exit {
                        code: 137,
                        signal: Some(9),
                        oom_killed: false,
                        stopped: false,
                        finished_at: Timestamp::now(),
                        not_started: None,
                    };
                    self.record.status.message =
                        Some("the supervisor ended without recording the exit".to_owned());
                    return self.ended(&state, exit);
                }
                _ => return State::Start,
            }
        }
        match self.record.status.phase.as_deref() {
            Some("Succeeded" | "Failed") => State::Finished,
            _ => State::Start,
        }
    }

    /// A command while no process runs.
    async fn idle_command(&mut self, command: Option<Command>, unchanged: State) -> State {
        match command {
            Some(Command::Apply(application)) => {
                let changed = self.adopt(*application);
                let frozen = self.record.application.spec.frozen;
                match unchanged {
                    State::Finished if !changed => State::Finished,
                    State::Held if frozen && !changed => State::Held,
                    // Thawed: the run it held back starts now, the back-off long over.
                    State::Held => {
                        self.set_frozen_condition(false, "Thawed", "thawed: a process starts");
                        State::Start
                    }
                    _ if frozen => self.held(),
                    _ if changed => State::Start,
                    unchanged => unchanged,
                }
            }
            Some(Command::Forget) => {
                self.forget();
                State::Gone
            }
            Some(Command::Detach) | None => State::Gone,
        }
    }

    /// Takes the Application as now desired; `true` when its spec changed (a new generation
    /// beyond `spec.frozen`, which freezes and thaws the run in place), so the next run starts
    /// afresh. A new generation that changed only `spec.frozen` is observed at once. At the same
    /// generation, a stored status that says otherwise than this node (a write the node did
    /// not make, such as an unbinding that a binding to this node undid before the node heard of
    /// either) is corrected by reporting it again.
    fn adopt(&mut self, application: Application) -> bool {
        let moved = application.metadata.generation != self.record.application.metadata.generation;
        let thawed = |spec: &ApplicationSpec| ApplicationSpec { frozen: false, ..spec.clone() };
        let changed = moved && thawed(&application.spec) != thawed(&self.record.application.spec);
        let contradicted = !changed && says_otherwise(application.status.as_ref(), &self.record.status);
        self.record.application = application;
        if changed {
            self.record.history = History::default();
            self.record.job_started_at = None;
        } else if moved {
            self.record.status.observed_generation = self.record.application.metadata.generation;
        }
        if contradicted || (moved && !changed) {
            self.publish();
        } else {
            self.save();
        }
        changed
    }

    fn policy(&self) -> RestartPolicy {
        RestartPolicy::parse(self.record.application.spec.lifecycle.restart_policy.as_deref())
    }

    /// When a job's active deadline passes.
    fn deadline(&self) -> Option<Instant> {
        if self.policy() == RestartPolicy::Always {
            return None;
        }
        let seconds = self.record.application.spec.lifecycle.active_deadline_seconds?;
        let started = self.record.job_started_at?;
        let left = started.as_millisecond() + seconds.max(0) * 1000 - Timestamp::now().as_millisecond();
        Some(Instant::now() + Duration::from_millis(left.max(0) as u64))
    }

    fn deadline_exceeded(&mut self) -> State {
        let message = "Job was active longer than specified deadline".to_owned();
        self.shared.emit(&self.names, EventType::Warning, "DeadlineExceeded", message.clone());
        self.set_ready(false, "ProcessNotRunning");
        let status = &mut self.record.status;
        status.phase = Some(Phase::Failed.word().to_owned());
        status.message = Some(format!("DeadlineExceeded: {message}"));
        self.publish();
        State::Finished
    }

    /// Starts a run: plans it, prepares its directories and cgroup, starts its supervisor.
    async fn start(&mut self) -> State {
        if self.deadline().is_some_and(|deadline| deadline <= Instant::now()) {
            return self.deadline_exceeded();
        }
        if self.record.application.spec.frozen {
            return self.held();
        }
        let work = self.shared.work_dir(&self.names.uid);
        let secrets = self.shared.secrets.lock().expect("the secrets are never poisoned").clone();
        let identity = self.shared.identity_dir(&self.names.uid, &self.record.application);
        let api = self.shared.config.api.as_ref().map(|api| (api.host.as_str(), api.port));
        let plan = launch::plan(
            &self.record.application,
            &launch::Context {
                secrets: &secrets,
                agent: self.shared.agent,
                agent_path: &self.shared.agent_path,
                home: &work,
                hostname: &self.shared.config.node_name,
                pids: self.shared.config.pids_limit,
                is_executable: &is_executable,
                api,
                identity_dir: identity.as_ref().map(|(_, seen)| seen.as_path()),
            },
        );
        let plan = match plan {
            Ok(plan) => plan,
            Err(Refused(message)) => return self.could_not_start(message),
        };
        match self.launch(&plan, &work).await {
            Ok(run) => {
                let pid = run.state.workload.pid;
                self.shared.emit(&self.names, EventType::Normal, "Started", format!("Started process {pid}"));
                State::Running(Box::new(run))
            }
            Err(message) => self.could_not_start(message),
        }
    }

    async fn launch(&mut self, plan: &launch::Plan, work: &Path) -> Result<Run, String> {
        let config = &self.shared.config;
        let run_dir = self.dir.join("run");
        let logs_dir = self.dir.join("logs");
        for (dir, mode) in
            [(&self.dir, 0o711), (&run_dir, 0o700), (&logs_dir, 0o700), (&work.to_owned(), 0o750)]
        {
            create_dir(dir, mode).map_err(|error| error.to_string())?;
        }
        if let Some((uid, gid)) = plan.user {
            std::os::unix::fs::chown(work, Some(uid), Some(gid))
                .map_err(|error| format!("chown {}: {error}", work.display()))?;
        }
        let working_dir = plan.working_dir.clone().unwrap_or_else(|| work.to_owned());
        let cgroups = &self.shared.cgroups;
        let enforcement = cgroups.enforcement();
        let uid = &self.names.uid;
        cgroups.create(uid, &plan.limits).map_err(|error| format!("creating the cgroup: {error}"))?;
        let run = self.record.run + 1;
        prune_logs(&logs_dir, run);
        let spec = RunSpec {
            run,
            program: plan.program.clone(),
            argv: plan.argv.clone(),
            env: plan.env.clone(),
            working_dir,
            user: plan.user,
            cgroup_procs: cgroups.procs_files(uid),
            oom_counter: cgroups.oom_counter(uid),
            rlimits: if enforcement == crate::cgroup::Enforcement::Rlimit {
                crate::rlimit::for_limits(&plan.limits)
            } else {
                Vec::new()
            },
            grace_seconds: plan.grace_seconds,
            log_path: crate::logs::run_log_path(&logs_dir, run),
            log_max_bytes: config.log_max_bytes,
            log_files: config.log_files,
            supervisor: config.supervisor.clone(),
            identity_mount: match self.shared.identity_dir(uid, &self.record.application) {
                Some((host, seen)) if host != seen => Some(host),
                _ => None,
            },
            stdin: self.record.application.spec.stdin,
        };
        supervisor::write_atomically(&run_dir.join(supervisor::SPEC_FILE), &spec)
            .map_err(|error| format!("writing the run spec: {error}"))?;
        let _ = std::fs::remove_file(run_dir.join(supervisor::STATE_FILE));
        self.record.run = run;
        self.record.history.attempts += 1;
        self.record.job_started_at.get_or_insert_with(Timestamp::now);
        self.save();

        let supervisor_log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(run_dir.join("supervisor.log"))
            .map_err(|error| format!("opening the supervisor log: {error}"))?;
        let (program, args) = config.supervisor.split_first().ok_or("no supervisor program configured")?;
        let mut child = tokio::process::Command::new(program)
            .args(args)
            .arg("run")
            .arg(&run_dir)
            .current_dir("/")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(supervisor_log)
            .spawn()
            .map_err(|error| format!("starting the supervisor {program}: {error}"))?;
        // Opened while the supervisor is an unreaped child, so its pid cannot name another
        // process yet; from then on it is waited on through the pidfd, and tokio reaps it.
        let fd = child
            .id()
            .and_then(|pid| rustix::process::Pid::from_raw(pid as i32))
            .and_then(|pid| rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty()).ok());
        let stdout = child.stdout.take().ok_or("the supervisor has no stdout")?;
        let mut line = String::new();
        let read =
            tokio::time::timeout(Duration::from_secs(30), BufReader::new(stdout).read_line(&mut line)).await;
        if !matches!(read, Ok(Ok(_))) || !line.starts_with("started ") {
            // A supervisor that said why it could not start the process has recorded that and
            // is ending: waited for, so that the next run meets nothing of this one.
            let _ = tokio::time::timeout(Duration::from_secs(5), child.wait()).await;
            let log = std::fs::read_to_string(run_dir.join("supervisor.log")).unwrap_or_default();
            let why = line
                .trim()
                .strip_prefix("failed ")
                .map(str::to_owned)
                .or_else(|| log.lines().last().map(str::to_owned));
            return Err(not_started(&why.unwrap_or_else(|| "no answer".to_owned())));
        }
        drop(child);
        let state = supervisor::read_state(&run_dir)
            .filter(|state| state.run == run)
            .ok_or("the supervisor recorded no state")?;
        let fd = fd.ok_or("the supervisor is gone")?;
        let limited = {
            let limits = &plan.limits;
            limits.memory_bytes.is_some() || limits.cpu_millis.is_some()
        };

        let job = self.policy() != RestartPolicy::Always;
        let status = &mut self.record.status;
        status.phase = Some(Phase::Running.word().to_owned());
        status.message = None;
        status.observed_generation = self.record.application.metadata.generation;
        status.started_at = Some(rfc3339(state.started_at));
        status.restarts = Some(self.record.history.restarts);
        status.attempts = job.then_some(self.record.history.attempts);
        if limited {
            set_condition(status, "LimitsEnforced", true, enforcement.reason(), Some(enforcement.describe()));
        } else {
            status.conditions.retain(|condition| condition.type_ != "LimitsEnforced");
        }
        let ready = self.probe_spec(false).is_none();
        self.set_ready(ready, if ready { "ProcessRunning" } else { "ReadinessProbePending" });
        Ok(self.attach(state, fd, Some(spec)))
    }

    /// Waits on a run's supervisor and starts its probes.
    fn attach(&mut self, state: RunState, fd: OwnedFd, spec: Option<RunSpec>) -> Run {
        // Deprecated for descriptors an `AsyncFd` does not own; an `OwnedFd` stays open and the
        // same for the `AsyncFd`'s whole life, which is what `register` asks of its caller.
        #[allow(deprecated)]
        let supervisor = AsyncFd::new(fd).expect("a pidfd can be polled");
        let spec = spec.or_else(|| {
            serde_json::from_slice::<RunSpec>(
                &std::fs::read(self.dir.join("run").join(supervisor::SPEC_FILE)).ok()?,
            )
            .ok()
        });
        let (sender, signals) = mpsc::channel(16);
        let context =
            spec.map(|spec| ExecContext { working_dir: spec.working_dir, env: spec.env, user: spec.user });
        let mut run = Run { state, supervisor, probes: Vec::new(), context, sender, signals };
        // A run found frozen stays so, its probes suspended, until it is thawed.
        if self.record.frozen.is_none() {
            run.probes = self.start_probes(&run);
        }
        self.publish();
        run
    }

    /// While a run is on: its end, commands, probe verdicts and a job's deadline.
    async fn running(&mut self, mut run: Box<Run>) -> State {
        loop {
            let deadline = self.deadline();
            tokio::select! {
                ready = run.supervisor.readable() => {
                    if let Ok(mut guard) = ready {
                        guard.retain_ready();
                    }
                    let exit = self.collect(&run).await;
                    return self.ended(&run.state, exit);
                }
                () = sleep_until_some(deadline) => {
                    self.stop(&run, None, "Stopping process: the job's active deadline passed").await;
                    self.record.handled = run.state.run;
                    return self.deadline_exceeded();
                }
                signal = run.signals.recv() => match signal {
                    // A verdict sent before the run was frozen says nothing of it now.
                    Some(_) if self.record.frozen.is_some() => {}
                    Some(ProbeSignal::Failed { liveness, message }) => {
                        let which = if liveness { "Liveness" } else { "Readiness" };
                        self.shared.emit(&self.names, EventType::Warning, "Unhealthy", format!("{which} probe failed: {message}"));
                    }
                    Some(ProbeSignal::Verdict { liveness: false, passing }) => {
                        self.set_ready(passing, if passing { "ReadinessProbePassed" } else { "ReadinessProbeFailed" });
                        self.publish();
                    }
                    Some(ProbeSignal::Verdict { liveness: true, passing: false }) => {
                        let exit = self.stop(&run, None, "Process failed liveness probe, will be restarted").await;
                        return self.ended(&run.state, exit);
                    }
                    Some(ProbeSignal::Verdict { liveness: true, passing: true }) | None => {}
                },
                command = self.commands.recv() => match command {
                    Some(Command::Apply(application)) => {
                        let generation = application.metadata.generation;
                        if self.adopt(*application) {
                            let message = format!("Stopping process: the spec changed (generation {})", generation.unwrap_or_default());
                            let exit = self.stop(&run, None, &message).await;
                            self.record.handled = run.state.run;
                            self.record_exit(&exit);
                            return State::Start;
                        }
                        self.hold(&mut run).await;
                    }
                    Some(Command::Forget) => {
                        self.stop(&run, None, "Stopping process: the application is gone from this node").await;
                        self.record.handled = run.state.run;
                        self.forget();
                        return State::Gone;
                    }
                    Some(Command::Detach) | None => return State::Gone,
                },
            }
        }
    }

    /// Asks the supervisor to stop the workload and waits for the run to end (a frozen one is
    /// let go first: a held process does not take its stop signal).
    async fn stop(&mut self, run: &Run, grace: Option<u64>, message: &str) -> Exit {
        self.release(run.state.workload);
        self.shared.emit(&self.names, EventType::Normal, "Killing", message.to_owned());
        let run_dir = self.dir.join("run");
        let asked = {
            let run_dir = run_dir.clone();
            tokio::task::spawn_blocking(move || supervisor::request_stop(&run_dir, grace)).await
        };
        if !matches!(asked, Ok(Ok(()))) {
            tracing::debug!(uid = %self.names.uid, "the supervisor took no stop request; it may have just ended");
        }
        let _ = run.supervisor.readable().await;
        self.collect(run).await
    }

    /// How the run ended, from its state file once its supervisor is gone.
    async fn collect(&mut self, run: &Run) -> Exit {
        let run_dir = self.dir.join("run");
        match supervisor::read_state(&run_dir)
            .and_then(|state| state.exit.filter(|_| state.run == run.state.run))
        {
            Some(exit) => exit,
            None => {
                if run.state.workload.is_alive()
                    && let Some(pid) = rustix::process::Pid::from_raw(run.state.workload.pid as i32)
                {
                    let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
                }
                Exit {
                    code: 137,
                    signal: Some(9),
                    oom_killed: false,
                    stopped: false,
                    finished_at: Timestamp::now(),
                    not_started: None,
                }
            }
        }
    }

    /// Writes a run's end into the status.
    fn record_exit(&mut self, exit: &Exit) {
        let status = &mut self.record.status;
        status.finished_at = Some(rfc3339(exit.finished_at));
        status.exit_code = Some(i64::from(exit.code));
        self.set_ready(false, "ProcessNotRunning");
    }

    /// A run ended with `exit`: account for it and decide what comes next.
    fn ended(&mut self, state: &RunState, exit: Exit) -> State {
        self.record.handled = state.run;
        // What held it goes with it, so that the next run starts thawed.
        self.release(state.workload);
        if let Some(why) = &exit.not_started {
            self.set_ready(false, "ProcessNotRunning");
            return self.could_not_start(not_started(why));
        }
        self.record_exit(&exit);
        if exit.oom_killed {
            let message = format!("process {} was killed for exceeding its memory limit", state.workload.pid);
            self.shared.emit(&self.names, EventType::Warning, "OOMKilled", message);
        }
        let ran_for = Duration::from_millis(
            (exit.finished_at.as_millisecond() - state.started_at.as_millisecond()).max(0) as u64,
        );
        let outcome = Outcome { succeeded: exit.code == 0 && !exit.oom_killed, ran_for };
        let reason = if exit.oom_killed {
            "OOMKilled"
        } else if exit.code == 0 {
            "Completed"
        } else {
            "Error"
        };
        let ended = format!("{reason}: exit code {}", exit.code);
        self.next(outcome, ended)
    }

    /// A run could not even start: the failure is accounted for as a failed run.
    fn could_not_start(&mut self, message: String) -> State {
        self.shared.emit(&self.names, EventType::Warning, "Failed", format!("Error: {message}"));
        self.next(Outcome { succeeded: false, ran_for: Duration::ZERO }, message)
    }

    fn next(&mut self, outcome: Outcome, message: String) -> State {
        let policy = self.policy();
        let limit = self.record.application.spec.lifecycle.backoff_limit;
        let next = lifecycle::after_run(
            policy,
            limit,
            &self.shared.config.backoff,
            &mut self.record.history,
            outcome,
        );
        let started = self.record.status.started_at.is_some();
        let status = &mut self.record.status;
        status.restarts = Some(self.record.history.restarts);
        status.observed_generation = self.record.application.metadata.generation;
        let state = match next {
            Next::Restart { after } => {
                status.phase = Some(if started { Phase::Running } else { Phase::Pending }.word().to_owned());
                set_condition(status, "Ready", false, kayra_api::kinds::application::BACK_OFF, None);
                status.message =
                    Some(format!("{message}; back-off {}s restarting the process", after.as_secs()));
                // The same words every time the same failure repeats, so its Event counts up
                // instead of multiplying; the growing delay is in the status message.
                let event = format!("Back-off restarting the failed process ({message})");
                self.shared.emit(&self.names, EventType::Warning, "BackOff", event);
                State::Waiting(Instant::now() + after)
            }
            Next::Finished { phase, reason } => {
                status.phase = Some(phase.word().to_owned());
                status.message = Some(match reason {
                    Some(reason) => {
                        format!("{reason}: {message}; the job has reached the specified backoff limit")
                    }
                    None => message,
                });
                State::Finished
            }
        };
        self.publish();
        state
    }

    fn ready(&self) -> bool {
        self.record.status.conditions.iter().any(|c| c.type_ == "Ready" && c.status == "True")
    }

    fn set_ready(&mut self, ready: bool, reason: &str) {
        set_condition(&mut self.record.status, "Ready", ready, reason, None);
    }

    /// Stops being responsible for the Application: its cgroup and directories go.
    fn forget(&mut self) {
        if let Err(error) = self.shared.cgroups.remove(&self.names.uid) {
            tracing::warn!(uid = %self.names.uid, %error, "removing the cgroup of a forgotten application");
        }
        let _ = std::fs::remove_dir_all(&self.dir);
        let _ = std::fs::remove_dir_all(self.shared.work_dir(&self.names.uid));
        self.shared.report(&self.names, None, self.record.run);
    }

    fn save(&self) {
        if let Err(error) = supervisor::write_atomically(&self.dir.join("app.json"), &self.record) {
            tracing::warn!(uid = %self.names.uid, %error, "saving the application record");
        }
    }

    fn publish(&mut self) {
        self.save();
        self.shared.report(&self.names, Some(&self.record.status), self.record.run);
    }
}

/// What the status and Events say of a run whose process never started.
fn not_started(why: &str) -> String {
    format!("the supervisor could not start the process: {why}")
}

/// A pidfd for `process`, when it is that very process (pid and start time) and alive.
fn open_pidfd(process: ProcessId) -> Option<OwnedFd> {
    let pid = rustix::process::Pid::from_raw(process.pid as i32)?;
    let fd = rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty()).ok()?;
    // Checked after opening: the pidfd now pins the process the start time names.
    process.is_alive().then_some(fd)
}

async fn sleep_until_some(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
}

/// Keeps the logs of run `run - 1` (for `--previous`) and newer; older ones go.
fn prune_logs(dir: &Path, run: u64) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let number =
            name.to_str().and_then(|name| name.split('.').next()).and_then(|n| n.parse::<u64>().ok());
        if number.is_some_and(|number| number + 1 < run) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}
