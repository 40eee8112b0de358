//! The agent's own log, kept in its data directory as `agent.log` beside what it prints, so
//! that it can be read from the node (and, behind the controller's `NodeLogs` gate, through
//! the API). Rotated by size: when a write would take the file past its limit, `agent.log`
//! becomes `agent.log.1` (replacing the one before) and a new `agent.log` starts, so the two
//! files hold at most twice the limit. Writes are whole log lines, each appended in one call.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

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
mod tests {
    use super::*;

    #[test]
    fn the_log_rotates_by_size_and_keeps_the_newest_lines() {
        let dir = tempfile::tempdir().expect("a directory");
        let log = OwnLog::open(dir.path(), 20).expect("the log opens");
        for line in ["one 12345\n", "two 12345\n", "three 123\n"] {
            log.append(line.as_bytes()).expect("a line is written");
        }
        let read = |path: &Path| std::fs::read_to_string(path).unwrap_or_default();
        assert_eq!(read(&log.path()), "three 123\n", "a line past the limit starts a new file");
        assert_eq!(read(&rotated_path(&log.path())), "one 12345\ntwo 12345\n", "the one before is kept");
        log.append(b"four 1234\n").expect("a line is written");
        log.append(b"five 1234\n").expect("a line is written");
        assert_eq!(read(&log.path()), "five 1234\n");
        assert_eq!(read(&rotated_path(&log.path())), "three 123\nfour 1234\n", "only one rotated file");
    }

    #[test]
    fn a_reopened_log_appends_and_counts_what_it_holds() {
        let dir = tempfile::tempdir().expect("a directory");
        OwnLog::open(dir.path(), 20).expect("the log opens").append(b"before 1234\n").expect("written");
        let log = OwnLog::open(dir.path(), 20).expect("the log opens again");
        log.append(b"after 12345\n").expect("written");
        assert_eq!(std::fs::read_to_string(log.path()).unwrap_or_default(), "after 12345\n");
        assert_eq!(std::fs::read_to_string(rotated_path(&log.path())).unwrap_or_default(), "before 1234\n");
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(log.path()).expect("the file").permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "the log is the agent's alone");
    }

    #[test]
    fn one_line_larger_than_the_limit_is_written_whole() {
        let dir = tempfile::tempdir().expect("a directory");
        let log = OwnLog::open(dir.path(), 4).expect("the log opens");
        log.append(b"a long line\n").expect("written");
        assert_eq!(std::fs::read_to_string(log.path()).unwrap_or_default(), "a long line\n");
    }
}
