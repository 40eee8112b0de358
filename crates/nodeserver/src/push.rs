//! The desired-state push: a loop keyed by node name, woken by any change to the node's
//! Applications, the Secrets they reference or its Node object (through the cache's feeds), by
//! a session's first status, by a service-account token falling due, and by the periodic
//! resync. Each replica pushes to the sessions it holds.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use kayra_application::feed::FollowFeed;
use kayra_loop::runtime::Loop;
use kayra_loop::source::{Sink, Source};
use kayra_loop::{Action, Key, ReconcileError, Reconciler};
use tokio_util::sync::CancellationToken;

use crate::cache::{CacheFollower, Collection};
use crate::{Inner, NodeServer};

/// How soon a node is looked at again while the cache is still listing.
const UNSYNCED: Duration = Duration::from_millis(200);

/// A source the server queues nodes through by hand (a session that just reported).
#[derive(Debug, Default)]
pub(crate) struct Trigger {
    sink: Mutex<Option<Sink>>,
}

impl Trigger {
    /// Queues node `node` for a push, once the loop runs.
    pub(crate) fn add(&self, node: &str) {
        if let Some(sink) =
            self.sink.lock().expect("the trigger's lock is never held across a panic").as_ref()
        {
            sink.add(Key::new(node));
        }
    }
}

/// The loop's view of the trigger.
struct Triggered(Arc<Inner>);

#[async_trait::async_trait]
impl Source for Triggered {
    async fn run(&self, sink: Sink, stop: CancellationToken) {
        *self.0.trigger.sink.lock().expect("the trigger's lock is never held across a panic") = Some(sink);
        // Sessions opened before the loop ran are pushed now.
        let nodes: Vec<String> = self.0.sessions().keys().cloned().collect();
        for node in nodes {
            self.0.trigger.add(&node);
        }
        stop.cancelled().await;
    }

    fn known(&self) -> Vec<Key> {
        self.0.sessions().keys().map(Key::new).collect()
    }
}

/// Pushes each node's desired state to its session.
struct Pusher(Arc<Inner>);

#[async_trait::async_trait]
impl Reconciler for Pusher {
    async fn reconcile(&self, key: &Key) -> Result<Action, ReconcileError> {
        let inner = &self.0;
        let node = key.name();
        let Some(live) = inner.sessions().get(node).cloned() else { return Ok(Action::AwaitChange) };
        if !live.reported() {
            return Ok(Action::AwaitChange);
        }
        if !inner.cache.synced() {
            // Nothing is pushed before the cache holds every collection: an incomplete state
            // would stop what the node runs.
            return Ok(Action::RequeueAfter(UNSYNCED));
        }
        if !inner.cache.has_node(node) {
            // The Node was deleted: the node is frozen, keeping what it runs, until its next
            // status re-creates the Node.
            return Ok(Action::AwaitChange);
        }
        let started = std::time::Instant::now();
        let mut desired = inner.cache.desired(node);
        let refresh = inner.tokens.fill(&inner.control, node, &mut desired).await;
        let (applications, secrets) = (desired.applications.len(), desired.secrets.len());
        if live.push(desired, inner.config.resync) {
            inner.metrics.pushes.inc();
            inner.metrics.push_duration.observe(started.elapsed().as_secs_f64());
            tracing::debug!(node, applications, secrets, "pushed the node's desired state");
        }
        // A token falling due is a change of its own.
        Ok(refresh.map_or(Action::AwaitChange, Action::RequeueAfter))
    }
}

impl NodeServer {
    /// The push loop. Every replica runs it for the sessions it holds.
    pub fn push_loop(&self) -> Loop {
        let inner = &self.inner;
        let feed = |resource: &kayra_registry::Resource, collection| {
            let follower = CacheFollower { collection, cache: inner.cache.clone() };
            FollowFeed::source(inner.reader.clone(), resource.clone(), Arc::new(follower))
        };
        Loop::new("node-push", Pusher(inner.clone()))
            .source(Triggered(inner.clone()))
            .source(feed(&inner.applications, Collection::Applications))
            .source(feed(&inner.secrets, Collection::Secrets))
            .source(feed(&inner.nodes, Collection::Nodes))
            .resync(inner.config.resync)
            .concurrency(4)
    }
}
