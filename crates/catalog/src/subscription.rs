//! What a registration's sync status reports about its subscriptions.

use serde::{Deserialize, Serialize};

use crate::ApiRegistration;

pub use kayra_api::kinds::catalog::{Subscription, SubscriptionState};

/// `GET .../apiregistrations/<name>/status`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RegistrationStatus {
    /// The registration.
    pub name: String,
    /// Its build.
    pub sync_id: String,
    /// Every active subscription that has been reconciled at least once.
    pub subscriptions: Vec<SubscriptionSync>,
    /// While a canary rollout is pending: its namespaces.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub canary_namespaces: Vec<String>,
}

/// One subscription's sync state in a [`RegistrationStatus`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubscriptionSync {
    /// The subscriber.
    pub namespace: String,
    /// `success` or `error`.
    pub state: String,
    /// The build it is reconciled to.
    pub current_sync_id: String,
    /// Whether that is the registration's.
    pub synced: bool,
}

/// The sync status of `registration` over its subscriptions (any order in, namespaces in
/// order out); inactive ones and those awaiting their first reconciliation are left out.
pub fn status(registration: &ApiRegistration, subscriptions: &[Subscription]) -> RegistrationStatus {
    let mut reported: Vec<SubscriptionSync> = subscriptions
        .iter()
        .filter(|s| s.api == registration.name && s.active && !s.awaiting_activation())
        .map(|s| SubscriptionSync {
            namespace: s.namespace.clone(),
            state: s.status.state.clone(),
            current_sync_id: s.status.current_sync_id.clone(),
            synced: s.synced(registration),
        })
        .collect();
    reported.sort_by(|a, b| a.namespace.cmp(&b.namespace));
    RegistrationStatus {
        name: registration.name.clone(),
        sync_id: registration.sync_id.clone(),
        subscriptions: reported,
        canary_namespaces: registration.canary_namespaces.clone(),
    }
}

#[cfg(test)]
mod tests;
