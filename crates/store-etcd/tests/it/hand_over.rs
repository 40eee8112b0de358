//! Two replicas of one elected loop over a real etcd: a stopped leader hands over, and a crashed
//! one (its lease neither renewed nor revoked) is replaced once etcd expires its lease.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use kayra_loop::testing::{Conflicts, check_hand_over, replica};
use kayra_store::conformance::Harness;
use kayra_store::{
    KeyValue, Lease, LeaseId, RangeRequest, RangeResult, Revision, Store, StoreError, Txn, TxnResult, Watcher,
};
use tokio::time::Instant;

use super::etcd;

#[tokio::test]
async fn a_leader_hands_over_to_the_next_replica_over_etcd() {
    let Some(harness) = etcd().await else { return };
    check_hand_over(harness.open().await).await;
}

/// A store that stops answering when frozen, as one whose process crashed: every call fails.
struct Freezable {
    inner: Arc<dyn Store>,
    frozen: AtomicBool,
}

impl Freezable {
    fn check(&self) -> Result<(), StoreError> {
        if self.frozen.load(Ordering::SeqCst) {
            return Err(StoreError::Unavailable { message: "frozen by the test".to_owned(), source: None });
        }
        Ok(())
    }
}

#[async_trait]
impl Store for Freezable {
    async fn get(&self, key: &str) -> Result<Option<KeyValue>, StoreError> {
        self.check()?;
        self.inner.get(key).await
    }
    async fn range(&self, request: &RangeRequest) -> Result<RangeResult, StoreError> {
        self.check()?;
        self.inner.range(request).await
    }
    async fn txn(&self, txn: Txn) -> Result<TxnResult, StoreError> {
        self.check()?;
        self.inner.txn(txn).await
    }
    async fn watch(&self, prefix: &str, after: Revision) -> Result<Watcher, StoreError> {
        self.check()?;
        self.inner.watch(prefix, after).await
    }
    async fn compact(&self, revision: Revision) -> Result<(), StoreError> {
        self.check()?;
        self.inner.compact(revision).await
    }
    async fn revision(&self) -> Result<Revision, StoreError> {
        self.check()?;
        self.inner.revision().await
    }
    async fn grant_lease(&self, ttl: Duration) -> Result<Lease, StoreError> {
        self.check()?;
        self.inner.grant_lease(ttl).await
    }
    async fn keep_alive(&self, lease: LeaseId) -> Result<Duration, StoreError> {
        self.check()?;
        self.inner.keep_alive(lease).await
    }
    async fn revoke_lease(&self, lease: LeaseId) -> Result<(), StoreError> {
        self.check()?;
        self.inner.revoke_lease(lease).await
    }
}

#[tokio::test]
async fn a_crashed_leader_is_replaced_once_etcd_expires_its_lease() {
    let Some(harness) = etcd().await else { return };
    let store = harness.open().await;
    let crashing = Arc::new(Freezable { inner: store.clone(), frozen: AtomicBool::new(false) });
    let ttl = Duration::from_secs(1);
    let (first, _stop_first, first_record) = replica(crashing.clone(), "crash", "first", ttl);
    first_record.until(|runs| runs.len() >= 3).await;
    let campaigning = Conflicts::new(store.clone());
    let (second, stop_second, second_record) = replica(campaigning.clone(), "crash", "second", ttl);
    // The second's candidate has found the key held, waited a lease's life, and found it held
    // again: it must have reconciled nothing all that while.
    campaigning.until(2).await;
    assert!(second_record.runs().is_empty(), "the second replica waits while the first leads");
    // The crash: the first replica's process is gone, so nothing renews its lease and nothing
    // revokes it (its leadership's drop tries, and finds the store gone).
    crashing.frozen.store(true, Ordering::SeqCst);
    first.abort();
    let _ = first.await;
    let crashed = Instant::now();
    let holder = store.get("/elections/crash").await.unwrap().expect("the crashed leader's key outlives it");
    assert_eq!(holder.value, b"first", "the lease was not revoked");
    second_record.until(|runs| runs.len() >= 3).await;
    let taken_over = crashed.elapsed();
    // etcd grants at least its minimum TTL (2 s with the default election timeout) and checks
    // for expired leases every half second. The last keep-alive was at most a third of the TTL
    // before the crash.
    let granted = store.grant_lease(ttl).await.unwrap().ttl;
    assert!(taken_over >= granted - ttl / 3, "not before the lease expired: {taken_over:?} of {granted:?}");
    assert!(taken_over < granted * 2 + Duration::from_secs(1), "within about one lease: {taken_over:?}");
    let first_ended = first_record.runs().iter().map(|run| run.ended).max().unwrap();
    let second_started = second_record.runs().iter().map(|run| run.started).min().unwrap();
    assert!(second_started >= first_ended, "no key reconciled by both replicas at once");
    stop_second.cancel();
    second.await.unwrap();
}
