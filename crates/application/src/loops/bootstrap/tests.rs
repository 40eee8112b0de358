//! The bootstrap roles, through the running loop: a missing one is created, an unedited one
//! that grants less than the defaults now do is brought up to date, an edited one is left alone.

use std::sync::Arc;
use std::time::Duration;

use kayra_api::clock::SystemClock;
use kayra_api::scheme::Scheme;
use kayra_registry::{Registry, RegistryError};
use kayra_store::mvcc::{MvccStore, Options};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::{BootstrapReconciler, DEFAULTS_DIGEST, grant_digest};
use crate::ApplicationLayer;

#[tokio::test]
async fn missing_roles_are_created_unedited_ones_updated_and_edited_ones_left_alone() {
    let store = Arc::new(MvccStore::in_memory(Options::default()).unwrap());
    let registry = Registry::new(store, Arc::new(SystemClock), "/registry/");
    let control = Arc::new(ApplicationLayer::new(Arc::new(Scheme::new("example.com")), registry));
    let client = control.client(crate::controller_identity("test"));
    let roles = client.resource("authorization.example.com", "clusterroles").unwrap();
    let role = |name: &str| {
        json!({"apiVersion": "authorization.example.com/v1", "kind": "ClusterRole", "metadata": {"name": name},
               "rules": [{"apis": ["fleet.example.com"], "resources": ["applications"], "verbs": ["get"]}]})
    };
    // `edit` as an older controller wrote it: its digest still matches what it grants.
    let mut outdated = role("edit");
    outdated["metadata"]["annotations"] = json!({DEFAULTS_DIGEST: grant_digest(&outdated)});
    client.create(&roles, None, outdated).await.unwrap();
    // `view` as an operator edited it: what it grants no longer matches its digest.
    let mut edited = role("view");
    edited["metadata"]["annotations"] = json!({DEFAULTS_DIGEST: "what it granted before the edit"});
    client.create(&roles, None, edited).await.unwrap();

    let stop = CancellationToken::new();
    let running = tokio::spawn(BootstrapReconciler::new(client.clone()).into_loop().run(stop.clone()));
    let get = |name: &'static str| {
        let (client, roles) = (client.clone(), roles.clone());
        async move {
            match client.get(&roles, None, name).await {
                Ok(object) => Some(Value::Object(object)),
                Err(RegistryError::NotFound { .. }) => None,
                Err(error) => panic!("{error}"),
            }
        }
    };
    let rules = |role: &Value| role["rules"].as_array().map_or(0, Vec::len);
    tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            let edit = get("edit").await.unwrap();
            if get("admin").await.is_some() && rules(&edit) > 1 {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the missing role is created and the unedited one brought up to date");
    // Every key has had its turn by the time the last binding exists.
    let bindings = client.resource("authorization.example.com", "clusterrolebindings").unwrap();
    tokio::time::timeout(Duration::from_secs(10), async {
        while client.get(&bindings, None, "system:monitoring").await.is_err() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("every binding is created");
    assert_eq!(rules(&get("view").await.unwrap()), 1, "the edited role is left as edited");
    stop.cancel();
    running.await.unwrap();
}
