//! Reading the agent's own log for a request: the kept lines (the rotated file, then the
//! current one), filtered by `since` and `tail`, then (with `follow`) new lines as they are
//! written, across rotation (the log rotates at megabytes, far less often than it is looked
//! at), until the reader goes away. Each line starts with its time, as
//! the agent writes it; a line without one (the rest of a multi-line message) takes the time
//! of the line before. Runs on a blocking thread; the bounded channel makes a slow reader slow
//! the reading.

use std::fs::File;
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use jiff::Timestamp;
use tokio::sync::mpsc;

use super::rotated_path;

/// The most bytes one chunk carries.
const CHUNK: usize = 32 * 1024;
/// How often a followed log is looked at for new lines.
const POLL: Duration = Duration::from_millis(100);

/// What is asked of the agent's log.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reading {
    /// Only the last lines.
    pub tail_lines: Option<usize>,
    /// Only lines written at or after this time.
    pub since: Option<Timestamp>,
    /// Keep sending new lines until the reader goes away.
    pub follow: bool,
    /// Stop after this many bytes.
    pub limit_bytes: Option<u64>,
}

/// Streams the log at `path` as `reading` asks, into `sender`, in chunks.
pub(super) fn stream(path: &Path, reading: &Reading, sender: &mpsc::Sender<Vec<u8>>) {
    let mut out = Output { sender, left: reading.limit_bytes.unwrap_or(u64::MAX), buffer: Vec::new() };
    let mut text = std::fs::read(rotated_path(path)).unwrap_or_default();
    let mut current = File::open(path).ok();
    if let Some(file) = current.as_mut() {
        let _ = file.read_to_end(&mut text);
    }
    let complete = text.iter().rposition(|b| *b == b'\n').map_or(0, |at| at + 1);
    let mut last_time = None;
    let lines: Vec<(Option<Timestamp>, &[u8])> = text[..complete]
        .split_inclusive(|b| *b == b'\n')
        .map(|line| {
            last_time = line_time(line).or(last_time);
            (last_time, line)
        })
        .collect();
    let kept: Vec<&[u8]> = lines
        .into_iter()
        .filter(|(at, _)| reading.since.is_none_or(|since| at.is_some_and(|at| at >= since)))
        .map(|(_, line)| line)
        .collect();
    let from = reading.tail_lines.map_or(0, |tail| kept.len().saturating_sub(tail));
    for line in &kept[from..] {
        if !out.line(line) {
            return;
        }
    }
    let mut pending = text[complete..].to_vec();
    drop(text);
    if !out.flush() || !reading.follow {
        return;
    }
    let mut file = Followed { path: path.to_owned(), open: current };
    loop {
        if sender.is_closed() {
            return;
        }
        let fresh = file.read_new();
        if fresh.is_empty() {
            std::thread::sleep(POLL);
            continue;
        }
        pending.extend_from_slice(&fresh);
        let complete = pending.iter().rposition(|b| *b == b'\n').map_or(0, |at| at + 1);
        for line in pending[..complete].split_inclusive(|b| *b == b'\n') {
            last_time = line_time(line).or(last_time);
            if reading.since.is_some_and(|since| last_time.is_none_or(|at| at < since)) {
                continue;
            }
            if !out.line(line) {
                return;
            }
        }
        pending.drain(..complete);
        if !out.flush() {
            return;
        }
    }
}

/// The time a log line starts with (`2026-12-02T03:45:25.123456Z  INFO ...`), if it does.
fn line_time(line: &[u8]) -> Option<Timestamp> {
    let end = line.iter().position(|b| b.is_ascii_whitespace()).unwrap_or(line.len());
    std::str::from_utf8(&line[..end]).ok()?.parse().ok()
}

/// The current log file, read as it grows and reopened when it is rotated away.
struct Followed {
    path: PathBuf,
    open: Option<File>,
}

impl Followed {
    /// What was written since the last read: the rest of a rotated file first, then the new one.
    /// Rotation is looked for before the open file is read: once the path names another file,
    /// the writer has finished with the open one, so reading it to its end loses nothing.
    fn read_new(&mut self) -> Vec<u8> {
        let open = self.open.as_ref().and_then(|file| file.metadata().ok());
        let replaced = match (open, std::fs::metadata(&self.path)) {
            (Some(open), Ok(now)) => open.ino() != now.ino(),
            (None, Ok(_)) => true,
            _ => false,
        };
        let mut fresh = Vec::new();
        if let Some(file) = self.open.as_mut() {
            let _ = file.read_to_end(&mut fresh);
        }
        if replaced {
            self.open = File::open(&self.path).ok();
            if let Some(file) = self.open.as_mut() {
                let _ = file.read_to_end(&mut fresh);
            }
        }
        fresh
    }
}

/// Lines on their way to the reader, in chunks, within the byte limit.
struct Output<'a> {
    sender: &'a mpsc::Sender<Vec<u8>>,
    left: u64,
    buffer: Vec<u8>,
}

impl Output<'_> {
    /// Adds a line; `false` when the reader is gone or the limit is reached.
    fn line(&mut self, line: &[u8]) -> bool {
        self.buffer.extend_from_slice(line);
        if self.buffer.len() as u64 >= self.left {
            self.buffer.truncate(usize::try_from(self.left).unwrap_or(usize::MAX));
            self.flush();
            return false;
        }
        if self.buffer.len() >= CHUNK { self.flush() } else { true }
    }

    /// Sends what is buffered, waiting while the reader is behind; `false` when it is gone.
    fn flush(&mut self) -> bool {
        if self.buffer.is_empty() {
            return !self.sender.is_closed();
        }
        let chunk = std::mem::take(&mut self.buffer);
        self.left = self.left.saturating_sub(chunk.len() as u64);
        self.sender.blocking_send(chunk).is_ok()
    }
}
