//! The agent's own log, kept in its data directory as `agent.log` beside what it prints, so
//! that it can be read from the node (and, behind the controller's `NodeLogs` gate, through
//! the API). Rotated by size: when a write would take the file past its limit, `agent.log`
//! becomes `agent.log.1` (replacing the one before) and a new `agent.log` starts, so the two
//! files hold at most twice the limit. Writes are whole log lines, each appended in one call.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use tokio::sync::mpsc;

mod reading;

pub use reading::Reading;

/// The name of the agent's own log in its data directory.
pub const FILE_NAME: &str = "agent.log";

/// How large `agent.log` grows before it is rotated (10 MiB, kubelet's `containerLogMaxSize`).
pub const DEFAULT_LIMIT: u64 = 10 * 1024 * 1024;

/// The agent's own log file, shared by every writer of the process.
#[derive(Debug, Clone)]
pub struct OwnLog {
    inner: Arc<Mutex<Open>>,
}

#[derive(Debug)]
struct Open {
    path: PathBuf,
    file: File,
    written: u64,
    limit: u64,
}

impl OwnLog {
    /// Opens (creating it, mode 0600) `agent.log` in `data_dir`, rotated at `limit` bytes.
    pub fn open(data_dir: &Path, limit: u64) -> std::io::Result<OwnLog> {
        std::fs::create_dir_all(data_dir)?;
        let path = data_dir.join(FILE_NAME);
        let file = append(&path)?;
        let written = file.metadata()?.len();
        Ok(OwnLog { inner: Arc::new(Mutex::new(Open { path, file, written, limit: limit.max(1) })) })
    }

    /// The file's path.
    pub fn path(&self) -> PathBuf {
        self.lock().path.clone()
    }

    /// A writer that appends to the log and also to standard error.
    pub fn with_stderr(&self) -> Tee {
        Tee { log: self.clone() }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Open> {
        self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Appends `bytes` whole, rotating first when they would take the file past its limit.
    pub fn append(&self, bytes: &[u8]) -> std::io::Result<()> {
        let mut open = self.lock();
        let length = u64::try_from(bytes.len()).unwrap_or(u64::MAX);
        if open.written > 0 && open.written.saturating_add(length) > open.limit {
            let rotated = rotated_path(&open.path);
            std::fs::rename(&open.path, &rotated)?;
            open.file = append(&open.path)?;
            open.written = 0;
        }
        open.file.write_all(bytes)?;
        open.written = open.written.saturating_add(length);
        Ok(())
    }
}

/// Reads the log at `path` (the agent's own, or one laid out as it is) as `reading` asks, on a
/// blocking thread: the chunks arrive on the receiver, which ends the reading when dropped.
pub fn read(path: &Path, reading: Reading) -> mpsc::Receiver<Vec<u8>> {
    let (sender, chunks) = mpsc::channel(4);
    let path = path.to_owned();
    tokio::task::spawn_blocking(move || reading::stream(&path, &reading, &sender));
    chunks
}

/// Where a rotated log goes: `agent.log.1`.
pub fn rotated_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().map(|name| name.to_os_string()).unwrap_or_default();
    name.push(".1");
    path.with_file_name(name)
}

fn append(path: &Path) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    OpenOptions::new().create(true).append(true).mode(0o600).open(path)
}

/// Writes each log line to standard error and to the agent's own log. A failure to write the
/// file never stops the agent: standard error still has the line.
#[derive(Debug)]
pub struct Tee {
    log: OwnLog,
}

impl Write for Tee {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        let _ = self.log.append(bytes);
        std::io::stderr().write_all(bytes)?;
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}

#[cfg(test)]
mod tests;
