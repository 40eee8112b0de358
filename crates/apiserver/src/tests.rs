//! The router driven in-process: panics anywhere in a request become a logged 500 `Status`,
//! and every answer carries its `Audit-Id`; and what the middleware layers' own tests share (a
//! router over a memory store, requests from the admin or with a token, a Status read back).
//!
//! Test builds (and only they) let a request panic on purpose: the `x-kayra-test-panic` header
//! names the stage that panics ([`fault`]).

use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::http::{Request, StatusCode};
use kayra_authn::Identity;
use serde_json::Value;
use tower::ServiceExt;

use crate::{ApiState, PeerIdentity};

/// Panics when the request's `x-kayra-test-panic` header names `stage`. Compiled into test
/// builds of this crate only.
pub(crate) fn fault(headers: &axum::http::HeaderMap, stage: &str) {
    if headers.get("x-kayra-test-panic").is_some_and(|value| value == stage) {
        panic!("a test asked for a panic in {stage}");
    }
}

/// A router over an in-memory store, auditing to a file in `dir`.
pub(crate) fn router(dir: &std::path::Path) -> axum::Router {
    router_with_tokens(dir, kayra_authn::TokenFile::none())
}

/// A router over an in-memory store, auditing to a file in `dir`, taking the bearer tokens of
/// `tokens`.
pub(crate) fn router_with_tokens(dir: &std::path::Path, tokens: kayra_authn::TokenFile) -> axum::Router {
    let store: Arc<dyn kayra_store::Store> = Arc::new(
        kayra_store::mvcc::MvccStore::in_memory(kayra_store::mvcc::Options::default())
            .expect("a memory store"),
    );
    let scheme = Arc::new(kayra_api::scheme::Scheme::new("example.com"));
    let registry =
        kayra_registry::Registry::new(store, Arc::new(kayra_api::clock::SystemClock), "/registry/");
    let audit = crate::AuditLog::open(&dir.join("audit.log")).expect("the audit log opens");
    let control = Arc::new(kayra_application::ApplicationLayer::new(scheme, registry));
    let state = ApiState::new(control, Arc::new(tokens), "here".to_owned()).with_audit_log(audit);
    crate::router(Arc::new(state))
}

/// A request from `system:masters`, as a verified client certificate would make it.
pub(crate) fn admin_request(method: &str, path: &str) -> axum::http::request::Builder {
    let admin = Identity::new("admin".to_owned(), String::new(), vec!["system:masters".to_owned()]);
    let mut builder = Request::builder().method(method).uri(path);
    if let Some(extensions) = builder.extensions_mut() {
        extensions.insert(PeerIdentity(admin));
    }
    builder
}

/// What the router logs while `run` runs, as text.
async fn logged<T>(run: impl std::future::Future<Output = T>) -> (T, String) {
    #[derive(Clone, Default)]
    struct Buffer(Arc<Mutex<Vec<u8>>>);
    impl std::io::Write for Buffer {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().expect("buffer lock").extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let buffer = Buffer::default();
    let writer = buffer.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_ansi(false)
        .with_max_level(tracing::Level::INFO)
        .with_writer(move || writer.clone())
        .finish();
    let outcome = {
        let _guard = tracing::subscriber::set_default(subscriber);
        run.await
    };
    let text = String::from_utf8_lossy(&buffer.0.lock().expect("buffer lock")).into_owned();
    (outcome, text)
}

/// A response's code and JSON body (`null` when it is not JSON).
pub(crate) async fn status_of(response: axum::response::Response) -> (StatusCode, Value) {
    let code = response.status();
    let body = axum::body::to_bytes(response.into_body(), 1 << 20).await.expect("a body");
    (code, serde_json::from_slice(&body).unwrap_or(Value::Null))
}

#[tokio::test]
async fn a_panic_anywhere_in_a_request_is_a_500_status_logged_with_its_backtrace() {
    for stage in ["authentication", "handler"] {
        let dir = tempfile::tempdir().expect("a directory");
        let app = router(dir.path());
        let request = admin_request("POST", "/api/v1/namespaces")
            .header("x-kayra-test-panic", stage)
            .header("audit-id", format!("panic-in-{stage}"))
            .body(Body::from("{}"))
            .expect("a request");
        let (response, log) = logged(app.clone().oneshot(request)).await;
        let response = response.expect("the router answers");
        assert_eq!(response.headers()["audit-id"], format!("panic-in-{stage}").as_str(), "{stage}");
        let (code, status) = status_of(response).await;
        assert_eq!(code, StatusCode::INTERNAL_SERVER_ERROR, "{stage}");
        assert_eq!(
            (status["kind"].as_str(), status["code"].as_u64()),
            (Some("Status"), Some(500)),
            "{stage}"
        );
        assert!(
            !status["message"].as_str().unwrap_or_default().contains("test asked"),
            "a 5xx reveals nothing internal: {status}"
        );
        assert!(log.contains(&format!("a test asked for a panic in {stage}")), "{stage}: {log}");
        assert!(log.contains(&format!("audit_id=panic-in-{stage}")), "{stage}: {log}");
        assert!(log.contains("src/tests.rs:"), "the log says where it panicked: {log}");
        assert!(log.contains("kayra_apiserver::tests::fault"), "the log has the backtrace: {log}");
        let audit = std::fs::read_to_string(dir.path().join("audit.log")).expect("the audit log");
        assert!(
            audit.lines().any(|line| line.contains(&format!("\"auditID\":\"panic-in-{stage}\""))
                && line.contains("\"code\":500")),
            "{stage}: {audit}"
        );

        // The server goes on serving.
        let request = admin_request("GET", "/api/v1/namespaces").body(Body::empty()).expect("a request");
        let (code, _) = status_of(app.oneshot(request).await.expect("the router answers")).await;
        assert_eq!(code, StatusCode::OK, "after a panic in {stage}");
    }
}

#[tokio::test]
async fn the_legacy_orphan_dependents_option_is_a_propagation_policy_and_may_not_contradict_one() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let app = router(dir.path());
    let send = |method: &str, path: &str, body: Value| {
        let request = admin_request(method, path)
            .header("content-type", "application/json")
            .body(Body::from(body.to_string()))
            .expect("a request");
        app.clone().oneshot(request)
    };
    let created = send("POST", "/api/v1/namespaces", serde_json::json!({"metadata": {"name": "demo"}}));
    assert_eq!(created.await.expect("an answer").status(), StatusCode::CREATED);
    let sets = "/apis/fleet.example.com/v1/namespaces/demo/applicationsets";
    for name in ["kept", "contradicted"] {
        let set = serde_json::json!({"apiVersion": "fleet.example.com/v1", "kind": "ApplicationSet",
            "metadata": {"name": name},
            "spec": {"applications": [{"name": "c", "spec": {"command": ["/bin/true"]}}]}});
        assert_eq!(send("POST", sets, set).await.expect("an answer").status(), StatusCode::CREATED);
    }
    let both = serde_json::json!({"orphanDependents": true, "propagationPolicy": "Background"});
    let (status, body) =
        status_of(send("DELETE", &format!("{sets}/contradicted"), both).await.expect("an answer")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    let orphan = serde_json::json!({"orphanDependents": true});
    let (status, body) =
        status_of(send("DELETE", &format!("{sets}/kept"), orphan).await.expect("an answer")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["metadata"]["finalizers"], serde_json::json!(["orphan"]), "{body}");
    assert!(body["metadata"]["deletionTimestamp"].is_string(), "{body}");
}
