//! The agent's own log: rotation by size, and reading it back as a log request asks.

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

/// Everything `reading` yields from the log in `dir` until it ends.
async fn read_all(dir: &Path, reading: Reading) -> String {
    let mut chunks = read(&dir.join(FILE_NAME), reading);
    let mut text = Vec::new();
    while let Some(chunk) = chunks.recv().await {
        text.extend(chunk);
    }
    String::from_utf8(text).expect("the log is text")
}

#[tokio::test]
async fn a_read_takes_the_rotated_file_first_and_filters_by_time_and_tail() {
    let dir = tempfile::tempdir().expect("a directory");
    std::fs::write(
        dir.path().join("agent.log.1"),
        "2026-01-01T00:00:00Z  INFO old\n2026-01-01T00:05:00Z  WARN two lines\n  the second\n",
    )
    .expect("written");
    std::fs::write(
        dir.path().join(FILE_NAME),
        "2026-01-01T00:10:00Z  INFO new\n2026-01-01T00:11:00Z  INFO unfin",
    )
    .expect("written");
    let all = read_all(dir.path(), Reading::default()).await;
    assert_eq!(
        all,
        "2026-01-01T00:00:00Z  INFO old\n2026-01-01T00:05:00Z  WARN two lines\n  the second\n\
         2026-01-01T00:10:00Z  INFO new\n",
        "a line still being written is not sent"
    );
    let tail = read_all(dir.path(), Reading { tail_lines: Some(2), ..Reading::default() }).await;
    assert_eq!(tail, "  the second\n2026-01-01T00:10:00Z  INFO new\n");
    let since = "2026-01-01T00:05:00Z".parse().ok();
    let recent = read_all(dir.path(), Reading { since, ..Reading::default() }).await;
    assert_eq!(
        recent, "2026-01-01T00:05:00Z  WARN two lines\n  the second\n2026-01-01T00:10:00Z  INFO new\n",
        "a line without its own time has the time of the line before"
    );
    let cut = read_all(dir.path(), Reading { limit_bytes: Some(12), ..Reading::default() }).await;
    assert_eq!(cut, "2026-01-01T0");
    assert_eq!(read_all(dir.path(), Reading { tail_lines: Some(0), ..Reading::default() }).await, "");
}

#[tokio::test]
async fn a_followed_read_sends_new_lines_across_rotation_until_the_reader_goes() {
    let dir = tempfile::tempdir().expect("a directory");
    let log = OwnLog::open(dir.path(), 150).expect("the log opens");
    log.append(b"2026-01-01T00:00:00Z  INFO zero\n").expect("written");
    log.append(b"2026-01-01T00:00:00Z  INFO first\n").expect("written");
    let mut chunks = read(&log.path(), Reading { follow: true, tail_lines: Some(1), ..Reading::default() });
    let wait = std::time::Duration::from_secs(20);
    let mut next = async || {
        let chunk =
            tokio::time::timeout(wait, chunks.recv()).await.expect("lines arrive").expect("still open");
        String::from_utf8(chunk).expect("text")
    };
    let mut seen = next().await;
    assert_eq!(seen, "2026-01-01T00:00:00Z  INFO first\n", "the tail of what was kept comes first");
    let lines: Vec<String> = (0..6).map(|n| format!("2026-01-01T00:00:0{n}Z  INFO line {n}\n")).collect();
    for line in &lines {
        log.append(line.as_bytes()).expect("written");
    }
    let wanted = format!("{seen}{}", lines.concat());
    while seen.len() < wanted.len() {
        seen.push_str(&next().await);
    }
    assert_eq!(seen, wanted, "every line once, in order, though the log rotated while it was read");
    assert!(rotated_path(&log.path()).exists(), "the log rotated during the read");
}
