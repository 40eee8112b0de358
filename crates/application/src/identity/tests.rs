//! What verifying a service-account token costs the store: the signing keys are read at most
//! once per [`KEYS_FRESH`] while tokens name keys they hold, and a token naming a key they
//! lack has them read again at most once per [`UNKNOWN_KEY_REREAD`]; the Application is read
//! every time, so a deleted one's tokens stop at once.

use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;
use kayra_api::scheme::Scheme;
use kayra_registry::Registry;
use kayra_store::mvcc::{MvccStore, Options};
use kayra_store::{
    KeyValue, Lease, LeaseId, RangeRequest, RangeResult, Revision, Store, StoreError, Txn, TxnResult, Watcher,
};

use super::*;

/// A memory store counting the reads of the signing keys' Secret.
struct Counting {
    inner: MvccStore,
    key_reads: AtomicUsize,
}

#[async_trait]
impl Store for Counting {
    async fn get(&self, key: &str) -> Result<Option<KeyValue>, StoreError> {
        if key.ends_with(SIGNING_KEYS_SECRET) {
            self.key_reads.fetch_add(1, Ordering::SeqCst);
        }
        self.inner.get(key).await
    }
    async fn range(&self, request: &RangeRequest) -> Result<RangeResult, StoreError> {
        self.inner.range(request).await
    }
    async fn txn(&self, txn: Txn) -> Result<TxnResult, StoreError> {
        self.inner.txn(txn).await
    }
    async fn watch(&self, prefix: &str, after: Revision) -> Result<Watcher, StoreError> {
        self.inner.watch(prefix, after).await
    }
    async fn compact(&self, revision: Revision) -> Result<(), StoreError> {
        self.inner.compact(revision).await
    }
    async fn revision(&self) -> Result<Revision, StoreError> {
        self.inner.revision().await
    }
    async fn grant_lease(&self, ttl: Duration) -> Result<Lease, StoreError> {
        self.inner.grant_lease(ttl).await
    }
    async fn keep_alive(&self, lease: LeaseId) -> Result<Duration, StoreError> {
        self.inner.keep_alive(lease).await
    }
    async fn revoke_lease(&self, lease: LeaseId) -> Result<(), StoreError> {
        self.inner.revoke_lease(lease).await
    }
}

#[tokio::test(start_paused = true)]
async fn verifying_reads_the_keys_once_while_fresh_and_the_application_every_time() {
    let store =
        Arc::new(Counting { inner: MvccStore::in_memory(Options::default()).unwrap(), key_reads: 0.into() });
    let registry = Registry::new(store.clone(), Arc::new(kayra_api::clock::SystemClock), "/registry/");
    let layer = Arc::new(ApplicationLayer::new(Arc::new(Scheme::new("example.com")), registry));
    layer.set_issuer("https://kayra.test:6443".to_owned());
    let admin = layer.client(crate::controller_identity("test"));
    let namespaces = admin.resource("", "namespaces").unwrap();
    for name in ["kayra-system", "default"] {
        let namespace = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}});
        admin.create(&namespaces, None, namespace).await.unwrap();
    }
    let applications = admin.resource("fleet.example.com", "applications").unwrap();
    let app = json!({"apiVersion": "fleet.example.com/v1", "kind": "Application",
                     "metadata": {"name": "web", "namespace": "default"}, "spec": {"command": ["sleep"]}});
    let created = admin.create(&applications, Some("default"), app).await.unwrap();
    let token = layer.mint_token(&Value::Object(created), &[], None).await.unwrap().token;
    let reads = || store.key_reads.load(Ordering::SeqCst);

    let before = reads();
    for _ in 0..20 {
        assert!(layer.verify_token(&token).await.is_ok());
    }
    assert_eq!(reads(), before, "the keys read to mint are fresh: no verification reads them");
    tokio::time::advance(KEYS_FRESH).await;
    for _ in 0..20 {
        assert!(layer.verify_token(&token).await.is_ok());
    }
    assert_eq!(reads(), before + 1, "read once more when they were no longer fresh");

    // A token naming a key there is not: the keys are read again, but not for every such token.
    let header =
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(br#"{"alg":"ES256","kid":"no-such-key"}"#);
    let unknown = format!("{header}.{}", token.split_once('.').unwrap().1);
    tokio::time::advance(UNKNOWN_KEY_REREAD).await;
    let before = reads();
    for _ in 0..20 {
        assert!(matches!(layer.verify_token(&unknown).await, Err(Refusal::Invalid(Invalid::UnknownKey))));
    }
    assert_eq!(reads(), before + 1, "one read for twenty tokens naming an unknown key");

    // Deleted, its token stops at once: the Application is read for each verification.
    admin
        .delete(&applications, Some("default"), "web", &crate::options::DeleteRequest::default())
        .await
        .unwrap();
    assert!(matches!(layer.verify_token(&token).await, Err(Refusal::Gone)));
}
