//! What a registration's sync status reports.

use serde_json::json;

use super::*;

#[test]
fn the_status_reports_active_subscriptions_once_reconciled() {
    let registration = ApiRegistration {
        name: "compute.example.com".into(),
        sync_id: "f872573b-8ad8-9dd5-79f0-234fcb41517e".into(),
        ..ApiRegistration::default()
    };
    let reconciled = |namespace: &str, current: &str| {
        let mut subscription = Subscription::new(namespace, "compute.example.com", true);
        subscription.status = SubscriptionState {
            state: "success".into(),
            current_sync_id: current.into(),
            expected_sync_id: registration.sync_id.clone(),
            message: String::new(),
            last_attempt: "2026-11-30T12:00:00Z".into(),
        };
        subscription
    };
    let mut inactive = reconciled("old", "old-build");
    inactive.active = false;
    let subscriptions = [
        reconciled("sre", "f872573b-8ad8-9dd5-79f0-234fcb41517e"),
        Subscription::new("new", "compute.example.com", true),
        inactive,
        reconciled("apps", "old-build"),
    ];
    let status = status(&registration, &subscriptions);
    assert_eq!(
        serde_json::to_value(&status).unwrap(),
        json!({
            "name": "compute.example.com",
            "sync_id": "f872573b-8ad8-9dd5-79f0-234fcb41517e",
            "subscriptions": [
                {"namespace": "apps", "state": "success", "current_sync_id": "old-build", "synced": false},
                {"namespace": "sre", "state": "success", "current_sync_id": "f872573b-8ad8-9dd5-79f0-234fcb41517e", "synced": true},
            ]
        })
    );
    let canary = ApiRegistration { canary_namespaces: vec!["sre".into()], ..registration.clone() };
    assert_eq!(
        serde_json::to_value(self::status(&canary, &subscriptions)).unwrap()["canary_namespaces"],
        json!(["sre"])
    );
}

#[test]
fn subscriptions_read_the_documented_body() {
    let subscription: Subscription =
        serde_json::from_str(r#"{"api": "compute.example.com", "active": true}"#).unwrap();
    assert!(subscription.active && subscription.awaiting_activation());
    let written = serde_json::to_value(Subscription::new("sre", "compute.example.com", true)).unwrap();
    assert_eq!(written["state"], "pending");
    assert_eq!(written["current_sync_id"], "");
}
