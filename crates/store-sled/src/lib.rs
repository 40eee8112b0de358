//! The embedded default store: Kayra's MVCC engine ([`kayra_store::mvcc`]) over a sled
//! database, so that one controller keeps its state on local disk with no other process.
//!
//! Every record, the revision counter, the compaction point and the leases live in one sled
//! tree, written one atomic batch per revision. A write is acknowledged only after sled has
//! flushed it; concurrent writers share flushes through the engine's group commit. After a
//! crash sled recovers a prefix of the batches, so a write is either whole or absent.
//!
//! This crate knows nothing of what the keys mean. Start at [`open`].

use std::path::Path;
use std::sync::Arc;

use kayra_store::StoreError;
use kayra_store::mvcc::backend::{Backend, BatchEntry, Reader, Visitor};
use kayra_store::mvcc::{MvccStore, Options};

/// Opens (creating if needed) the store kept in the directory `path`. Must be called inside a
/// Tokio runtime. A path that cannot hold a database, a database another process holds, or
/// damaged files give a typed error naming the path.
pub fn open(path: &Path, options: Options) -> Result<MvccStore, StoreError> {
    if path.exists() && !path.is_dir() {
        return Err(StoreError::engine(
            format!("open the store at {}", path.display()),
            "the path exists and is not a directory",
        ));
    }
    let db = sled::Config::new()
        .path(path)
        .flush_every_ms(None)
        .mode(sled::Mode::HighThroughput)
        .open()
        .map_err(|error| engine_error(&format!("open the store at {}", path.display()), error))?;
    MvccStore::open(Arc::new(SledBackend { db }), options)
}

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
        let mut sled_batch = sled::Batch::default();
        for (key, value) in batch {
            match value {
                Some(value) => sled_batch.insert(key, value),
                None => sled_batch.remove(key),
            }
        }
        self.db.apply_batch(sled_batch).map_err(|error| engine_error("write a batch", error))
    }

    fn flush(&self) -> Result<(), StoreError> {
        self.db.flush().map(drop).map_err(|error| engine_error("flush to disk", error))
    }

    fn is_persistent(&self) -> bool {
        true
    }
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
