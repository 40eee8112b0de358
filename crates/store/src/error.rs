//! The one error type of the storage port, shared by every adapter.

use crate::{LeaseId, Revision};

/// Everything a store operation can fail with.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The requested revision is older than the retained history (the API answers 410 Gone).
    #[error("revision {requested} has been compacted; the oldest retained revision is {compacted}")]
    Compacted {
        /// The revision the caller asked for.
        requested: Revision,
        /// The store's compaction point; reads at or after it are served.
        compacted: Revision,
    },
    /// The requested revision lies beyond the store's current revision.
    #[error("revision {requested} is in the future; the current revision is {current}")]
    FutureRevision {
        /// The revision the caller asked for.
        requested: Revision,
        /// The store's current revision.
        current: Revision,
    },
    /// The lease does not exist: it expired, was revoked, or was never granted.
    #[error("lease {0} not found")]
    LeaseNotFound(LeaseId),
    /// A value exceeds the store's size limit.
    #[error("value for key {key:?} is {size} bytes, over the limit of {limit} bytes")]
    ValueTooLarge {
        /// The key being written.
        key: String,
        /// The value's size in bytes.
        size: usize,
        /// The configured limit in bytes.
        limit: usize,
    },
    /// The request itself is malformed (an empty key, a key written twice in one transaction...).
    #[error("invalid request: {0}")]
    InvalidArgument(String),
    /// The watcher fell behind and was cut off; watch again after `resume_after` to continue
    /// with no gap.
    #[error("watcher fell behind and was cut off; resume after revision {resume_after}")]
    WatchLagged {
        /// The last revision whose events the watcher received in full.
        resume_after: Revision,
    },
    /// The store cannot be reached (a network partition, a server restarting).
    #[error("store unavailable: {message}")]
    Unavailable {
        /// What was being attempted and where.
        message: String,
        /// The transport's own error.
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync>>,
    },
    /// The storage engine failed to read or write (disk full, permission denied, I/O error).
    #[error("storage engine failed to {action}")]
    Engine {
        /// What the engine was doing.
        action: String,
        /// The engine's own error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// Stored data could not be decoded: the files were damaged or written by something else.
    #[error("stored data is corrupt: {0}")]
    Corrupt(String),
    /// The store was shut down while the operation was in flight.
    #[error("store is closed")]
    Closed,
}

impl StoreError {
    /// Whether repeating the same operation later may succeed without any change by the caller.
    /// A lagged watcher is retryable: it resumes from the revision it names.
    pub fn is_retryable(&self) -> bool {
        matches!(self, StoreError::Unavailable { .. } | StoreError::WatchLagged { .. })
    }

    /// Builds an [`StoreError::Engine`] from an engine error and what was being done.
    pub fn engine(
        action: impl Into<String>,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> StoreError {
        StoreError::Engine { action: action.into(), source: source.into() }
    }
}
