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
    /// A canary namespace has no active subscription to the registration (404).
    #[error("namespace {namespace:?} has no active subscription to {api}")]
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
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    /// `sync-1`, `sync-2`...
    struct Counter(AtomicUsize);

    impl IdGenerator for Counter {
        fn sync_id(&self) -> String {
            format!("sync-{}", self.0.fetch_add(1, Ordering::SeqCst) + 1)
        }
    }

    fn registration() -> ApiRegistration {
        ApiRegistration {
            name: "compute.example.com".into(),
            sync_id: "build-0".into(),
            ..ApiRegistration::default()
        }
    }

    fn subscription(namespace: &str, current: &str) -> Subscription {
        let mut subscription = Subscription::new(namespace, "compute.example.com", true);
        subscription.status.current_sync_id = current.into();
        subscription
    }

    #[test]
    fn random_ids_have_go_uuid_shape() {
        let id = RandomIds.sync_id();
        let groups: Vec<usize> = id.split('-').map(str::len).collect();
        assert_eq!(groups, [8, 4, 4, 4, 12], "{id}");
        assert!(id.bytes().all(|b| b == b'-' || b.is_ascii_digit() || (b'a'..=b'f').contains(&b)), "{id}");
        assert_ne!(id, RandomIds.sync_id());
    }

    #[test]
    fn a_canary_is_tried_then_released_with_the_same_build() {
        let ids = Counter(AtomicUsize::new(0));
        let subscribed = |namespace: &str| ["sre", "apps", "web"].contains(&namespace);
        let mut registration = registration();

        let plain = SyncRequest::default();
        sync(&mut registration, &plain, subscribed, &ids).unwrap();
        assert_eq!(registration.sync_id, "sync-1", "nothing pending: a fresh build for everyone");
        assert!(registration.canary_namespaces.is_empty());

        let canary = SyncRequest { canary_namespaces: vec!["sre".into()] };
        sync(&mut registration, &canary, subscribed, &ids).unwrap();
        assert_eq!(
            (registration.sync_id.as_str(), registration.canary_namespaces.as_slice()),
            ("sync-2", &["sre".to_owned()][..])
        );
        assert!(due(&registration, &subscription("sre", "sync-1")));
        assert!(!due(&registration, &subscription("apps", "sync-1")), "outside the canary: left as it was");

        sync(&mut registration, &plain, subscribed, &ids).unwrap();
        assert_eq!(registration.sync_id, "sync-2", "the release reuses the validated build");
        assert!(registration.canary_namespaces.is_empty());
        assert!(due(&registration, &subscription("apps", "sync-1")), "and reaches everyone");
        assert!(!due(&registration, &subscription("sre", "sync-2")), "the canary is already there");

        sync(&mut registration, &plain, subscribed, &ids).unwrap();
        assert_eq!(registration.sync_id, "sync-3", "no rollout pending: fresh again");
    }

    #[test]
    fn a_canary_names_only_subscribed_namespaces() {
        let ids = Counter(AtomicUsize::new(0));
        let mut registration = registration();
        let typo = SyncRequest { canary_namespaces: vec!["sre".into(), "sre-typo".into()] };
        let refused = sync(&mut registration, &typo, |namespace| namespace == "sre", &ids).unwrap_err();
        assert_eq!(
            refused,
            SyncError::NotSubscribed { namespace: "sre-typo".into(), api: "compute.example.com".into() }
        );
        assert_eq!(registration, self::registration(), "a refused sync changes nothing");
        assert!(
            serde_json::from_str::<SyncRequest>(r#"{"canary": ["sre"]}"#).is_err(),
            "a misspelt field is not a plain sync"
        );
        assert_eq!(serde_json::from_str::<SyncRequest>("{}").unwrap(), SyncRequest::default());
    }

    #[test]
    fn only_active_subscriptions_behind_a_build_are_due() {
        let registration = registration();
        assert!(due(&registration, &subscription("a", "")));
        assert!(!due(&registration, &subscription("a", "build-0")));
        let mut inactive = subscription("a", "");
        inactive.active = false;
        assert!(!due(&registration, &inactive));
        let unsynced = ApiRegistration { sync_id: String::new(), ..registration.clone() };
        assert!(!due(&unsynced, &subscription("a", "")), "nothing to catch up to");
        let mut other = subscription("a", "");
        other.api = "vault.example.com".into();
        assert!(!due(&registration, &other));
    }
}
