//! The agent's side of the node session (`proto/node.proto`): connect, report the node and
//! every Application, apply each desired state, serve log requests under the controller's
//! credit, and reconnect with back-off when the session ends. What runs on the node never
//! depends on the session: while the controller is away, everything keeps running.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use futures_util::stream::BoxStream;
use kayra_api::session::{
    ApplicationReport, ControllerMessage, DesiredState, LogChunk, LogRequest, NodeEvent, NodeMessage,
    NodeReport, StreamOpen, UsageSample,
};
use kayra_grpc::client::{Connection, Credentials};
use tokio::sync::{Semaphore, broadcast, mpsc};
use tokio_util::sync::CancellationToken;

/// What runs on the node, as the session sees it: the port the process runtime implements.
#[async_trait::async_trait]
pub trait Workloads: Send + Sync + 'static {
    /// Makes the node run exactly `desired`.
    fn apply(&self, desired: &DesiredState);
    /// The status of every Application the node knows, and their changes from now on.
    fn statuses(&self) -> (Vec<ApplicationReport>, broadcast::Receiver<ApplicationReport>);
    /// Events about Applications, from now on.
    fn events(&self) -> broadcast::Receiver<NodeEvent>;
    /// Current usage of each Application and of the node.
    fn usage(&self) -> Vec<UsageSample>;
    /// The node's own status.
    fn node_report(&self) -> NodeReport;
    /// One Application's log, as the request asks. Dropping the stream stops reading.
    async fn logs(&self, request: &LogRequest)
    -> Result<BoxStream<'static, Result<Vec<u8>, String>>, String>;
    /// What a stream connects to: a command run beside an Application's process, the process
    /// itself, or a connection to a port it declares; why not, in words for the client.
    async fn open_stream(&self, open: &StreamOpen) -> Result<crate::streams::Connected, String>;
}

/// Where the session's credentials come from: read anew at each connection, so a renewed
/// certificate is used from the next session on.
pub trait CredentialSource: Send + Sync + 'static {
    /// The credentials to connect with now.
    fn credentials(&self) -> Result<Credentials, String>;
}

/// How the session behaves.
#[derive(Debug, Clone)]
pub struct SessionConfig {
    /// How often the node's status (its heartbeat) and usage are sent.
    pub heartbeat: Duration,
    /// The first wait before reconnecting; doubled after each failure up to `max_backoff`.
    pub first_backoff: Duration,
    /// The longest wait before reconnecting.
    pub max_backoff: Duration,
}

impl Default for SessionConfig {
    fn default() -> SessionConfig {
        SessionConfig {
            heartbeat: Duration::from_secs(10),
            first_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(30),
        }
    }
}

/// The largest log chunk sent at once.
const LOG_CHUNK: usize = 32 * 1024;

/// Holds the node's session until `stop`, reconnecting as needed.
pub async fn run(
    workloads: Arc<dyn Workloads>,
    credentials: Arc<dyn CredentialSource>,
    config: SessionConfig,
    stop: CancellationToken,
) {
    let mut backoff = config.first_backoff;
    // Events are taken across sessions: those raised while the controller is away (a crash,
    // its back-off) wait in the runtime's buffer and go out once the next session is open.
    let mut events = Events { receiver: workloads.events(), unsent: None };
    loop {
        let connected = match credentials.credentials() {
            Ok(credentials) => {
                tokio::select! {
                    () = stop.cancelled() => return,
                    connected = kayra_grpc::client::connect(&credentials) => connected
                        .map(|connection| (connection, credentials.server))
                        .map_err(|error| error.to_string()),
                }
            }
            Err(error) => Err(error),
        };
        match connected {
            Ok((connection, server)) => {
                tracing::info!(server, "the node session is open");
                backoff = config.first_backoff;
                let ended = hold(connection, workloads.as_ref(), &mut events, &config, &stop).await;
                if stop.is_cancelled() {
                    return;
                }
                tracing::warn!(reason = %ended, "the node session ended; reconnecting");
            }
            Err(error) => tracing::warn!(%error, retry_in = ?backoff, "cannot open the node session"),
        }
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(jittered(backoff)) => {}
        }
        backoff = (backoff * 2).min(config.max_backoff);
    }
}

/// `wait` less up to a fifth, so that nodes cut off together do not return together.
fn jittered(wait: Duration) -> Duration {
    let nanos =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().subsec_nanos();
    wait.mul_f64(1.0 - f64::from(nanos % 200) / 1000.0)
}

/// One log stream being served: its credit and how to stop it.
struct Serving {
    credit: Arc<Semaphore>,
    cancel: CancellationToken,
}

/// The runtime's Events, followed from the agent's start, and the one a closing session could
/// not send.
struct Events {
    receiver: broadcast::Receiver<NodeEvent>,
    unsent: Option<NodeEvent>,
}

/// Holds one session until it ends; answers why it ended.
async fn hold(
    mut connection: Connection,
    workloads: &dyn Workloads,
    events: &mut Events,
    config: &SessionConfig,
    stop: &CancellationToken,
) -> String {
    let sender = connection.sender();
    let (known, mut statuses) = workloads.statuses();
    // The contract: the node's status first, then every Application's, even unchanged.
    if sender.send(NodeMessage::Status(workloads.node_report())).await.is_err() {
        return "the session closed before the node's status was sent".into();
    }
    for report in known {
        if sender.send(NodeMessage::Application(report)).await.is_err() {
            return "the session closed while statuses were sent".into();
        }
    }
    if let Some(event) = events.unsent.take()
        && let Err(unsent) = sender.send(NodeMessage::Event(event)).await
    {
        events.unsent = event_of(unsent.0);
        return "the session closed while an earlier event was sent".into();
    }
    let mut heartbeat = tokio::time::interval(config.heartbeat);
    heartbeat.tick().await;
    let mut logs: HashMap<u64, Serving> = HashMap::new();
    let mut streams: HashMap<u64, crate::streams::Serving> = HashMap::new();
    let session_over = CancellationToken::new();
    let (done_logs, mut finished_logs) = mpsc::unbounded_channel::<u64>();
    let (done_streams, mut finished_streams) = mpsc::unbounded_channel::<u64>();
    let reason = loop {
        tokio::select! {
            () = stop.cancelled() => break "the agent is stopping".to_owned(),
            message = connection.next() => match message {
                Ok(Some(ControllerMessage::Desired(desired))) => {
                    tracing::debug!(applications = desired.applications.len(), signature = %desired.signature, "desired state received");
                    workloads.apply(&desired);
                }
                Ok(Some(ControllerMessage::LogRequest(request))) => {
                    let id = request.id;
                    let serving = Serving { credit: Arc::new(Semaphore::new(window(request.window))), cancel: session_over.child_token() };
                    let pump = pump(
                        workloads.logs(&request).await,
                        id,
                        window(request.window),
                        sender.clone(),
                        serving.credit.clone(),
                        serving.cancel.clone(),
                        done_logs.clone(),
                    );
                    logs.insert(id, serving);
                    tokio::spawn(pump);
                }
                Ok(Some(ControllerMessage::LogCancel(id))) => {
                    if let Some(serving) = logs.remove(&id) {
                        serving.cancel.cancel();
                    }
                }
                Ok(Some(ControllerMessage::LogCredit { id, bytes })) => {
                    if let Some(serving) = logs.get(&id) {
                        serving.credit.add_permits(window(bytes));
                    }
                }
                Ok(Some(ControllerMessage::StreamOpen(open))) => {
                    let (serving, inputs) =
                        crate::streams::Serving::new(open.window, session_over.child_token());
                    let connected = workloads.open_stream(&open).await;
                    let id = open.id;
                    let serve = crate::streams::serve(
                        open,
                        connected,
                        sender.clone(),
                        inputs,
                        serving.credit.clone(),
                        serving.cancel.clone(),
                        done_streams.clone(),
                    );
                    streams.insert(id, serving);
                    tokio::spawn(serve);
                }
                Ok(Some(ControllerMessage::StreamInput(input))) => {
                    if let Some(serving) = streams.get(&input.id) {
                        let _ = serving.input.send(input.input);
                    }
                }
                Ok(Some(ControllerMessage::StreamCredit { id, bytes })) => {
                    if let Some(serving) = streams.get(&id) {
                        serving.credit.add_permits(crate::streams::permits(bytes));
                    }
                }
                Ok(Some(ControllerMessage::StreamCancel(id))) => {
                    if let Some(serving) = streams.remove(&id) {
                        serving.cancel.cancel();
                    }
                }
                Ok(None) => break "the controller closed the session".to_owned(),
                Err(error) => break error.to_string(),
            },
            report = statuses.recv() => match report {
                Ok(report) => {
                    if sender.send(NodeMessage::Application(report)).await.is_err() {
                        break "the session closed".to_owned();
                    }
                }
                // Missed some: resend every status, each a full statement.
                Err(broadcast::error::RecvError::Lagged(_)) => {
                    let (known, fresh) = workloads.statuses();
                    statuses = fresh;
                    for report in known {
                        if sender.send(NodeMessage::Application(report)).await.is_err() {
                            break;
                        }
                    }
                }
                Err(broadcast::error::RecvError::Closed) => break "the runtime stopped".to_owned(),
            },
            event = events.receiver.recv() => match event {
                Ok(event) => {
                    if let Err(unsent) = sender.send(NodeMessage::Event(event)).await {
                        events.unsent = event_of(unsent.0);
                        break "the session closed".to_owned();
                    }
                }
                Err(broadcast::error::RecvError::Lagged(missed)) => {
                    tracing::warn!(missed, "events were raised faster than they could be sent; the oldest were dropped");
                }
                Err(broadcast::error::RecvError::Closed) => break "the runtime stopped".to_owned(),
            },
            _ = heartbeat.tick() => {
                if sender.send(NodeMessage::Status(workloads.node_report())).await.is_err() {
                    break "the session closed".to_owned();
                }
                for sample in workloads.usage() {
                    let _ = sender.try_send(NodeMessage::Usage(sample));
                }
            }
            Some(id) = finished_logs.recv() => {
                logs.remove(&id);
            }
            Some(id) = finished_streams.recv() => {
                streams.remove(&id);
            }
        }
    };
    // The old session's log streams and exec, attach and port-forward streams end with it (their
    // processes hung up); the controller failed them already.
    session_over.cancel();
    reason
}

fn window(bytes: u64) -> usize {
    usize::try_from(bytes).unwrap_or(usize::MAX).min(Semaphore::MAX_PERMITS)
}

/// Sends a log stream's bytes as the controller's credit allows, then its end.
async fn pump(
    opened: Result<BoxStream<'static, Result<Vec<u8>, String>>, String>,
    id: u64,
    window: usize,
    sender: mpsc::Sender<NodeMessage>,
    credit: Arc<Semaphore>,
    cancel: CancellationToken,
    done: mpsc::UnboundedSender<u64>,
) {
    let end = |error: Option<String>| {
        NodeMessage::LogChunk(LogChunk { id, data: Vec::new(), eof: error.is_none(), error })
    };
    let mut stream = match opened {
        Ok(stream) => stream,
        Err(error) => {
            let _ = sender.send(end(Some(error))).await;
            let _ = done.send(id);
            return;
        }
    };
    let outcome = loop {
        let next = tokio::select! {
            () = cancel.cancelled() => break None,
            next = stream.next() => next,
        };
        match next {
            Some(Ok(data)) => {
                for piece in data.chunks(LOG_CHUNK.min(window).max(1)) {
                    let wanted = u32::try_from(piece.len()).unwrap_or(u32::MAX);
                    let permit = tokio::select! {
                        () = cancel.cancelled() => None,
                        permit = credit.acquire_many(wanted) => permit.ok(),
                    };
                    let Some(permit) = permit else { break };
                    permit.forget();
                    let chunk = LogChunk { id, data: piece.to_vec(), eof: false, error: None };
                    if sender.send(NodeMessage::LogChunk(chunk)).await.is_err() {
                        break;
                    }
                }
                if cancel.is_cancelled() {
                    break None;
                }
            }
            Some(Err(error)) => break Some(end(Some(error))),
            None => break Some(end(None)),
        }
    };
    if let Some(last) = outcome {
        let _ = sender.send(last).await;
    }
    let _ = done.send(id);
}

/// The event in a message a closed session gave back.
fn event_of(message: NodeMessage) -> Option<NodeEvent> {
    match message {
        NodeMessage::Event(event) => Some(event),
        _ => None,
    }
}
