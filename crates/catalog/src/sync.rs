//! How a registration's `sync_id` moves: minted on create when none is given, minted afresh by
//! a sync, or, with a canary pending, kept and released to everyone.

use serde::{Deserialize, Serialize};

use crate::{ApiRegistration, Subscription};

/// Where new sync ids come from.
pub trait IdGenerator: Send + Sync {
    /// A fresh id.
    fn sync_id(&self) -> String;
}

/// hashicorp/go-uuid's ids: 16 bytes from the system's random source, printed 8-4-4-4-12 in
/// lowercase hex (no version or variant bits forced).
#[derive(Debug, Clone, Copy, Default)]
pub struct RandomIds;

impl IdGenerator for RandomIds {
    fn sync_id(&self) -> String {
        let mut bytes = [0u8; 16];
        ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut bytes)
            .expect("the system's random source works");
        uuid::Uuid::from_bytes(bytes).hyphenated().to_string()
    }
}

/// The body of `PUT .../apiregistrations/<name>/sync`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SyncRequest {
    /// Restrict the new build to these namespaces until it is released.
    pub canary_namespaces: Vec<String>,
}

/// Why a sync was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SyncError {
    /// A canary namespace is not subscribed to the registration (404).
    #[error("namespace {namespace:?} is not subscribed to {api}")]
    NotSubscribed {
        /// The namespace named.
        namespace: String,
        /// The registration.
        api: String,
    },
}

/// Applies a sync to `registration`. With canary namespaces (each of which `subscribed` must
/// confirm): a fresh sync_id, reconciled only there. Without, while a canary is pending: the
/// same sync_id, released to everyone. Without, and nothing pending: a fresh sync_id for
/// everyone.
pub fn sync(
    registration: &mut ApiRegistration,
    request: &SyncRequest,
    subscribed: impl Fn(&str) -> bool,
    ids: &dyn IdGenerator,
) -> Result<(), SyncError> {
    if request.canary_namespaces.is_empty() {
        if registration.canary_namespaces.is_empty() {
            registration.sync_id = ids.sync_id();
        } else {
            registration.canary_namespaces.clear();
        }
        return Ok(());
    }
    if let Some(namespace) = request.canary_namespaces.iter().find(|namespace| !subscribed(namespace)) {
        return Err(SyncError::NotSubscribed {
            namespace: namespace.clone(),
            api: registration.name.clone(),
        });
    }
    let mut canary = request.canary_namespaces.clone();
    canary.sort();
    canary.dedup();
    registration.sync_id = ids.sync_id();
    registration.canary_namespaces = canary;
    Ok(())
}

/// Whether `subscription` is due for reconciliation against `registration`: active, behind a
/// non-empty sync_id, and inside the canary when one is pending.
pub fn due(registration: &ApiRegistration, subscription: &Subscription) -> bool {
    subscription.active
        && subscription.api == registration.name
        && !registration.sync_id.is_empty()
        && subscription.status.current_sync_id != registration.sync_id
        && (registration.canary_namespaces.is_empty()
            || registration.canary_namespaces.contains(&subscription.namespace))
}

#[cfg(test)]
mod tests;
