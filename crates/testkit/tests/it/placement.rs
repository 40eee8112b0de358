//! Placement admission and `pods/eviction` over HTTPS, on a fleet of Node objects with no
//! agents: a pin names an existing Node with room, only the scheduler marks and moves what it
//! placed, and an eviction moves a scheduler-placed Application and refuses a pinned one with
//! Kubernetes' disruption-budget answer.

use std::time::Duration;

use kayra_testkit::{Store, TestServer};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

const FLEET: &str = "/apis/fleet.example.com/v1/namespaces/default";
const PODS: &str = "/api/v1/namespaces/default/pods";
const SCHEDULED_BY: &str = "fleet.example.com/scheduled-by";

async fn send(
    server: &TestServer,
    token: Option<&str>,
    method: Method,
    path: &str,
    body: Option<Value>,
) -> (StatusCode, Value) {
    let client = match token {
        None => server.admin(),
        Some(_) => server.anonymous(),
    };
    let mut request = client.request(method.clone(), format!("{}{path}", server.url()));
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    if let Some(body) = body {
        request = match method {
            Method::PATCH => {
                request.header("Content-Type", "application/merge-patch+json").body(body.to_string())
            }
            _ => request.json(&body),
        };
    }
    let response = request.send().await.expect("the server answers");
    let code = response.status();
    (code, response.json().await.unwrap_or(Value::Null))
}

/// A merge patch of `path` as the admin.
async fn send_patch(server: &TestServer, path: &str, patch: Value) -> (StatusCode, Value) {
    let response = server
        .admin()
        .patch(format!("{}{path}", server.url()))
        .header("Content-Type", "application/merge-patch+json")
        .body(patch.to_string())
        .send()
        .await
        .expect("the server answers");
    let code = response.status();
    (code, response.json().await.unwrap_or(Value::Null))
}

async fn admin(server: &TestServer, method: Method, path: &str, body: Option<Value>) -> (StatusCode, Value) {
    send(server, None, method, path, body).await
}

/// A Ready, schedulable Node offering 2 cores and 1Gi.
async fn node(server: &TestServer, name: &str) {
    let body = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}, "spec": {"unschedulable": false}});
    let (code, created) = admin(server, Method::POST, "/api/v1/nodes", Some(body)).await;
    assert_eq!(code, StatusCode::CREATED, "{created}");
    let now = jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string();
    let status = json!({"status": {
        "allocatable": {"cpu": "2", "memory": "1Gi"}, "capacity": {"cpu": "2", "memory": "1Gi"},
        "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "lastHeartbeatTime": now, "lastTransitionTime": now}],
    }});
    let (code, written) =
        admin(server, Method::PATCH, &format!("/api/v1/nodes/{name}/status"), Some(status)).await;
    assert_eq!(code, StatusCode::OK, "{written}");
}

fn application(name: &str, node: Option<&str>, memory: &str) -> Value {
    let mut app = json!({"apiVersion": "fleet.example.com/v1", "kind": "Application", "metadata": {"name": name},
                         "spec": {"command": ["/bin/sleep", "1000"], "resources": {"requests": {"memory": memory}}}});
    if let Some(node) = node {
        app["spec"]["placement"] = json!({"nodeName": node});
    }
    app
}

async fn eventually(what: &str, mut check: impl AsyncFnMut() -> Option<Value>) -> Value {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(tokio::time::Instant::now() < deadline, "{what} did not happen");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn eviction(name: &str) -> Value {
    json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": "default"}})
}

#[tokio::test]
async fn a_pin_names_an_existing_node_with_room_and_only_the_scheduler_moves_what_it_placed() {
    let server = TestServer::start(Store::Memory).await;
    let (code, refused) = admin(
        &server,
        Method::POST,
        &format!("{FLEET}/applications"),
        Some(application("early", Some("n1"), "1Mi")),
    )
    .await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "no Node n1 yet: {refused}");
    assert_eq!(refused["details"]["causes"][0]["field"], "spec.placement.nodeName", "{refused}");

    // Created, then pinned to at once: the pin knows the Node.
    node(&server, "n1").await;
    let (code, pinned) = admin(
        &server,
        Method::POST,
        &format!("{FLEET}/applications"),
        Some(application("pinned", Some("n1"), "512Mi")),
    )
    .await;
    assert_eq!(code, StatusCode::CREATED, "{pinned}");

    // The only schedulable node gets the unpinned one, marked as the scheduler's.
    let (code, created) = admin(
        &server,
        Method::POST,
        &format!("{FLEET}/applications"),
        Some(application("moved", None, "256Mi")),
    )
    .await;
    assert_eq!(code, StatusCode::CREATED, "{created}");
    let placed = eventually("moved to be placed", async || {
        let (_, app) = admin(&server, Method::GET, &format!("{FLEET}/applications/moved"), None).await;
        (app["spec"]["placement"]["nodeName"] == "n1").then_some(app)
    })
    .await;
    assert_eq!(placed["metadata"]["annotations"][SCHEDULED_BY], "kayra-scheduler", "{placed}");

    // 512Mi + 256Mi taken of 1Gi: 512Mi more is 256Mi too many.
    let (code, over) = admin(
        &server,
        Method::POST,
        &format!("{FLEET}/applications"),
        Some(application("big", Some("n1"), "512Mi")),
    )
    .await;
    assert_eq!(code, StatusCode::FORBIDDEN, "{over}");
    let message = over["message"].as_str().unwrap_or_default();
    assert!(message.contains("would exceed node \"n1\"'s allocatable memory by 256Mi"), "{message}");

    // Not even system:masters marks an Application as the scheduler's, or moves one it placed.
    let mark = json!({"metadata": {"annotations": {SCHEDULED_BY: "kayra-scheduler"}}});
    let (code, answer) =
        admin(&server, Method::PATCH, &format!("{FLEET}/applications/pinned"), Some(mark)).await;
    assert_eq!(code, StatusCode::FORBIDDEN, "{answer}");
    node(&server, "n2").await;
    let elsewhere = json!({"spec": {"placement": {"nodeName": "n2"}}});
    let (code, answer) =
        admin(&server, Method::PATCH, &format!("{FLEET}/applications/moved"), Some(elsewhere)).await;
    assert_eq!(code, StatusCode::FORBIDDEN, "{answer}");
    assert!(answer["message"].as_str().unwrap_or_default().contains("may not move"), "{answer}");
    // Clearing the binding asks for a new placement: the mark goes with it.
    let (code, answer) =
        admin(&server, Method::PATCH, "/api/v1/nodes/n1", Some(json!({"spec": {"unschedulable": true}})))
            .await;
    assert_eq!(code, StatusCode::OK, "{answer}");
    let cleared = json!({"spec": {"placement": {"nodeName": null}}});
    let (code, answer) =
        admin(&server, Method::PATCH, &format!("{FLEET}/applications/moved"), Some(cleared)).await;
    assert_eq!(code, StatusCode::OK, "{answer}");
    assert_eq!(answer["spec"]["placement"]["nodeName"], Value::Null, "{answer}");
    assert_eq!(answer["metadata"]["annotations"][SCHEDULED_BY], Value::Null, "{answer}");
    let replaced = eventually("moved to be placed again, on n2", async || {
        let (_, app) = admin(&server, Method::GET, &format!("{FLEET}/applications/moved"), None).await;
        (app["spec"]["placement"]["nodeName"] == "n2").then_some(app)
    })
    .await;
    assert_eq!(replaced["metadata"]["annotations"][SCHEDULED_BY], "kayra-scheduler", "{replaced}");
}

#[tokio::test]
async fn an_eviction_moves_what_the_scheduler_placed_and_refuses_a_pin_as_a_disruption_budget_would() {
    let server = TestServer::start(Store::Memory).await;
    // kubectl drain looks for exactly this in discovery before it evicts.
    let (_, core) = admin(&server, Method::GET, "/api/v1", None).await;
    let advertised =
        core["resources"].as_array().into_iter().flatten().find(|r| r["name"] == "pods/eviction");
    assert_eq!(
        advertised.map(|r| (r["group"].clone(), r["version"].clone(), r["kind"].clone(), r["verbs"].clone())),
        Some((json!("policy"), json!("v1"), json!("Eviction"), json!(["create"]))),
        "{core}"
    );

    node(&server, "n1").await;
    for app in [application("pinned", Some("n1"), "1Mi"), application("moved", None, "1Mi")] {
        let (code, created) = admin(&server, Method::POST, &format!("{FLEET}/applications"), Some(app)).await;
        assert_eq!(code, StatusCode::CREATED, "{created}");
    }
    let before = eventually("moved to be placed", async || {
        let (_, pod) = admin(&server, Method::GET, &format!("{PODS}/moved"), None).await;
        (pod["spec"]["nodeName"] == "n1").then_some(pod)
    })
    .await;
    assert_eq!(before["metadata"]["ownerReferences"][0]["kind"], "Application", "{before}");
    assert_eq!(before["metadata"]["ownerReferences"][0]["controller"], true, "{before}");
    // Cordoned, the node gets nothing back.
    let (code, _) =
        admin(&server, Method::PATCH, "/api/v1/nodes/n1", Some(json!({"spec": {"unschedulable": true}})))
            .await;
    assert_eq!(code, StatusCode::OK);

    // What the node reported of its run there.
    let running = json!({"status": {"phase": "Running", "startedAt": "2026-12-01T00:00:00Z", "restarts": 2,
        "conditions": [{"type": "Ready", "status": "True", "reason": "ProcessRunning"},
                       {"type": "Scheduled", "status": "True", "reason": "Scheduled"}]}});
    let (code, answer) = send_patch(&server, &format!("{FLEET}/applications/moved/status"), running).await;
    assert_eq!(code, StatusCode::OK, "{answer}");

    server.add_token("viewer-token", "viewer", "");
    let (code, _) = send(
        &server,
        Some("viewer-token"),
        Method::POST,
        &format!("{PODS}/moved/eviction"),
        Some(eviction("moved")),
    )
    .await;
    assert_eq!(code, StatusCode::FORBIDDEN, "evicting needs create on pods/eviction");

    let (code, answer) =
        admin(&server, Method::POST, &format!("{PODS}/moved/eviction?dryRun=All"), Some(eviction("moved")))
            .await;
    assert_eq!(code, StatusCode::CREATED, "{answer}");
    let in_body = json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "moved"},
                         "deleteOptions": {"dryRun": ["All"]}});
    let (code, answer) = admin(&server, Method::POST, &format!("{PODS}/moved/eviction"), Some(in_body)).await;
    assert_eq!(code, StatusCode::CREATED, "{answer}");
    let (_, still) = admin(&server, Method::GET, &format!("{FLEET}/applications/moved"), None).await;
    assert_eq!(still["spec"]["placement"]["nodeName"], "n1", "a dry run moves nothing");
    assert_eq!(still["metadata"]["annotations"][SCHEDULED_BY], "kayra-scheduler", "{still}");
    let (_, pod) = admin(&server, Method::GET, &format!("{PODS}/moved"), None).await;
    assert_eq!(pod["metadata"]["uid"], before["metadata"]["uid"], "the pod is the same after dry runs");
    let (_, events) = admin(&server, Method::GET, "/api/v1/namespaces/default/events", None).await;
    assert!(!events.to_string().contains("\"Evicted\""), "a dry run records nothing: {events}");

    let (code, answer) =
        admin(&server, Method::POST, &format!("{PODS}/moved/eviction"), Some(eviction("moved"))).await;
    assert_eq!((code, answer["status"].as_str()), (StatusCode::CREATED, Some("Success")), "{answer}");
    let (_, unbound) = admin(&server, Method::GET, &format!("{FLEET}/applications/moved"), None).await;
    assert_eq!(unbound["spec"]["placement"]["nodeName"], Value::Null, "{unbound}");
    assert_eq!(unbound["metadata"]["annotations"][SCHEDULED_BY], Value::Null, "{unbound}");
    // Nothing runs it any more: it is Pending and not Ready, not Running as on its old node.
    let status = &unbound["status"];
    assert_eq!(
        (status["phase"].as_str(), status["startedAt"].as_str()),
        (Some("Pending"), None),
        "{unbound}"
    );
    let conditions: Vec<&str> =
        status["conditions"].as_array().into_iter().flatten().filter_map(|c| c["type"].as_str()).collect();
    assert!(!conditions.contains(&"Ready"), "{unbound}");
    let (_, after) = admin(&server, Method::GET, &format!("{PODS}/moved"), None).await;
    assert_ne!(after["metadata"]["uid"], before["metadata"]["uid"], "drain sees the evicted pod gone");
    let events = eventually("the Evicted event", async || {
        let (_, events) = admin(&server, Method::GET, "/api/v1/namespaces/default/events", None).await;
        let text = events.to_string();
        text.contains("Evicted from node n1").then_some(events)
    })
    .await;
    assert!(events.to_string().contains("\"Evicted\""), "{events}");

    let (code, refused) =
        admin(&server, Method::POST, &format!("{PODS}/pinned/eviction"), Some(eviction("pinned"))).await;
    assert_eq!(code, StatusCode::TOO_MANY_REQUESTS, "{refused}");
    let message = refused["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with("Cannot evict pod as it would violate the pod's disruption budget."),
        "{message}"
    );
    assert!(message.contains("pinned to node \"n1\""), "{message}");
    assert_eq!(refused["reason"], "TooManyRequests", "{refused}");
    assert_eq!(refused["details"]["retryAfterSeconds"], 1, "kubectl drain retries: {refused}");
    let (_, kept) = admin(&server, Method::GET, &format!("{FLEET}/applications/pinned"), None).await;
    assert_eq!(kept["spec"]["placement"]["nodeName"], "n1");

    let (code, _) =
        admin(&server, Method::POST, &format!("{PODS}/ghost/eviction"), Some(eviction("ghost"))).await;
    assert_eq!(code, StatusCode::NOT_FOUND);
    let (code, _) =
        admin(&server, Method::POST, &format!("{PODS}/pinned/eviction"), Some(eviction("other"))).await;
    assert_eq!(code, StatusCode::BAD_REQUEST, "the Eviction names the pod of the path");
}

#[tokio::test]
async fn a_binding_places_an_application_and_marks_it_scheduled_through_applications_or_pods() {
    let server = TestServer::start(Store::Memory).await;
    node(&server, "n1").await;
    // Cordoned, so that the scheduler leaves the Applications to the bindings below.
    let (code, _) =
        admin(&server, Method::PATCH, "/api/v1/nodes/n1", Some(json!({"spec": {"unschedulable": true}})))
            .await;
    assert_eq!(code, StatusCode::OK);
    for name in ["web", "api"] {
        let (code, created) = admin(
            &server,
            Method::POST,
            &format!("{FLEET}/applications"),
            Some(application(name, None, "1Mi")),
        )
        .await;
        assert_eq!(code, StatusCode::CREATED, "{created}");
    }
    let binding = |name: &str, node: &str| json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name}, "target": {"kind": "Node", "name": node}});

    server.add_token("viewer-token", "viewer", "");
    let (code, _) = send(
        &server,
        Some("viewer-token"),
        Method::POST,
        &format!("{FLEET}/applications/web/binding"),
        Some(binding("web", "n1")),
    )
    .await;
    assert_eq!(code, StatusCode::FORBIDDEN, "binding needs create on applications/binding");
    let (code, refused) = admin(
        &server,
        Method::POST,
        &format!("{FLEET}/applications/web/binding"),
        Some(binding("web", "n9")),
    )
    .await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "no Node n9: {refused}");

    let (code, answer) = admin(
        &server,
        Method::POST,
        &format!("{FLEET}/applications/web/binding"),
        Some(binding("web", "n1")),
    )
    .await;
    assert_eq!((code, answer["status"].as_str()), (StatusCode::CREATED, Some("Success")), "{answer}");
    let (code, answer) =
        admin(&server, Method::POST, &format!("{PODS}/api/binding"), Some(binding("api", "n1"))).await;
    assert_eq!(code, StatusCode::CREATED, "{answer}");
    for name in ["web", "api"] {
        let (_, bound) = admin(&server, Method::GET, &format!("{FLEET}/applications/{name}"), None).await;
        assert_eq!(bound["spec"]["placement"]["nodeName"], "n1", "{bound}");
        assert_eq!(bound["status"]["conditions"][0]["type"], "Scheduled", "{bound}");
        assert_eq!(bound["status"]["conditions"][0]["status"], "True", "{bound}");
        assert_eq!(bound["metadata"]["annotations"][SCHEDULED_BY], Value::Null, "the author's pin: {bound}");
    }
    let (code, again) =
        admin(&server, Method::POST, &format!("{PODS}/api/binding"), Some(binding("api", "n1"))).await;
    assert_eq!(code, StatusCode::CONFLICT, "already bound: {again}");
}

/// Placement is the control plane's decision, not a new desired state from the author: the
/// scheduler's binding, and an eviction's unbinding, leave `metadata.generation` as the author
/// left it, as kube-apiserver's `pods/binding` leaves a Pod's.
#[tokio::test]
async fn a_placed_application_keeps_the_generation_its_author_wrote() {
    let server = TestServer::start(Store::Memory).await;
    node(&server, "n1").await;
    let (code, created) = admin(
        &server,
        Method::POST,
        &format!("{FLEET}/applications"),
        Some(application("placed", None, "1Mi")),
    )
    .await;
    assert_eq!((code, &created["metadata"]["generation"]), (StatusCode::CREATED, &json!(1)), "{created}");
    let placed = eventually("placed to be placed", async || {
        let (_, app) = admin(&server, Method::GET, &format!("{FLEET}/applications/placed"), None).await;
        (app["spec"]["placement"]["nodeName"] == "n1").then_some(app)
    })
    .await;
    assert_eq!(placed["metadata"]["generation"], 1, "the scheduler's binding is not the author's: {placed}");

    // Cordoned, the node gets nothing back, and the eviction's unbinding stays.
    let (code, _) =
        admin(&server, Method::PATCH, "/api/v1/nodes/n1", Some(json!({"spec": {"unschedulable": true}})))
            .await;
    assert_eq!(code, StatusCode::OK);
    let (code, answer) =
        admin(&server, Method::POST, &format!("{PODS}/placed/eviction"), Some(eviction("placed"))).await;
    assert_eq!(code, StatusCode::CREATED, "{answer}");
    let (_, evicted) = admin(&server, Method::GET, &format!("{FLEET}/applications/placed"), None).await;
    assert_eq!(evicted["spec"]["placement"]["nodeName"], Value::Null, "{evicted}");
    assert_eq!(evicted["metadata"]["generation"], 1, "nor is the eviction's unbinding: {evicted}");
}
