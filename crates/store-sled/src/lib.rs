//! The embedded default store: Kayra's MVCC engine ([`kayra_store::mvcc`]) over a sled
//! database, so that one controller keeps its state on local disk with no other process.
//!
//! Every record, the revision counter, the compaction point and the leases live in one sled
//! tree, written one atomic batch per revision. A write is acknowledged only after sled has
//! flushed it; concurrent writers share flushes through the engine's group commit.
//!
//! A batch of one entry is one sled insert, atomic by itself. A batch of several is written as
//! plain inserts between an undo record and its removal ([`UNDO_KEY`]): sled recovers a prefix
//! of its log after a crash, so a batch whose undo record survives was cut short and is rolled
//! back from that record when the store next opens, and one whose undo record is gone is
//! whole. Sled's own batches would do the same, but each takes an exclusive lock that waits for
//! every operation in flight and writes out the log buffer it interrupts, which cost concurrent
//! multi-key writes a third of their rate.
//!
//! This crate knows nothing of what the keys mean. Start at [`open`].

use std::path::Path;
use std::sync::Arc;

use kayra_store::StoreError;
use kayra_store::mvcc::backend::{Backend, BatchEntry, Reader, Visitor};
use kayra_store::mvcc::{MvccStore, Options};

/// Opens (creating if needed) the store kept in the directory `path`. Must be called inside a
/// Tokio runtime. A path that cannot hold a database, a database another holder keeps locked
/// for longer than [`LOCK_WAIT`], or damaged files give a typed error naming the path.
pub fn open(path: &Path, options: Options) -> Result<MvccStore, StoreError> {
    if path.exists() && !path.is_dir() {
        return Err(StoreError::engine(
            format!("open the store at {}", path.display()),
            "the path exists and is not a directory",
        ));
    }
    let config = sled::Config::new().path(path).flush_every_ms(None).mode(sled::Mode::HighThroughput);
    let waited_until = std::time::Instant::now() + LOCK_WAIT;
    let db = loop {
        match config.open() {
            Err(error) if held_by_another(&error) && std::time::Instant::now() < waited_until => {
                std::thread::sleep(LOCK_RETRY);
            }
            opened => {
                break opened.map_err(|error| {
                    engine_error(&format!("open the store at {}", path.display()), error)
                })?;
            }
        }
    };
    let backend = SledBackend { db };
    backend.roll_back_interrupted()?;
    MvccStore::open(Arc::new(backend), options)
}

/// The key of the undo record of a multi-entry batch being written: outside every key the
/// engine uses (`r`, `l`, `m/`).
const UNDO_KEY: &[u8] = b"s/undo";

/// The engine's backend: one sled tree.
struct SledBackend {
    db: sled::Db,
}

impl Backend for SledBackend {
    fn get(&self, key: &[u8], read: &mut Reader<'_>) -> Result<bool, StoreError> {
        match self.db.get(key).map_err(|error| engine_error("read a record", error))? {
            Some(value) => read(&value).map(|()| true),
            None => Ok(false),
        }
    }

    fn scan(&self, from: &[u8], to: &[u8], visit: &mut Visitor<'_>) -> Result<(), StoreError> {
        for entry in self.db.range(from..to) {
            let (key, value) = entry.map_err(|error| engine_error("scan records", error))?;
            visit(&key, &value)?;
        }
        Ok(())
    }

    fn apply(&self, mut batch: Vec<BatchEntry>) -> Result<(), StoreError> {
        // A single write is atomic by itself; sled's batches take an exclusive lock that waits
        // for any flush in progress, so they are kept for writes that need them.
        if batch.len() == 1 {
            let (key, value) = batch.pop().expect("one entry");
            let written = match value {
                Some(value) => self.db.insert(key, value),
                None => self.db.remove(key),
            };
            return written.map(drop).map_err(|error| engine_error("write a record", error));
        }
        self.apply_undoably(batch, usize::MAX)
    }

    fn flush(&self) -> Result<(), StoreError> {
        self.db.flush().map(drop).map_err(|error| engine_error("flush to disk", error))
    }

    fn is_persistent(&self) -> bool {
        true
    }
}

impl SledBackend {
    /// Writes `batch` entry by entry after an undo record of what its keys held, then removes
    /// the record; stops, as a crash would, after `entries` of them (only tests stop early).
    /// The engine writes one batch at a time, so one undo record is enough.
    fn apply_undoably(&self, batch: Vec<BatchEntry>, entries: usize) -> Result<(), StoreError> {
        let mut undo = Vec::with_capacity(batch.len());
        for (key, _) in &batch {
            let before = self.db.get(key).map_err(|error| engine_error("read a record", error))?;
            undo.push((key.clone(), before.map(|value| value.to_vec())));
        }
        self.db.insert(UNDO_KEY, encode_undo(&undo)).map_err(|error| engine_error("write a batch", error))?;
        for (key, value) in batch.into_iter().take(entries) {
            let written = match value {
                Some(value) => self.db.insert(key, value),
                None => self.db.remove(key),
            };
            written.map_err(|error| engine_error("write a batch", error))?;
        }
        if entries != usize::MAX {
            return Ok(());
        }
        self.db.remove(UNDO_KEY).map(drop).map_err(|error| engine_error("write a batch", error))
    }

    /// Rolls back the batch a crash cut short, if one was: puts back what its undo record says
    /// its keys held, then removes the record, durably.
    fn roll_back_interrupted(&self) -> Result<(), StoreError> {
        let Some(undo) = self.db.get(UNDO_KEY).map_err(|error| engine_error("read a record", error))? else {
            return Ok(());
        };
        for (key, before) in decode_undo(&undo)? {
            let restored = match before {
                Some(value) => self.db.insert(key, value),
                None => self.db.remove(key),
            };
            restored.map_err(|error| engine_error("roll back a batch", error))?;
        }
        self.db.remove(UNDO_KEY).map_err(|error| engine_error("roll back a batch", error))?;
        self.flush()
    }
}

/// An undo record: for each key, what it held before the batch (or that it held nothing).
fn encode_undo(undo: &[BatchEntry]) -> Vec<u8> {
    let size: usize =
        undo.iter().map(|(key, value)| 9 + key.len() + value.as_ref().map_or(0, Vec::len)).sum();
    let mut out = Vec::with_capacity(4 + size);
    out.extend_from_slice(&(undo.len() as u32).to_be_bytes());
    for (key, value) in undo {
        out.extend_from_slice(&(key.len() as u32).to_be_bytes());
        out.extend_from_slice(key);
        match value {
            Some(value) => {
                out.push(1);
                out.extend_from_slice(&(value.len() as u32).to_be_bytes());
                out.extend_from_slice(value);
            }
            None => out.push(0),
        }
    }
    out
}

fn decode_undo(bytes: &[u8]) -> Result<Vec<BatchEntry>, StoreError> {
    let mut cursor = Cursor(bytes);
    let count = cursor.length()?;
    let mut undo = Vec::with_capacity(count.min(1024));
    for _ in 0..count {
        let key = cursor.field()?;
        let value = match cursor.take(1)? {
            [0] => None,
            [1] => Some(cursor.field()?),
            _ => return Err(damaged_undo()),
        };
        undo.push((key, value));
    }
    if !cursor.0.is_empty() {
        return Err(damaged_undo());
    }
    Ok(undo)
}

/// What is left of an undo record to read.
struct Cursor<'a>(&'a [u8]);

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], StoreError> {
        let (head, tail) = self.0.split_at_checked(n).ok_or_else(damaged_undo)?;
        self.0 = tail;
        Ok(head)
    }

    fn length(&mut self) -> Result<usize, StoreError> {
        let bytes = self.take(4)?.try_into().expect("four bytes");
        Ok(u32::from_be_bytes(bytes) as usize)
    }

    /// A length, then that many bytes.
    fn field(&mut self) -> Result<Vec<u8>, StoreError> {
        let length = self.length()?;
        Ok(self.take(length)?.to_vec())
    }
}

fn damaged_undo() -> StoreError {
    StoreError::Corrupt("the undo record of an interrupted batch is damaged".to_owned())
}

/// How long [`open`] waits (blocking its thread) for a database another holder keeps locked.
/// A store dropped in this process lets go of its database a moment after its last write is
/// acknowledged (the thread that led the flush, and sled's I/O threads, finish with the file
/// first), so an embedding service that closes its store and opens it again, a restart in
/// process, would otherwise be refused now and then; another process's store is refused after
/// the wait, as bbolt's open with a lock timeout refuses it.
pub const LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// How often [`open`] tries the lock again while it waits.
const LOCK_RETRY: std::time::Duration = std::time::Duration::from_millis(10);

/// Whether sled refused to open because another holder has the database's file lock.
fn held_by_another(error: &sled::Error) -> bool {
    matches!(error, sled::Error::Io(io) if io.to_string().starts_with("could not acquire lock on"))
}

/// The one place sled's errors become the port's.
fn engine_error(action: &str, error: sled::Error) -> StoreError {
    match error {
        sled::Error::Corruption { at, .. } => StoreError::Corrupt(match at {
            Some(at) => format!("sled found damaged data at {at:?} while trying to {action}"),
            None => format!("sled found damaged data while trying to {action}"),
        }),
        other => StoreError::engine(action, other),
    }
}

/// Bare sled with the settings the store uses, for benchmarks: the ceiling the store's
/// overhead is measured against.
#[cfg(feature = "bench")]
pub mod raw {
    use std::path::Path;

    /// A sled database used directly.
    #[derive(Debug, Clone)]
    pub struct RawSled {
        db: sled::Db,
    }

    impl RawSled {
        /// Opens a database in `path` as [`open`](crate::open) would.
        pub fn open(path: &Path) -> Result<RawSled, String> {
            let db = sled::Config::new()
                .path(path)
                .flush_every_ms(None)
                .mode(sled::Mode::HighThroughput)
                .open()
                .map_err(|error| error.to_string())?;
            Ok(RawSled { db })
        }

        /// Inserts and waits until the insert is on disk.
        pub fn insert_durably(&self, key: &[u8], value: &[u8]) -> Result<(), String> {
            self.db.insert(key, value).map_err(|error| error.to_string())?;
            self.db.flush().map(drop).map_err(|error| error.to_string())
        }

        /// Waits until every insert made so far is on disk.
        pub fn flush(&self) -> Result<(), String> {
            self.db.flush().map(drop).map_err(|error| error.to_string())
        }

        /// Inserts without waiting for the disk.
        pub fn insert(&self, key: &[u8], value: &[u8]) -> Result<(), String> {
            self.db.insert(key, value).map(drop).map_err(|error| error.to_string())
        }

        /// Reads a key; answers the value's length.
        pub fn get(&self, key: &[u8]) -> Result<Option<usize>, String> {
            self.db.get(key).map(|value| value.map(|value| value.len())).map_err(|error| error.to_string())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn backend(path: &Path) -> SledBackend {
        let db = sled::Config::new().path(path).flush_every_ms(None).open().expect("sled opens");
        SledBackend { db }
    }

    fn value(backend: &SledBackend, key: &[u8]) -> Option<Vec<u8>> {
        backend.db.get(key).expect("readable").map(|value| value.to_vec())
    }

    #[test]
    fn a_batch_cut_short_is_rolled_back_when_the_store_opens_again() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        {
            let backend = backend(dir.path());
            backend.apply(vec![(b"kept".to_vec(), Some(b"old".to_vec()))]).expect("written");
            backend.apply(vec![(b"gone".to_vec(), Some(b"was here".to_vec()))]).expect("written");
            let batch = vec![
                (b"kept".to_vec(), Some(b"new".to_vec())),
                (b"gone".to_vec(), None),
                (b"fresh".to_vec(), Some(b"1".to_vec())),
            ];
            // A crash after two of the three entries, with what was written on disk.
            backend.apply_undoably(batch, 2).expect("written in part");
            backend.flush().expect("flushed");
            assert_eq!(value(&backend, b"kept").as_deref(), Some(&b"new"[..]));
        }
        let backend = backend(dir.path());
        backend.roll_back_interrupted().expect("rolled back");
        assert_eq!(value(&backend, b"kept").as_deref(), Some(&b"old"[..]));
        assert_eq!(value(&backend, b"gone").as_deref(), Some(&b"was here"[..]));
        assert_eq!(value(&backend, b"fresh"), None);
        assert_eq!(value(&backend, UNDO_KEY), None, "the undo record is gone with the batch");
    }

    #[test]
    fn a_whole_batch_leaves_no_undo_record_and_nothing_to_roll_back() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let backend = backend(dir.path());
        let batch = vec![(b"a".to_vec(), Some(b"1".to_vec())), (b"b".to_vec(), Some(b"2".to_vec()))];
        backend.apply(batch).expect("written");
        assert_eq!(value(&backend, UNDO_KEY), None);
        backend.roll_back_interrupted().expect("nothing to do");
        assert_eq!(
            (value(&backend, b"a"), value(&backend, b"b")),
            (Some(b"1".to_vec()), Some(b"2".to_vec()))
        );
    }

    #[test]
    fn an_undo_record_reads_back_as_written_and_a_damaged_one_is_refused() {
        let undo = vec![(b"k".to_vec(), Some(b"v".to_vec())), (b"empty".to_vec(), None)];
        let encoded = encode_undo(&undo);
        assert_eq!(decode_undo(&encoded).expect("decodes"), undo);
        for cut in [0, 3, encoded.len() - 1] {
            assert!(matches!(decode_undo(&encoded[..cut]), Err(StoreError::Corrupt(_))), "cut at {cut}");
        }
        let mut longer = encoded.clone();
        longer.push(0);
        assert!(matches!(decode_undo(&longer), Err(StoreError::Corrupt(_))), "trailing bytes");
    }
}
