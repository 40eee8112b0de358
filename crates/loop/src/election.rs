//! Leader election through the store's leases, so that of several controller replicas sharing
//! a store exactly one runs a given loop at a time.
//!
//! A candidate [`Election::campaign`]s by creating the election's key attached to a lease of its
//! own; whoever creates it leads, keeps the lease alive, and steps down when a keep-alive fails
//! (then the key goes with the lease and another candidate takes over). The others watch the key
//! and try again when it goes.

use std::sync::Arc;
use std::time::Duration;

use kayra_store::{Compare, EventKind, LeaseId, Op, Store, StoreError, Txn, TxnResult};

/// One election: a key, and this candidate's name for itself.
pub struct Election {
    store: Arc<dyn Store>,
    key: String,
    candidate: String,
    ttl: Duration,
}

impl std::fmt::Debug for Election {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Election")
            .field("key", &self.key)
            .field("candidate", &self.candidate)
            .finish_non_exhaustive()
    }
}

/// Leadership won in an election; dropping it steps down at once.
pub struct Leadership {
    store: Arc<dyn Store>,
    lease: LeaseId,
    lost: tokio::sync::watch::Receiver<bool>,
    keeper: tokio::task::JoinHandle<()>,
    resigned: bool,
}

impl Election {
    /// An election at `key` for `candidate`, whose leadership lapses `ttl` after its last
    /// keep-alive (so a crashed leader is replaced within about `ttl`).
    pub fn new(
        store: Arc<dyn Store>,
        key: impl Into<String>,
        candidate: impl Into<String>,
        ttl: Duration,
    ) -> Election {
        Election { store, key: key.into(), candidate: candidate.into(), ttl }
    }

    /// Waits until this candidate leads.
    pub async fn campaign(&self) -> Result<Leadership, StoreError> {
        loop {
            let lease = self.store.grant_lease(self.ttl).await?;
            let txn = Txn {
                compares: vec![Compare::Absent(self.key.clone())],
                ops: vec![Op::Put {
                    key: self.key.clone(),
                    value: self.candidate.clone().into_bytes(),
                    lease: Some(lease.id),
                }],
            };
            match self.store.txn(txn).await? {
                TxnResult::Applied { .. } => {
                    tracing::info!(key = %self.key, candidate = %self.candidate, "leading");
                    return Ok(self.lead(lease.id));
                }
                TxnResult::Conflict { revision, .. } => {
                    let _ = self.store.revoke_lease(lease.id).await;
                    self.wait_for_vacancy(revision).await;
                }
            }
        }
    }

    /// Returns once the key may be free: it was deleted after `revision`, or a while passed.
    async fn wait_for_vacancy(&self, revision: kayra_store::Revision) {
        let vacated = async {
            let Ok(mut watcher) = self.store.watch(&self.key, revision).await else { return };
            while let Some(Ok(event)) = watcher.next().await {
                if event.kind == EventKind::Delete && event.kv.key == self.key {
                    return;
                }
            }
        };
        let _ = tokio::time::timeout(self.ttl, vacated).await;
    }

    fn lead(&self, lease: LeaseId) -> Leadership {
        let (lose, lost) = tokio::sync::watch::channel(false);
        let (store, ttl) = (self.store.clone(), self.ttl);
        let keeper = tokio::spawn(async move {
            let mut tick = tokio::time::interval(ttl / 3);
            tick.tick().await;
            loop {
                tick.tick().await;
                if let Err(error) = store.keep_alive(lease).await {
                    tracing::warn!(%error, "a leader's keep-alive failed; stepping down");
                    let _ = lose.send(true);
                    return;
                }
            }
        });
        Leadership { store: self.store.clone(), lease, lost, keeper, resigned: false }
    }
}

impl std::fmt::Debug for Leadership {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Leadership").field("lease", &self.lease).finish_non_exhaustive()
    }
}

impl Leadership {
    /// Resolves when leadership is lost (a keep-alive failed: another may lead now).
    pub async fn lost(&mut self) {
        let _ = self.lost.wait_for(|lost| *lost).await;
    }

    /// Steps down now: the election's key goes with the lease before this returns, so another
    /// candidate may lead at once, and nothing of this leadership holds the store afterwards.
    pub async fn resign(mut self) {
        self.keeper.abort();
        let _ = (&mut self.keeper).await;
        if let Err(error) = self.store.revoke_lease(self.lease).await {
            tracing::debug!(%error, "revoking a resigned leader's lease failed; it expires on its own");
        }
        self.resigned = true;
    }
}

impl Drop for Leadership {
    fn drop(&mut self) {
        if self.resigned {
            return;
        }
        self.keeper.abort();
        let (store, lease) = (self.store.clone(), self.lease);
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let _ = store.revoke_lease(lease).await;
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use kayra_store::mvcc::{MvccStore, Options};

    use super::*;

    #[tokio::test]
    async fn one_candidate_leads_at_a_time_and_the_next_takes_over() {
        let store: Arc<dyn Store> = Arc::new(MvccStore::in_memory(Options::default()).unwrap());
        let ttl = Duration::from_secs(2);
        let first = Election::new(store.clone(), "/elections/loop", "a", ttl);
        let second = Election::new(store.clone(), "/elections/loop", "b", ttl);
        let leadership = first.campaign().await.unwrap();
        let holder = |store: Arc<dyn Store>| async move {
            String::from_utf8(store.get("/elections/loop").await.unwrap().unwrap().value).unwrap()
        };
        assert_eq!(holder(store.clone()).await, "a");
        let waiting = tokio::spawn(async move { second.campaign().await.map(|_leadership| ()) });
        tokio::time::sleep(Duration::from_millis(300)).await;
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
        tokio::time::timeout(Duration::from_secs(5), leadership.lost())
            .await
            .expect("the next keep-alive fails");
    }
}
