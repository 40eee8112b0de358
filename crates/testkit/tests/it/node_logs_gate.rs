//! The `NodeLogs` feature gate, off (the default): the node log route does not exist, so a
//! request for it is answered exactly as a path no route serves is, 404 to an authenticated
//! caller and 401 to anyone else, body and headers alike, indistinguishable from a typo.

use kayra_testkit::{Store, TestServer};
use reqwest::StatusCode;

/// Status, headers (less those that differ between any two answers: the date and the audit
/// id) and body of `request`.
async fn answer(request: reqwest::RequestBuilder) -> (StatusCode, Vec<(String, String)>, String) {
    let response = request.send().await.unwrap();
    let status = response.status();
    let mut headers: Vec<(String, String)> = response
        .headers()
        .iter()
        .filter(|(name, _)| !matches!(name.as_str(), "date" | "audit-id"))
        .map(|(name, value)| (name.as_str().to_owned(), value.to_str().unwrap_or_default().to_owned()))
        .collect();
    headers.sort();
    (status, headers, response.text().await.unwrap())
}

#[tokio::test]
async fn with_the_gate_off_a_node_log_is_answered_as_a_path_no_route_serves() {
    let server = TestServer::start(Store::Memory).await;
    let url = server.url();
    let node_log = format!("{url}/apis/fleet.example.com/v1/nodes/node-1/log?follow=true&tailLines=10");
    let typo = format!("{url}/apis/fleet.example.com/v1/nodez/node-1/log?follow=true&tailLines=10");
    for (who, client, code) in [
        ("an administrator", server.admin(), StatusCode::NOT_FOUND),
        ("an anonymous caller", server.anonymous(), StatusCode::UNAUTHORIZED),
    ] {
        let (logs, unknown) = (answer(client.get(&node_log)).await, answer(client.get(&typo)).await);
        assert_eq!(logs.0, code, "{who}: {logs:?}");
        assert_eq!(logs, unknown, "{who}: the node log route answers as no route does");
    }
}
