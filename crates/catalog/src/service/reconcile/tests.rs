//! Reconciliation passes over the memory store, with a fake gateway and step runner.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use kayra_store::Store;
use kayra_store::mvcc::{MvccStore, Options};

use super::*;
use crate::steps::{Mode, Step, StepRequest};
use crate::{IdGenerator, Scope, SyncRequest};
use kayra_api::clock::Clock;

struct Counter(AtomicUsize);

impl IdGenerator for Counter {
    fn sync_id(&self) -> String {
        format!("build-{}", self.0.fetch_add(1, Ordering::SeqCst) + 1)
    }
}

/// What the gateway answers a fetch: a status and a body, or no answer.
type Fetched = Result<(u16, Vec<u8>), String>;

/// Serves one answer for every fetch, counting them.
struct Gateway {
    answer: Mutex<Fetched>,
    fetches: AtomicUsize,
}

#[async_trait::async_trait]
impl SpecFetcher for Gateway {
    async fn fetch(&self, url: &str, limit: usize) -> Result<(u16, Vec<u8>), String> {
        assert!(url.ends_with("/-/openapi.json"), "{url}");
        self.fetches.fetch_add(1, Ordering::SeqCst);
        self.answer.lock().unwrap().clone().map(|(status, mut body)| {
            body.truncate(limit + 1);
            (status, body)
        })
    }
}

/// Answers every step with one status, recording the URLs.
struct Runner {
    status: Mutex<u16>,
    sent: Mutex<Vec<String>>,
}

#[async_trait::async_trait]
impl StepRunner for Runner {
    async fn send(&self, request: &StepRequest) -> Result<u16, String> {
        self.sent.lock().unwrap().push(request.url.clone());
        Ok(*self.status.lock().unwrap())
    }
}

const DOCUMENT: &str = r#"{"openapi": "3.1.0", "paths": {"/apis/compute.example.com/v1/namespaces/{namespace}/machines": {"get": {}, "post": {}}}}"#;

/// A clock the test moves.
struct TestClock(Mutex<SystemTime>);

impl Clock for TestClock {
    fn now(&self) -> SystemTime {
        *self.0.lock().unwrap()
    }
}

struct World {
    store: Arc<dyn Store>,
    clock: Arc<TestClock>,
    catalog: Catalog,
    config: ReconcilerConfig,
    gateway: Gateway,
    runner: Runner,
}

fn world() -> World {
    let store: Arc<dyn Store> = Arc::new(MvccStore::in_memory(Options::default()).unwrap());
    let mut config =
        ReconcilerConfig { gateway_url: Some("http://gateway".into()), ..ReconcilerConfig::default() };
    let step = Step {
        name: "notify".into(),
        url: "{{ .Gateway }}/apis/{{ .Subscription.Api }}/v1/namespaces/{{ .Subscription.Namespace }}/syncs/{{ .SyncID }}".into(),
        ..Step::default()
    };
    config.mode.insert("trigger".into(), Mode { steps: vec![step] });
    // A whole second, as the catalog writes times.
    let now = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap().as_secs();
    let clock = Arc::new(TestClock(Mutex::new(SystemTime::UNIX_EPOCH + Duration::from_secs(now))));
    World {
        catalog: catalog(&store, clock.clone()),
        store,
        clock,
        config,
        gateway: Gateway {
            answer: Mutex::new(Ok((200, DOCUMENT.as_bytes().to_vec()))),
            fetches: AtomicUsize::new(0),
        },
        runner: Runner { status: Mutex::new(200), sent: Mutex::new(Vec::new()) },
    }
}

fn catalog(store: &Arc<dyn Store>, clock: Arc<dyn Clock>) -> Catalog {
    let scope = Scope {
        root: "/registry/".into(),
        domain: "example.com".into(),
        platform: "p".into(),
        region: "r".into(),
        reserved_groups: Vec::new(),
    };
    let namespaces = Arc::new(crate::service::tests::TestNamespaces(Vec::new()));
    Catalog::new(store.clone(), scope, namespaces, Arc::new(Counter(AtomicUsize::new(0))), clock)
}

impl World {
    /// Moves the clock on by `by`.
    fn after(&self, by: Duration) {
        *self.clock.0.lock().unwrap() += by;
    }

    /// Moves the clock past any fetch's back-off.
    fn later(&self) {
        self.after(backoff::MAX);
    }

    async fn pass(&self) -> Report {
        self.catalog.reconcile(&self.config, &self.gateway, &self.runner, 4).await.unwrap()
    }

    async fn setup(&self, namespaces: &[&str]) {
        let registration = ApiRegistration {
            name: "compute.example.com".into(),
            short_name: "compute".into(),
            mode: "trigger".into(),
            ..ApiRegistration::default()
        };
        self.catalog.create_registration(registration).await.unwrap();
        for namespace in namespaces {
            self.catalog
                .subscribe(namespace, Subscription::new("", "compute.example.com", true))
                .await
                .unwrap();
        }
    }

    async fn state(&self, namespace: &str) -> SubscriptionState {
        self.catalog.subscription(namespace, "compute.example.com").await.unwrap().object.status
    }
}

fn failures(report: &Report) -> Vec<(String, bool)> {
    report.attempts.iter().map(|a| (a.namespace.clone(), a.failure.is_some())).collect()
}

#[tokio::test]
async fn a_sync_reaches_every_subscriber_once_with_one_fetch() {
    let w = world();
    w.setup(&["apps", "sre"]).await;
    w.catalog.subscribe("idle", Subscription::new("", "compute.example.com", false)).await.unwrap();

    let report = w.pass().await;
    assert_eq!(failures(&report), [("apps".to_owned(), false), ("sre".to_owned(), false)]);
    assert_eq!(w.gateway.fetches.load(Ordering::SeqCst), 1, "one fetch however many subscribers");
    let state = w.state("sre").await;
    assert_eq!((state.state.as_str(), state.current_sync_id.as_str()), ("success", "build-1"));
    assert!(!state.last_attempt.is_empty());
    assert!(
        w.runner
            .sent
            .lock()
            .unwrap()
            .contains(&"http://gateway/apis/compute.example.com/v1/namespaces/sre/syncs/build-1".to_owned())
    );
    let spec = w.catalog.spec("compute.example.com").await.unwrap().unwrap();
    let document = w.catalog.document("compute.example.com").await.unwrap().unwrap();
    assert_eq!(document, DOCUMENT.as_bytes(), "stored byte for byte");
    assert_eq!(spec.resources[0].name, "machines");

    assert!(w.pass().await.attempts.is_empty(), "nothing is due any more");
    let status = w.catalog.status("compute.example.com").await.unwrap();
    assert!(status.subscriptions.iter().all(|s| s.synced), "{status:?}");
    assert_eq!(status.subscriptions.len(), 2, "the inactive one is not reported");
}

#[tokio::test]
async fn a_canary_goes_first_and_the_release_reuses_its_build() {
    let w = world();
    w.setup(&["apps", "sre"]).await;
    w.pass().await;
    w.catalog
        .sync("compute.example.com", &SyncRequest { canary_namespaces: vec!["sre".into()] })
        .await
        .unwrap();
    let report = w.pass().await;
    assert_eq!(failures(&report), [("sre".to_owned(), false)]);
    assert_eq!(w.state("apps").await.current_sync_id, "build-1", "outside the canary, left as it was");
    assert_eq!(w.state("sre").await.current_sync_id, "build-2");

    w.catalog.sync("compute.example.com", &SyncRequest::default()).await.unwrap();
    let report = w.pass().await;
    assert_eq!(failures(&report), [("apps".to_owned(), false)]);
    assert_eq!(w.state("apps").await.current_sync_id, "build-2");
    assert_eq!(w.gateway.fetches.load(Ordering::SeqCst), 2, "the release needs no second fetch of build-2");
}

#[tokio::test]
async fn without_the_document_nothing_moves() {
    let w = world();
    w.setup(&["sre"]).await;
    w.pass().await;
    w.catalog.sync("compute.example.com", &SyncRequest::default()).await.unwrap();
    let big =
        format!(r#"{{"openapi": "3.1.0", "paths": {{}}, "pad": "{}"}}"#, "x".repeat(openapi::MAX_DOCUMENT));
    let cases: Vec<(Fetched, &str)> = vec![
        (Err("connection refused".into()), "connection refused"),
        (Ok((503, Vec::new())), "answered 503"),
        (Ok((200, b"<html></html>".to_vec())), "not an OpenAPI document"),
        (Ok((200, big.into_bytes())), "more than the 1 MiB"),
    ];
    for (answer, reason) in cases {
        *w.gateway.answer.lock().unwrap() = answer;
        w.later();
        let report = w.pass().await;
        assert_eq!(failures(&report), [("sre".to_owned(), true)]);
        let state = w.state("sre").await;
        assert_eq!(state.state, "error");
        assert!(state.message.contains(reason), "{reason}: {}", state.message);
        assert_eq!(state.current_sync_id, "build-1", "it keeps working on the build it had");
        assert_eq!(state.expected_sync_id, "build-2");
    }
    assert_eq!(
        w.catalog.spec("compute.example.com").await.unwrap().unwrap().sync_id,
        "build-1",
        "the old document stays"
    );

    let unset = ReconcilerConfig { gateway_url: None, ..w.config.clone() };
    w.later();
    w.catalog.reconcile(&unset, &w.gateway, &w.runner, 1).await.unwrap();
    assert!(w.state("sre").await.message.contains("gateway_url is not set"));

    *w.gateway.answer.lock().unwrap() = Ok((200, DOCUMENT.as_bytes().to_vec()));
    w.later();
    w.pass().await;
    assert_eq!(w.state("sre").await.current_sync_id, "build-2", "the next pass fetches again and moves");
}

#[tokio::test]
async fn a_failing_step_is_recorded_and_a_restart_resumes() {
    let w = world();
    w.setup(&["apps", "sre"]).await;
    *w.runner.status.lock().unwrap() = 500;
    let report = w.pass().await;
    assert_eq!(failures(&report), [("apps".to_owned(), true), ("sre".to_owned(), true)]);
    let state = w.state("sre").await;
    assert!(
        state.message.starts_with("notify: POST http://gateway/") && state.message.ends_with("answered 500"),
        "{}",
        state.message
    );
    assert_eq!(state.current_sync_id, "");

    // A new instance over the same store picks up where the store says things are.
    *w.runner.status.lock().unwrap() = 200;
    let restarted = catalog(&w.store, w.clock.clone());
    let report = restarted.reconcile(&w.config, &w.gateway, &w.runner, 2).await.unwrap();
    assert_eq!(failures(&report), [("apps".to_owned(), false), ("sre".to_owned(), false)]);
    assert_eq!(
        w.gateway.fetches.load(Ordering::SeqCst),
        1,
        "the document stored before the restart is reused"
    );

    let unknown = serde_json::json!({"mode": "nope"});
    w.catalog.update_registration("compute.example.com", unknown.as_object().unwrap()).await.unwrap();
    w.catalog.sync("compute.example.com", &SyncRequest::default()).await.unwrap();
    w.pass().await;
    assert!(w.state("sre").await.message.contains("\"nope\" is not configured"));
}

#[tokio::test]
async fn held_back_subscribers_show_the_build_they_wait_for() {
    let w = world();
    w.setup(&["apps", "sre"]).await;
    w.pass().await;
    let canary = SyncRequest { canary_namespaces: vec!["sre".into()] };
    w.catalog.sync("compute.example.com", &canary).await.unwrap();
    w.pass().await;
    let apps = w.state("apps").await;
    assert_eq!(
        (apps.current_sync_id.as_str(), apps.expected_sync_id.as_str()),
        ("build-1", "build-2"),
        "visibly pending"
    );
}

#[tokio::test]
async fn the_document_follows_the_build_with_or_without_subscribers() {
    let w = world();
    w.setup(&[]).await;
    w.pass().await;
    assert_eq!(w.catalog.spec("compute.example.com").await.unwrap().unwrap().sync_id, "build-1");
    w.catalog.delete_registration("compute.example.com").await.unwrap();
    assert!(w.catalog.spec("compute.example.com").await.unwrap().is_none(), "deleted with its registration");
}

#[tokio::test]
async fn a_repeated_failure_is_not_news() {
    let w = world();
    w.setup(&["sre"]).await;
    w.catalog.subscribe("idle", Subscription::new("", "compute.example.com", false)).await.unwrap();
    *w.runner.status.lock().unwrap() = 500;
    assert!(w.pass().await.attempts[0].changed, "the first failure changes the state");
    assert!(!w.pass().await.attempts[0].changed, "the same failure again does not");
}

#[tokio::test]
async fn an_inactive_canary_is_reconciled_to_the_canary_build_once_turned_on() {
    let w = world();
    w.setup(&["sre"]).await;
    w.catalog.subscribe("idle", Subscription::new("", "compute.example.com", false)).await.unwrap();
    w.pass().await;
    let idle = SyncRequest { canary_namespaces: vec!["idle".into()] };
    let canary = w.catalog.sync("compute.example.com", &idle).await.unwrap().object.sync_id;

    assert!(w.pass().await.attempts.is_empty(), "an inactive subscription is not reconciled");
    let sre = w.state("sre").await;
    assert_eq!(
        (sre.current_sync_id.as_str(), sre.expected_sync_id.as_str()),
        ("build-1", canary.as_str()),
        "outside the canary: visibly pending"
    );

    w.catalog.set_active("idle", "compute.example.com", true).await.unwrap();
    let report = w.pass().await;
    assert_eq!(failures(&report), [("idle".to_owned(), false)], "turned on, the canary goes first");
    assert_eq!(w.state("idle").await.current_sync_id, canary);
    assert_eq!(w.state("sre").await.current_sync_id, "build-1", "the rest wait for the release");

    w.catalog.sync("compute.example.com", &SyncRequest::default()).await.unwrap();
    assert_eq!(failures(&w.pass().await), [("sre".to_owned(), false)]);
    assert_eq!(w.state("sre").await.current_sync_id, canary, "the release reuses the canary's build");
}

#[tokio::test]
async fn a_registration_without_a_mode_only_records_the_sync() {
    let w = world();
    let plain = ApiRegistration { name: "plain.example.com".into(), ..ApiRegistration::default() };
    w.catalog.create_registration(plain).await.unwrap();
    w.catalog.subscribe("sre", Subscription::new("", "plain.example.com", true)).await.unwrap();
    w.pass().await;
    let state = w.catalog.subscription("sre", "plain.example.com").await.unwrap().object.status;
    assert_eq!((state.state.as_str(), state.current_sync_id.as_str()), ("success", "build-1"), "{state:?}");
    assert!(w.runner.sent.lock().unwrap().is_empty());
}

#[tokio::test]
async fn a_failing_fetch_backs_off_per_registration_and_build_however_often_passes_run() {
    let w = world();
    w.setup(&["sre"]).await;
    let vault = ApiRegistration { name: "vault.example.com".into(), ..ApiRegistration::default() };
    w.catalog.create_registration(vault).await.unwrap();
    *w.gateway.answer.lock().unwrap() = Err("connection refused".into());
    let start = w.clock.now();
    let seconds = |at: SystemTime| at.duration_since(start).unwrap().as_secs();

    // A pass every second for twenty minutes: two registrations, each fetch failing.
    let mut fetched_at = Vec::new();
    let mut attempted_at = Vec::new();
    for second in 0..20 * 60 {
        let before = w.gateway.fetches.load(Ordering::SeqCst);
        let report = w.pass().await;
        let fetched = w.gateway.fetches.load(Ordering::SeqCst) - before;
        if fetched > 0 {
            assert_eq!(fetched, 2, "both registrations, on the same schedule: {second}");
            fetched_at.push(second);
            assert_eq!(failures(&report), [("sre".to_owned(), true)], "{second}");
            assert!(report.attempts[0].awaits_document);
        } else {
            assert!(report.attempts.is_empty(), "nothing is attempted while the fetch waits: {second}");
        }
        let next = report.retry_after.expect("a fetch is waiting").as_secs();
        assert!(next >= 1, "{second}: {next}");
        attempted_at.push((second, seconds(parse(&w.state("sre").await.last_attempt))));
        w.after(Duration::from_secs(1));
    }
    assert_eq!(fetched_at, [0, 5, 15, 35, 75, 155, 315, 615, 915], "5 s doubling to 5 min");
    assert!(
        attempted_at
            .iter()
            .all(|(second, last)| fetched_at.iter().rev().find(|at| *at <= second) == Some(last)),
        "last_attempt is the last fetch: {attempted_at:?}"
    );

    // A new subscription to one registration is a change to it: that one is fetched at once.
    let before = w.gateway.fetches.load(Ordering::SeqCst);
    w.catalog.subscribe("apps", Subscription::new("", "vault.example.com", true)).await.unwrap();
    let report = w.pass().await;
    assert_eq!(w.gateway.fetches.load(Ordering::SeqCst) - before, 1, "only vault, at once");
    assert_eq!(failures(&report), [("apps".to_owned(), true)]);
    assert_eq!(report.retry_after, Some(Duration::from_secs(5)), "and its back-off starts over");

    // Once the gateway answers, the next fetch stores the document and moves the subscribers.
    *w.gateway.answer.lock().unwrap() = Ok((200, DOCUMENT.as_bytes().to_vec()));
    w.later();
    let report = w.pass().await;
    // compute.example.com's sre, then vault.example.com's apps.
    assert_eq!(failures(&report), [("sre".to_owned(), false), ("apps".to_owned(), false)]);
    assert_eq!(report.retry_after, None, "nothing waits any more");
}

/// An RFC 3339 time as the catalog writes it.
fn parse(text: &str) -> SystemTime {
    let at: jiff::Timestamp = text.parse().unwrap_or_else(|e| panic!("{text:?}: {e}"));
    SystemTime::from(at)
}
