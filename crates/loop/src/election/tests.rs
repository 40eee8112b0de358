//! Tests of leader election: one leader at a time, hand-over, and stepping down in time.

use kayra_store::mvcc::{MvccStore, Options};

use super::*;

#[tokio::test]
async fn one_candidate_leads_at_a_time_and_the_next_takes_over() {
    let store: Arc<dyn Store> = Arc::new(MvccStore::in_memory(Options::default()).unwrap());
    let ttl = Duration::from_secs(2);
    let first = Election::new(store.clone(), "/elections/loop", "a", ttl);
    let campaigning = crate::testing::Conflicts::new(store.clone());
    let second = Election::new(campaigning.clone(), "/elections/loop", "b", ttl);
    let leadership = first.campaign().await.unwrap();
    let holder = |store: Arc<dyn Store>| async move {
        String::from_utf8(store.get("/elections/loop").await.unwrap().unwrap().value).unwrap()
    };
    assert_eq!(holder(store.clone()).await, "a");
    let waiting = tokio::spawn(async move { second.campaign().await.map(|_leadership| ()) });
    // b finds the key held, waits a lease's life for it to fall vacant, and finds it held again.
    campaigning.until(2).await;
    assert!(!waiting.is_finished(), "b waits while a leads");
    drop(leadership);
    tokio::time::timeout(Duration::from_secs(5), waiting).await.expect("b takes over").unwrap().unwrap();
}

#[tokio::test]
async fn a_leader_that_stops_renewing_is_replaced() {
    let store: Arc<dyn Store> = Arc::new(MvccStore::in_memory(Options::default()).unwrap());
    let ttl = Duration::from_secs(1);
    let first = Election::new(store.clone(), "/elections/loop", "a", ttl);
    let leadership = first.campaign().await.unwrap();
    // As if the leader's process froze: its keep-alives stop, and its lease runs out.
    leadership.keeper.abort();
    let second = Election::new(store.clone(), "/elections/loop", "b", ttl);
    let took_over = tokio::time::timeout(Duration::from_secs(10), second.campaign()).await;
    let _b = took_over.expect("b leads within the lease's life and a bit").unwrap();
    assert_eq!(store.get("/elections/loop").await.unwrap().unwrap().value, b"b");
}

#[tokio::test]
async fn a_leader_learns_when_it_lost() {
    let store: Arc<dyn Store> = Arc::new(MvccStore::in_memory(Options::default()).unwrap());
    let election = Election::new(store.clone(), "/elections/loop", "a", Duration::from_secs(1));
    let mut leadership = election.campaign().await.unwrap();
    store.revoke_lease(leadership.lease).await.unwrap();
    tokio::time::timeout(Duration::from_secs(5), leadership.lost()).await.expect("the next keep-alive fails");
}

/// A store whose lease renewals hang (a partitioned leader) or fail a few times before they
/// reach the store underneath.
struct Renewals {
    inner: Arc<dyn Store>,
    hang: bool,
    failures_left: std::sync::atomic::AtomicU32,
}

#[async_trait::async_trait]
impl Store for Renewals {
    async fn get(&self, key: &str) -> Result<Option<kayra_store::KeyValue>, StoreError> {
        self.inner.get(key).await
    }
    async fn range(
        &self,
        request: &kayra_store::RangeRequest,
    ) -> Result<kayra_store::RangeResult, StoreError> {
        self.inner.range(request).await
    }
    async fn txn(&self, txn: Txn) -> Result<TxnResult, StoreError> {
        self.inner.txn(txn).await
    }
    async fn watch(
        &self,
        prefix: &str,
        after: kayra_store::Revision,
    ) -> Result<kayra_store::Watcher, StoreError> {
        self.inner.watch(prefix, after).await
    }
    async fn compact(&self, revision: kayra_store::Revision) -> Result<(), StoreError> {
        self.inner.compact(revision).await
    }
    async fn revision(&self) -> Result<kayra_store::Revision, StoreError> {
        self.inner.revision().await
    }
    async fn grant_lease(&self, ttl: Duration) -> Result<kayra_store::Lease, StoreError> {
        self.inner.grant_lease(ttl).await
    }
    async fn keep_alive(&self, lease: LeaseId) -> Result<Duration, StoreError> {
        if self.hang {
            std::future::pending::<()>().await;
        }
        let failing = self.failures_left.fetch_update(
            std::sync::atomic::Ordering::SeqCst,
            std::sync::atomic::Ordering::SeqCst,
            |left| left.checked_sub(1),
        );
        if failing.is_ok() {
            return Err(StoreError::Unavailable { message: "no leader".to_owned(), source: None });
        }
        self.inner.keep_alive(lease).await
    }
    async fn revoke_lease(&self, lease: LeaseId) -> Result<(), StoreError> {
        self.inner.revoke_lease(lease).await
    }
}

fn renewals(hang: bool, failures: u32) -> Arc<dyn Store> {
    let inner: Arc<dyn Store> = Arc::new(MvccStore::in_memory(Options::default()).unwrap());
    Arc::new(Renewals { inner, hang, failures_left: failures.into() })
}

#[tokio::test(start_paused = true)]
async fn a_leader_that_cannot_renew_stops_before_its_lease_can_expire() {
    let ttl = Duration::from_secs(15);
    let election = Election::new(renewals(true, 0), "/elections/loop", "a", ttl);
    assert_eq!(election.renew_deadline(), Duration::from_secs(10));
    let mut leadership = election.campaign().await.unwrap();
    let led = tokio::time::Instant::now();
    tokio::time::timeout(ttl, leadership.lost())
        .await
        .expect("a leader whose renewals hang steps down before its 15 s lease could lapse");
    let acted = led.elapsed();
    assert!(
        acted >= election.renew_deadline() && acted < ttl,
        "it stops at the renew deadline (10 s), not before and not at the lease's end: {acted:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_renewal_that_fails_for_a_moment_keeps_the_leadership() {
    let ttl = Duration::from_secs(15);
    let election = Election::new(renewals(false, 3), "/elections/loop", "a", ttl);
    let mut leadership = election.campaign().await.unwrap();
    let lost = tokio::time::timeout(4 * ttl, leadership.lost()).await;
    assert!(lost.is_err(), "three failed renewals a second apart are tried again within the deadline");
}

#[tokio::test(start_paused = true)]
async fn renewals_that_keep_failing_step_down_at_the_deadline() {
    let ttl = Duration::from_secs(15);
    let election = Election::new(renewals(false, u32::MAX), "/elections/loop", "a", ttl);
    let mut leadership = election.campaign().await.unwrap();
    let led = tokio::time::Instant::now();
    tokio::time::timeout(ttl, leadership.lost()).await.expect("steps down within the lease's life");
    assert!(led.elapsed() < ttl, "before the lease could lapse: {:?}", led.elapsed());
}
