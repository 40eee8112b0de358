//! Logs relayed from nodes: a reader asks for an Application's log (or for a node agent's own),
//! the request goes to the node holding it over the session, and the node's chunks come back. Flow control is by
//! credit: the node sends at most a window of bytes ahead of what the reader has taken, so a
//! slow reader slows the node instead of losing lines or growing buffers. Dropping the stream
//! cancels it on the node.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use kayra_api::session::{ControllerMessage, LogChunk, LogRequest};
use kayra_registry::{RegistryError, meta_str};
use tokio::sync::{OwnedSemaphorePermit, mpsc};

use crate::session::Live;
use crate::{Inner, LogOptions, NodeServerError};

/// Where a node's chunks for one stream go.
pub(crate) struct Sink {
    chunks: mpsc::UnboundedSender<Result<Vec<u8>, String>>,
    /// Bytes sent by the node and not yet taken by the reader.
    outstanding: u64,
    window: u64,
}

/// One log as it arrives from its node.
pub struct LogStream {
    id: u64,
    live: Arc<Live>,
    chunks: mpsc::UnboundedReceiver<Result<Vec<u8>, String>>,
    finished: bool,
    _permit: OwnedSemaphorePermit,
}

impl std::fmt::Debug for LogStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogStream")
            .field("id", &self.id)
            .field("node", &self.live.node)
            .finish_non_exhaustive()
    }
}

impl LogStream {
    /// The next bytes; `None` at the end; an error ends the stream (the node went away, or
    /// could not read the log).
    pub async fn next(&mut self) -> Option<Result<Vec<u8>, NodeServerError>> {
        if self.finished {
            return None;
        }
        match self.chunks.recv().await {
            Some(Ok(data)) => {
                let taken = data.len() as u64;
                if let Some(sink) = self.live.logs().get_mut(&self.id) {
                    sink.outstanding = sink.outstanding.saturating_sub(taken);
                }
                let _ = self.live.control.send(ControllerMessage::LogCredit { id: self.id, bytes: taken });
                Some(Ok(data))
            }
            Some(Err(reason)) => {
                self.finished = true;
                Some(Err(NodeServerError::LogEnded { reason }))
            }
            None => {
                self.finished = true;
                None
            }
        }
    }
}

impl Drop for LogStream {
    fn drop(&mut self) {
        let was_open = self.live.logs().remove(&self.id).is_some();
        if was_open {
            let _ = self.live.control.send(ControllerMessage::LogCancel(self.id));
        }
    }
}

pub(crate) async fn open(
    inner: &Arc<Inner>,
    namespace: &str,
    name: &str,
    options: LogOptions,
) -> Result<LogStream, NodeServerError> {
    let application = match inner.reader.get(&inner.applications, Some(namespace), name).await {
        Ok(application) => application,
        Err(RegistryError::NotFound { .. }) => {
            return Err(NodeServerError::ApplicationNotFound {
                namespace: namespace.to_owned(),
                name: name.to_owned(),
            });
        }
        Err(source) => {
            return Err(NodeServerError::Registry {
                what: format!("reading application {namespace}/{name}"),
                source,
            });
        }
    };
    let Some(node) = kayra_api::kinds::application::bound_node(&application).map(str::to_owned) else {
        return Err(NodeServerError::NotPlaced { namespace: namespace.to_owned(), name: name.to_owned() });
    };
    let Some(live) = inner.sessions().get(&node).cloned() else {
        return Err(NodeServerError::NodeUnavailable { node, name: name.to_owned() });
    };
    let request = LogRequest {
        namespace: namespace.to_owned(),
        name: name.to_owned(),
        uid: meta_str(&application, "uid").to_owned(),
        timestamps: options.timestamps,
        previous: options.previous,
        ..asked(&options)
    };
    start(inner, &live, request)
}

/// Opens the stream of `node`'s agent's own log.
pub(crate) async fn open_agent(
    inner: &Arc<Inner>,
    node: &str,
    options: LogOptions,
) -> Result<LogStream, NodeServerError> {
    match inner.reader.get(&inner.nodes, None, node).await {
        Ok(_) => {}
        Err(RegistryError::NotFound { .. }) => {
            return Err(NodeServerError::NodeNotFound { node: node.to_owned() });
        }
        Err(source) => {
            return Err(NodeServerError::Registry { what: format!("reading node {node}"), source });
        }
    }
    let Some(live) = inner.sessions().get(node).cloned() else {
        return Err(NodeServerError::NoSession { node: node.to_owned() });
    };
    start(inner, &live, LogRequest { agent: true, ..asked(&options) })
}

/// What every log request asks, from the reader's options.
fn asked(options: &LogOptions) -> LogRequest {
    LogRequest {
        follow: options.follow,
        tail_lines: options.tail_lines,
        since_seconds: options.since_seconds,
        limit_bytes: options.limit_bytes,
        ..LogRequest::default()
    }
}

/// Numbers `request` within the session, sends it to the node and answers its stream.
fn start(inner: &Inner, live: &Arc<Live>, mut request: LogRequest) -> Result<LogStream, NodeServerError> {
    let permit =
        inner.log_streams.clone().try_acquire_owned().map_err(|_| NodeServerError::TooManyLogStreams)?;
    request.id = live.next_log.fetch_add(1, Ordering::Relaxed);
    request.window = inner.config.log_window;
    let (chunks, receiver) = mpsc::unbounded_channel();
    live.logs().insert(request.id, Sink { chunks, outstanding: 0, window: request.window });
    let stream =
        LogStream { id: request.id, live: live.clone(), chunks: receiver, finished: false, _permit: permit };
    if live.control.send(ControllerMessage::LogRequest(request)).is_err() {
        return Err(NodeServerError::NodeDisconnected { node: live.node.clone() });
    }
    Ok(stream)
}

/// Routes a chunk from the node to its stream. A node that sends beyond its window, or for a
/// stream that is gone, has the stream cancelled.
pub(crate) fn deliver(live: &Live, chunk: LogChunk) {
    let mut logs = live.logs();
    let Some(sink) = logs.get_mut(&chunk.id) else {
        drop(logs);
        let _ = live.control.send(ControllerMessage::LogCancel(chunk.id));
        return;
    };
    if !chunk.data.is_empty() {
        sink.outstanding += chunk.data.len() as u64;
        if sink.outstanding > sink.window {
            let _ = sink.chunks.send(Err("the node sent more log than the reader allowed".into()));
            logs.remove(&chunk.id);
            drop(logs);
            let _ = live.control.send(ControllerMessage::LogCancel(chunk.id));
            return;
        }
        let _ = sink.chunks.send(Ok(chunk.data));
    }
    if let Some(error) = chunk.error {
        let _ = sink.chunks.send(Err(error));
        logs.remove(&chunk.id);
    } else if chunk.eof {
        logs.remove(&chunk.id);
    }
}

/// Ends every stream of a closed session with `reason`.
pub(crate) fn fail_all(live: &Live, reason: &str) {
    for (_, sink) in live.logs().drain() {
        let _ = sink.chunks.send(Err(reason.to_owned()));
    }
}
