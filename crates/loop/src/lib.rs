//! The one loop runtime every control loop of Kayra runs on, in the manner of kube-runtime's
//! `Controller` and client-go's workqueue.
//!
//! A loop is a [`Reconciler`] fed by [`source::Source`]s: a source watches something (a
//! resource, a store prefix), maps each change to the [`Key`]s it concerns, and hands them to the
//! loop's keyed work queue ([`queue`]). The runtime ([`runtime::Loop`]) takes keys from the
//! queue and reconciles them, at most one reconcile per key at a time and up to N keys at once;
//! a key queued many times before it runs is reconciled once. A reconcile answers an [`Action`]:
//! done until something changes, or again after a while; an error requeues the key with
//! exponential backoff. Every known key is reconciled again on a resync period. A loop may run
//! under an [`election::Election`] so that of several replicas sharing a store only the leader
//! reconciles, and it stops by draining what is in flight. [`metrics::Metrics`] counts it all.
//!
//! This crate knows nothing of HTTP, of the registry's Kinds, or of any one loop: start
//! reading at [`runtime::Loop`].

pub mod election;
pub mod metrics;
pub mod queue;
pub mod runtime;
pub mod source;
#[cfg(any(test, feature = "testing"))]
pub mod testing;

use std::sync::Arc;
use std::time::Duration;

/// What a loop reconciles: usually an object's `namespace/name` (or `name` for cluster-scoped
/// objects), but any string a loop chooses.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Key(Arc<str>);

impl Key {
    /// A key spelled exactly as given.
    pub fn new(key: impl AsRef<str>) -> Key {
        Key(Arc::from(key.as_ref()))
    }

    /// The key of an object: `namespace/name`, or `name` for a cluster-scoped one.
    pub fn object(namespace: Option<&str>, name: &str) -> Key {
        match namespace.filter(|namespace| !namespace.is_empty()) {
            Some(namespace) => Key::new(format!("{namespace}/{name}")),
            None => Key::new(name),
        }
    }

    /// The key as a string.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The namespace part of an object's key, if it has one.
    pub fn namespace(&self) -> Option<&str> {
        self.0.split_once('/').map(|(namespace, _)| namespace)
    }

    /// The name part of an object's key.
    pub fn name(&self) -> &str {
        self.0.split_once('/').map_or(&self.0, |(_, name)| name)
    }
}

impl std::fmt::Display for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", &*self.0)
    }
}

/// What a reconcile asks of the runtime next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Nothing more to do until something the loop watches changes (or the next resync).
    AwaitChange,
    /// Reconcile this key again after the given time, changed or not.
    RequeueAfter(Duration),
}

/// Why a reconcile failed; the runtime logs it with the key and retries with backoff.
pub type ReconcileError = Box<dyn std::error::Error + Send + Sync>;

/// A loop's rules: bring what `key` names to where it should be, reading what is stored and
/// writing the difference. Called for the same key again and again, so it must be idempotent;
/// never for the same key twice at once.
#[async_trait::async_trait]
pub trait Reconciler: Send + Sync + 'static {
    /// Reconciles one key.
    async fn reconcile(&self, key: &Key) -> Result<Action, ReconcileError>;
}

#[cfg(test)]
mod tests {
    use super::Key;

    #[test]
    fn object_keys_split_back_into_their_parts() {
        let key = Key::object(Some("demo"), "web");
        assert_eq!((key.as_str(), key.namespace(), key.name()), ("demo/web", Some("demo"), "web"));
        let key = Key::object(None, "node-1");
        assert_eq!((key.as_str(), key.namespace(), key.name()), ("node-1", None, "node-1"));
        assert_eq!(Key::object(Some(""), "x").as_str(), "x");
    }
}
