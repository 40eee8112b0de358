//! The controller's side of the node session (`proto/node.proto` documents the contract).
//!
//! A [`NodeServer`] holds one [`Session`] per connected node, opened only for a node identity
//! (`system:node:<name>` in `system:nodes`) and confined to that node: it pushes the node's
//! desired state (its Applications and exactly the Secrets they reference) whenever that
//! changes and on a periodic resync, writes what the node reports through the application layer
//! under the node's own identity, registers the Node of a node that has none (under its own
//! identity: as the node asks on its first registration, cordoned on any later one; see
//! `registration.rs`), and relays log streams and the exec, attach and port-forward streams
//! (`streams.rs`). Three loops run beside the sessions:
//! [`NodeServer::push_loop`] (every replica, for the sessions it holds) and
//! [`NodeServer::liveness_loop`] (elected: marks silent nodes `Ready=Unknown`), and
//! [`NodeServer::loss_loop`] (elected: moves what the scheduler placed off nodes lost for
//! longer than the lost timeout, and marks the pinned ones `NodeLost`).
//!
//! The transport is a port: the gRPC adapter opens sessions, feeds them what the node sends
//! and forwards what [`Session::next`] yields.

mod cache;
mod error;
mod holder;
mod lease;
mod liveness;
mod logs;
mod loss;
mod metrics;
mod push;
mod registration;
mod session;
mod status;
mod streams;
mod tokens;
mod usage;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use kayra_application::client::Client;
use kayra_application::events::Recorder;
use kayra_application::{ApplicationLayer, controller_identity};
use kayra_authn::Identity;
use kayra_registry::{RegistryError, Resource};

pub use error::NodeServerError;
pub use holder::Replica;
pub use logs::LogStream;
pub use session::Session;
pub use streams::{NodeStream, StreamEvent, StreamInputHalf, StreamOutputHalf};

use crate::cache::Cache;
use crate::push::Trigger;
use crate::session::Live;

/// How the node server behaves.
#[derive(Debug, Clone)]
pub struct Config {
    /// How long a node may be silent before it is `Ready=Unknown` and its session may be taken
    /// over (kubelet's node-monitor-grace-period; default 40 s).
    pub ready_timeout: Duration,
    /// How often every node's desired state is pushed even when unchanged (default 5 min).
    pub resync: Duration,
    /// How long a node may be `Ready=Unknown` before it is lost and what the scheduler placed
    /// there is placed elsewhere (default 5 min).
    pub lost_timeout: Duration,
    /// How stale a node's Lease may get before a report renews it (default a quarter of the
    /// ready timeout, as kubelet renews its own).
    pub heartbeat_write: Duration,
    /// How often an unchanged node status is written all the same (kubelet's
    /// `nodeStatusReportFrequency`; default 5 min): its Lease carries the heartbeat meanwhile.
    pub status_report: Duration,
    /// How many log bytes a node may send ahead of the reader (default 256 KiB).
    pub log_window: u64,
    /// The most log streams in flight across the server (default 256).
    pub max_log_streams: usize,
    /// How many bytes of an exec, attach or port-forward stream either side may send ahead of
    /// the other (default 256 KiB).
    pub stream_window: u64,
    /// The most exec, attach and port-forward streams one node carries at once (default 128).
    pub max_streams_per_node: usize,
    /// The most such streams one caller has open at once, across nodes (default 64).
    pub max_streams_per_caller: usize,
    /// How long such a stream may carry nothing either way before it is closed (kubelet's
    /// `streamingConnectionIdleTimeout`; default 4 h).
    pub stream_idle_timeout: Duration,
}

impl Default for Config {
    fn default() -> Config {
        let ready_timeout = Duration::from_secs(40);
        Config {
            ready_timeout,
            resync: Duration::from_secs(300),
            lost_timeout: Duration::from_secs(300),
            heartbeat_write: ready_timeout / 4,
            status_report: Duration::from_secs(300),
            log_window: 256 * 1024,
            max_log_streams: 256,
            stream_window: 256 * 1024,
            max_streams_per_node: 128,
            max_streams_per_caller: 64,
            stream_idle_timeout: Duration::from_secs(4 * 60 * 60),
        }
    }
}

/// The controller's side of every node session.
#[derive(Clone)]
pub struct NodeServer {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for NodeServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeServer").field("sessions", &self.inner.sessions().len()).finish_non_exhaustive()
    }
}

/// A [`NodeServer`] that does not keep it alive: what the server itself feeds (the application
/// layer it reports to) holds one, so that the two never hold each other.
#[derive(Clone)]
pub struct WeakNodeServer {
    inner: Weak<Inner>,
}

impl WeakNodeServer {
    /// The server, while it lasts.
    pub fn upgrade(&self) -> Option<NodeServer> {
        self.inner.upgrade().map(|inner| NodeServer { inner })
    }
}

pub(crate) struct Inner {
    control: Arc<ApplicationLayer>,
    config: Config,
    cache: Arc<Cache>,
    /// The service-account tokens last pushed to each node ([`tokens`]).
    tokens: tokens::Tokens,
    sessions: Mutex<HashMap<String, Arc<Live>>>,
    trigger: Trigger,
    next_epoch: AtomicU64,
    /// Reads what a node may not read itself (its Applications, the Secrets they reference).
    reader: Client,
    recorder: Recorder,
    nodes: Resource,
    leases: Resource,
    applications: Resource,
    secrets: Resource,
    log_streams: Arc<tokio::sync::Semaphore>,
    /// The exec, attach and port-forward streams in flight, per node and per caller.
    streams: streams::Counts,
    closing: std::sync::atomic::AtomicBool,
    /// On tokio's clock, which is the wall clock's pace unless a test pauses it.
    started: tokio::time::Instant,
    metrics: metrics::FleetMetrics,
    /// This replica, once it serves: session records name it ([`holder`]).
    replica: std::sync::OnceLock<holder::Replica>,
}

impl Inner {
    fn sessions(&self) -> MutexGuard<'_, HashMap<String, Arc<Live>>> {
        self.sessions.lock().expect("the session table's lock is never held across a panic")
    }

    /// Milliseconds since the server started: the clock sessions' silence is measured by.
    fn now_ms(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    fn client_for(&self, identity: Identity) -> Client {
        self.control.client(identity)
    }
}

impl NodeServer {
    /// A node server over the application layer.
    pub fn new(control: Arc<ApplicationLayer>, config: Config) -> Result<NodeServer, NodeServerError> {
        let reader = control.client(controller_identity("nodeserver"));
        let served = || NodeServerError::registry("finding the resources the node server writes");
        let nodes = reader.resource("", "nodes").map_err(served())?;
        let leases = reader.resource(kayra_api::kinds::lease::GROUP, "leases").map_err(served())?;
        let applications = application_resource(&control).map_err(served())?;
        let secrets = reader.resource(&applications.group, "secrets").map_err(served())?;
        let recorder = Recorder::new(reader.clone(), "kayra-nodeserver");
        Ok(NodeServer {
            inner: Arc::new(Inner {
                log_streams: Arc::new(tokio::sync::Semaphore::new(config.max_log_streams)),
                streams: streams::Counts::default(),
                control,
                config,
                cache: Arc::new(Cache::default()),
                tokens: tokens::Tokens::default(),
                sessions: Mutex::default(),
                trigger: Trigger::default(),
                next_epoch: AtomicU64::new(1),
                reader,
                recorder,
                nodes,
                leases,
                applications,
                secrets,
                closing: std::sync::atomic::AtomicBool::new(false),
                started: tokio::time::Instant::now(),
                metrics: metrics::FleetMetrics::default(),
                replica: std::sync::OnceLock::new(),
            }),
        })
    }

    /// Opens the session of the node `identity` names. Refused for anything but a node
    /// identity, and while the node holds another session that is not silent; a silent one is
    /// ended and replaced.
    pub fn open(&self, identity: &Identity) -> Result<Session, NodeServerError> {
        let caller = kayra_application::caller(identity);
        let Some(node) = caller.node_name() else {
            return Err(NodeServerError::NotANode { user: identity.user.clone() });
        };
        if !kayra_api::validation::is_dns_subdomain(node) {
            return Err(NodeServerError::BadNodeName { name: node.to_owned() });
        }
        let inner = &self.inner;
        let now = inner.now_ms();
        let silent_after = u64::try_from(inner.config.ready_timeout.as_millis()).unwrap_or(u64::MAX);
        let mut sessions = inner.sessions();
        if inner.closing.load(Ordering::Acquire) {
            return Err(NodeServerError::ShuttingDown);
        }
        if let Some(existing) = sessions.get(node) {
            if now.saturating_sub(existing.last_seen()) <= silent_after {
                return Err(NodeServerError::AlreadyConnected { node: node.to_owned() });
            }
            tracing::info!(node, "a silent session is taken over by a new one");
            existing.end();
        }
        let epoch = inner.next_epoch.fetch_add(1, Ordering::Relaxed);
        let (live, session) = session::open(inner.clone(), node.to_owned(), identity.clone(), epoch, now);
        sessions.insert(node.to_owned(), live.clone());
        if inner.replica.get().is_some() {
            let inner = inner.clone();
            tokio::spawn(async move {
                if let Err(error) = holder::claim(&inner, &live).await {
                    tracing::warn!(%error, node = %live.node, "cannot record that this replica holds the node");
                }
            });
        }
        Ok(session)
    }

    /// Ends every session and refuses new ones: the controller is stopping. Nodes reconnect
    /// (to another replica, or to this one when it is back) and keep running meanwhile.
    pub fn shutdown(&self) {
        let sessions = self.inner.sessions();
        self.inner.closing.store(true, Ordering::Release);
        for live in sessions.values() {
            live.end();
        }
    }

    /// Names this server as `replica` (its id, and the URL it serves at) in the store's records
    /// of which replica holds each node's session, and follows the records: a node that opens
    /// a session on another replica ends its session here. Set once, when the server serves.
    pub fn serve_as(&self, replica: Replica) {
        if self.inner.replica.set(replica).is_ok() {
            tokio::spawn(holder::follow(Arc::downgrade(&self.inner)));
        }
    }

    /// The replica holding `node`'s session, as the store's record says while it lasts.
    pub async fn holder(&self, node: &str) -> Result<Option<Replica>, NodeServerError> {
        holder::holder(&self.inner, node).await
    }

    /// Every replica that holds some node's session, as the store records them.
    pub async fn holders(&self) -> Result<Vec<Replica>, NodeServerError> {
        holder::holders(&self.inner).await
    }

    /// A handle on this server that does not keep it alive.
    pub fn downgrade(&self) -> WeakNodeServer {
        WeakNodeServer { inner: Arc::downgrade(&self.inner) }
    }

    /// This server's own name in the session records, when it serves as a replica.
    pub fn replica(&self) -> Option<Replica> {
        self.inner.replica.get().cloned()
    }

    /// How many sessions this server holds.
    pub fn sessions(&self) -> usize {
        self.inner.sessions().len()
    }

    /// Streams the log of Application `namespace/name` from the node it is bound to.
    pub async fn logs(
        &self,
        namespace: &str,
        name: &str,
        request: LogOptions,
    ) -> Result<LogStream, NodeServerError> {
        logs::open(&self.inner, namespace, name, request).await
    }

    /// Opens a stream of `kind` (exec, attach, port-forward) to the running Application
    /// `namespace/name` on the node it is bound to, for `caller` (whose streams are counted
    /// against its limit). A port-forward reaches only a TCP port the Application declares.
    pub async fn stream(
        &self,
        namespace: &str,
        name: &str,
        kind: kayra_api::session::StreamKind,
        caller: &str,
    ) -> Result<NodeStream, NodeServerError> {
        streams::open(&self.inner, namespace, name, kind, caller).await
    }

    /// The TCP ports Application `namespace/name` declares, when it can take port-forwards from
    /// this server: it declares one, is placed, and its node holds its session here.
    pub async fn forwardable(&self, namespace: &str, name: &str) -> Result<Vec<u16>, NodeServerError> {
        streams::forwardable(&self.inner, namespace, name).await
    }

    /// Streams the own log of `node`'s agent (behind the `NodeLogs` gate). `previous` and
    /// `timestamps` do not apply: the agent keeps one log, whose lines carry their times.
    pub async fn agent_log(&self, node: &str, request: LogOptions) -> Result<LogStream, NodeServerError> {
        logs::open_agent(&self.inner, node, request).await
    }
}

/// What a log request asks for (the session numbers it).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogOptions {
    /// Keep following new output.
    pub follow: bool,
    /// Only the last lines.
    pub tail_lines: Option<i64>,
    /// Only lines newer than this many seconds.
    pub since_seconds: Option<i64>,
    /// Prefix lines with their time.
    pub timestamps: bool,
    /// The previous run's log.
    pub previous: bool,
    /// Stop after this many bytes.
    pub limit_bytes: Option<i64>,
}

/// A Node, as the object of an Event.
pub(crate) fn node_involved(name: &str, uid: &str) -> kayra_application::events::Involved {
    kayra_application::events::Involved {
        api_version: "v1".into(),
        kind: "Node".into(),
        namespace: String::new(),
        name: name.into(),
        uid: uid.into(),
    }
}

fn application_resource(control: &ApplicationLayer) -> Result<Resource, RegistryError> {
    control
        .scheme()
        .kinds()
        .iter()
        .find(|kind| kind.kind == "Application")
        .map(|kind| control.resource(kind).clone())
        .ok_or_else(|| RegistryError::BadRequest("the scheme serves no Applications".into()))
}

#[cfg(test)]
mod tests;
