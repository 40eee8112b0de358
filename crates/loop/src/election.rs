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

    /// How long a leader goes on acting without a successful renewal: two thirds of the
    /// lease's life (kube-controller-manager's 10 s of 15 s), so that it has stopped before the
    /// store can expire its lease and let another candidate lead.
    pub fn renew_deadline(&self) -> Duration {
        self.ttl * 2 / 3
    }

    /// How long a leader that lost its leadership may take to stop acting: half the time
    /// between its renew deadline and the end of its lease (2.5 s of a 15 s lease), after which
    /// its loop cuts off what is still running.
    pub fn stop_deadline(&self) -> Duration {
        (self.ttl - self.renew_deadline()) / 2
    }

    fn lead(&self, lease: LeaseId) -> Leadership {
        let (lose, lost) = tokio::sync::watch::channel(false);
        let (store, ttl, renew_deadline) = (self.store.clone(), self.ttl, self.renew_deadline());
        let keeper = tokio::spawn(async move {
            let reason = keep_renewing(store.as_ref(), lease, ttl, renew_deadline).await;
            tracing::warn!(%reason, "a leader could not renew its lease; stepping down");
            let _ = lose.send(true);
        });
        Leadership { store: self.store.clone(), lease, lost, keeper, resigned: false }
    }
}

/// Renews `lease` every third of its life until that fails for good, and says why. A failed
/// renewal is tried again every `ttl / 15` until `renew_deadline` has passed since the last
/// renewal that succeeded (counted from when it was sent, so from before the store restarted
/// the lease's clock); a lease the store no longer has ends it at once.
async fn keep_renewing(store: &dyn Store, lease: LeaseId, ttl: Duration, renew_deadline: Duration) -> String {
    let mut renewed = tokio::time::Instant::now();
    let mut tick = tokio::time::interval(ttl / 3);
    tick.tick().await;
    loop {
        tick.tick().await;
        loop {
            let sent = tokio::time::Instant::now();
            let deadline = renewed + renew_deadline;
            match tokio::time::timeout_at(deadline, store.keep_alive(lease)).await {
                Ok(Ok(_)) => {
                    renewed = sent;
                    break;
                }
                Ok(Err(error @ StoreError::LeaseNotFound(_))) => return error.to_string(),
                Ok(Err(error)) if tokio::time::Instant::now() + ttl / 15 >= deadline => {
                    return format!("{error}, and the renew deadline of {renew_deadline:?} passed");
                }
                Ok(Err(error)) => {
                    tracing::debug!(%error, "a leader's keep-alive failed; trying again");
                    tokio::time::sleep(ttl / 15).await;
                }
                Err(_) => {
                    return format!("no renewal succeeded within the renew deadline of {renew_deadline:?}");
                }
            }
        }
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
mod tests;
