//! The conformance suite against a real etcd that each test starts for itself.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use kayra_store::conformance::Harness;
use kayra_store::{Store, StoreError};
use kayra_store_etcd::test_server::{EtcdServer, StartError, skip_test};
use kayra_store_etcd::{EtcdOptions, EtcdStore};

mod failover;
mod hand_over;

struct Etcd {
    server: EtcdServer,
    stores: AtomicUsize,
}

#[async_trait]
impl Harness for Etcd {
    async fn open(&self) -> Arc<dyn Store> {
        let n = self.stores.fetch_add(1, Ordering::Relaxed);
        let options = EtcdOptions { watch_buffer: 64, ..self.server.options(&format!("/kayra-{n}/")) };
        Arc::new(EtcdStore::connect(options).await.expect("etcd answers"))
    }
}

/// A private etcd, or `None` with the reason printed when this machine has no etcd binary.
/// Under CI a missing binary is a failure: `.ci/run` installs it.
async fn etcd() -> Option<Etcd> {
    match EtcdServer::start().await {
        Ok(server) => Some(Etcd { server, stores: AtomicUsize::new(0) }),
        Err(StartError::Missing) => {
            skip_test(StartError::Missing);
            None
        }
        Err(error) => panic!("{error}"),
    }
}

kayra_store::conformance_tests!(etcd);

#[tokio::test]
async fn keys_stay_under_their_prefix() {
    let Some(harness) = etcd().await else { return };
    let ours = harness.open().await;
    let theirs = harness.open().await;
    ours.put("shared/name", b"ours".to_vec()).await.unwrap();
    theirs.put("shared/name", b"theirs".to_vec()).await.unwrap();
    assert_eq!(ours.get("shared/name").await.unwrap().unwrap().value, b"ours");
    let listed = ours.range(&kayra_store::RangeRequest::prefix("")).await.unwrap();
    assert_eq!(listed.kvs.len(), 1, "a deployment sees only its own prefix");
}

#[tokio::test]
async fn an_unreachable_etcd_is_a_clear_error() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let endpoint = format!("http://127.0.0.1:{port}");
    let options = EtcdOptions {
        connect_timeout: Duration::from_millis(500),
        ..EtcdOptions::new(vec![endpoint.clone()], "/x/")
    };
    match EtcdStore::connect(options).await {
        Err(error @ StoreError::Unavailable { .. }) => {
            assert!(error.to_string().contains(&endpoint), "{error}");
            assert!(error.is_retryable());
        }
        other => panic!("connecting to nothing must fail, got {other:?}"),
    }
}

/// A reader waiting for a watcher to reach a revision asks for progress, and the watcher learns
/// it at once rather than at its next periodic report (here an hour away).
#[tokio::test]
async fn a_watcher_learns_progress_as_soon_as_a_reader_asks_for_it() {
    let Some(harness) = etcd().await else { return };
    let options =
        EtcdOptions { progress_every: Duration::from_secs(3600), ..harness.server.options("/kayra-asked/") };
    let store = EtcdStore::connect(options).await.expect("etcd answers");
    let start = store.put("quiet/a", b"1".to_vec()).await.unwrap();
    let mut watcher = store.watch("quiet/", start).await.unwrap();
    let elsewhere = store.put("busy/b", b"2".to_vec()).await.unwrap();
    assert_eq!(watcher.progress_is_ordered(), store.progress_is_ordered());
    let Some(requester) = watcher.progress_requester() else {
        // This etcd's reports may overtake changes: nothing may wait on one, so none is asked.
        assert!(!store.progress_is_ordered());
        let next = store.put("quiet/c", b"3".to_vec()).await.unwrap();
        match tokio::time::timeout(Duration::from_secs(10), watcher.next()).await {
            Ok(Some(Ok(event))) => assert_eq!(event.revision(), next, "changes still flow"),
            other => panic!("expected the change at {next}, got {other:?}"),
        }
        return;
    };
    requester.request();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        match tokio::time::timeout_at(deadline, watcher.next_change()).await {
            Ok(Some(Ok(kayra_store::Change::Progress(reached)))) if reached >= elsewhere => break,
            Ok(Some(Ok(kayra_store::Change::Progress(_)))) => continue,
            other => panic!("expected progress up to {elsewhere} once asked, got {other:?}"),
        }
    }
}
