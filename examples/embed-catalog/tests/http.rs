//! The team's catalog service over HTTP, on a sled store in a temporary directory, with its
//! reconciler running against a small gateway the test starts: register, subscribe, sync a
//! canary, see it reconciled in the status; a reserved group and a missing namespace refused;
//! and what was written still there after a restart.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::Path;
use kayra_api::clock::SystemClock;
use kayra_catalog::ports::FixedNamespaces;
use kayra_catalog::reconciler::{Events, SubscriptionEvent};
use kayra_catalog::steps::{Mode, ReconcilerConfig, Step};
use kayra_catalog::{Catalog, RandomIds, Scope};
use kayra_example_embed_catalog::reconciler::reconciler;
use reqwest::StatusCode;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

const DOCUMENT: &str = r#"{"openapi": "3.1.0", "paths": {"/apis/compute.example.com/v1/namespaces/{namespace}/machines": {"get": {}}}}"#;

/// How long anything the test waits for may take.
const PATIENCE: Duration = Duration::from_secs(20);

fn open_catalog(dir: &std::path::Path) -> Arc<Catalog> {
    let store = kayra_store_sled::open(&dir.join("store"), kayra_store::mvcc::Options::default()).unwrap();
    let scope = Scope {
        root: "/".to_owned(),
        domain: "example.com".to_owned(),
        platform: "local".to_owned(),
        region: "local".to_owned(),
        reserved_groups: vec!["tenants.example.com".to_owned()],
    };
    let namespaces = FixedNamespaces::new(["default", "sre"]);
    Arc::new(Catalog::new(
        Arc::new(store),
        scope,
        Arc::new(namespaces),
        Arc::new(RandomIds),
        Arc::new(SystemClock),
    ))
}

/// A gateway serving compute.example.com's document and taking its sync notifications, each
/// sent on as `<namespace> <body>`.
async fn gateway() -> (String, mpsc::UnboundedReceiver<String>) {
    let (notified, notifications) = mpsc::unbounded_channel();
    let router = axum::Router::new()
        .route("/apis/compute.example.com/-/openapi.json", axum::routing::get(|| async { DOCUMENT }))
        .route(
            "/apis/compute.example.com/v1/namespaces/{namespace}/sync",
            axum::routing::post(move |Path(namespace): Path<String>, body: String| async move {
                let _ = notified.send(format!("{namespace} {body}"));
                StatusCode::ACCEPTED
            }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, router).await });
    (url, notifications)
}

struct Client {
    http: reqwest::Client,
    base: String,
}

impl Client {
    async fn send(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> (StatusCode, Value) {
        let mut request = self.http.request(method, format!("{}{path}", self.base));
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.unwrap();
        let code = response.status();
        (code, response.json().await.unwrap_or(Value::Null))
    }
}

#[tokio::test]
async fn a_team_serves_and_reconciles_its_own_catalog() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    use reqwest::Method as M;
    let dir = tempfile::tempdir().unwrap();
    let catalog = open_catalog(dir.path());
    let (gateway, mut notifications) = gateway().await;

    let (stop, stopped) = tokio::sync::watch::channel(false);
    let until_stopped = |mut stopped: tokio::sync::watch::Receiver<bool>| async move {
        let _ = stopped.wait_for(|stopped| *stopped).await;
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let client =
        Client { http: reqwest::Client::new(), base: format!("http://{}", listener.local_addr().unwrap()) };
    let serving = tokio::spawn(kayra_example_embed_catalog::serve(
        listener,
        kayra_example_embed_catalog::router(catalog.clone()),
        until_stopped(stopped.clone()),
    ));
    let step = Step {
        url: "{{ .Gateway }}/apis/{{ .Subscription.Api }}/v1/namespaces/{{ .Subscription.Namespace }}/sync"
            .into(),
        body: r#"{"sync_id": "{{ .SyncID }}"}"#.into(),
        ..Step::default()
    };
    let config = ReconcilerConfig {
        gateway_url: Some(gateway),
        mode: [("notify".to_owned(), Mode { steps: vec![step] })].into(),
    };
    let (reported, mut events) = mpsc::unbounded_channel::<SubscriptionEvent>();
    let reconciler =
        reconciler(catalog.clone(), config, Arc::new(Forward(reported)), Duration::from_secs(3600)).unwrap();
    let stop_reconciling = CancellationToken::new();
    let reconciling = tokio::spawn(reconciler.run(stop_reconciling.clone()));

    let compute =
        json!({"name": "compute.example.com", "short_name": "compute", "owner": "sre-a", "mode": "notify"});
    let (code, created) = client.send(M::POST, "/registrations", Some(compute)).await;
    assert_eq!(code, StatusCode::CREATED, "{created}");
    assert_eq!(
        (created["platform"].as_str(), created["kind"].as_str()),
        (Some("local"), Some("ApiRegistration"))
    );
    for reserved in ["tenants.example.com", "catalog.example.com"] {
        let (code, refused) = client.send(M::POST, "/registrations", Some(json!({"name": reserved}))).await;
        assert_eq!(code, StatusCode::BAD_REQUEST, "{reserved} is reserved: {refused}");
        assert!(refused["error"].as_str().unwrap().contains("cannot be registered"), "{refused}");
    }

    let subscription = json!({"api": "compute.example.com", "active": true});
    let (code, subscribed) =
        client.send(M::POST, "/namespaces/sre/subscriptions", Some(subscription.clone())).await;
    assert_eq!(code, StatusCode::CREATED, "{subscribed}");
    let (code, missing) = client.send(M::POST, "/namespaces/ghost/subscriptions", Some(subscription)).await;
    assert_eq!(code, StatusCode::NOT_FOUND, "{missing}");
    assert_eq!(missing["error"], "namespaces \"ghost\" not found");
    let (code, _) = client.send(M::GET, "/namespaces/ghost/subscriptions/compute.example.com", None).await;
    assert_eq!(code, StatusCode::NOT_FOUND, "a refused subscription writes nothing");
    let first = created["sync_id"].as_str().unwrap();
    let notification = tokio::time::timeout(PATIENCE, notifications.recv()).await.expect("sre is notified");
    assert_eq!(
        notification.as_deref(),
        Some(format!(r#"sre {{"sync_id": "{first}"}}"#).as_str()),
        "a new subscriber is brought to the current build"
    );

    let (code, canary) = client
        .send(M::PUT, "/registrations/compute.example.com/sync", Some(json!({"canary_namespaces": ["sre"]})))
        .await;
    assert_eq!(code, StatusCode::OK, "{canary}");
    let build = canary["sync_id"].as_str().unwrap().to_owned();
    let notification = tokio::time::timeout(PATIENCE, notifications.recv()).await.expect("sre is notified");
    assert_eq!(
        notification.as_deref(),
        Some(format!(r#"sre {{"sync_id": "{build}"}}"#).as_str()),
        "the canary"
    );
    // The pass that notified sre records it before it tells its Event.
    tokio::time::timeout(PATIENCE, async {
        while let Some(event) = events.recv().await {
            if event.namespace == "sre" && event.reason == "Synced" && event.message.ends_with(&build) {
                return;
            }
        }
    })
    .await
    .expect("a pass reconciles sre");
    let (code, status) = client.send(M::GET, "/registrations/compute.example.com/status", None).await;
    assert_eq!(code, StatusCode::OK);
    assert_eq!(
        status,
        json!({"name": "compute.example.com", "sync_id": build, "canary_namespaces": ["sre"],
               "subscriptions": [{"namespace": "sre", "state": "success", "current_sync_id": build, "synced": true}]})
    );

    let _ = stop.send(true);
    stop_reconciling.cancel();
    serving.await.unwrap().unwrap();
    reconciling.await.unwrap();
    drop(catalog);

    // A restart over the same directory finds everything as it was left.
    let restarted = open_catalog(dir.path());
    let (registration, subscription) = (
        restarted.registration("compute.example.com").await.unwrap(),
        restarted.subscription("sre", "compute.example.com").await.unwrap(),
    );
    assert_eq!(registration.object.sync_id, build);
    assert_eq!(subscription.object.status.current_sync_id, build);
}

/// The reconciler's Events, handed to the test.
struct Forward(mpsc::UnboundedSender<SubscriptionEvent>);

#[async_trait::async_trait]
impl Events for Forward {
    async fn record(&self, event: &SubscriptionEvent) {
        let _ = self.0.send(event.clone());
    }
}
