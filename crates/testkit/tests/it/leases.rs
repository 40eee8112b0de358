//! `coordination.k8s.io/v1` Leases as an ordinary API group: discovery, create, get, list with
//! a table, watch, update, merge patch, delete, and a Status naming a bad field.

use kayra_testkit::{Store, TestServer};
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::status_of;

const LEASES: &str = "/apis/coordination.k8s.io/v1/namespaces/default/leases";

#[tokio::test]
async fn leases_are_an_ordinary_api_group() {
    let server = TestServer::start(Store::Memory).await;
    let (client, url) = (server.admin(), server.url());

    let (code, group) =
        status_of(client.get(format!("{url}/apis/coordination.k8s.io/v1")).send().await.unwrap()).await;
    assert_eq!(code, StatusCode::OK, "{group}");
    let leases = group["resources"].as_array().unwrap().iter().find(|r| r["name"] == "leases").cloned();
    let leases = leases.unwrap_or_else(|| panic!("no leases in {group}"));
    assert_eq!((leases["kind"].as_str(), leases["namespaced"].as_bool()), (Some("Lease"), Some(true)));
    let (_, namespaces) =
        status_of(client.get(format!("{url}/api/v1/namespaces/kube-node-lease")).send().await.unwrap()).await;
    assert_eq!(
        namespaces["status"]["phase"], "Active",
        "kube-node-lease exists from the start: {namespaces}"
    );

    let lease = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "leader"},
                       "spec": {"holderIdentity": "replica-1", "leaseDurationSeconds": 15,
                                "renewTime": "2026-01-01T00:00:00.000000Z"}});
    let (code, created) =
        status_of(client.post(format!("{url}{LEASES}")).json(&lease).send().await.unwrap()).await;
    assert_eq!(code, StatusCode::CREATED, "{created}");

    // A watch from the create's version sees the update that follows.
    let version = created["metadata"]["resourceVersion"].as_str().unwrap().to_owned();
    let watch = client
        .get(format!("{url}{LEASES}?watch=true&resourceVersion={version}&timeoutSeconds=5"))
        .send()
        .await
        .unwrap();
    let mut updated = created.clone();
    updated["spec"]["holderIdentity"] = json!("replica-2");
    let (code, updated) =
        status_of(client.put(format!("{url}{LEASES}/leader")).json(&updated).send().await.unwrap()).await;
    assert_eq!(
        (code, &updated["spec"]["holderIdentity"]),
        (StatusCode::OK, &json!("replica-2")),
        "{updated}"
    );
    let events = watch.text().await.unwrap();
    let first: Value = serde_json::from_str(events.lines().next().unwrap()).unwrap();
    assert_eq!(
        (first["type"].as_str(), &first["object"]["spec"]["holderIdentity"]),
        (Some("MODIFIED"), &json!("replica-2"))
    );

    let (code, patched) = status_of(
        client
            .patch(format!("{url}{LEASES}/leader"))
            .header("Content-Type", "application/merge-patch+json")
            .body(r#"{"spec":{"leaseTransitions":1}}"#)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!((code, &patched["spec"]["leaseTransitions"]), (StatusCode::OK, &json!(1)), "{patched}");

    let table = client
        .get(format!("{url}{LEASES}"))
        .header("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
        .send()
        .await
        .unwrap();
    let table: Value = table.json().await.unwrap();
    let columns: Vec<&str> =
        table["columnDefinitions"].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(columns, ["Name", "Holder", "Age"], "{table}");
    assert_eq!(table["rows"][0]["cells"][1], "replica-2", "{table}");

    let mut bad = lease.clone();
    bad["metadata"]["name"] = json!("bad");
    bad["spec"]["leaseDurationSeconds"] = json!(0);
    let (code, status) =
        status_of(client.post(format!("{url}{LEASES}")).json(&bad).send().await.unwrap()).await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "{status}");
    assert_eq!(status["details"]["causes"][0]["field"], "spec.leaseDurationSeconds", "{status}");
    let (code, _) = status_of(client.get(format!("{url}{LEASES}/bad")).send().await.unwrap()).await;
    assert_eq!(code, StatusCode::NOT_FOUND, "a refused Lease is not stored");

    let (code, _) = status_of(client.delete(format!("{url}{LEASES}/leader")).send().await.unwrap()).await;
    assert_eq!(code, StatusCode::OK);
    let (code, _) = status_of(client.get(format!("{url}{LEASES}/leader")).send().await.unwrap()).await;
    assert_eq!(code, StatusCode::NOT_FOUND);
}
