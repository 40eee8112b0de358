//! Per-Application logs: the supervisor appends each line of the workload's stdout and stderr
//! to a bounded, rotated file in the CRI log format (`<RFC 3339 time> <stream> <F|P> <text>`, one
//! entry a line, `P` for a piece of a line longer than [`MAX_ENTRY`]), so `--timestamps` and
//! `--since` need no second index; the runtime reads the entries back for `kubectl logs`.
//!
//! Each run writes `<run>.log`; when it grows past the size limit it becomes `<run>.log.1` (older
//! pieces shift up to `files - 1`, the oldest dropped), so one run keeps at most `files × size`
//! bytes. The runtime keeps the logs of the current and the previous run (`--previous`).

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use jiff::Timestamp;

/// The longest piece of a line one entry holds; a longer line is split into partial entries.
pub(crate) const MAX_ENTRY: usize = 16 * 1024;

/// Which output of the workload an entry came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stream {
    /// Standard output.
    Stdout,
    /// Standard error.
    Stderr,
}

impl Stream {
    fn word(self) -> &'static str {
        match self {
            Stream::Stdout => "stdout",
            Stream::Stderr => "stderr",
        }
    }

    fn of_word(word: &[u8]) -> Option<Stream> {
        match word {
            b"stdout" => Some(Stream::Stdout),
            b"stderr" => Some(Stream::Stderr),
            _ => None,
        }
    }
}

/// The file one run's log is written to: `<dir>/<run>.log`.
pub(crate) fn run_log_path(dir: &Path, run: u64) -> PathBuf {
    dir.join(format!("{run}.log"))
}

/// The files holding one run's log, oldest first: `<path>.<files-1>` … `<path>.1`, `<path>`.
pub(crate) fn run_log_files(path: &Path, files: u32) -> Vec<PathBuf> {
    let mut all: Vec<PathBuf> = (1..files.max(1)).rev().map(|n| rotated(path, n)).collect();
    all.push(path.to_owned());
    all
}

fn rotated(path: &Path, n: u32) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(format!(".{n}"));
    PathBuf::from(name)
}

/// Appends entries to one run's log, rotating it at `max_bytes`.
#[derive(Debug)]
pub(crate) struct LogWriter {
    path: PathBuf,
    file: File,
    written: u64,
    max_bytes: u64,
    files: u32,
}

impl LogWriter {
    /// Opens (appending to) the log at `path`, files of at most `max_bytes`, `files` in all.
    pub(crate) fn open(path: &Path, max_bytes: u64, files: u32) -> io::Result<LogWriter> {
        let file = open_append(path)?;
        let written = file.metadata()?.len();
        Ok(LogWriter {
            path: path.to_owned(),
            file,
            written,
            max_bytes: max_bytes.max(1024),
            files: files.max(1),
        })
    }

    /// Writes one entry: `content` without its line break, `partial` when the line goes on.
    pub(crate) fn write_entry(
        &mut self,
        stream: Stream,
        partial: bool,
        content: &[u8],
        at: Timestamp,
    ) -> io::Result<()> {
        let mut entry = Vec::with_capacity(content.len() + 48);
        entry.extend_from_slice(at.to_string().as_bytes());
        entry.push(b' ');
        entry.extend_from_slice(stream.word().as_bytes());
        entry.extend_from_slice(if partial { b" P " } else { b" F " });
        entry.extend_from_slice(content);
        entry.push(b'\n');
        if self.written > 0 && self.written + entry.len() as u64 > self.max_bytes {
            self.rotate()?;
        }
        self.file.write_all(&entry)?;
        self.written += entry.len() as u64;
        Ok(())
    }

    fn rotate(&mut self) -> io::Result<()> {
        if self.files == 1 {
            self.file.set_len(0)?;
            self.written = 0;
            return Ok(());
        }
        for n in (1..self.files - 1).rev() {
            let from = rotated(&self.path, n);
            if from.exists() {
                std::fs::rename(&from, rotated(&self.path, n + 1))?;
            }
        }
        std::fs::rename(&self.path, rotated(&self.path, 1))?;
        self.file = open_append(&self.path)?;
        self.written = 0;
        Ok(())
    }
}

fn open_append(path: &Path) -> io::Result<File> {
    OpenOptions::new().create(true).append(true).mode(0o600).open(path)
}

/// One entry read back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Entry<'a> {
    /// When the supervisor read it.
    pub(crate) at: Timestamp,
    /// Which output it came from.
    pub(crate) stream: Stream,
    /// Whether the line goes on in the next entry.
    pub(crate) partial: bool,
    /// The text, without the line break.
    pub(crate) content: &'a [u8],
}

/// Parses one line of a log file (without its `\n`); `None` for a line that is not an entry.
pub(crate) fn parse_entry(line: &[u8]) -> Option<Entry<'_>> {
    let mut fields = line.splitn(4, |b| *b == b' ');
    let at = std::str::from_utf8(fields.next()?).ok()?.parse::<Timestamp>().ok()?;
    let stream = Stream::of_word(fields.next()?)?;
    let partial = match fields.next()? {
        b"P" => true,
        b"F" => false,
        _ => return None,
    };
    Some(Entry { at, stream, partial, content: fields.next().unwrap_or_default() })
}

/// Appends `entry` as `kubectl logs` prints it: the text, a line break unless the line goes
/// on, and with `timestamps` the RFC 3339 time and a space before each line's first piece.
pub(crate) fn render(entry: &Entry<'_>, timestamps: bool, line_start: bool, out: &mut Vec<u8>) {
    if timestamps && line_start {
        out.extend_from_slice(format!("{:.9} ", entry.at).as_bytes());
    }
    out.extend_from_slice(entry.content);
    if !entry.partial {
        out.push(b'\n');
    }
}

/// Which complete entries of `lines` a request wants: those at or after `since`, then only the
/// last `tail` lines (a line being its partial pieces and the full entry ending it).
pub(crate) fn select<'a>(
    entries: Vec<Entry<'a>>,
    since: Option<Timestamp>,
    tail: Option<usize>,
) -> Vec<Entry<'a>> {
    let mut entries: Vec<Entry<'a>> =
        entries.into_iter().filter(|entry| since.is_none_or(|since| entry.at >= since)).collect();
    if let Some(tail) = tail {
        let mut lines = 0;
        let mut keep_from = entries.len();
        for (at, entry) in entries.iter().enumerate().rev() {
            if !entry.partial {
                if lines == tail {
                    break;
                }
                lines += 1;
            }
            keep_from = at;
        }
        entries.drain(..keep_from);
    }
    entries
}

#[cfg(test)]
mod tests;
