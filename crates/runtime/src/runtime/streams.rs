//! Streams to a running Application: a command run beside its process (through the enter
//! shim, `crate::enter`), its own stdin and output from now on (attach), and a TCP connection
//! to a port it declares (port-forward). Each gives its output as a stream of chunks that is
//! read only as fast as it is pulled, so a consumer that stops pulling leaves the process
//! blocked on its pipe rather than its output piling up here.

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;
use std::pin::Pin;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, ready};

use bytes::Bytes;
use futures_util::StreamExt;
use futures_util::stream::BoxStream;
use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, ReadBuf};
use tokio::sync::mpsc;

use super::{Runtime, RuntimeError, Shared};
use crate::logs::{Stream, parse_entry, run_log_path};
use crate::supervisor::{STDIN_FIFO, read_spec, read_state};

/// The most bytes one chunk of output carries.
const CHUNK: usize = 32 * 1024;

/// Which output of a process a chunk came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Output {
    /// Standard output, or a terminal's output.
    Stdout,
    /// Standard error.
    Stderr,
}

/// A process's output, chunk by chunk, read as it is pulled; it ends when the output does.
pub type OutputStream = BoxStream<'static, io::Result<(Output, Bytes)>>;

/// A command to run beside an Application's process.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExecCommand {
    /// The Application's `metadata.uid`.
    pub uid: String,
    /// The program (looked up in the process's `PATH`) and its arguments.
    pub command: Vec<String>,
    /// Give it a stdin to write to.
    pub stdin: bool,
    /// Read its stdout.
    pub stdout: bool,
    /// Read its stderr (not with a terminal).
    pub stderr: bool,
    /// Run it on a pseudo-terminal.
    pub tty: bool,
}

/// A command running beside an Application's process.
pub struct Execution {
    /// Where its stdin is written (the terminal, with one), when it has one.
    pub stdin: Option<Pin<Box<dyn AsyncWrite + Send>>>,
    /// Its output.
    pub output: OutputStream,
    /// Its terminal, to resize.
    pub terminal: Option<Terminal>,
    child: tokio::process::Child,
    group: rustix::process::Pid,
    ended: Arc<AtomicBool>,
    tty: bool,
}

impl std::fmt::Debug for Execution {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Execution")
            .field("group", &self.group)
            .field("tty", &self.tty)
            .finish_non_exhaustive()
    }
}

impl Execution {
    /// Waits for the command to end: its exit code, or 128 + the signal that ended it.
    pub async fn wait(&mut self) -> io::Result<i32> {
        use std::os::unix::process::ExitStatusExt;
        let status = self.child.wait().await?;
        self.ended.store(true, Ordering::SeqCst);
        Ok(status.code().unwrap_or_else(|| 128 + status.signal().unwrap_or(0)))
    }

    /// What ends the command when its client goes away: a hang-up for a terminal (as closing
    /// one does), closing its stdin otherwise; then, unless it has ended within `grace`,
    /// SIGKILL to its process group.
    pub fn hang_up(&mut self, grace: std::time::Duration) {
        self.stdin = None;
        if self.tty {
            let _ = rustix::process::kill_process_group(self.group, rustix::process::Signal::HUP);
        }
        let (group, ended) = (self.group, self.ended.clone());
        tokio::spawn(async move {
            tokio::time::sleep(grace).await;
            if !ended.load(Ordering::SeqCst) {
                let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
            }
        });
    }
}

/// A pseudo-terminal's master side: the command's input and output, and its size.
#[derive(Clone)]
pub struct Terminal {
    master: Arc<AsyncFd<OwnedFd>>,
}

impl std::fmt::Debug for Terminal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Terminal").finish_non_exhaustive()
    }
}

impl Terminal {
    /// Gives the terminal a new size in characters (the command is told by SIGWINCH).
    pub fn resize(&self, width: u16, height: u16) {
        let size = rustix::termios::Winsize { ws_col: width, ws_row: height, ws_xpixel: 0, ws_ypixel: 0 };
        let _ = rustix::termios::tcsetwinsize(self.master.get_ref(), size);
    }
}

impl AsyncRead for Terminal {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        loop {
            let mut guard = ready!(self.master.poll_read_ready(cx))?;
            let unfilled = buf.initialize_unfilled();
            match guard.try_io(|fd| rustix::io::read(fd.get_ref(), &mut *unfilled).map_err(io::Error::from)) {
                Ok(Ok(read)) => {
                    buf.advance(read);
                    return Poll::Ready(Ok(()));
                }
                // The last holder of the terminal's other side closed it: the end of its output.
                Ok(Err(error)) if error.raw_os_error() == Some(rustix::io::Errno::IO.raw_os_error()) => {
                    return Poll::Ready(Ok(()));
                }
                Ok(Err(error)) => return Poll::Ready(Err(error)),
                Err(_would_block) => continue,
            }
        }
    }
}

impl AsyncWrite for Terminal {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        loop {
            let mut guard = ready!(self.master.poll_write_ready(cx))?;
            match guard.try_io(|fd| rustix::io::write(fd.get_ref(), data).map_err(io::Error::from)) {
                Ok(result) => return Poll::Ready(result),
                Err(_would_block) => continue,
            }
        }
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

/// An attach to an Application's process: its stdin (when it keeps one and the client writes
/// to it) and its output from now on, until its run ends.
pub struct Attachment {
    /// Where the client's input goes: the process's own stdin.
    pub stdin: Option<Pin<Box<dyn AsyncWrite + Send>>>,
    /// The process's output from the moment of the attach.
    pub output: OutputStream,
}

impl std::fmt::Debug for Attachment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Attachment").field("stdin", &self.stdin.is_some()).finish_non_exhaustive()
    }
}

impl Runtime {
    /// Runs `command` beside the running process of its Application, as the process runs:
    /// its user and group, cgroup, rlimits, mount namespace, environment and working directory.
    pub async fn exec(&self, command: ExecCommand) -> Result<Execution, RuntimeError> {
        let run_dir = self.running(&command.uid)?;
        let (program, prefix) = self.shared.config.supervisor.split_first().ok_or_else(|| {
            RuntimeError::io("starting the enter shim")(io::Error::other("no supervisor program"))
        })?;
        let mut process = tokio::process::Command::new(program);
        process
            .args(prefix)
            .arg("enter")
            .arg(&run_dir)
            .arg(if command.tty { "tty" } else { "pipes" })
            .args(&command.command)
            .current_dir("/")
            .env_clear()
            .kill_on_drop(false);
        let spawn_error = RuntimeError::io(format!("starting {:?}", command.command));
        if command.tty {
            let (master, slave) = open_terminal().map_err(RuntimeError::io("opening a pseudo-terminal"))?;
            let dup = |file: &std::fs::File| file.try_clone().map(Stdio::from);
            process
                .stdin(dup(&slave).map_err(RuntimeError::io("sharing the terminal"))?)
                .stdout(dup(&slave).map_err(RuntimeError::io("sharing the terminal"))?)
                .stderr(Stdio::from(slave));
            let child = process.spawn().map_err(spawn_error)?;
            drop(process);
            let group = group_of(&child)?;
            let terminal = Terminal { master: Arc::new(master) };
            return Ok(Execution {
                stdin: command.stdin.then(|| Box::pin(terminal.clone()) as Pin<Box<dyn AsyncWrite + Send>>),
                output: chunks(terminal.clone(), Output::Stdout),
                terminal: Some(terminal),
                child,
                group,
                ended: Arc::default(),
                tty: true,
            });
        }
        let piped = |wanted: bool| if wanted { Stdio::piped() } else { Stdio::null() };
        process
            .stdin(piped(command.stdin))
            .stdout(piped(command.stdout))
            .stderr(piped(command.stderr))
            .process_group(0);
        let mut child = process.spawn().map_err(spawn_error)?;
        let group = group_of(&child)?;
        let stdin = child.stdin.take().map(|stdin| Box::pin(stdin) as Pin<Box<dyn AsyncWrite + Send>>);
        let stdout = child.stdout.take().map(|out| chunks(out, Output::Stdout));
        let stderr = child.stderr.take().map(|err| chunks(err, Output::Stderr));
        let output = match (stdout, stderr) {
            (Some(out), Some(err)) => futures_util::stream::select(out, err).boxed(),
            (Some(one), None) | (None, Some(one)) => one,
            (None, None) => futures_util::stream::empty().boxed(),
        };
        Ok(Execution { stdin, output, terminal: None, child, group, ended: Arc::default(), tty: false })
    }

    /// Attaches to the running process of Application `uid`: its output from now on, and its
    /// stdin when `stdin` is asked and the process keeps one (`spec.stdin`).
    pub async fn attach(&self, uid: &str, stdin: bool) -> Result<Attachment, RuntimeError> {
        let run_dir = self.running(uid)?;
        let spec = read_spec(&run_dir).map_err(RuntimeError::io("reading the run spec"))?;
        let stdin = match (stdin, spec.stdin) {
            (false, _) => None,
            (true, false) => {
                return Err(RuntimeError::NoStdin { uid: uid.to_owned() });
            }
            (true, true) => {
                let fifo = tokio::net::unix::pipe::OpenOptions::new()
                    .open_sender(run_dir.join(STDIN_FIFO))
                    .map_err(RuntimeError::io("opening the process's stdin"))?;
                Some(Box::pin(fifo) as Pin<Box<dyn AsyncWrite + Send>>)
            }
        };
        let logs_dir = self.shared.app_dir(uid).join("logs");
        let (sender, receiver) = mpsc::channel(1);
        let (shared, uid, run) = (self.shared.clone(), uid.to_owned(), spec.run);
        let live = run_log_path(&logs_dir, run);
        // From the end of what is written now: an attach shows what comes, not what was.
        let start = std::fs::metadata(&live).map_or(0, |meta| meta.len());
        tokio::task::spawn_blocking(move || follow_output(&shared, &uid, &live, run, start, &sender));
        let output = futures_util::stream::unfold(receiver, |mut receiver| async move {
            Some((receiver.recv().await?, receiver))
        })
        .boxed();
        Ok(Attachment { stdin, output })
    }

    /// A TCP connection to `port` on this node's loopback address, for Application `uid`,
    /// which must declare it.
    pub async fn forward(&self, uid: &str, port: u16) -> Result<tokio::net::TcpStream, RuntimeError> {
        let declared = {
            let apps = self.shared.apps.lock().expect("the app table is never poisoned");
            apps.get(uid)
                .map(|entry| entry.ports.clone())
                .ok_or_else(|| RuntimeError::NotFound { namespace: String::new(), name: uid.to_owned() })?
        };
        if !declared.contains(&port) {
            return Err(RuntimeError::PortNotDeclared { port, declared });
        }
        tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .map_err(RuntimeError::io(format!("connecting to 127.0.0.1:{port}")))
    }

    /// The run directory of Application `uid`'s running process, or why there is none.
    fn running(&self, uid: &str) -> Result<std::path::PathBuf, RuntimeError> {
        let not_running =
            |application: String, why: &str| RuntimeError::NotRunning { application, why: why.to_owned() };
        let application = {
            let apps = self.shared.apps.lock().expect("the app table is never poisoned");
            let entry = apps.get(uid).ok_or_else(|| not_running(uid.to_owned(), "it is not on this node"))?;
            let application = format!("{}/{}", entry.namespace, entry.name);
            let phase = entry.status.phase.as_deref().unwrap_or("Pending");
            if !matches!(phase, "Running" | "Terminating") {
                return Err(not_running(application, &format!("it is {phase}")));
            }
            application
        };
        let run_dir = self.shared.app_dir(uid).join("run");
        match read_state(&run_dir) {
            Some(state) if state.exit.is_none() && state.workload.is_alive() => Ok(run_dir),
            _ => Err(not_running(application, "its process has ended")),
        }
    }
}

/// The process group (its leader's pid) a child was started in.
fn group_of(child: &tokio::process::Child) -> Result<rustix::process::Pid, RuntimeError> {
    child
        .id()
        .and_then(|pid| rustix::process::Pid::from_raw(pid as i32))
        .ok_or_else(|| RuntimeError::io("starting the command")(io::Error::other("it ended at once")))
}

/// A new pseudo-terminal: its master, ready for async use, and its other side.
fn open_terminal() -> io::Result<(AsyncFd<OwnedFd>, std::fs::File)> {
    use rustix::pty::OpenptFlags;
    let master = rustix::pty::openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY | OpenptFlags::CLOEXEC)?;
    rustix::pty::grantpt(&master)?;
    rustix::pty::unlockpt(&master)?;
    let name = rustix::pty::ptsname(&master, Vec::new())?;
    let path = Path::new(<std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(name.as_bytes()));
    let slave = std::fs::OpenOptions::new().read(true).write(true).open(path)?;
    rustix::io::ioctl_fionbio(master.as_fd(), true)?;
    // Deprecated for descriptors an `AsyncFd` does not own; this `OwnedFd` stays open and the
    // same for the `AsyncFd`'s whole life, which is what `register` asks of its caller.
    #[allow(deprecated)]
    let master = AsyncFd::new(master)?;
    Ok((master, slave))
}

/// `reader`'s bytes as chunks of `output`, one read per pull.
fn chunks(reader: impl AsyncRead + Unpin + Send + 'static, output: Output) -> OutputStream {
    futures_util::stream::unfold(Some(reader), move |reader| async move {
        let mut reader = reader?;
        let mut buffer = vec![0; CHUNK];
        match reader.read(&mut buffer).await {
            Ok(0) => None,
            Ok(read) => {
                buffer.truncate(read);
                Some((Ok((output, Bytes::from(buffer))), Some(reader)))
            }
            Err(error) => Some((Err(error), None)),
        }
    })
    .boxed()
}

/// Follows run `run`'s log from byte `start` of its live file, sending each entry's bytes as
/// its process wrote them, until the run ends or the reader goes away. On a blocking thread.
fn follow_output(
    shared: &Shared,
    uid: &str,
    live: &Path,
    run: u64,
    start: u64,
    sender: &mpsc::Sender<io::Result<(Output, Bytes)>>,
) {
    use std::io::{Read, Seek, SeekFrom};
    use std::os::unix::fs::MetadataExt;
    const POLL: std::time::Duration = std::time::Duration::from_millis(50);
    let mut handle = std::fs::File::open(live).ok();
    if let Some(handle) = handle.as_mut() {
        let _ = handle.seek(SeekFrom::Start(start));
    }
    let mut pending = Vec::new();
    loop {
        if sender.is_closed() {
            return;
        }
        let mut fresh = Vec::new();
        if let Some(handle) = handle.as_mut() {
            let _ = handle.read_to_end(&mut fresh);
        }
        if !fresh.is_empty() {
            pending.extend_from_slice(&fresh);
            let complete = pending.iter().rposition(|b| *b == b'\n').map_or(0, |at| at + 1);
            for entry in pending[..complete].split(|b| *b == b'\n').filter_map(parse_entry) {
                let mut bytes = entry.content.to_vec();
                if !entry.partial {
                    bytes.push(b'\n');
                }
                let output = match entry.stream {
                    Stream::Stdout => Output::Stdout,
                    Stream::Stderr => Output::Stderr,
                };
                if sender.blocking_send(Ok((output, Bytes::from(bytes)))).is_err() {
                    return;
                }
            }
            pending.drain(..complete);
            continue;
        }
        let rotated = match (handle.as_ref().and_then(|h| h.metadata().ok()), std::fs::metadata(live)) {
            (Some(open), Ok(now)) => open.ino() != now.ino(),
            (None, Ok(_)) => true,
            _ => false,
        };
        if rotated {
            handle = std::fs::File::open(live).ok();
            continue;
        }
        let ended = {
            let apps = shared.apps.lock().expect("the app table is never poisoned");
            apps.get(uid).is_none_or(|entry| {
                entry.run != run || !matches!(entry.status.phase.as_deref(), Some("Running" | "Terminating"))
            })
        };
        if ended {
            return;
        }
        std::thread::sleep(POLL);
    }
}
