//! The storage port of Kayra: a revisioned key-value store in the spirit of etcd v3.
//!
//! Start reading at [`Store`], the trait every other crate holds as `Arc<dyn Store>`, and the
//! types of [`model`]. [`MvccStore`](mvcc::MvccStore) implements it in memory, and over any
//! [`Backend`](mvcc::backend::Backend) (the sled adapter is one); the etcd adapter implements
//! it directly. Every implementation must pass the suite in `conformance`.
//!
//! This crate knows nothing of Kubernetes objects, HTTP, or any particular storage engine.

mod error;
pub mod model;
pub mod mvcc;
mod port;
pub mod priority;
pub mod statistics;
pub mod watch;

#[cfg(feature = "conformance")]
pub mod conformance;

pub use error::StoreError;
pub use model::{
    Compare, DEFAULT_MAX_VALUE_SIZE, Event, EventKind, KeyValue, Lease, LeaseId, Op, RangeRequest,
    RangeResult, Revision, Txn, TxnResult,
};
pub use port::{Outcome, Store};
pub use statistics::EngineStatistics;
pub use watch::{Change, WatchBatch, Watcher};
