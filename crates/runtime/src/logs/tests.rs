//! The log file format, rotation and selection for `--tail`, `--since` and `--timestamps`.

use jiff::{Timestamp, ToSpan};

use super::*;

fn at(second: i64) -> Timestamp {
    Timestamp::from_second(1_700_000_000 + second).unwrap()
}

#[test]
fn entries_round_trip_through_the_file_format() {
    let dir = tempfile::tempdir().unwrap();
    let path = run_log_path(dir.path(), 3);
    let mut writer = LogWriter::open(&path, 1 << 20, 2).unwrap();
    writer.write_entry(Stream::Stdout, false, b"hello world", at(0)).unwrap();
    writer.write_entry(Stream::Stderr, true, b"part ", at(1)).unwrap();
    writer.write_entry(Stream::Stderr, false, b"one", at(1)).unwrap();
    let text = std::fs::read(&path).unwrap();
    let entries: Vec<Entry<'_>> = text.split(|b| *b == b'\n').filter_map(parse_entry).collect();
    assert_eq!(entries.len(), 3);
    assert_eq!(
        entries[0],
        Entry { at: at(0), stream: Stream::Stdout, partial: false, content: b"hello world" }
    );
    assert_eq!(entries[1].stream, Stream::Stderr, "each entry keeps the output it came from");
    let mut out = Vec::new();
    let mut line_start = true;
    for entry in &entries {
        render(entry, false, line_start, &mut out);
        line_start = !entry.partial;
    }
    assert_eq!(out, b"hello world\npart one\n");
    let mut stamped = Vec::new();
    render(&entries[0], true, true, &mut stamped);
    assert_eq!(String::from_utf8(stamped).unwrap(), "2023-11-14T22:13:20.000000000Z hello world\n");
}

#[test]
fn a_full_file_rotates_and_the_oldest_piece_is_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let path = run_log_path(dir.path(), 1);
    let mut writer = LogWriter::open(&path, 1024, 2).unwrap();
    let line = [b'x'; 300];
    for n in 0..10 {
        writer.write_entry(Stream::Stdout, false, &line, at(n)).unwrap();
    }
    let files = run_log_files(&path, 2);
    assert_eq!(files, [dir.path().join("1.log.1"), dir.path().join("1.log")]);
    let sizes: Vec<u64> = files.iter().map(|f| std::fs::metadata(f).unwrap().len()).collect();
    assert!(sizes.iter().all(|size| *size <= 1024), "{sizes:?}");
    assert!(!dir.path().join("1.log.2").exists(), "two files in all");
    let last = std::fs::read(&path).unwrap();
    let entries: Vec<Entry<'_>> = last.split(|b| *b == b'\n').filter_map(parse_entry).collect();
    assert_eq!(entries.last().unwrap().at, at(9), "the newest entry is in the live file");
}

#[test]
fn selection_takes_since_then_the_last_lines() {
    let entry = |second, partial, content: &'static [u8]| Entry {
        at: at(second),
        stream: Stream::Stdout,
        partial,
        content,
    };
    let all = vec![
        entry(0, false, b"a"),
        entry(10, false, b"b"),
        entry(20, true, b"c1"),
        entry(20, false, b"c2"),
        entry(30, false, b"d"),
    ];
    let contents = |entries: Vec<Entry<'static>>| entries.iter().map(|e| e.content).collect::<Vec<_>>();
    /// Since, tail, and the contents selected.
    type Case = (Option<Timestamp>, Option<usize>, Vec<&'static [u8]>);
    let cases: [Case; 6] = [
        (None, None, vec![b"a", b"b", b"c1", b"c2", b"d"]),
        (None, Some(2), vec![b"c1", b"c2", b"d"]),
        (None, Some(0), vec![]),
        (None, Some(99), vec![b"a", b"b", b"c1", b"c2", b"d"]),
        (Some(at(0) + 15.seconds()), None, vec![b"c1", b"c2", b"d"]),
        (Some(at(10)), Some(1), vec![b"d"]),
    ];
    for (since, tail, expect) in cases {
        assert_eq!(contents(select(all.clone(), since, tail)), expect, "since {since:?} tail {tail:?}");
    }
}

#[test]
fn lines_that_are_not_entries_are_skipped() {
    for line in [&b""[..], b"garbage", b"2023-11-14T22:13:20Z stdout X text", b"notatime stdout F x"] {
        assert_eq!(parse_entry(line), None, "{:?}", String::from_utf8_lossy(line));
    }
    assert_eq!(parse_entry(b"2023-11-14T22:13:20Z stdout F ").map(|e| e.content), Some(&b""[..]));
}
