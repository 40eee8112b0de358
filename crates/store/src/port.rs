//! The `Store` trait: what the rest of Kayra may ask of storage, in control-plane words.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use crate::{
    Compare, EngineStatistics, KeyValue, Lease, LeaseId, Op, RangeRequest, RangeResult, Revision, StoreError,
    Txn, TxnResult, Watcher,
};

/// A revisioned key-value store in the spirit of etcd v3, held as `Arc<dyn Store>`.
///
/// Every write advances one store-wide revision; every key carries its create and modification
/// revisions and a version. A write is acknowledged only once it is durable.
#[async_trait]
pub trait Store: Send + Sync + 'static {
    /// The key's current value, if it exists.
    async fn get(&self, key: &str) -> Result<Option<KeyValue>, StoreError>;

    /// Keys under a prefix in key order, at the current or an older revision.
    async fn range(&self, request: &RangeRequest) -> Result<RangeResult, StoreError>;

    /// Applies the ops at one new revision if every compare holds, atomically.
    async fn txn(&self, txn: Txn) -> Result<TxnResult, StoreError>;

    /// Applies several transactions, each as [`Store::txn`] would and at a revision of its
    /// own, and answers each one's result in the order given. An engine may commit them
    /// together (one flush); their order relative to each other is not promised, so
    /// none should depend on another. This one sends them all at once.
    async fn txn_all(&self, txns: Vec<Txn>) -> Vec<Result<TxnResult, StoreError>> {
        futures_util::future::join_all(txns.into_iter().map(|txn| self.txn(txn))).await
    }

    /// Every event under `prefix` after revision `after`, in revision order, then every new one
    /// as it happens. `after` older than the retained history is [`StoreError::Compacted`];
    /// a watcher that cannot keep up is cut off with [`StoreError::WatchLagged`].
    async fn watch(&self, prefix: &str, after: Revision) -> Result<Watcher, StoreError>;

    /// Forgets history older than `revision`: reads at earlier revisions, and watches after
    /// earlier revisions, answer [`StoreError::Compacted`] from then on.
    async fn compact(&self, revision: Revision) -> Result<(), StoreError>;

    /// The current revision.
    async fn revision(&self) -> Result<Revision, StoreError>;

    /// Grants a lease that lives `ttl` unless kept alive. The TTL is whole seconds, at least one.
    async fn grant_lease(&self, ttl: Duration) -> Result<Lease, StoreError>;

    /// Restarts the lease's countdown; answers its TTL.
    async fn keep_alive(&self, lease: LeaseId) -> Result<Duration, StoreError>;

    /// Ends the lease now, deleting every key attached to it at one revision.
    async fn revoke_lease(&self, lease: LeaseId) -> Result<(), StoreError>;

    /// What the engine behind the store counts of its own work (its group commits, the
    /// compactions it runs by itself), shared and kept current; `None` for an engine that
    /// counts nothing here (etcd reports on itself, in its own metrics).
    fn engine_statistics(&self) -> Option<Arc<EngineStatistics>> {
        None
    }

    /// Creates the key if it does not exist.
    async fn create(&self, key: &str, value: Vec<u8>) -> Result<Outcome, StoreError> {
        let txn = Txn { compares: vec![Compare::Absent(key.to_owned())], ops: vec![Op::put(key, value)] };
        Ok(Outcome::from(self.txn(txn).await?))
    }

    /// Replaces the key's value if its last write was at `revision`.
    async fn update_if(&self, key: &str, value: Vec<u8>, revision: Revision) -> Result<Outcome, StoreError> {
        let txn = Txn {
            compares: vec![Compare::ModifiedAt(key.to_owned(), revision)],
            ops: vec![Op::put(key, value)],
        };
        Ok(Outcome::from(self.txn(txn).await?))
    }

    /// Deletes the key if its last write was at `revision`.
    async fn delete_if(&self, key: &str, revision: Revision) -> Result<Outcome, StoreError> {
        let txn =
            Txn { compares: vec![Compare::ModifiedAt(key.to_owned(), revision)], ops: vec![Op::delete(key)] };
        Ok(Outcome::from(self.txn(txn).await?))
    }

    /// Sets the key's value whatever it was; answers the write's revision.
    async fn put(&self, key: &str, value: Vec<u8>) -> Result<Revision, StoreError> {
        let txn = Txn { compares: Vec::new(), ops: vec![Op::put(key, value)] };
        Ok(self.txn(txn).await?.revision())
    }

    /// Deletes the key whatever it was; answers its value before the delete.
    async fn delete(&self, key: &str) -> Result<Option<KeyValue>, StoreError> {
        let txn = Txn { compares: Vec::new(), ops: vec![Op::delete(key)] };
        match self.txn(txn).await? {
            TxnResult::Applied { mut prev, .. } => Ok(prev.pop().flatten()),
            TxnResult::Conflict { .. } => {
                Err(StoreError::InvalidArgument("an unconditional delete reported a conflict".to_owned()))
            }
        }
    }
}

/// The answer to a single-key conditional write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The write was applied at this revision.
    Applied(Revision),
    /// The condition did not hold; this is the key's current value.
    Conflict(Option<KeyValue>),
}

impl From<TxnResult> for Outcome {
    fn from(result: TxnResult) -> Outcome {
        match result {
            TxnResult::Applied { revision, .. } => Outcome::Applied(revision),
            TxnResult::Conflict { mut current, .. } => Outcome::Conflict(current.pop().flatten()),
        }
    }
}

impl TxnResult {
    /// The store's revision after the transaction was evaluated.
    pub fn revision(&self) -> Revision {
        match self {
            TxnResult::Applied { revision, .. } | TxnResult::Conflict { revision, .. } => *revision,
        }
    }

    /// Whether the compares held and the ops were applied.
    pub fn is_applied(&self) -> bool {
        matches!(self, TxnResult::Applied { .. })
    }
}
