//! The node session over real gRPC and mutual TLS on the API port, with a simulated agent:
//! who may hold a session, what a node is sent, what it may write, freezing, logs.

use std::time::Duration;

use kayra_api::session::{
    ApplicationReport, ControllerMessage, DesiredState, LogChunk, NodeInfo, NodeMessage, NodeReport,
};
use kayra_grpc::client::{Connection, Credentials, connect};
use kayra_pki::{Ca, Usage};
use kayra_registry::meta_str;
use kayra_testkit::{Store, TestServer};
use reqwest::StatusCode;
use serde_json::{Value, json};

const FLEET: &str = "/apis/fleet.example.com/v1/namespaces/default";

fn credentials(server: &TestServer, user: &str, group: &str) -> Credentials {
    let ca_pem = String::from_utf8(server.pki_file("ca.crt")).expect("UTF-8");
    let ca_key = String::from_utf8(server.pki_file("ca.key")).expect("UTF-8");
    let ca = Ca::from_pem(&ca_pem, &ca_key).expect("the cluster CA");
    let issued = ca.issue(Usage::Client, user, Some(group), &[]).expect("a client certificate");
    Credentials { server: server.url(), ca_pem, cert_pem: issued.cert_pem, key_pem: issued.key_pem }
}

fn node_credentials(server: &TestServer, node: &str) -> Credentials {
    credentials(server, &format!("system:node:{node}"), "system:nodes")
}

fn report() -> NodeReport {
    NodeReport {
        capacity: [("cpu".to_owned(), "2".to_owned()), ("memory".to_owned(), "4Gi".to_owned())].into(),
        allocatable: [("cpu".to_owned(), "2".to_owned()), ("memory".to_owned(), "4Gi".to_owned())].into(),
        addresses: vec![("InternalIP".into(), "10.0.0.7".into())],
        info: NodeInfo {
            operating_system: "linux".into(),
            architecture: "amd64".into(),
            agent_version: "v0.1.0".into(),
            ..NodeInfo::default()
        },
        ..NodeReport::default()
    }
}

/// The next desired state the controller sends, skipping nothing else (none is expected).
async fn next_desired(connection: &mut Connection) -> DesiredState {
    loop {
        let message = tokio::time::timeout(Duration::from_secs(10), connection.next())
            .await
            .expect("a message within 10 s")
            .expect("the session stays open")
            .expect("the controller keeps the session");
        if let ControllerMessage::Desired(desired) = message {
            return desired;
        }
    }
}

/// The next log request the controller sends, skipping desired states.
async fn next_log_request(connection: &mut Connection) -> kayra_api::session::LogRequest {
    loop {
        let message = tokio::time::timeout(Duration::from_secs(10), connection.next())
            .await
            .expect("a message within 10 s")
            .expect("the session stays open");
        match message {
            Some(ControllerMessage::LogRequest(request)) => return request,
            Some(_) => continue,
            None => panic!("the controller closed the session"),
        }
    }
}

fn names(documents: &[kayra_api::session::Document]) -> Vec<String> {
    let mut names: Vec<String> = documents.iter().map(|d| meta_str(d, "name").to_owned()).collect();
    names.sort();
    names
}

async fn admin_json(
    server: &TestServer,
    method: reqwest::Method,
    path: &str,
    body: Option<Value>,
) -> (StatusCode, Value) {
    let mut request = server.admin().request(method, format!("{}{path}", server.url()));
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.expect("the server answers");
    let code = response.status();
    (code, response.json().await.unwrap_or(Value::Null))
}

fn application(name: &str, node: &str, secret: Option<&str>) -> Value {
    let env: Vec<Value> =
        secret.iter().map(|s| json!({"name": "TOKEN", "secretRef": {"name": s, "key": "token"}})).collect();
    json!({"apiVersion": "fleet.example.com/v1", "kind": "Application", "metadata": {"name": name},
           "spec": {"command": ["/bin/sleep", "1000"], "env": env, "placement": {"nodeName": node}}})
}

fn secret(name: &str) -> Value {
    json!({"apiVersion": "fleet.example.com/v1", "kind": "Secret", "metadata": {"name": name}, "stringData": {"token": "s3cr3t"}})
}

#[tokio::test]
async fn a_node_session_is_confined_to_its_node() {
    let server = TestServer::start(Store::Memory).await;
    // Only a node identity holds a session.
    let admin = credentials(&server, "admin", "system:masters");
    let refused = connect(&admin).await.expect_err("an admin is not a node");
    assert!(refused.to_string().contains("is not a node"), "{refused}");

    let mut n1 = connect(&node_credentials(&server, "n1")).await.expect("node n1 connects");
    n1.sender().send(NodeMessage::Status(report())).await.expect("sent");
    // The first status registers the Node, schedulable, Ready with the controller's heartbeat.
    let first = next_desired(&mut n1).await;
    assert!(first.applications.is_empty() && first.secrets.is_empty());
    let (code, node) = admin_json(&server, reqwest::Method::GET, "/api/v1/nodes/n1", None).await;
    assert_eq!(code, StatusCode::OK, "{node}");
    assert_eq!(node["spec"]["unschedulable"], Value::Null, "a node's first registration takes work at once");
    assert_eq!(node["status"]["nodeInfo"]["kubeletVersion"], "v0.1.0");
    assert_eq!(node["status"]["capacity"]["memory"], "4Gi");
    let ready = &node["status"]["conditions"][0];
    assert_eq!((ready["type"].as_str(), ready["status"].as_str()), (Some("Ready"), Some("True")));
    assert!(ready["lastHeartbeatTime"].is_string());

    // A second session for a live node is refused.
    let second = connect(&node_credentials(&server, "n1")).await.expect_err("n1 is connected already");
    assert!(second.to_string().contains("already holds a live session"), "{second}");

    // n1 is sent exactly its own Applications and the Secrets they reference.
    for body in [secret("db"), secret("other")] {
        let (code, answer) =
            admin_json(&server, reqwest::Method::POST, &format!("{FLEET}/secrets"), Some(body)).await;
        assert_eq!(code, StatusCode::CREATED, "{answer}");
    }
    // n2 exists but holds no session: what is bound to it goes nowhere.
    let n2 = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n2"}});
    let (code, answer) = admin_json(&server, reqwest::Method::POST, "/api/v1/nodes", Some(n2)).await;
    assert_eq!(code, StatusCode::CREATED, "{answer}");
    for body in [application("web", "n1", Some("db")), application("api", "n2", Some("other"))] {
        let (code, answer) =
            admin_json(&server, reqwest::Method::POST, &format!("{FLEET}/applications"), Some(body)).await;
        assert_eq!(code, StatusCode::CREATED, "{answer}");
    }
    let desired = loop {
        let desired = next_desired(&mut n1).await;
        if !desired.applications.is_empty() && !desired.secrets.is_empty() {
            break desired;
        }
    };
    assert_eq!(
        (names(&desired.applications), names(&desired.secrets)),
        (vec!["web".to_owned()], vec!["db".to_owned()])
    );
    let web_uid = meta_str(&desired.applications[0], "uid").to_owned();
    // Its service-account tokens are its own Application's alone: the API's token for web, and
    // none for api, which is bound to n2.
    let files: Vec<(&str, &str)> =
        desired.tokens.iter().map(|token| (token.uid.as_str(), token.path.as_str())).collect();
    assert_eq!(files, [(web_uid.as_str(), "token")], "only web's token reaches n1");
    let review = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
                        "spec": {"token": desired.tokens[0].token}});
    let (code, reviewed) = admin_json(
        &server,
        reqwest::Method::POST,
        "/apis/authentication.k8s.io/v1/tokenreviews",
        Some(review),
    )
    .await;
    assert_eq!(code, StatusCode::CREATED, "{reviewed}");
    assert_eq!(reviewed["status"]["user"]["username"], "system:serviceaccount:default:web", "{reviewed}");

    // Its status for its own Application is written; for another node's it is not.
    let (_, api) =
        admin_json(&server, reqwest::Method::GET, &format!("{FLEET}/applications/api"), None).await;
    let sender = n1.sender();
    // The session handles a node's messages in order: api's report goes first, so once web's
    // status is written, api's report has been handled.
    for (name, uid) in
        [("api", api["metadata"]["uid"].as_str().unwrap_or_default()), ("web", web_uid.as_str())]
    {
        let status = kayra_api::kinds::application::ApplicationStatus {
            phase: Some("Running".into()),
            observed_generation: Some(1),
            ..Default::default()
        };
        let report =
            ApplicationReport { namespace: "default".into(), name: name.into(), uid: uid.into(), status };
        sender.send(NodeMessage::Application(report)).await.expect("sent");
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let (_, web) =
            admin_json(&server, reqwest::Method::GET, &format!("{FLEET}/applications/web"), None).await;
        if web["status"]["phase"] == "Running" {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "web's status was not written: {web}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (_, api) =
        admin_json(&server, reqwest::Method::GET, &format!("{FLEET}/applications/api"), None).await;
    assert_ne!(api["status"]["phase"], "Running", "n1 wrote n2's application's status: {api}");

    // Its Events and usage about its own Application are taken; about another node's, dropped.
    for (name, uid) in
        [("api", api["metadata"]["uid"].as_str().unwrap_or_default()), ("web", web_uid.as_str())]
    {
        let event = kayra_api::session::NodeEvent {
            namespace: "default".into(),
            name: name.into(),
            uid: uid.into(),
            reason: "Started".into(),
            message: format!("started {name}"),
            type_: "Normal".into(),
        };
        sender.send(NodeMessage::Event(event)).await.expect("sent");
    }
    let events_of = |name: &str| {
        let path = format!("/api/v1/namespaces/default/events?fieldSelector=involvedObject.name={name}");
        let server = &server;
        async move {
            let (code, list) = admin_json(server, reqwest::Method::GET, &path, None).await;
            assert_eq!(code, StatusCode::OK, "{list}");
            list["items"].as_array().cloned().unwrap_or_default()
        }
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while events_of("web").await.is_empty() {
        assert!(tokio::time::Instant::now() < deadline, "web's Event was not recorded");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Sent before web's, so written by now if it were written at all.
    assert!(events_of("api").await.is_empty(), "n1 recorded an Event for n2's application");
    let (_, n2) = admin_json(&server, reqwest::Method::GET, "/api/v1/nodes/n2", None).await;
    assert!(n2["status"]["conditions"].is_null(), "n1's reports reached n2's Node: {n2}");

    // A status-only change is not pushed again; a spec change is.
    let patch = server
        .admin()
        .patch(format!("{}{FLEET}/applications/web", server.url()))
        .header("Content-Type", "application/merge-patch+json")
        .body(r#"{"spec":{"args":["2000"]}}"#)
        .send()
        .await
        .expect("patched");
    assert_eq!(patch.status(), StatusCode::OK);
    let changed = next_desired(&mut n1).await;
    assert_eq!(changed.applications[0]["metadata"]["generation"], 2);
    assert_ne!(changed.signature, desired.signature);
}

#[tokio::test]
async fn logs_stream_from_the_node_and_a_deleted_node_is_frozen() {
    let server = TestServer::start(Store::Memory).await;
    let mut n1 = connect(&node_credentials(&server, "n1")).await.expect("node n1 connects");
    let sender = n1.sender();
    sender.send(NodeMessage::Status(report())).await.expect("sent");
    next_desired(&mut n1).await;
    let (code, answer) = admin_json(
        &server,
        reqwest::Method::POST,
        &format!("{FLEET}/applications"),
        Some(application("web", "n1", None)),
    )
    .await;
    assert_eq!(code, StatusCode::CREATED, "{answer}");
    assert_eq!(next_desired(&mut n1).await.applications.len(), 1);

    // `kubectl logs web`: the request reaches the node, its chunks come back.
    let url = format!("{}/api/v1/namespaces/default/pods/web/log?tailLines=5&timestamps=true", server.url());
    let reader = tokio::spawn({
        let client = server.admin();
        async move {
            let response = client.get(url).send().await.expect("the server answers");
            (response.status(), response.text().await.unwrap_or_default())
        }
    });
    let request = next_log_request(&mut n1).await;
    assert_eq!((request.name.as_str(), request.tail_lines, request.timestamps), ("web", Some(5), true));
    assert!(request.window > 0);
    for (data, eof) in [(&b"hello\n"[..], false), (&b"world\n"[..], true)] {
        let chunk = LogChunk { id: request.id, data: data.to_vec(), eof, error: None };
        sender.send(NodeMessage::LogChunk(chunk)).await.expect("sent");
    }
    let (code, text) = reader.await.expect("the reader finishes");
    assert_eq!((code, text.as_str()), (StatusCode::OK, "hello\nworld\n"));

    // A reader that goes away cancels the stream on the node.
    let url = format!("{}/api/v1/namespaces/default/pods/web/log?follow=true", server.url());
    let follower = tokio::spawn({
        let client = server.admin();
        async move {
            let mut response = client.get(url).send().await.expect("the server answers");
            while let Ok(Some(_)) = response.chunk().await {}
        }
    });
    let followed = next_log_request(&mut n1).await;
    assert!(followed.follow);
    let chunk = LogChunk { id: followed.id, data: b"line\n".to_vec(), eof: false, error: None };
    sender.send(NodeMessage::LogChunk(chunk)).await.expect("sent");
    tokio::time::sleep(Duration::from_millis(200)).await;
    follower.abort();
    let cancelled = loop {
        match tokio::time::timeout(Duration::from_secs(10), n1.next()).await.expect("a cancel").expect("open")
        {
            Some(ControllerMessage::LogCancel(id)) => break id,
            Some(_) => continue,
            None => panic!("the session closed"),
        }
    };
    assert_eq!(cancelled, followed.id);

    // A log the node cannot serve is an error, not an empty log.
    let url = format!("{}/api/v1/namespaces/default/pods/web/log?previous=true", server.url());
    let asking = tokio::spawn({
        let client = server.admin();
        async move {
            let response = client.get(url).send().await.expect("the server answers");
            (response.status(), response.text().await.unwrap_or_default())
        }
    });
    let previous = next_log_request(&mut n1).await;
    assert!(previous.previous);
    let refusal = "previous terminated process of application \"web\" in namespace \"default\" not found";
    let chunk = LogChunk { id: previous.id, data: Vec::new(), eof: false, error: Some(refusal.into()) };
    sender.send(NodeMessage::LogChunk(chunk)).await.expect("sent");
    let (code, text) = asking.await.expect("the request finishes");
    assert_eq!(code, StatusCode::BAD_REQUEST, "{text}");
    assert!(text.contains("previous terminated process"), "{text}");

    // A log of an Application that does not exist is a 404 naming pods.
    let missing = server
        .admin()
        .get(format!("{}/api/v1/namespaces/default/pods/nope/log", server.url()))
        .send()
        .await
        .expect("answers");
    assert_eq!(missing.status(), StatusCode::NOT_FOUND);

    // Deleting the Node freezes the node: nothing is pushed, so nothing it runs is torn down.
    let (code, _) = admin_json(&server, reqwest::Method::DELETE, "/api/v1/nodes/n1", None).await;
    assert_eq!(code, StatusCode::OK);
    let (code, _) =
        admin_json(&server, reqwest::Method::DELETE, &format!("{FLEET}/applications/web"), None).await;
    assert_eq!(code, StatusCode::OK);
    // Nothing the push loop does for a frozen node can be seen, so no marker says it has
    // looked at n1 since: the check waits 3 s, where a push follows a change within
    // milliseconds on a quiet machine.
    let frozen = tokio::time::timeout(Duration::from_secs(3), next_desired(&mut n1)).await;
    assert!(frozen.is_err(), "a frozen node was pushed {:?}", frozen.map(|d| d.applications.len()));
    // Its next status re-creates the Node, cordoned, and pushing resumes.
    sender
        .send(NodeMessage::Status(NodeReport {
            capacity: [("cpu".to_owned(), "4".to_owned())].into(),
            ..report()
        }))
        .await
        .expect("sent");
    let resumed = next_desired(&mut n1).await;
    assert!(resumed.applications.is_empty(), "the deleted application is gone from the node's state");
    let (code, node) = admin_json(&server, reqwest::Method::GET, "/api/v1/nodes/n1", None).await;
    assert_eq!((code, node["spec"]["unschedulable"].as_bool()), (StatusCode::OK, Some(true)));
}

/// A node connected with one Application `web` bound to it.
async fn node_running_web(server: &TestServer) -> Connection {
    let mut n1 = connect(&node_credentials(server, "n1")).await.expect("node n1 connects");
    n1.sender().send(NodeMessage::Status(report())).await.expect("sent");
    next_desired(&mut n1).await;
    let (code, answer) = admin_json(
        server,
        reqwest::Method::POST,
        &format!("{FLEET}/applications"),
        Some(application("web", "n1", None)),
    )
    .await;
    assert_eq!(code, StatusCode::CREATED, "{answer}");
    assert_eq!(next_desired(&mut n1).await.applications.len(), 1);
    n1
}

#[tokio::test]
async fn a_log_stream_that_breaks_off_midway_fails_instead_of_ending() {
    let server = TestServer::start(Store::Memory).await;
    let mut n1 = node_running_web(&server).await;
    let sender = n1.sender();
    let url = format!("{}/api/v1/namespaces/default/pods/web/log?follow=true", server.url());
    let (answered, answer) = tokio::sync::oneshot::channel();
    let reader = tokio::spawn({
        let client = server.admin();
        async move {
            let mut response = client.get(url).send().await.expect("the server answers");
            let _ = answered.send(response.status());
            let mut read = Vec::new();
            loop {
                match response.chunk().await {
                    Ok(Some(data)) => read.extend_from_slice(&data),
                    Ok(None) => return (read, Ok(())),
                    Err(error) => return (read, Err(error.to_string())),
                }
            }
        }
    });
    let request = next_log_request(&mut n1).await;
    let chunk = LogChunk { id: request.id, data: b"first\n".to_vec(), eof: false, error: None };
    sender.send(NodeMessage::LogChunk(chunk)).await.expect("sent");
    // Once the answer is 200, the failure can only break the body.
    let status = tokio::time::timeout(Duration::from_secs(10), answer).await.expect("an answer within 10 s");
    assert_eq!(status.expect("the reader reports the answer"), StatusCode::OK);
    let broken =
        LogChunk { id: request.id, data: Vec::new(), eof: false, error: Some("the disk went away".into()) };
    sender.send(NodeMessage::LogChunk(broken)).await.expect("sent");
    let (read, ended) = tokio::time::timeout(Duration::from_secs(10), reader)
        .await
        .expect("the reader finishes")
        .expect("the reader does not panic");
    assert_eq!(read, b"first\n");
    assert!(ended.is_err(), "a log cut short read as complete");
}

#[tokio::test]
async fn reading_a_log_is_authorized_as_pods_log_and_audited() {
    let server = TestServer::start(Store::Memory).await;
    let mut n1 = node_running_web(&server).await;
    let sender = n1.sender();
    server.add_token("vera-token", "vera", "");
    server.add_token("stan-token", "stan", "");
    // Vera views the namespace; Stan may read pods but not their logs.
    let rbac = "/apis/authorization.example.com/v1/namespaces/default";
    let objects = [
        (
            "roles",
            json!({"apiVersion": "authorization.example.com/v1", "kind": "Role", "metadata": {"name": "pod-reader"},
                         "rules": [{"apis": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}]}),
        ),
        (
            "rolebindings",
            json!({"apiVersion": "authorization.example.com/v1", "kind": "RoleBinding", "metadata": {"name": "stan"},
                                "subjects": [{"kind": "User", "name": "stan"}], "roleRef": {"kind": "Role", "name": "pod-reader"}}),
        ),
        (
            "rolebindings",
            json!({"apiVersion": "authorization.example.com/v1", "kind": "RoleBinding", "metadata": {"name": "vera"},
                                "subjects": [{"kind": "User", "name": "vera"}], "roleRef": {"kind": "ClusterRole", "name": "view"}}),
        ),
    ];
    for (plural, object) in objects {
        let (code, answer) =
            admin_json(&server, reqwest::Method::POST, &format!("{rbac}/{plural}"), Some(object)).await;
        assert_eq!(code, StatusCode::CREATED, "{answer}");
    }
    let as_user = |token: &str| server.token_builder(token).build().expect("a client");
    let pod_log = format!("{}/api/v1/namespaces/default/pods/web/log", server.url());
    let pod =
        as_user("stan-token").get(format!("{}/api/v1/namespaces/default/pods/web", server.url())).send();
    assert_eq!(pod.await.expect("answers").status(), StatusCode::OK, "stan reads the pod");
    let refused = as_user("stan-token").get(&pod_log).send().await.expect("answers");
    assert_eq!(refused.status(), StatusCode::FORBIDDEN);
    let refusal: Value = refused.json().await.expect("a Status");
    let message = refusal["message"].as_str().unwrap_or_default();
    assert!(message.contains("User \"stan\" cannot get resource \"pods/log\""), "{refusal}");

    // A log read, through pods or through the Application, streams what the node sends.
    let reads = [
        (as_user("vera-token"), pod_log.clone()),
        (server.admin(), format!("{}{FLEET}/applications/web/log", server.url())),
    ];
    for (client, url) in reads {
        let reader = tokio::spawn(async move {
            let response = client.get(url).send().await.expect("the server answers");
            (response.status(), response.text().await.unwrap_or_default())
        });
        let request = next_log_request(&mut n1).await;
        assert_eq!(request.name, "web");
        for (data, eof) in [(&b"one\n"[..], false), (&b"two\n"[..], true)] {
            let chunk = LogChunk { id: request.id, data: data.to_vec(), eof, error: None };
            sender.send(NodeMessage::LogChunk(chunk)).await.expect("sent");
        }
        let (code, text) = reader.await.expect("the reader finishes");
        assert_eq!((code, text.as_str()), (StatusCode::OK, "one\ntwo\n"));
    }

    // Both of Stan's and Vera's reads are in the audit log, under their names.
    let audit = std::fs::read_to_string(server.data_dir().join("audit.log")).expect("the audit log");
    let lines: Vec<Value> = audit.lines().map(|line| serde_json::from_str(line).expect("JSON")).collect();
    let read_by = |user: &str| {
        lines
            .iter()
            .find(|line| {
                line["user"] == user
                    && line["path"].as_str().is_some_and(|path| path.ends_with("/pods/web/log"))
            })
            .unwrap_or_else(|| panic!("no audit line for {user}'s log read in:\n{audit}"))
    };
    assert_eq!(
        (read_by("vera")["code"].as_u64(), read_by("vera")["verb"].as_str()),
        (Some(200), Some("GET"))
    );
    assert_eq!(read_by("stan")["decision"], "denied");
}

#[tokio::test]
async fn a_repeated_event_counts_on_one_event_instead_of_writing_another() {
    let server = TestServer::start(Store::Memory).await;
    let n1 = node_running_web(&server).await;
    let (_, application) =
        admin_json(&server, reqwest::Method::GET, &format!("{FLEET}/applications/web"), None).await;
    let uid = application["metadata"]["uid"].as_str().expect("a uid").to_owned();
    let event = |message: &str| kayra_api::session::NodeEvent {
        namespace: "default".into(),
        name: "web".into(),
        uid: uid.clone(),
        reason: "BackOff".into(),
        message: message.into(),
        type_: "Warning".into(),
    };
    let repeated = "Back-off restarting the failed process (Error: exit code 1)";
    for message in
        [repeated, repeated, repeated, "Back-off restarting the failed process (Error: exit code 2)"]
    {
        n1.sender().send(NodeMessage::Event(event(message))).await.expect("sent");
    }
    let path = "/api/v1/namespaces/default/events?fieldSelector=reason=BackOff";
    let events = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            let (code, list) = admin_json(&server, reqwest::Method::GET, path, None).await;
            assert_eq!(code, StatusCode::OK, "{list}");
            let items = list["items"].as_array().cloned().unwrap_or_default();
            let counted = items.iter().any(|e| e["count"] == 3) && items.iter().any(|e| e["count"] == 1);
            if counted {
                return items;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("one Event counted three times and another once");
    assert_eq!(events.len(), 2, "a repeat is no new Event: {events:#?}");
    let counted = events.iter().find(|e| e["count"] == 3).expect("the repeated one");
    assert_eq!(counted["message"], repeated);
    assert_eq!(counted["series"]["count"], 3, "{counted}");
    assert!(counted["series"]["lastObservedTime"].as_str().is_some_and(|t| t.contains('.')), "{counted}");
    assert!(counted["lastTimestamp"].as_str() >= counted["firstTimestamp"].as_str());
}

#[tokio::test]
async fn a_nodes_events_about_an_application_are_found_by_its_pods_uid() {
    let server = TestServer::start(Store::Memory).await;
    let n1 = node_running_web(&server).await;
    let (_, application) =
        admin_json(&server, reqwest::Method::GET, &format!("{FLEET}/applications/web"), None).await;
    let (_, pod) =
        admin_json(&server, reqwest::Method::GET, "/api/v1/namespaces/default/pods/web", None).await;
    let uid = |object: &Value| object["metadata"]["uid"].as_str().expect("a uid").to_owned();
    let (app_uid, pod_uid) = (uid(&application), uid(&pod));
    assert_ne!(app_uid, pod_uid);
    let event = kayra_api::session::NodeEvent {
        namespace: "default".into(),
        name: "web".into(),
        uid: app_uid.clone(),
        reason: "BackOff".into(),
        message: "Back-off restarting failed process".into(),
        type_: "Warning".into(),
    };
    n1.sender().send(NodeMessage::Event(event)).await.expect("sent");
    // What `kubectl describe pod web` asks (kind left out), and `kubectl describe application`.
    let selectors = [
        format!("involvedObject.name=web,involvedObject.namespace=default,involvedObject.uid={pod_uid}"),
        format!(
            "involvedObject.kind=Application,involvedObject.name=web,involvedObject.namespace=default,involvedObject.uid={app_uid}"
        ),
    ];
    for selector in selectors {
        let path = format!("/api/v1/namespaces/default/events?fieldSelector={selector}");
        let listed = tokio::time::timeout(Duration::from_secs(10), async {
            loop {
                let (code, list) = admin_json(&server, reqwest::Method::GET, &path, None).await;
                assert_eq!(code, StatusCode::OK, "{list}");
                if let Some(items) = list["items"].as_array().filter(|items| !items.is_empty()) {
                    return items.clone();
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
        .await
        .unwrap_or_else(|_| panic!("no Event found by {selector}"));
        assert_eq!(listed[0]["reason"], "BackOff");
        assert_eq!(listed[0]["source"]["host"], "n1");
    }
}
