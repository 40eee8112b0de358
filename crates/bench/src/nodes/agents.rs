//! Simulated node agents: each holds one node session over real gRPC and mutual TLS with its
//! own node certificate, reports its status once, notes when each desired state arrives and
//! which version of the shared Secret it carries, and while the fleet is told to, reports its
//! status again every [`HEARTBEAT`] as the real agent does (its heartbeat).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use kayra_api::session::{ControllerMessage, NodeInfo, NodeMessage, NodeReport};
use kayra_grpc::client::{Credentials, connect};
use kayra_pki::{Ca, Usage};
use kayra_registry::meta_str;
use tokio::sync::{Semaphore, mpsc};
use tokio::task::JoinSet;

/// How many sessions are being opened (TCP, TLS, HTTP/2, first status, first desired state)
/// at once.
const OPENING: usize = 128;

/// How often a heartbeating node reports its status: the real agent's default, and the
/// benchmark's unless a smoke run asks for less.
pub(crate) const HEARTBEAT: Duration = Duration::from_secs(10);

/// A desired state reaching a node: which node, the shared Secret's resourceVersion in it, and
/// when it arrived.
#[derive(Debug)]
pub(crate) struct Arrival {
    pub(crate) node: usize,
    pub(crate) version: String,
    pub(crate) at: Instant,
}

/// The node certificates of `system:node:node-<i>`, `i` in `0..count`, issued by the cluster
/// CA on every core.
pub(crate) async fn issue(
    ca_pem: &str,
    ca_key_pem: &str,
    count: usize,
) -> Result<Vec<(String, String)>, String> {
    let ca = Arc::new(Ca::from_pem(ca_pem, ca_key_pem).map_err(|e| e.to_string())?);
    let threads = std::thread::available_parallelism().map_or(2, usize::from);
    let per = count.div_ceil(threads);
    let mut tasks = JoinSet::new();
    for t in 0..threads {
        let ca = ca.clone();
        let range = (t * per)..((t + 1) * per).min(count);
        tasks.spawn_blocking(move || {
            range
                .map(|i| {
                    ca.issue(
                        Usage::Client,
                        &format!("system:node:{}", node_name(i)),
                        Some("system:nodes"),
                        &[],
                    )
                    .map(|issued| (i, issued.cert_pem, issued.key_pem))
                    .map_err(|e| e.to_string())
                })
                .collect::<Result<Vec<_>, String>>()
        });
    }
    let mut all = Vec::with_capacity(count);
    while let Some(done) = tasks.join_next().await {
        all.extend(done.map_err(|e| e.to_string())??);
    }
    all.sort_by_key(|(i, _, _)| *i);
    Ok(all.into_iter().map(|(_, cert, key)| (cert, key)).collect())
}

/// The name of simulated node `i`.
pub(crate) fn node_name(i: usize) -> String {
    format!("node-{i}")
}

fn report() -> NodeReport {
    NodeReport {
        capacity: [("cpu".to_owned(), "2".to_owned()), ("memory".to_owned(), "4Gi".to_owned())].into(),
        allocatable: [("cpu".to_owned(), "2".to_owned()), ("memory".to_owned(), "4Gi".to_owned())].into(),
        addresses: vec![("InternalIP".into(), "127.0.0.1".into())],
        info: NodeInfo {
            operating_system: "linux".into(),
            architecture: "amd64".into(),
            agent_version: "v0.1.0-bench".into(),
            ..NodeInfo::default()
        },
        ..NodeReport::default()
    }
}

/// A fleet of simulated agents, each holding a session until the fleet is dropped.
pub(crate) struct Fleet {
    tasks: JoinSet<()>,
    /// Every desired state any node received, in order of arrival.
    pub(crate) arrivals: mpsc::UnboundedReceiver<Arrival>,
    /// How many nodes hold a session and received their first desired state.
    pub(crate) held: usize,
    /// How long it took until the last of them did.
    pub(crate) opened_in: Duration,
    /// Why the others failed, the first of each kind, with how many.
    pub(crate) failures: Vec<(String, usize)>,
    /// Whether the nodes send their heartbeats.
    beating: Arc<AtomicBool>,
    /// How often each node heartbeats while told to.
    pub(crate) interval: Duration,
}

/// Opens one session per certificate against `server` and waits until each received its
/// first desired state (or failed, or `deadline` passed). Each node heartbeats every
/// `interval` while the fleet is told to.
pub(crate) async fn open(
    server: &str,
    ca_pem: &str,
    certificates: &[(String, String)],
    deadline: Duration,
    interval: Duration,
) -> Fleet {
    let (arrivals_tx, arrivals) = mpsc::unbounded_channel();
    let (ready_tx, mut ready) = mpsc::unbounded_channel::<Result<(), String>>();
    let opening = Arc::new(Semaphore::new(OPENING));
    let beating = Arc::new(AtomicBool::new(false));
    let mut tasks = JoinSet::new();
    let spread = interval.as_secs_f64() / certificates.len().max(1) as f64;
    let started = Instant::now();
    for (node, (cert_pem, key_pem)) in certificates.iter().enumerate() {
        let credentials = Credentials {
            server: server.to_owned(),
            ca_pem: ca_pem.to_owned(),
            cert_pem: cert_pem.clone(),
            key_pem: key_pem.clone(),
        };
        let (arrivals, ready, opening) = (arrivals_tx.clone(), ready_tx.clone(), opening.clone());
        let beating = beating.clone();
        // Heartbeats spread evenly over the interval, as independent agents' are.
        let first_beat = tokio::time::Instant::now() + Duration::from_secs_f64(spread * node as f64);
        tasks.spawn(async move {
            let permit = opening.acquire_owned().await;
            let mut connection = match connect(&credentials).await {
                Ok(connection) => connection,
                Err(error) => {
                    let _ = ready.send(Err(error.to_string()));
                    return;
                }
            };
            if connection.sender().send(NodeMessage::Status(report())).await.is_err() {
                let _ = ready.send(Err("the session closed before the first status".into()));
                return;
            }
            let mut first = Some((permit, ready));
            let sender = connection.sender();
            let mut heartbeat = tokio::time::interval_at(first_beat, interval);
            loop {
                let next = tokio::select! {
                    next = connection.next() => next,
                    _ = heartbeat.tick() => {
                        if beating.load(Ordering::Relaxed) && sender.send(NodeMessage::Status(report())).await.is_err() {
                            return;
                        }
                        continue;
                    }
                };
                match next {
                    Ok(Some(ControllerMessage::Desired(desired))) => {
                        let version = desired
                            .secrets
                            .first()
                            .map(|secret| meta_str(secret, "resourceVersion").to_owned())
                            .unwrap_or_default();
                        let _ = arrivals.send(Arrival { node, version, at: Instant::now() });
                        if let Some((_permit, ready)) = first.take() {
                            let _ = ready.send(Ok(()));
                        }
                    }
                    Ok(Some(_)) => {}
                    Ok(None) => {
                        if let Some((_, ready)) = first.take() {
                            let _ = ready.send(Err("the controller closed the session".into()));
                        }
                        return;
                    }
                    Err(error) => {
                        if let Some((_, ready)) = first.take() {
                            let _ = ready.send(Err(error.to_string()));
                        }
                        return;
                    }
                }
            }
        });
    }
    drop(ready_tx);
    let (mut held, mut answered) = (0, 0);
    let mut failures: Vec<(String, usize)> = Vec::new();
    let until = tokio::time::Instant::now() + deadline;
    while answered < certificates.len() {
        match tokio::time::timeout_at(until, ready.recv()).await {
            Ok(Some(Ok(()))) => held += 1,
            Ok(Some(Err(error))) => {
                // Errors differ by node name and port; group them by their first words.
                let kind: String = error.split_whitespace().take(8).collect::<Vec<_>>().join(" ");
                match failures.iter_mut().find(|(k, _)| *k == kind) {
                    Some((_, count)) => *count += 1,
                    None => failures.push((kind, 1)),
                }
            }
            Ok(None) | Err(_) => break,
        }
        answered += 1;
    }
    Fleet { tasks, arrivals, held, opened_in: started.elapsed(), failures, beating, interval }
}

impl Fleet {
    /// Starts or stops every node's heartbeats.
    pub(crate) fn heartbeats(&self, on: bool) {
        self.beating.store(on, Ordering::Relaxed);
    }

    /// Forgets every arrival so far.
    pub(crate) fn drain(&mut self) {
        while self.arrivals.try_recv().is_ok() {}
    }

    /// Waits until each of `nodes` nodes received a desired state whose shared Secret is at
    /// `version`, or `deadline` passed; answers each node's delay after `since` (`None` for a
    /// node that never got it).
    pub(crate) async fn delivered(
        &mut self,
        nodes: usize,
        version: &str,
        since: Instant,
        deadline: Duration,
    ) -> Vec<Option<Duration>> {
        let mut delays = vec![None; nodes];
        let mut missing = nodes;
        let until = tokio::time::Instant::now() + deadline;
        while missing > 0 {
            match tokio::time::timeout_at(until, self.arrivals.recv()).await {
                Ok(Some(arrival)) => {
                    if arrival.version == version && delays[arrival.node].is_none() {
                        delays[arrival.node] = Some(arrival.at.saturating_duration_since(since));
                        missing -= 1;
                    }
                }
                Ok(None) | Err(_) => break,
            }
        }
        delays
    }

    /// Closes every session.
    pub(crate) async fn close(mut self) {
        self.tasks.abort_all();
        while self.tasks.join_next().await.is_some() {}
    }
}
