//! Usage samples across replicas: each replica holds the samples of the node sessions it
//! holds, so `kubectl top` through any replica answers from its own sessions and from every
//! other replica the session records name, asked once each over their
//! `/apis/fleet.<domain>/v1/sessionusage` (which serves only what that replica holds, so a
//! request is never passed on twice).

use std::collections::BTreeMap;
use std::sync::Arc;

use kayra_application::usage::{Samples, UsageSource};
use kayra_nodeserver::{NodeServer, WeakNodeServer};

use crate::peers::HttpsPeers;

/// The local sessions' samples, and through them the other replicas'.
pub(crate) struct ReplicatedUsage {
    local: Arc<dyn UsageSource>,
    /// Weak: the node server holds the application layer, which holds this.
    nodes: WeakNodeServer,
    peers: Arc<HttpsPeers>,
    path: String,
}

impl ReplicatedUsage {
    /// Reads `local` first, then the replicas `nodes`' session records name, through `peers`.
    pub(crate) fn new(nodes: NodeServer, peers: Arc<HttpsPeers>, domain: &str) -> ReplicatedUsage {
        let path = format!("/apis/fleet.{domain}/v1/sessionusage");
        ReplicatedUsage { local: nodes.usage_source(), nodes: nodes.downgrade(), peers, path }
    }

    /// The samples every other replica holding sessions holds; one that does not answer in
    /// time counts as holding none (its nodes' usage is then not available, as kubectl says).
    async fn elsewhere(&self) -> Vec<Samples> {
        let Some(nodes) = self.nodes.upgrade() else { return Vec::new() };
        let Some(me) = nodes.replica() else { return Vec::new() };
        let holders = match nodes.holders().await {
            Ok(holders) => holders,
            Err(error) => {
                tracing::warn!(%error, "cannot read which replicas hold the nodes' sessions");
                return Vec::new();
            }
        };
        let asks = holders.into_iter().filter(|replica| replica.id != me.id).map(|replica| async move {
            let url = format!("{}{}", replica.url, self.path);
            match self.peers.json(&url).await {
                Ok(answer) => serde_json::from_value::<Vec<Samples>>(answer["samples"].clone())
                    .map_err(|error| error.to_string()),
                Err(error) => Err(error),
            }
            .unwrap_or_else(|error| {
                tracing::warn!(replica = %replica.url, %error, "cannot read another replica's usage samples");
                Vec::new()
            })
        });
        futures_util::future::join_all(asks).await.into_iter().flatten().collect()
    }

    /// The local samples `keep` keeps, then the other replicas', one per node or Application:
    /// the latest, where a session moving between replicas left one on each.
    async fn merged(&self, local: Vec<Samples>, keep: impl Fn(&Samples) -> bool) -> Vec<Samples> {
        let mut merged: BTreeMap<(String, String, String), Samples> = BTreeMap::new();
        for samples in local.into_iter().chain(self.elsewhere().await.into_iter().filter(|s| keep(s))) {
            let node = if samples.latest.name.is_empty() { samples.node.clone() } else { String::new() };
            let key = (node, samples.latest.namespace.clone(), samples.latest.name.clone());
            match merged.get(&key) {
                Some(kept) if kept.latest.timestamp >= samples.latest.timestamp => {}
                _ => {
                    merged.insert(key, samples);
                }
            }
        }
        merged.into_values().collect()
    }
}

#[async_trait::async_trait]
impl UsageSource for ReplicatedUsage {
    async fn application(&self, namespace: &str, name: &str) -> Option<Samples> {
        if let Some(samples) = self.local.application(namespace, name).await {
            return Some(samples);
        }
        let of = |s: &Samples| s.latest.namespace == namespace && s.latest.name == name;
        self.merged(Vec::new(), of).await.into_iter().next()
    }

    async fn applications(&self, namespace: Option<&str>) -> Vec<Samples> {
        let local = self.local.applications(namespace).await;
        let keep = |s: &Samples| {
            !s.latest.name.is_empty() && namespace.is_none_or(|wanted| wanted == s.latest.namespace)
        };
        self.merged(local, keep).await
    }

    async fn node(&self, node: &str) -> Option<Samples> {
        if let Some(samples) = self.local.node(node).await {
            return Some(samples);
        }
        let of = |s: &Samples| s.node == node && s.latest.name.is_empty();
        self.merged(Vec::new(), of).await.into_iter().next()
    }

    async fn nodes(&self) -> Vec<Samples> {
        let local = self.local.nodes().await;
        self.merged(local, |s: &Samples| s.latest.name.is_empty()).await
    }

    async fn held(&self) -> Vec<Samples> {
        self.local.held().await
    }
}
