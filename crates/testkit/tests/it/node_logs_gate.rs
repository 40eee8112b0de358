//! The `NodeLogs` feature gate. Off (the default), the node log route does not exist, so a
//! request for it is answered exactly as a path no route serves is, 404 to an authenticated
//! caller and 401 to anyone else, body and headers alike, indistinguishable from a typo. On,
//! it streams a real agent's own log (tail, follow) to a caller granted `get` on `nodes/log`,
//! and every read is audited.

use std::time::{Duration, Instant};

use kayra_testkit::fleet::{Marked, unique};
use kayra_testkit::{Store, TestServer};
use reqwest::StatusCode;
use serde_json::{Value, json};

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

async fn create(server: &TestServer, path: &str, object: Value) {
    let response = server.admin().post(format!("{}{path}", server.url())).json(&object).send().await.unwrap();
    let code = response.status();
    assert_eq!(code, StatusCode::CREATED, "{path}: {}", response.text().await.unwrap_or_default());
}

#[tokio::test]
async fn with_the_gate_on_a_node_log_streams_the_agents_own_log_to_those_granted_it() {
    let server = TestServer::start_with(Store::Memory, |config| {
        config.feature_gates.insert("NodeLogs".to_owned(), true);
    })
    .await;
    let agent = server.join_agent("node-log").await;
    let node = agent.name().to_owned();
    let url = format!("{}/apis/fleet.example.com/v1/nodes/{node}/log", server.url());

    // The whole log, once the node's session is open (503 until then).
    let deadline = Instant::now() + Duration::from_secs(30);
    let whole = loop {
        let response = server.admin().get(&url).send().await.unwrap();
        let code = response.status();
        let text = response.text().await.unwrap_or_default();
        if code == StatusCode::OK && text.contains("the node session is open") {
            break text;
        }
        assert!(Instant::now() < deadline, "no node log: {code} {text}\n{}", agent.log());
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert!(whole.contains("joined the fleet"), "{whole}");
    let tail = server.admin().get(format!("{url}?tailLines=1")).send().await.unwrap().text().await.unwrap();
    assert_eq!(tail.lines().count(), 1, "{tail}");
    assert!(agent.log().contains(tail.trim_end()), "the tail is a line of the agent's log: {tail}");
    let raw = format!("/apis/fleet.example.com/v1/nodes/{node}/log?tailLines=2");
    let output = server.kubectl(&server.admin_token(), &["get", "--raw", &raw]).await;
    assert!(output.status.success(), "kubectl get --raw: {}", String::from_utf8_lossy(&output.stderr));
    assert_eq!(String::from_utf8_lossy(&output.stdout).lines().count(), 2);

    // Followed: a line the agent writes after the request arrives on the open stream.
    let followed = server.admin().get(format!("{url}?follow=true&tailLines=0")).send().await.unwrap();
    assert_eq!(followed.status(), StatusCode::OK);
    let marker = Marked(unique("node-log-workload"));
    let application = json!({"apiVersion": "fleet.example.com/v1", "kind": "Application",
        "metadata": {"name": "logged"},
        "spec": {"command": ["/usr/bin/python3", "-c", "import time; time.sleep(1000)", &marker.0], "placement": {"nodeName": node}}});
    create(&server, "/apis/fleet.example.com/v1/namespaces/default/applications", application).await;
    let mut body = followed;
    let mut seen = String::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !seen.contains("application=default/logged reason=Started") {
        let left = deadline.saturating_duration_since(Instant::now());
        let chunk = tokio::time::timeout(left, body.chunk()).await;
        let chunk = chunk.unwrap_or_else(|_| panic!("no new line followed: {seen:?}\n{}", agent.log()));
        seen.push_str(&String::from_utf8_lossy(&chunk.expect("bytes").expect("the stream is open")));
    }
    assert!(!seen.contains("joined the fleet"), "tailLines=0 sends only what is new: {seen}");
    drop(body);

    // Only a caller granted `get` on nodes/log reads it: not one with `view`, not one with nothing.
    server.add_token("nora-token", "nora", "");
    server.add_token("vic-token", "vic", "");
    server.add_token("lee-token", "lee", "");
    let rbac = "/apis/authorization.example.com/v1";
    create(
        &server,
        &format!("{rbac}/clusterroles"),
        json!({"apiVersion": "authorization.example.com/v1",
        "kind": "ClusterRole", "metadata": {"name": "node-log-reader"},
        "rules": [{"apis": ["fleet.example.com"], "resources": ["nodes/log"], "verbs": ["get"]}]}),
    )
    .await;
    for (user, role) in [("lee", "node-log-reader"), ("vic", "view")] {
        create(
            &server,
            &format!("{rbac}/clusterrolebindings"),
            json!({"apiVersion": "authorization.example.com/v1",
            "kind": "ClusterRoleBinding", "metadata": {"name": format!("{user}-{role}")},
            "subjects": [{"kind": "User", "name": user}], "roleRef": {"kind": "ClusterRole", "name": role}}),
        )
        .await;
    }
    let as_user = |token: &str| server.token_builder(token).build().expect("a client");
    for user in ["nora", "vic"] {
        let refused = as_user(&format!("{user}-token")).get(&url).send().await.unwrap();
        assert_eq!(refused.status(), StatusCode::FORBIDDEN, "{user}");
        let status: Value = refused.json().await.unwrap();
        let message = status["message"].as_str().unwrap_or_default();
        assert!(message.contains(&format!("User \"{user}\" cannot get resource \"nodes/log\"")), "{status}");
    }
    // The grant holds with an informer's wait for the new binding.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let response = as_user("lee-token").get(format!("{url}?tailLines=2")).send().await.unwrap();
        if response.status() == StatusCode::OK {
            assert_eq!(response.text().await.unwrap().lines().count(), 2);
            break;
        }
        assert!(Instant::now() < deadline, "lee's grant never held: {}", response.status());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // What does not apply is named; a node that does not exist is not found; only GET reads.
    let previous = server.admin().get(format!("{url}?previous=true")).send().await.unwrap();
    assert_eq!(previous.status(), StatusCode::BAD_REQUEST);
    let absent = format!("{}/apis/fleet.example.com/v1/nodes/nowhere/log", server.url());
    let absent: Value = server.admin().get(&absent).send().await.unwrap().json().await.unwrap();
    assert_eq!(
        (absent["code"].as_u64(), absent["message"].as_str()),
        (Some(404), Some("nodes \"nowhere\" not found"))
    );
    let posted = server.admin().post(&url).body("").send().await.unwrap();
    assert_eq!(posted.status(), StatusCode::METHOD_NOT_ALLOWED);

    // Every read is audited, the refused ones too.
    let audit = std::fs::read_to_string(server.data_dir().join("audit.log")).expect("the audit log");
    let suffix = format!("/nodes/{node}/log");
    let reads: Vec<Value> = audit
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).expect("JSON"))
        .filter(|line| line["path"].as_str().is_some_and(|path| path.ends_with(&suffix)))
        .collect();
    let by = |user: &str| reads.iter().filter(|line| line["user"] == user).count();
    assert!(by("lee") >= 1 && by("nora") == 1 && by("vic") == 1, "{reads:?}");
    assert!(reads.iter().any(|line| line["user"] == "nora" && line["decision"] == "denied"), "{reads:?}");
}
