//! Reading an Application's log for a request: the chosen run's entries, filtered by `since`
//! and `tail`, then (with `follow`) new entries as they are written — across rotation and into
//! the next run's log — until the Application ends or the reader goes away. Runs on a blocking
//! thread; the bounded channel makes a slow reader slow the reading.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::Duration;

use bytes::Bytes;
use jiff::{SignedDuration, Timestamp};
use tokio::sync::mpsc;

use super::{LogRequest, RuntimeError, Shared};
use crate::logs::{Entry, parse_entry, render, run_log_files, run_log_path, select};

/// The most bytes one chunk carries.
const CHUNK: usize = 32 * 1024;
/// How often a followed log is looked at for new lines.
const POLL: Duration = Duration::from_millis(100);

type Sender = mpsc::Sender<Result<Bytes, RuntimeError>>;

/// Streams `request` for the Application `uid`, starting with run `run`.
pub(super) fn stream(
    shared: &Shared,
    uid: &str,
    dir: &Path,
    mut run: u64,
    request: &LogRequest,
    sender: &Sender,
) {
    let since = match (request.since_time, request.since_seconds) {
        (Some(time), _) => Some(time),
        (None, Some(seconds)) => Timestamp::now().checked_sub(SignedDuration::from_secs(seconds as i64)).ok(),
        (None, None) => None,
    };
    let mut out = Output {
        sender,
        left: request.limit_bytes.unwrap_or(u64::MAX),
        buffer: Vec::new(),
        line_start: true,
        timestamps: request.timestamps,
    };
    let live = run_log_path(dir, run);
    let files = run_log_files(&live, shared.config.log_files);
    let mut text = Vec::new();
    for file in &files[..files.len() - 1] {
        if let Ok(mut file) = File::open(file) {
            let _ = file.read_to_end(&mut text);
        }
    }
    let mut handle = File::open(&live).ok();
    if let Some(handle) = handle.as_mut() {
        let _ = handle.read_to_end(&mut text);
    }
    let complete = text.iter().rposition(|b| *b == b'\n').map_or(0, |at| at + 1);
    let entries: Vec<Entry<'_>> = text[..complete].split(|b| *b == b'\n').filter_map(parse_entry).collect();
    for entry in select(entries, since, request.tail_lines) {
        if !out.entry(&entry) {
            return;
        }
    }
    let mut pending = text[complete..].to_vec();
    if !out.flush() || !request.follow || request.previous {
        return;
    }
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
                if since.is_some_and(|since| entry.at < since) {
                    continue;
                }
                if !out.entry(&entry) {
                    return;
                }
            }
            pending.drain(..complete);
            if !out.flush() {
                return;
            }
            continue;
        }
        let live = run_log_path(dir, run);
        let rotated = match (handle.as_ref().and_then(|h| h.metadata().ok()), std::fs::metadata(&live)) {
            (Some(open), Ok(now)) => open.ino() != now.ino(),
            (None, Ok(_)) => true,
            _ => false,
        };
        if rotated {
            handle = File::open(&live).ok();
            if let Some(handle) = handle.as_mut() {
                let _ = handle.seek(SeekFrom::Start(0));
            }
            continue;
        }
        let (current, ended) = app_progress(shared, uid);
        if current > run && run_log_path(dir, run + 1).exists() {
            run += 1;
            handle = File::open(run_log_path(dir, run)).ok();
            pending.clear();
            continue;
        }
        if ended && current == run {
            return;
        }
        std::thread::sleep(POLL);
    }
}

/// The Application's latest run and whether it has ended for good (or is gone).
fn app_progress(shared: &Shared, uid: &str) -> (u64, bool) {
    let apps = shared.apps.lock().expect("the app table is never poisoned");
    match apps.get(uid) {
        Some(entry) => (entry.run, matches!(entry.status.phase.as_deref(), Some("Succeeded" | "Failed"))),
        None => (0, true),
    }
}

/// Rendered entries on their way to the reader, in chunks, within the byte limit.
struct Output<'a> {
    sender: &'a Sender,
    left: u64,
    buffer: Vec<u8>,
    line_start: bool,
    timestamps: bool,
}

impl Output<'_> {
    /// Adds an entry; `false` when the reader is gone or the limit is reached.
    fn entry(&mut self, entry: &Entry<'_>) -> bool {
        render(entry, self.timestamps, self.line_start, &mut self.buffer);
        self.line_start = !entry.partial;
        if self.buffer.len() as u64 >= self.left {
            self.buffer.truncate(self.left as usize);
            self.left = 0;
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
        let chunk = Bytes::from(std::mem::take(&mut self.buffer));
        self.left = self.left.saturating_sub(chunk.len() as u64);
        self.sender.blocking_send(Ok(chunk)).is_ok()
    }
}
