//! The API catalog over HTTP, as its documentation's curl examples use it (bearer token, plain
//! HTTP listener), and its reconciler against a small gateway started by the test.

use std::sync::{Arc, Mutex};

use kayra_catalog::steps::{Mode, ReconcilerConfig, Step};
use kayra_testkit::{Store, TestServer};
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::status_of;

const REGISTRATIONS: &str = "/apis/catalog.example.com/v1/apiregistrations";

struct Curl {
    client: reqwest::Client,
    base: String,
    token: String,
}

impl Curl {
    fn new(server: &TestServer) -> Curl {
        Curl { client: reqwest::Client::new(), base: server.http_url(), token: server.admin_token() }
    }

    async fn send(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> (StatusCode, Value) {
        let mut request =
            self.client.request(method, format!("{}{path}", self.base)).bearer_auth(&self.token);
        if let Some(body) = body {
            request = request.json(&body);
        }
        status_of(request.send().await.unwrap()).await
    }
}

fn is_go_uuid(id: &str) -> bool {
    id.split('-').map(str::len).collect::<Vec<_>>() == [8, 4, 4, 4, 12]
}

#[tokio::test]
async fn registrations_and_subscriptions_as_documented() {
    let server = TestServer::start(Store::Memory).await;
    let curl = Curl::new(&server);
    use reqwest::Method as M;

    let seed =
        json!({"name": "compute.example.com", "short_name": "compute", "active": true, "owner": "sre-a"});
    let (code, created) = curl.send(M::POST, REGISTRATIONS, Some(seed)).await;
    assert_eq!(code, StatusCode::CREATED, "{created}");
    assert_eq!(
        (created["name"].as_str(), created["owner"].as_str()),
        (Some("compute.example.com"), Some("sre-a"))
    );
    assert_eq!(created["kind"], "ApiRegistration");
    assert_eq!(created["metadata"]["name"], "compute.example.com");
    let first_sync = created["sync_id"].as_str().unwrap().to_owned();
    assert!(is_go_uuid(&first_sync), "{first_sync}");

    let (code, body) = curl.send(M::POST, REGISTRATIONS, Some(json!({"name": "fleet.example.com"}))).await;
    assert_eq!(code, StatusCode::BAD_REQUEST, "Kayra's own groups cannot be registered: {body}");
    let (code, body) =
        curl.send(M::POST, REGISTRATIONS, Some(json!({"name": "compute", "owner": "x"}))).await;
    assert_eq!((code, body["reason"].as_str()), (StatusCode::BAD_REQUEST, Some("BadRequest")), "{body}");
    let (code, body) = curl
        .send(M::POST, REGISTRATIONS, Some(json!({"name": "other.example.com", "short_name": "compute"})))
        .await;
    assert_eq!(code, StatusCode::CONFLICT, "{body}");

    let (code, got) = curl.send(M::GET, &format!("{REGISTRATIONS}/compute.example.com"), None).await;
    assert_eq!((code, got["short_name"].as_str()), (StatusCode::OK, Some("compute")));
    let (_, listed) = curl.send(M::GET, REGISTRATIONS, None).await;
    assert_eq!(listed["items"].as_array().unwrap().len(), 1);
    let update = json!({"name": "compute.example.com", "owner": "sre-b"});
    let (code, updated) =
        curl.send(M::PUT, &format!("{REGISTRATIONS}/compute.example.com"), Some(update)).await;
    assert_eq!((code, updated["owner"].as_str()), (StatusCode::OK, Some("sre-b")), "{updated}");
    assert_eq!(updated["sync_id"], first_sync.as_str(), "an update naming no sync_id keeps it");
    assert_eq!(
        (updated["active"].as_bool(), updated["short_name"].as_str()),
        (Some(true), Some("compute")),
        "{updated}"
    );

    let subscriptions = "/apis/catalog.example.com/v1/namespaces/default/subscriptions";
    let (code, body) =
        curl.send(M::POST, subscriptions, Some(json!({"api": "nope.example.com", "active": true}))).await;
    assert_eq!(code, StatusCode::NOT_FOUND, "{body}");
    let (code, subscription) =
        curl.send(M::POST, subscriptions, Some(json!({"api": "compute.example.com", "active": true}))).await;
    assert_eq!(code, StatusCode::CREATED, "{subscription}");
    assert_eq!(subscription["metadata"]["name"], "compute.example.com");
    let elsewhere = "/apis/catalog.example.com/v1/namespaces/ghost/subscriptions";
    let (code, _) =
        curl.send(M::POST, elsewhere, Some(json!({"api": "compute.example.com", "active": true}))).await;
    assert_eq!(code, StatusCode::NOT_FOUND, "no such namespace");

    let sync = format!("{REGISTRATIONS}/compute.example.com/sync");
    let (code, body) = curl.send(M::PUT, &sync, Some(json!({"canary_namespaces": ["sre"]}))).await;
    assert_eq!(code, StatusCode::NOT_FOUND, "sre is not subscribed: {body}");
    let (code, canary) = curl.send(M::PUT, &sync, Some(json!({"canary_namespaces": ["default"]}))).await;
    assert_eq!(code, StatusCode::OK, "{canary}");
    assert_eq!(canary["canary_namespaces"], json!(["default"]));
    let canary_sync = canary["sync_id"].as_str().unwrap().to_owned();
    assert_ne!(canary_sync, first_sync);
    let (_, released) = curl.send(M::PUT, &sync, Some(json!({}))).await;
    assert_eq!(released["sync_id"], canary_sync.as_str(), "the release reuses the canary's build");
    assert!(released.get("canary_namespaces").is_none(), "{released}");
    let (_, fresh) = curl.send(M::PUT, &sync, Some(json!({}))).await;
    assert_ne!(fresh["sync_id"], canary_sync.as_str(), "nothing pending: a fresh build");

    let (code, status) =
        curl.send(M::GET, &format!("{REGISTRATIONS}/compute.example.com/status"), None).await;
    assert_eq!(code, StatusCode::OK);
    assert_eq!(
        (status["name"].as_str(), status["sync_id"].as_str()),
        (Some("compute.example.com"), fresh["sync_id"].as_str())
    );
    assert!(status["subscriptions"].is_array(), "{status}");
    let (code, _) =
        curl.send(M::GET, &format!("{REGISTRATIONS}/compute.example.com/openapi.json"), None).await;
    assert_eq!(code, StatusCode::NOT_FOUND, "no gateway, no document");

    let (code, body) = curl.send(M::DELETE, &format!("{REGISTRATIONS}/compute.example.com"), None).await;
    assert_eq!(code, StatusCode::CONFLICT, "a subscription refers to it: {body}");
    let (code, _) = curl.send(M::DELETE, &format!("{subscriptions}/compute.example.com"), None).await;
    assert_eq!(code, StatusCode::OK);
    let (code, _) = curl.send(M::DELETE, &format!("{REGISTRATIONS}/compute.example.com"), None).await;
    assert_eq!(code, StatusCode::OK);
    let (code, _) = curl.send(M::GET, &format!("{REGISTRATIONS}/compute.example.com"), None).await;
    assert_eq!(code, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn only_sysadmins_manage_registrations_and_everyone_reads_documents() {
    let server = TestServer::start(Store::Memory).await;
    server.add_token("alice-token", "alice", "");
    let alice = Curl { token: "alice-token".into(), ..Curl::new(&server) };
    use reqwest::Method as M;
    let (code, body) = alice.send(M::POST, REGISTRATIONS, Some(json!({"name": "mine.example.com"}))).await;
    assert_eq!(code, StatusCode::FORBIDDEN, "{body}");
    assert_eq!(alice.send(M::GET, REGISTRATIONS, None).await.0, StatusCode::FORBIDDEN);
    let admin = Curl::new(&server);
    admin.send(M::POST, REGISTRATIONS, Some(json!({"name": "mine.example.com"}))).await;
    let (code, _) = alice.send(M::GET, &format!("{REGISTRATIONS}/mine.example.com/openapi.json"), None).await;
    assert_eq!(code, StatusCode::NOT_FOUND, "allowed, just not fetched yet");
    let (code, _) = alice.send(M::GET, &format!("{REGISTRATIONS}/mine.example.com/status"), None).await;
    assert_eq!(code, StatusCode::FORBIDDEN);
}

/// A gateway in front of one API: its document, and a hook the mode's step calls.
async fn gateway(hooks: Arc<Mutex<Vec<String>>>) -> String {
    let document = json!({"openapi": "3.1.0", "info": {"title": "compute", "version": "1"}, "paths": {
        "/apis/compute.example.com/v1/namespaces/{namespace}/machines": {"get": {}, "post": {}},
        "/apis/compute.example.com/v1/namespaces/{namespace}/machines/{name}": {"get": {}, "delete": {}},
    }});
    let app = axum::Router::new()
        .route("/apis/compute.example.com/-/openapi.json", axum::routing::get(move || async move { axum::Json(document) }))
        .route(
            "/hooks/{namespace}/{sync}",
            axum::routing::post(move |axum::extract::Path((namespace, sync)): axum::extract::Path<(String, String)>| async move {
                hooks.lock().unwrap().push(format!("{namespace} {sync}"));
                StatusCode::ACCEPTED
            }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    url
}

#[tokio::test]
async fn a_sync_reaches_subscribers_through_the_gateway() {
    let hooks = Arc::new(Mutex::new(Vec::new()));
    let gateway_url = gateway(hooks.clone()).await;
    let step = Step {
        name: "hook".into(),
        url: "{{ .Gateway }}/hooks/{{ .Subscription.Namespace }}/{{ .SyncID }}".into(),
        ..Step::default()
    };
    let mut reconciler = ReconcilerConfig { gateway_url: Some(gateway_url), ..ReconcilerConfig::default() };
    reconciler.mode.insert("trigger".into(), Mode { steps: vec![step] });
    let server = TestServer::start_with(Store::Memory, |config| config.reconciler = reconciler).await;
    let curl = Curl::new(&server);
    use reqwest::Method as M;

    let body = json!({"name": "compute.example.com", "short_name": "compute", "active": true, "mode": "trigger", "sync_id": "build-1"});
    assert_eq!(curl.send(M::POST, REGISTRATIONS, Some(body)).await.0, StatusCode::CREATED);
    let subscriptions = "/apis/catalog.example.com/v1/namespaces/default/subscriptions";
    curl.send(M::POST, subscriptions, Some(json!({"api": "compute.example.com", "active": true}))).await;

    let status_path = format!("{REGISTRATIONS}/compute.example.com/status");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let status = loop {
        let (_, status) = curl.send(M::GET, &status_path, None).await;
        if status["subscriptions"][0]["synced"] == true {
            break status;
        }
        assert!(std::time::Instant::now() < deadline, "never synced: {status}");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    };
    assert_eq!(
        status["subscriptions"][0],
        json!({"namespace": "default", "state": "success", "current_sync_id": "build-1", "synced": true})
    );
    assert_eq!(hooks.lock().unwrap().as_slice(), ["default build-1"]);

    let (code, document) =
        curl.send(M::GET, &format!("{REGISTRATIONS}/compute.example.com/openapi.json"), None).await;
    assert_eq!(code, StatusCode::OK);
    assert_eq!(document["info"]["title"], "compute", "the document as the app served it");
    let events: Value = server
        .admin()
        .get(format!("{}/api/v1/namespaces/default/events", server.url()))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(events["items"].as_array().unwrap().iter().any(|e| e["reason"] == "Synced"), "{events}");

    // Discovery lists the registered API with the resources its document serves.
    let aggregated: Value = server
        .admin()
        .get(format!("{}/apis", server.url()))
        .header("Accept", "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let compute = aggregated["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["metadata"]["name"] == "compute.example.com");
    let compute = compute.unwrap_or_else(|| panic!("no registered group in {aggregated}"));
    let machines = &compute["versions"][0]["resources"][0];
    assert_eq!(
        (machines["resource"].as_str(), machines["scope"].as_str()),
        (Some("machines"), Some("Namespaced")),
        "{compute}"
    );
    assert_eq!(machines["verbs"], json!(["get", "list", "create", "delete"]));
    let (_, legacy) = curl.send(M::GET, "/apis", None).await;
    assert!(
        legacy["groups"].as_array().unwrap().iter().any(|g| g["name"] == "compute.example.com"),
        "{legacy}"
    );
    let (code, group_version) = curl.send(M::GET, "/apis/compute.example.com/v1", None).await;
    assert_eq!(
        (code, group_version["kind"].as_str()),
        (StatusCode::OK, Some("APIResourceList")),
        "{group_version}"
    );
    assert_eq!(
        group_version["resources"][0]["name"], "machines",
        "legacy discovery matches what /apis advertises"
    );
    let (code, body) =
        curl.send(M::GET, "/apis/compute.example.com/v1/namespaces/default/machines", None).await;
    assert_eq!(code, StatusCode::NOT_FOUND);
    assert!(body["message"].as_str().unwrap().contains("served by its own service"), "{body}");
}

#[tokio::test]
async fn registrations_and_subscriptions_can_be_watched() {
    let server = TestServer::start(Store::Memory).await;
    let curl = Curl::new(&server);
    use reqwest::Method as M;
    curl.send(M::POST, REGISTRATIONS, Some(json!({"name": "first.example.com"}))).await;
    let (_, list) = curl.send(M::GET, REGISTRATIONS, None).await;
    let revision = list["metadata"]["resourceVersion"].as_str().unwrap().to_owned();

    let watch_from = |query: String| {
        let url = format!("{}{REGISTRATIONS}?watch=true&timeoutSeconds=2{query}", curl.base);
        curl.client.get(url).bearer_auth(&curl.token).send()
    };
    let everything = watch_from(String::new()).await.unwrap();
    let since_list = watch_from(format!("&resourceVersion={revision}")).await.unwrap();
    curl.send(M::POST, REGISTRATIONS, Some(json!({"name": "second.example.com"}))).await;
    curl.send(M::PUT, &format!("{REGISTRATIONS}/second.example.com"), Some(json!({"owner": "sre-b"}))).await;
    curl.send(M::DELETE, &format!("{REGISTRATIONS}/second.example.com"), None).await;
    let events = |text: String| -> Vec<(String, String)> {
        text.lines()
            .map(|line| serde_json::from_str::<Value>(line).unwrap())
            .map(|e| {
                (
                    e["type"].as_str().unwrap().to_owned(),
                    e["object"]["name"].as_str().unwrap_or_default().to_owned(),
                )
            })
            .collect()
    };
    let all = events(everything.text().await.unwrap());
    let expected = |names: &[(&str, &str)]| {
        names.iter().map(|(t, n)| ((*t).to_owned(), (*n).to_owned())).collect::<Vec<_>>()
    };
    assert_eq!(
        all,
        expected(&[
            ("ADDED", "first.example.com"),
            ("ADDED", "second.example.com"),
            ("MODIFIED", "second.example.com"),
            ("DELETED", "second.example.com")
        ])
    );
    let later = events(since_list.text().await.unwrap());
    assert_eq!(
        later,
        expected(&[
            ("ADDED", "second.example.com"),
            ("MODIFIED", "second.example.com"),
            ("DELETED", "second.example.com")
        ])
    );

    server.add_token("alice-token", "alice", "");
    let alice = server
        .anonymous()
        .get(format!("{}{REGISTRATIONS}?watch=1", curl.base))
        .bearer_auth("alice-token")
        .send()
        .await
        .unwrap();
    assert_eq!(alice.status(), StatusCode::FORBIDDEN, "watching needs the watch verb");
}

#[tokio::test]
async fn deleting_a_namespace_ends_its_subscriptions() {
    let server = TestServer::start(Store::Memory).await;
    let curl = Curl::new(&server);
    use reqwest::Method as M;
    curl.send(
        M::POST,
        "/api/v1/namespaces",
        Some(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "gone"}})),
    )
    .await;
    curl.send(M::POST, REGISTRATIONS, Some(json!({"name": "compute.example.com"}))).await;
    let subscriptions = "/apis/catalog.example.com/v1/namespaces/gone/subscriptions";
    let (code, _) =
        curl.send(M::POST, subscriptions, Some(json!({"api": "compute.example.com", "active": true}))).await;
    assert_eq!(code, StatusCode::CREATED);
    assert_eq!(curl.send(M::DELETE, "/api/v1/namespaces/gone", None).await.0, StatusCode::OK);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while curl.send(M::GET, &format!("{subscriptions}/compute.example.com"), None).await.0
        != StatusCode::NOT_FOUND
    {
        assert!(std::time::Instant::now() < deadline, "the subscription outlived its namespace");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let (code, body) = curl.send(M::DELETE, &format!("{REGISTRATIONS}/compute.example.com"), None).await;
    assert_eq!(code, StatusCode::OK, "nothing refers to it any more: {body}");
}

#[tokio::test]
async fn discovery_of_registered_apis_is_a_discovery_path_like_any_other() {
    let server = TestServer::start(Store::Memory).await;
    let admin = Curl::new(&server);
    use reqwest::Method as M;
    admin.send(M::POST, REGISTRATIONS, Some(json!({"name": "compute.example.com"}))).await;
    server.add_token("alice-token", "alice", "");
    let alice = Curl { token: "alice-token".into(), ..Curl::new(&server) };
    let (code, group) = alice.send(M::GET, "/apis/compute.example.com", None).await;
    assert_eq!((code, group["kind"].as_str()), (StatusCode::OK, Some("APIGroup")), "{group}");
    let binding = "/apis/authorization.example.com/v1/clusterrolebindings/system:discovery";
    assert_eq!(admin.send(M::DELETE, binding, None).await.0, StatusCode::OK);
    let refused = crate::eventually(StatusCode::NOT_FOUND, || {
        alice.client.get(format!("{}/apis/compute.example.com", alice.base)).bearer_auth(&alice.token)
    })
    .await;
    assert_eq!(refused, StatusCode::NOT_FOUND, "without the discovery grant, no discovery document");
}

#[tokio::test]
async fn the_catalogs_rules_come_from_the_catalog_with_kayras_groups_and_namespaces() {
    let server = TestServer::start(Store::Memory).await;
    let curl = Curl::new(&server);
    use reqwest::Method as M;
    for group in
        ["catalog.example.com", "authorization.example.com", "authorization.k8s.io", "authentication.k8s.io"]
    {
        let (code, body) = curl.send(M::POST, REGISTRATIONS, Some(json!({"name": group}))).await;
        assert_eq!(code, StatusCode::BAD_REQUEST, "{group} is served by Kayra: {body}");
        assert!(body["message"].as_str().unwrap().contains("cannot be registered"), "{body}");
    }
    curl.send(M::POST, REGISTRATIONS, Some(json!({"name": "compute.example.com"}))).await;

    // A finalizer nobody removes keeps the namespace terminating.
    let held = json!({"apiVersion": "v1", "kind": "Namespace",
                      "metadata": {"name": "leaving", "finalizers": ["example.com/hold"]}});
    assert_eq!(curl.send(M::POST, "/api/v1/namespaces", Some(held)).await.0, StatusCode::CREATED);
    assert_eq!(curl.send(M::DELETE, "/api/v1/namespaces/leaving", None).await.0, StatusCode::OK);
    let subscriptions = "/apis/catalog.example.com/v1/namespaces/leaving/subscriptions";
    let (code, body) =
        curl.send(M::POST, subscriptions, Some(json!({"api": "compute.example.com", "active": true}))).await;
    assert_eq!((code, body["reason"].as_str()), (StatusCode::FORBIDDEN, Some("Forbidden")), "{body}");
    assert_eq!(
        body["message"],
        "unable to create new content in namespace leaving because it is being terminated"
    );
}
