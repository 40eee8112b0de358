//! The supervisor: one small process per run of an Application, the way conmon and
//! containerd-shim work, so the agent can die (even by SIGKILL) and come back without touching
//! the workload.
//!
//! The runtime writes the run's [`RunSpec`] into the Application's run directory and starts the
//! supervisor (`<supervisor argv> run <dir>`). The supervisor leaves the agent's session, starts
//! the workload through the exec shim (`<supervisor argv> exec <dir>`: joins the cgroup, sets
//! rlimits, drops to the run-as user, enters the working directory, execs) in a process group
//! of its own, with stdout and stderr piped into the supervisor, which writes them to the run's
//! log ([`crate::logs`]). It records the run in `state.json` (atomically: written aside, then
//! renamed): its own identity and the workload's when it spawns the shim, the exit code, signal
//! and out-of-memory flag when it ends (or, for a run whose exec failed, why it never started),
//! and then exits itself. A `stop [seconds]` line on the control socket `control.sock` sends
//! SIGTERM to the workload's process group and SIGKILL after the grace period.
//!
//! Whether the workload started is the shim's to say, on a pipe that is its stdin and that it
//! keeps only close-on-exec: `exec` just before the exec, then either nothing (the exec
//! succeeded and closed the pipe) or `failed <why>` (see [`ShimReport`]). The supervisor reads
//! that pipe to its end before anything else, so the first line it prints on its stdout tells
//! its starter that the workload runs (`started <pid>`) only once its exec has succeeded, or
//! why it never started (`failed <why>`, printed after the run's end is recorded).

use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::fd::AsFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use jiff::Timestamp;
use rustix::process::{Pid, Signal, kill_process_group};
use serde::{Deserialize, Serialize};

use crate::cgroup::OomCounter;
use crate::logs::{LogWriter, MAX_ENTRY, Stream};
use crate::proc::ProcessId;
use crate::rlimit::Rlimit;

/// The spec file of a run, in the run directory.
pub(crate) const SPEC_FILE: &str = "spec.json";
/// The state file of a run, in the run directory.
pub(crate) const STATE_FILE: &str = "state.json";
/// The control socket of a run, in the run directory.
pub(crate) const CONTROL_SOCKET: &str = "control.sock";

/// Everything one run needs, written by the runtime before it starts the supervisor.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct RunSpec {
    /// The run's number within the Application; its log is `<run>.log`.
    pub(crate) run: u64,
    /// The program, resolved to a path.
    pub(crate) program: PathBuf,
    /// The argument vector, `argv[0]` first.
    pub(crate) argv: Vec<String>,
    /// The whole environment.
    pub(crate) env: Vec<(String, String)>,
    /// The working directory.
    pub(crate) working_dir: PathBuf,
    /// The user and group to drop to, when the runtime runs as root.
    pub(crate) user: Option<(u32, u32)>,
    /// The `cgroup.procs` files the workload joins before it execs.
    pub(crate) cgroup_procs: Vec<PathBuf>,
    /// Where out-of-memory kills are counted.
    pub(crate) oom_counter: Option<OomCounter>,
    /// Rlimits the workload sets on itself (where no cgroup limits it).
    pub(crate) rlimits: Vec<Rlimit>,
    /// Seconds between SIGTERM and SIGKILL when stopped.
    pub(crate) grace_seconds: u64,
    /// The run's log file.
    pub(crate) log_path: PathBuf,
    /// The largest a log file grows before it rotates.
    pub(crate) log_max_bytes: u64,
    /// How many files one run's log keeps.
    pub(crate) log_files: u32,
    /// The argv prefix of the supervisor program, to start the exec shim.
    pub(crate) supervisor: Vec<String>,
    /// The identity directory to mount at the service-account path in a mount namespace of
    /// the workload's own (only when the agent is root).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) identity_mount: Option<PathBuf>,
    /// Whether the workload keeps a stdin ([`STDIN_FIFO`]) that attaches write to.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub(crate) stdin: bool,
}

/// The named pipe in the run directory that is the workload's stdin when its spec asks for one:
/// the supervisor holds it open for writing as long as the run lasts, so the workload never
/// reads an end of it, and `kubectl attach -i` writes into it.
pub(crate) const STDIN_FIFO: &str = "stdin";

/// What the supervisor records about its run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct RunState {
    /// The run's number.
    pub(crate) run: u64,
    /// The supervisor.
    pub(crate) supervisor: ProcessId,
    /// The workload.
    pub(crate) workload: ProcessId,
    /// When the workload started.
    pub(crate) started_at: Timestamp,
    /// How the workload ended, once it has.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) exit: Option<Exit>,
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Exit {
    /// The exit code, or 128 + the signal that killed it (137 for SIGKILL), as Kubernetes
    /// reports it.
    pub(crate) code: i32,
    /// The signal that killed it.
    pub(crate) signal: Option<i32>,
    /// Whether the kernel killed it for exceeding its memory limit.
    pub(crate) oom_killed: bool,
    /// Whether it ended because it was asked to stop.
    pub(crate) stopped: bool,
    /// When it ended.
    pub(crate) finished_at: Timestamp,
    /// Why the workload never started, when its exec (or what the shim does before it)
    /// failed: such a run is a failed start, not a process that ran and exited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) not_started: Option<String>,
}

/// What the exec shim said on its report pipe, read whole once the pipe has closed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ShimReport {
    /// The workload's exec succeeded: the shim said `exec` and the exec closed the pipe.
    Started,
    /// The workload was never started, for this reason.
    NotStarted(String),
}

impl ShimReport {
    /// Reads what the shim said: a `failed <why>` line wins, an `exec` line alone is a
    /// started workload, and silence is a shim that ended (or was killed) before its exec.
    pub(crate) fn read(said: &[u8]) -> ShimReport {
        let said = String::from_utf8_lossy(said);
        if let Some(why) = said.lines().find_map(|line| line.strip_prefix("failed ")) {
            return ShimReport::NotStarted(why.to_owned());
        }
        if said.lines().any(|line| line == "exec") {
            return ShimReport::Started;
        }
        ShimReport::NotStarted("the exec shim ended before it started the process".to_owned())
    }
}

/// Reads the run's state file, if there is a readable one.
pub(crate) fn read_state(run_dir: &Path) -> Option<RunState> {
    serde_json::from_slice(&std::fs::read(run_dir.join(STATE_FILE)).ok()?).ok()
}

/// Writes `value` as JSON to `path` atomically (aside, synced, renamed), mode 0600.
pub(crate) fn write_atomically(path: &Path, value: &impl Serialize) -> io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let aside = path.with_extension("tmp");
    let mut file =
        std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(&aside)?;
    file.write_all(&serde_json::to_vec(value).map_err(io::Error::other)?)?;
    file.sync_all()?;
    std::fs::rename(&aside, path)
}

/// Asks the supervisor of `run_dir` to stop its workload, with `grace` overriding the spec's
/// grace period. Returns once the supervisor has taken the request.
pub(crate) fn request_stop(run_dir: &Path, grace: Option<u64>) -> io::Result<()> {
    let mut stream = UnixStream::connect(run_dir.join(CONTROL_SOCKET))?;
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    let line = grace.map_or("stop\n".to_owned(), |grace| format!("stop {grace}\n"));
    stream.write_all(line.as_bytes())?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer)?;
    if answer.trim() == "ok" {
        Ok(())
    } else {
        Err(io::Error::other(format!("supervisor answered {answer:?}")))
    }
}

/// The supervisor program: `run <dir>` supervises one run, `exec <dir>` is the exec shim
/// between it and the workload. Returns the process's exit code.
pub(crate) fn main(args: &[String]) -> i32 {
    match args {
        [verb, dir] if verb == "run" => match supervise(Path::new(dir)) {
            Ok(()) => 0,
            Err(error) => {
                eprintln!("kayra supervisor: {error}");
                1
            }
        },
        [verb, dir] if verb == "exec" => exec_shim(Path::new(dir)),
        [verb, dir, terminal, argv @ ..] if verb == "enter" => {
            crate::enter::main(Path::new(dir), terminal, argv)
        }
        _ => {
            eprintln!(
                "usage: supervise run|exec <run directory> | enter <run directory> tty|pipes <argv...>"
            );
            64
        }
    }
}

pub(crate) fn read_spec(dir: &Path) -> io::Result<RunSpec> {
    serde_json::from_slice(&std::fs::read(dir.join(SPEC_FILE))?).map_err(io::Error::other)
}

/// Whether the workload has ended, for the stop timer to wait on.
#[derive(Default)]
struct Ended {
    ended: Mutex<bool>,
    changed: Condvar,
}

fn supervise(dir: &Path) -> io::Result<()> {
    // Out of the agent's session and process group: a signal to the agent's group, or the
    // agent's terminal closing, does not reach the supervisor or its workload.
    let _ = rustix::process::setsid();
    let spec = read_spec(dir)?;
    let announce = Announce { stdout: Mutex::new(Some(io::stdout())) };
    let me =
        ProcessId::of(std::process::id()).ok_or_else(|| io::Error::other("no /proc entry for myself"))?;
    let log = Arc::new(Mutex::new(LogWriter::open(&spec.log_path, spec.log_max_bytes, spec.log_files)?));
    let oom_before = spec.oom_counter.as_ref().map_or(0, OomCounter::read);
    let _ = std::fs::remove_file(dir.join(CONTROL_SOCKET));
    let listener = UnixListener::bind(dir.join(CONTROL_SOCKET))?;
    // Held, read and write, until this process ends: the workload's stdin never ends.
    let _stdin = if spec.stdin { Some(open_stdin_fifo(dir)?) } else { None };

    let (shim, shim_args) =
        spec.supervisor.split_first().ok_or_else(|| io::Error::other("empty supervisor argv"))?;
    let (mut report, report_end) = io::pipe()?;
    // The command, and with it this process's copy of the pipe's writing end, goes at the end
    // of the statement: the shim (until its exec) holds the only one.
    let spawned = Command::new(shim)
        .args(shim_args)
        .arg("exec")
        .arg(dir)
        .stdin(report_end)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn();
    let mut child = match spawned {
        Ok(child) => child,
        Err(error) => {
            announce.say(&format!("failed starting the exec shim {shim}: {error}"));
            return Err(error);
        }
    };
    let pid = child.id();
    let group = Pid::from_raw(pid as i32).expect("a child's pid is positive");
    let workload = ProcessId::of(pid).unwrap_or(ProcessId { pid, start_time: 0 });
    let started_at = Timestamp::now();
    let mut state = RunState { run: spec.run, supervisor: me, workload, started_at, exit: None };
    write_atomically(&dir.join(STATE_FILE), &state)?;

    let mut pumps = Vec::new();
    for (stream, pipe) in [
        (Stream::Stdout, child.stdout.take().map(|out| Box::new(out) as Box<dyn Read + Send>)),
        (Stream::Stderr, child.stderr.take().map(|err| Box::new(err) as Box<dyn Read + Send>)),
    ] {
        let log = log.clone();
        if let Some(pipe) = pipe {
            pumps.push(std::thread::spawn(move || pump(pipe, stream, &log)));
        }
    }

    let ended = Arc::new(Ended::default());
    let stopped = Arc::new(Mutex::new(false));
    {
        let (ended, stopped, grace) = (ended.clone(), stopped.clone(), spec.grace_seconds);
        std::thread::spawn(move || serve_control(listener, group, grace, &ended, &stopped));
    }

    // The pipe ends at the exec (close-on-exec) or when the shim exits, whichever comes first.
    let mut said = Vec::new();
    let _ = report.read_to_end(&mut said);
    let report = ShimReport::read(&said);
    if report == ShimReport::Started {
        announce.say(&format!("started {pid}"));
    }

    let status = child.wait()?;
    *ended.ended.lock().expect("the ended flag is never poisoned") = true;
    ended.changed.notify_all();
    // The group leader is gone; what it left in its group goes with it.
    let _ = kill_process_group(group, Signal::KILL);
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for pump in pumps {
            let _ = pump.join();
        }
        let _ = done_tx.send(());
    });
    // A descendant that left the group may still hold the pipes; its output is not waited for.
    let _ = done_rx.recv_timeout(Duration::from_secs(2));

    let oom_after = spec.oom_counter.as_ref().map_or(0, OomCounter::read);
    let signal = status.signal();
    // The kernel's own count decides, as runc and kubelet do: the process it chose may be any
    // in the cgroup (a shell's child, a worker of a pool), not only the one this spawned.
    let oom_killed = oom_after > oom_before;
    let code = status.code().unwrap_or_else(|| 128 + signal.unwrap_or(0));
    let was_stopped = *stopped.lock().expect("the stop flag is never poisoned");
    let not_started = match report {
        ShimReport::Started => None,
        ShimReport::NotStarted(why) => Some(why),
    };
    state.exit = Some(Exit {
        code,
        signal,
        oom_killed,
        stopped: was_stopped,
        finished_at: Timestamp::now(),
        not_started: not_started.clone(),
    });
    write_atomically(&dir.join(STATE_FILE), &state)?;
    let _ = std::fs::remove_file(dir.join(CONTROL_SOCKET));
    // Said once the run's end is recorded and its socket gone, so that a next run started at
    // once meets nothing of this one.
    if let Some(why) = not_started {
        announce.say(&format!("failed {why}"));
    }
    Ok(())
}

/// Copies one pipe into the log, an entry a line, long lines in pieces.
fn pump(pipe: Box<dyn Read + Send>, stream: Stream, log: &Mutex<LogWriter>) {
    let mut reader = BufReader::with_capacity(MAX_ENTRY, pipe);
    let mut line = Vec::with_capacity(256);
    loop {
        line.clear();
        let read = (&mut reader).take(MAX_ENTRY as u64).read_until(b'\n', &mut line);
        match read {
            Ok(0) | Err(_) => return,
            Ok(_) => {
                let complete = line.last() == Some(&b'\n');
                if complete {
                    line.pop();
                }
                let mut log = log.lock().expect("the log writer is never poisoned");
                // A full disk loses lines rather than stalling the workload on a full pipe.
                let _ = log.write_entry(stream, !complete, &line, Timestamp::now());
            }
        }
    }
}

/// The supervisor's one line to its starter, said once.
struct Announce {
    stdout: Mutex<Option<io::Stdout>>,
}

impl Announce {
    fn say(&self, line: &str) {
        if let Some(mut stdout) = self.stdout.lock().expect("the announcement is never poisoned").take() {
            let _ = writeln!(stdout, "{line}");
            let _ = stdout.flush();
        }
    }
}

/// Answers the control socket's stop requests: SIGTERM to the group now, SIGKILL when the
/// grace runs out.
fn serve_control(listener: UnixListener, group: Pid, grace: u64, ended: &Arc<Ended>, stopped: &Mutex<bool>) {
    for connection in listener.incoming() {
        let Ok(mut connection) = connection else { continue };
        let _ = connection.set_read_timeout(Some(Duration::from_secs(5)));
        let mut line = String::new();
        let _ = BufReader::new(&mut connection).read_line(&mut line);
        let mut words = line.split_whitespace();
        if words.next() != Some("stop") {
            let _ = connection.write_all(b"unknown request\n");
            continue;
        }
        let grace = words.next().and_then(|word| word.parse().ok()).unwrap_or(grace);
        let first = !std::mem::replace(&mut *stopped.lock().expect("the stop flag is never poisoned"), true);
        if first {
            let _ = kill_process_group(group, Signal::TERM);
            let ended = ended.clone();
            std::thread::spawn(move || {
                let guard = ended.ended.lock().expect("the ended flag is never poisoned");
                let (guard, _) = ended
                    .changed
                    .wait_timeout_while(guard, Duration::from_secs(grace), |ended| !*ended)
                    .expect("the ended flag is never poisoned");
                if !*guard {
                    let _ = kill_process_group(group, Signal::KILL);
                }
            });
        } else if grace == 0 {
            let _ = kill_process_group(group, Signal::KILL);
        }
        let _ = connection.write_all(b"ok\n");
    }
}

/// The exec shim: joins the cgroup, sets rlimits, drops to the run-as user, enters the
/// working directory and execs the workload, all in the process that becomes the workload, so
/// it is limited from its first instruction. When it cannot, it says why on its report pipe
/// (and on stderr, which is the run's log) and exits 126 or 127, as shells do.
fn exec_shim(dir: &Path) -> i32 {
    // The report pipe is stdin; the copy kept is close-on-exec, and stdin itself becomes
    // `/dev/null` for the workload, so a successful exec closes the pipe.
    let mut report = io::stdin().as_fd().try_clone_to_owned().ok().map(std::fs::File::from);
    let (code, why) = exec_workload(dir, &mut report);
    eprintln!("kayra: {why}");
    if let Some(report) = report.as_mut() {
        let _ = writeln!(report, "failed {why}");
    }
    code
}

/// Execs the workload; returns only when that failed: the exit code and why.
fn exec_workload(dir: &Path, report: &mut Option<std::fs::File>) -> (i32, String) {
    let spec = match read_spec(dir) {
        Ok(spec) => spec,
        Err(error) => return (126, format!("reading the run spec: {error}")),
    };
    let me = std::process::id().to_string();
    for procs in &spec.cgroup_procs {
        if let Err(error) = std::fs::write(procs, &me) {
            return (126, format!("joining the cgroup {}: {error}", procs.display()));
        }
    }
    for limit in &spec.rlimits {
        if let Err(error) = crate::rlimit::apply(*limit) {
            eprintln!("kayra: setting {limit:?}: {error}");
        }
    }
    let Some((arg0, args)) = spec.argv.split_first() else {
        return (127, "empty command".to_owned());
    };
    if let Some(source) = &spec.identity_mount
        && let Err(error) = crate::identity::mount_privately(source)
    {
        return (126, format!("mounting the identity directory {}: {}", source.display(), describe(&error)));
    }
    // Opened before the drop to the workload's user: the pipe is in the run directory, which
    // only the agent's user enters.
    let stdin = match spec.stdin {
        true => match std::fs::File::open(dir.join(STDIN_FIFO)) {
            Ok(fifo) => Stdio::from(fifo),
            Err(error) => return (126, format!("opening the stdin pipe: {}", describe(&error))),
        },
        false => Stdio::null(),
    };
    if let Some((uid, gid)) = spec.user
        && let Err(error) = become_user(uid, gid)
    {
        return (126, format!("becoming user {uid} (group {gid}): {}", describe(&error)));
    }
    // Entered as the workload's user, so a directory it may not reach is refused here, in
    // words of its own, rather than as a failed exec.
    if let Err(error) = std::env::set_current_dir(&spec.working_dir) {
        return (126, format!("chdir {}: {}", spec.working_dir.display(), describe(&error)));
    }
    let mut command = Command::new(&spec.program);
    command.arg0(arg0).args(args).env_clear().envs(spec.env.iter().map(|(k, v)| (k, v))).stdin(stdin);
    if let Some(report) = report.as_mut() {
        let _ = report.write_all(b"exec\n");
    }
    let error = command.exec();
    let code = if error.kind() == io::ErrorKind::NotFound { 127 } else { 126 };
    (code, format!("exec {}: {error}", spec.program.display()))
}

/// Makes the run's stdin pipe afresh and opens it for reading and writing (so opening it never
/// waits for a reader, and the workload never reads its end).
fn open_stdin_fifo(dir: &Path) -> io::Result<std::fs::File> {
    let path = dir.join(STDIN_FIFO);
    let _ = std::fs::remove_file(&path);
    rustix::fs::mknodat(
        rustix::fs::CWD,
        &path,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )?;
    std::fs::OpenOptions::new().read(true).write(true).open(&path)
}

/// Drops to `uid` and `gid` with no supplementary groups, as the one thread of the shim (the
/// kernel's credentials are per thread; the exec that follows gives the workload this thread's,
/// and with every id nonzero no capability is left).
pub(crate) fn become_user(uid: u32, gid: u32) -> io::Result<()> {
    let (uid, gid) = (rustix::process::Uid::from_raw(uid), rustix::process::Gid::from_raw(gid));
    rustix::thread::set_thread_groups(&[])?;
    rustix::thread::set_thread_res_gid(gid, gid, gid)?;
    rustix::thread::set_thread_res_uid(uid, uid, uid)?;
    Ok(())
}

/// An error in the C library's words, in lower case and without its number:
/// `permission denied`, `no such file or directory`.
pub(crate) fn describe(error: &io::Error) -> String {
    let text = error.to_string();
    let words = text.split(" (os error ").next().unwrap_or_default();
    let mut chars = words.chars();
    chars.next().map(|first| first.to_lowercase().chain(chars).collect()).unwrap_or_default()
}

#[cfg(test)]
mod tests;
