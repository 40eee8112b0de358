//! The data the storage port speaks: keys with their revisions, reads, transactions, events.

use std::fmt;
use std::time::Duration;

use crate::StoreError;

/// A point in the store's history. One cluster-wide counter that every write advances by one;
/// zero means "before anything was written".
pub type Revision = u64;

/// Values larger than this are refused unless a store is configured otherwise (etcd's default
/// request limit).
pub const DEFAULT_MAX_VALUE_SIZE: usize = 1536 * 1024;

/// The identity of a lease. Keys attached to a lease are deleted when it expires or is revoked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LeaseId(pub i64);

impl fmt::Display for LeaseId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:x}", self.0)
    }
}

/// A key as stored at some revision, with the metadata every key carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyValue {
    /// The key.
    pub key: String,
    /// The value; empty for the key of a delete event.
    pub value: Vec<u8>,
    /// The revision at which the key was (last) created.
    pub create_revision: Revision,
    /// The revision of the write that produced this value.
    pub mod_revision: Revision,
    /// How many times the key was written since it was created, starting at 1.
    pub version: u64,
    /// The lease the key is attached to, if any.
    pub lease: Option<LeaseId>,
}

/// A range read: every key starting with `prefix`, in key order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RangeRequest {
    /// Only keys starting with this are returned; empty means every key.
    pub prefix: String,
    /// Start at this key (inclusive) instead of the first key of the prefix; how a paginated
    /// read continues. A key outside the prefix is an error.
    pub start: Option<String>,
    /// Return at most this many keys; `None` (or zero) returns all of them.
    pub limit: Option<usize>,
    /// Read the store as it was at this revision; `None` reads the current revision.
    pub revision: Option<Revision>,
}

impl RangeRequest {
    /// Every key under `prefix`, at the current revision.
    pub fn prefix(prefix: impl Into<String>) -> RangeRequest {
        RangeRequest { prefix: prefix.into(), ..RangeRequest::default() }
    }
}

/// The answer to a [`RangeRequest`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RangeResult {
    /// The keys found, in key order, at most `limit` of them.
    pub kvs: Vec<KeyValue>,
    /// How many keys the range holds from its start key on, including those beyond `limit`.
    pub count: usize,
    /// Whether keys beyond `limit` remain.
    pub more: bool,
    /// The revision the read was taken at.
    pub revision: Revision,
}

/// A condition a transaction checks before it writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Compare {
    /// The key does not exist.
    Absent(String),
    /// The key exists and its last write was at this revision.
    ModifiedAt(String, Revision),
}

impl Compare {
    /// The key the condition is about.
    pub fn key(&self) -> &str {
        match self {
            Compare::Absent(key) | Compare::ModifiedAt(key, _) => key,
        }
    }

    /// Whether the condition holds for the key's current value.
    pub fn holds(&self, current: Option<&KeyValue>) -> bool {
        match (self, current) {
            (Compare::Absent(_), current) => current.is_none(),
            (Compare::ModifiedAt(_, revision), Some(kv)) => kv.mod_revision == *revision,
            (Compare::ModifiedAt(..), None) => false,
        }
    }
}

/// A write inside a transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// Set the key's value, attaching it to `lease` (or detaching it when `None`).
    Put {
        /// The key to write.
        key: String,
        /// The new value.
        value: Vec<u8>,
        /// The lease the key is attached to from now on.
        lease: Option<LeaseId>,
    },
    /// Remove the key; removing a key that does not exist changes nothing.
    Delete {
        /// The key to remove.
        key: String,
    },
}

impl Op {
    /// A put with no lease.
    pub fn put(key: impl Into<String>, value: impl Into<Vec<u8>>) -> Op {
        Op::Put { key: key.into(), value: value.into(), lease: None }
    }

    /// A delete.
    pub fn delete(key: impl Into<String>) -> Op {
        Op::Delete { key: key.into() }
    }

    /// The key the operation writes.
    pub fn key(&self) -> &str {
        match self {
            Op::Put { key, .. } | Op::Delete { key } => key,
        }
    }
}

/// An atomic transaction: if every compare holds, every op is applied at one new revision;
/// otherwise nothing is written.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Txn {
    /// The conditions, all of which must hold.
    pub compares: Vec<Compare>,
    /// The writes, each to a different key.
    pub ops: Vec<Op>,
}

/// The answer to a [`Txn`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TxnResult {
    /// Every compare held and the ops were applied.
    Applied {
        /// The store's revision after the transaction: the new revision if anything changed,
        /// the unchanged current revision if every op was a delete of an absent key.
        revision: Revision,
        /// For each op, in order, the key's value just before it.
        prev: Vec<Option<KeyValue>>,
    },
    /// A compare failed; nothing was written.
    Conflict {
        /// The store's revision the compares were evaluated at.
        revision: Revision,
        /// For each compare, in order, the key's current value.
        current: Vec<Option<KeyValue>>,
    },
}

impl Txn {
    /// Checks the transaction's shape against the store's limits: non-empty keys, each key
    /// written at most once, every value within `max_value_size`. Every adapter calls this
    /// before doing anything, so every adapter refuses the same requests.
    pub fn validate(&self, max_value_size: usize) -> Result<(), StoreError> {
        for compare in &self.compares {
            validate_key(compare.key())?;
            if let Compare::ModifiedAt(key, 0) = compare {
                return Err(StoreError::InvalidArgument(format!(
                    "no key is modified at revision 0; compare {key:?} as absent instead"
                )));
            }
        }
        let mut written = std::collections::HashSet::with_capacity(self.ops.len());
        for op in &self.ops {
            validate_key(op.key())?;
            if !written.insert(op.key()) {
                return Err(StoreError::InvalidArgument(format!(
                    "key {:?} is written more than once in one transaction",
                    op.key()
                )));
            }
            if let Op::Put { key, value, .. } = op
                && value.len() > max_value_size
            {
                return Err(StoreError::ValueTooLarge {
                    key: key.clone(),
                    size: value.len(),
                    limit: max_value_size,
                });
            }
        }
        Ok(())
    }
}

impl RangeRequest {
    /// Checks that the start key, if any, lies inside the prefix.
    pub fn validate(&self) -> Result<(), StoreError> {
        match &self.start {
            Some(start) if !start.starts_with(&self.prefix) => Err(StoreError::InvalidArgument(format!(
                "start key {start:?} is outside the prefix {:?}",
                self.prefix
            ))),
            _ => Ok(()),
        }
    }
}

/// Refuses the empty key, which no adapter can store.
pub fn validate_key(key: &str) -> Result<(), StoreError> {
    if key.is_empty() {
        return Err(StoreError::InvalidArgument("the key is empty".to_owned()));
    }
    Ok(())
}

/// What happened to a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventKind {
    /// The key was created or updated.
    Put,
    /// The key was deleted (explicitly, or with its lease).
    Delete,
}

/// One change seen by a watch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// Put or delete.
    pub kind: EventKind,
    /// The key after the change. For a delete: the key, an empty value, the deletion's revision
    /// as `mod_revision`, and zero create revision and version.
    pub kv: KeyValue,
    /// The key just before the change, when it existed.
    pub prev: Option<KeyValue>,
}

impl Event {
    /// The revision of the write that produced the event.
    pub fn revision(&self) -> Revision {
        self.kv.mod_revision
    }
}

/// A granted lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lease {
    /// Its identity, to attach keys and keep it alive.
    pub id: LeaseId,
    /// How long it lives without a keep-alive.
    pub ttl: Duration,
}
