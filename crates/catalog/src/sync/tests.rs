//! How syncs and canaries move a registration's build, and who is due.

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
