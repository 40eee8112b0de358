//! The reconciler's loop over simulated time, with the gateway faked: how often a document that
//! cannot be fetched is asked for again.

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use kayra_store::Store;
use kayra_store::mvcc::{MvccStore, Options};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::*;
use crate::ports::FixedNamespaces;
use crate::steps::{StepRequest, StepRunner};
use crate::{ApiRegistration, RandomIds, Scope, Subscription};
use kayra_api::clock::Clock;

/// Time as the paused tokio clock tells it, so that simulated minutes pass for the catalog too.
struct Simulated {
    start: SystemTime,
    at: Instant,
}

impl Clock for Simulated {
    fn now(&self) -> SystemTime {
        self.start + self.at.elapsed()
    }
}

/// A gateway that cannot be reached, noting when each fetch came.
#[derive(Default)]
struct Unreachable {
    fetches: Mutex<Vec<Instant>>,
}

#[async_trait::async_trait]
impl SpecFetcher for Unreachable {
    async fn fetch(&self, _url: &str, _limit: usize) -> Result<(u16, Vec<u8>), String> {
        self.fetches.lock().unwrap().push(Instant::now());
        Err("connection refused".to_owned())
    }
}

#[async_trait::async_trait]
impl StepRunner for Unreachable {
    async fn send(&self, _request: &StepRequest) -> Result<u16, String> {
        Ok(200)
    }
}

struct Quiet;

#[async_trait::async_trait]
impl Events for Quiet {
    async fn record(&self, _event: &SubscriptionEvent) {}
}

impl Unreachable {
    /// Seconds from `start` to each fetch.
    fn seconds(&self, start: Instant) -> Vec<u64> {
        self.fetches.lock().unwrap().iter().map(|at| (*at - start).as_secs()).collect()
    }
}

#[tokio::test(start_paused = true)]
async fn a_failing_fetch_is_retried_on_its_own_backoff_and_at_once_after_a_change() {
    let start = Instant::now();
    let store: Arc<dyn Store> = Arc::new(MvccStore::in_memory(Options::default()).unwrap());
    let scope = Scope {
        root: "/registry/".into(),
        domain: "example.com".into(),
        platform: "p".into(),
        region: "r".into(),
        reserved_groups: Vec::new(),
    };
    let clock =
        Arc::new(Simulated { start: SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000), at: start });
    let catalog = Arc::new(Catalog::new(
        store,
        scope,
        Arc::new(FixedNamespaces::new(["sre"])),
        Arc::new(RandomIds),
        clock,
    ));
    let compute = ApiRegistration { name: "compute.example.com".into(), ..ApiRegistration::default() };
    catalog.create_registration(compute).await.unwrap();
    catalog.subscribe("sre", Subscription::new("", "compute.example.com", true)).await.unwrap();
    let gateway = Arc::new(Unreachable::default());
    let config =
        ReconcilerConfig { gateway_url: Some("http://gateway".into()), ..ReconcilerConfig::default() };
    let reconciler =
        Reconciler::new(catalog.clone(), config, gateway.clone(), gateway.clone(), Arc::new(Quiet));
    let stop = CancellationToken::new();
    let running = tokio::spawn(reconciler.into_loop("test").run(stop.clone()));

    // Twenty minutes of a gateway that never answers, a pass on every change and every resync.
    tokio::time::sleep(Duration::from_secs(20 * 60)).await;
    assert_eq!(
        gateway.seconds(start),
        [0, 5, 15, 35, 75, 155, 315, 615, 915],
        "5 s doubling to 5 min, whatever the passes do"
    );
    let state = catalog.subscription("sre", "compute.example.com").await.unwrap().object.status;
    assert_eq!(state.state, "error");
    assert_eq!(
        state.last_attempt,
        jiff::Timestamp::from_second(1_800_000_000 + 915).unwrap().strftime("%Y-%m-%dT%H:%M:%SZ").to_string(),
        "last_attempt is the last fetch"
    );

    // A change to the registration retries at once, and the back-off starts over.
    let changed = Instant::now();
    let owner = serde_json::json!({"owner": "sre-b"});
    catalog.update_registration("compute.example.com", owner.as_object().unwrap()).await.unwrap();
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert_eq!(gateway.seconds(changed)[9..], [0, 5], "at once after the registration changed");

    // So does a change to a subscription.
    let changed = Instant::now();
    catalog.set_active("sre", "compute.example.com", false).await.unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(gateway.seconds(changed)[11..], [0], "at once after the subscription changed");

    stop.cancel();
    running.await.unwrap();
}
