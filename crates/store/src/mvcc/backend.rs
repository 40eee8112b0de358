//! The ordered byte map the engine keeps its records in, and its in-memory implementation.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::RwLock;

use crate::StoreError;

/// One entry of an atomic write: a key and its new value, or `None` to remove it.
pub type BatchEntry = (Vec<u8>, Option<Vec<u8>>);

/// What a point read calls with the value it finds.
pub type Reader<'a> = dyn FnMut(&[u8]) -> Result<(), StoreError> + 'a;

/// What a scan calls for each entry it finds.
pub type Visitor<'a> = dyn FnMut(&[u8], &[u8]) -> Result<(), StoreError> + 'a;

/// An ordered map of byte strings that applies batches atomically. The engine serialises all
/// writes; a backend only has to be safe to read while a batch is applied.
pub trait Backend: Send + Sync + 'static {
    /// Calls `read` with the value stored under `key`, if any; answers whether there was one.
    /// Reading in place spares a copy on the hottest path.
    fn get(&self, key: &[u8], read: &mut Reader<'_>) -> Result<bool, StoreError>;

    /// Calls `visit` with every entry with `from <= key < to`, in key order, stopping at the
    /// first error it returns.
    fn scan(&self, from: &[u8], to: &[u8], visit: &mut Visitor<'_>) -> Result<(), StoreError>;

    /// Applies every entry or none of them. The batch need not be durable yet.
    fn apply(&self, batch: Vec<BatchEntry>) -> Result<(), StoreError>;

    /// Makes every batch applied so far durable. Blocking; the engine calls it off the async
    /// runtime and lets concurrent writers share one call.
    fn flush(&self) -> Result<(), StoreError>;

    /// Whether [`Backend::flush`] does anything; a volatile backend's writes are final at once.
    fn is_persistent(&self) -> bool;
}

/// A backend that lives in memory and is gone with the process.
#[derive(Debug, Default)]
pub struct MemoryBackend {
    map: RwLock<BTreeMap<Vec<u8>, Vec<u8>>>,
}

impl Backend for MemoryBackend {
    fn get(&self, key: &[u8], read: &mut Reader<'_>) -> Result<bool, StoreError> {
        match self.map.read().expect("memory backend lock poisoned").get(key) {
            Some(value) => read(value).map(|()| true),
            None => Ok(false),
        }
    }

    fn scan(&self, from: &[u8], to: &[u8], visit: &mut Visitor<'_>) -> Result<(), StoreError> {
        if from >= to {
            return Ok(());
        }
        let map = self.map.read().expect("memory backend lock poisoned");
        map.range::<[u8], _>((Bound::Included(from), Bound::Excluded(to)))
            .try_for_each(|(key, value)| visit(key, value))
    }

    fn apply(&self, batch: Vec<BatchEntry>) -> Result<(), StoreError> {
        let mut map = self.map.write().expect("memory backend lock poisoned");
        for (key, value) in batch {
            match value {
                Some(value) => map.insert(key, value),
                None => map.remove(&key),
            };
        }
        Ok(())
    }

    fn flush(&self) -> Result<(), StoreError> {
        Ok(())
    }

    fn is_persistent(&self) -> bool {
        false
    }
}
