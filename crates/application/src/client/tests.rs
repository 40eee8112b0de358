//! The in-process client decides and admits as the REST API does.

use std::sync::Arc;

use kayra_api::clock::SystemClock;
use kayra_api::kinds::rbac::ClusterRole;
use kayra_api::scheme::Scheme;
use kayra_authn::Identity;
use kayra_registry::{Registry, RegistryError};
use kayra_store::mvcc::{MvccStore, Options};
use serde_json::json;

use crate::ApplicationLayer;

fn control() -> Arc<ApplicationLayer> {
    let store = Arc::new(MvccStore::in_memory(Options::default()).unwrap());
    let registry = Registry::new(store, Arc::new(SystemClock), "/registry/");
    Arc::new(ApplicationLayer::new(Arc::new(Scheme::new("example.com")), registry))
}

#[tokio::test]
async fn the_controller_identity_reads_and_writes_typed_objects() {
    let control = control();
    let client = control.client(crate::controller_identity("test"));
    let namespaces = client.resource("", "namespaces").unwrap();
    client
        .create(
            &namespaces,
            None,
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "demo"}}),
        )
        .await
        .unwrap();
    assert_eq!(client.list_all(&namespaces, None).await.unwrap().len(), 1);
    let roles = client.resource("authorization.example.com", "clusterroles").unwrap();
    let role = json!({"apiVersion": "authorization.example.com/v1", "kind": "ClusterRole", "metadata": {"name": "reader"},
        "rules": [{"apis": [""], "resources": ["namespaces"], "verbs": ["get"]}]});
    client.create(&roles, None, role).await.unwrap();
    let role: ClusterRole = client.get_as(&roles, None, "reader").await.unwrap();
    assert_eq!(role.rules.len(), 1);
}

#[tokio::test]
async fn an_identity_without_a_grant_is_refused_and_nothing_is_written() {
    let control = control();
    let nobody = control.client(Identity::new("mallory", "", vec![]));
    let namespaces = nobody.resource("", "namespaces").unwrap();
    let refused = nobody
        .create(
            &namespaces,
            None,
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x"}}),
        )
        .await
        .unwrap_err();
    match refused {
        RegistryError::Forbidden(message) => {
            assert!(message.contains("User \"mallory\" cannot create resource \"namespaces\""), "{message}")
        }
        other => panic!("expected Forbidden, got {other:?}"),
    }
    let admin = control.client(crate::controller_identity("test"));
    assert!(admin.list_all(&namespaces, None).await.unwrap().is_empty());
    assert!(matches!(nobody.get(&namespaces, None, "x").await, Err(RegistryError::Forbidden(_))));
}

#[tokio::test]
async fn creates_sent_together_are_each_authorized_admitted_and_answered() {
    let control = control();
    let admin = control.client(crate::controller_identity("test"));
    let namespaces = admin.resource("", "namespaces").unwrap();
    let namespace = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "demo"}});
    admin.create(&namespaces, None, namespace).await.unwrap();
    let secrets = admin.resource("fleet.example.com", "secrets").unwrap();
    let secret = |name: &str| {
        json!({"apiVersion": "fleet.example.com/v1", "kind": "Secret", "metadata": {"name": name},
               "stringData": {"password": "hunter2"}})
    };
    let demo = || Some("demo".to_owned());
    let objects = vec![
        (demo(), secret("one")),
        (demo(), secret("Bad_Name")),
        (Some("missing".to_owned()), secret("two")),
        (demo(), secret("three")),
    ];
    let answers = admin.create_all(&secrets, objects).await;
    let names: Vec<&str> = answers
        .iter()
        .filter_map(|answer| answer.as_ref().ok())
        .map(|s| kayra_registry::meta_str(s, "name"))
        .collect();
    assert_eq!(names, ["one", "three"]);
    match &answers[1] {
        Err(RegistryError::Invalid { kind, .. }) => assert_eq!(kind, "Secret.fleet.example.com"),
        other => panic!("an invalid name is refused as a create would refuse it, got {other:?}"),
    }
    assert!(matches!(answers[2], Err(RegistryError::NotFound { .. })), "{:?}", answers[2]);
    let stored = admin.get(&secrets, Some("demo"), "one").await.unwrap();
    assert_eq!(stored["data"]["password"], "aHVudGVyMg==", "admitted and defaulted as any create");

    let nobody = control.client(Identity::new("mallory", "", vec![]));
    let refused = nobody.create_all(&secrets, vec![(demo(), secret("four"))]).await;
    assert!(matches!(refused[..], [Err(RegistryError::Forbidden(_))]), "{refused:?}");
    assert_eq!(admin.list_all(&secrets, Some("demo")).await.unwrap().len(), 2, "nothing else was written");
}
