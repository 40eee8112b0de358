//! Streams to running Applications relayed over their node's session: a command run beside
//! the process (`exec`), the process's own stdin and output (`attach`), and TCP connections to
//! the ports it declares (`portforward`). The shape of logs with a second direction: the node
//! sends at most a window of output ahead of what the client has taken, and the controller
//! sends at most a window of input ahead of what the process has taken, so neither side holds
//! more than a window for a client or a process that stops reading. Dropping a stream (the
//! client went away) cancels it on the node, which ends its process.
//!
//! Each stream counts against a limit per node and per caller; one that carries nothing either
//! way for the idle timeout (kubelet's `streamingConnectionIdleTimeout`) ends.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use kayra_api::kinds::application::Application;
use kayra_api::session::{
    ControllerMessage, Input, OutputChannel, StreamEnd, StreamInput, StreamKind, StreamOpen, StreamOutcome,
    StreamOutput,
};
use kayra_registry::{RegistryError, meta_str};
use tokio::sync::{Semaphore, mpsc};

use crate::session::Live;
use crate::{Inner, NodeServerError};

/// The largest piece of input sent to the node in one message.
const INPUT_PIECE: usize = 32 * 1024;

/// What a stream's client receives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StreamEvent {
    /// Output of the process (or of the forwarded connection); `eof` ends that channel.
    Output {
        /// Which output.
        channel: OutputChannel,
        /// The bytes.
        data: Vec<u8>,
        /// The channel ended.
        eof: bool,
    },
    /// The stream ended: the command's exit, or why it could not go on.
    End(StreamOutcome),
}

/// Where a node's output for one stream goes, and the credit its input has.
pub(crate) struct Sink {
    events: mpsc::UnboundedSender<StreamEvent>,
    /// Output bytes sent by the node and not yet taken by the client.
    outstanding: u64,
    window: u64,
    /// Input bytes the controller may still send.
    credit: Arc<Semaphore>,
    kind: &'static str,
}

/// The streams in flight per node and per caller, against their limits.
#[derive(Default)]
pub(crate) struct Counts {
    per_node: Mutex<HashMap<String, usize>>,
    per_caller: Mutex<HashMap<String, usize>>,
}

/// A place among the streams in flight, given back when the stream goes.
struct Place {
    inner: Arc<Inner>,
    node: String,
    caller: String,
    kind: &'static str,
}

impl Counts {
    fn take(
        inner: &Arc<Inner>,
        node: &str,
        caller: &str,
        kind: &'static str,
    ) -> Result<Place, NodeServerError> {
        let counts = &inner.streams;
        let config = &inner.config;
        let mut per_node = counts.per_node.lock().expect("the stream counts are never poisoned");
        let mut per_caller = counts.per_caller.lock().expect("the stream counts are never poisoned");
        let on_node = per_node.get(node).copied().unwrap_or(0);
        if on_node >= config.max_streams_per_node {
            return Err(NodeServerError::TooManyStreams {
                what: format!("node \"{node}\" already carries {on_node} streams"),
            });
        }
        let of_caller = per_caller.get(caller).copied().unwrap_or(0);
        if of_caller >= config.max_streams_per_caller {
            return Err(NodeServerError::TooManyStreams {
                what: format!("\"{caller}\" already has {of_caller} streams open"),
            });
        }
        *per_node.entry(node.to_owned()).or_default() += 1;
        *per_caller.entry(caller.to_owned()).or_default() += 1;
        inner.metrics.streams_opened(kind);
        Ok(Place { inner: inner.clone(), node: node.to_owned(), caller: caller.to_owned(), kind })
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        let counts = &self.inner.streams;
        for (table, key) in [(&counts.per_node, &self.node), (&counts.per_caller, &self.caller)] {
            let mut table = table.lock().expect("the stream counts are never poisoned");
            if let Some(count) = table.get_mut(key) {
                *count -= 1;
                if *count == 0 {
                    table.remove(key);
                }
            }
        }
        self.inner.metrics.streams_closed(self.kind);
    }
}

/// What both halves of a stream share: dropping the last of them cancels it on the node
/// unless it has ended.
struct Shared {
    id: u64,
    live: Arc<Live>,
    /// When either direction last carried something, in the server's milliseconds.
    active: AtomicU64,
    _place: Place,
}

impl Shared {
    fn touch(&self) {
        self.active.store(self._place.inner.now_ms(), Ordering::Relaxed);
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        let was_open = self.live.streams().remove(&self.id).is_some();
        if was_open {
            let _ = self.live.control.send(ControllerMessage::StreamCancel(self.id));
        }
    }
}

/// A stream to a running Application, as opened by [`crate::NodeServer::stream`]; split it
/// into its input and its output to drive both at once.
pub struct NodeStream {
    input: StreamInputHalf,
    output: StreamOutputHalf,
}

impl std::fmt::Debug for NodeStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeStream")
            .field("id", &self.input.shared.id)
            .field("node", &self.input.shared.live.node)
            .finish_non_exhaustive()
    }
}

impl NodeStream {
    /// The stream's input and output.
    pub fn split(self) -> (StreamInputHalf, StreamOutputHalf) {
        (self.input, self.output)
    }
}

/// What the client sends into a stream.
pub struct StreamInputHalf {
    shared: Arc<Shared>,
    credit: Arc<Semaphore>,
    /// The most input bytes in flight: no piece is larger.
    window: usize,
    kind: &'static str,
}

impl std::fmt::Debug for StreamInputHalf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamInputHalf").field("id", &self.shared.id).finish_non_exhaustive()
    }
}

impl StreamInputHalf {
    /// Sends `input` to the node once the process has taken enough of what was sent before
    /// (waiting while it has not); an error when the stream or its session is gone.
    pub async fn send(&self, input: Input) -> Result<(), NodeServerError> {
        let gone = || NodeServerError::StreamEnded { reason: "the stream has ended".into() };
        let piece_size = INPUT_PIECE.min(self.window).max(16);
        let pieces: Vec<Input> = match input {
            Input::Data(data) if data.len() > piece_size => {
                data.chunks(piece_size).map(|piece| Input::Data(piece.to_vec())).collect()
            }
            Input::Data(data) if data.is_empty() => return Ok(()),
            other => vec![other],
        };
        for piece in pieces {
            let cost = u32::try_from(piece.cost()).unwrap_or(u32::MAX);
            let permit = self.credit.acquire_many(cost).await.map_err(|_| gone())?;
            permit.forget();
            self.shared.touch();
            if let Input::Data(data) = &piece {
                self.shared._place.inner.metrics.stream_bytes(self.kind, "in", data.len());
            }
            let message = ControllerMessage::StreamInput(StreamInput { id: self.shared.id, input: piece });
            self.shared
                .live
                .control
                .send(message)
                .map_err(|()| NodeServerError::NodeDisconnected { node: self.shared.live.node.clone() })?;
        }
        Ok(())
    }
}

/// What a stream's client receives.
pub struct StreamOutputHalf {
    shared: Arc<Shared>,
    events: mpsc::UnboundedReceiver<StreamEvent>,
    finished: bool,
    kind: &'static str,
}

impl std::fmt::Debug for StreamOutputHalf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamOutputHalf").field("id", &self.shared.id).finish_non_exhaustive()
    }
}

impl StreamOutputHalf {
    /// The next thing the stream produced; after [`StreamEvent::End`], `None`. A stream that
    /// carries nothing either way for the idle timeout ends as failed.
    pub async fn next(&mut self) -> Option<StreamEvent> {
        if self.finished {
            return None;
        }
        let inner = self.shared._place.inner.clone();
        let idle = u64::try_from(inner.config.stream_idle_timeout.as_millis()).unwrap_or(u64::MAX);
        let event = loop {
            let quiet_for = inner.now_ms().saturating_sub(self.shared.active.load(Ordering::Relaxed));
            if quiet_for >= idle {
                let minutes = inner.config.stream_idle_timeout.as_secs_f64() / 60.0;
                break StreamEvent::End(StreamOutcome::Failed(format!(
                    "the stream carried nothing for {minutes} minutes (the stream idle timeout) and was closed"
                )));
            }
            let wait = std::time::Duration::from_millis(idle - quiet_for);
            match tokio::time::timeout(wait, self.events.recv()).await {
                Ok(Some(event)) => break event,
                Ok(None) => {
                    break StreamEvent::End(StreamOutcome::Failed("the stream ended without its end".into()));
                }
                Err(_) => continue,
            }
        };
        match &event {
            StreamEvent::Output { data, .. } => {
                self.shared.touch();
                let taken = data.len() as u64;
                if taken > 0 {
                    if let Some(sink) = self.shared.live.streams().get_mut(&self.shared.id) {
                        sink.outstanding = sink.outstanding.saturating_sub(taken);
                    }
                    inner.metrics.stream_bytes(self.kind, "out", data.len());
                    let credit = ControllerMessage::StreamCredit { id: self.shared.id, bytes: taken };
                    let _ = self.shared.live.control.send(credit);
                }
            }
            StreamEvent::End(_) => self.finished = true,
        }
        Some(event)
    }
}

/// Application `namespace/name`, decoded.
async fn application(
    inner: &Inner,
    namespace: &str,
    name: &str,
) -> Result<(Application, String), NodeServerError> {
    let object = match inner.reader.get(&inner.applications, Some(namespace), name).await {
        Ok(object) => object,
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
    let uid = meta_str(&object, "uid").to_owned();
    let application = serde_json::from_value(serde_json::Value::Object(object)).map_err(|error| {
        NodeServerError::StreamEnded {
            reason: format!("application {namespace}/{name} does not decode: {error}"),
        }
    })?;
    Ok((application, uid))
}

/// Whether Application `namespace/name` can take port-forwards at all: it declares a TCP port,
/// is placed, and its node holds its session here.
pub(crate) async fn forwardable(
    inner: &Inner,
    namespace: &str,
    name: &str,
) -> Result<Vec<u16>, NodeServerError> {
    let (application, _) = application(inner, namespace, name).await?;
    let declared = application.tcp_ports();
    if declared.is_empty() {
        return Err(NodeServerError::PortNotDeclared { name: name.to_owned(), port: 0, declared });
    }
    let Some(node) = application.bound_node().map(str::to_owned) else {
        return Err(NodeServerError::NotPlaced { namespace: namespace.to_owned(), name: name.to_owned() });
    };
    if !inner.sessions().contains_key(&node) {
        return Err(NodeServerError::NodeUnavailable { node, name: name.to_owned() });
    }
    Ok(declared)
}

/// Opens a stream of `kind` to Application `namespace/name` for `caller`.
pub(crate) async fn open(
    inner: &Arc<Inner>,
    namespace: &str,
    name: &str,
    kind: StreamKind,
    caller: &str,
) -> Result<NodeStream, NodeServerError> {
    let (application, uid) = application(inner, namespace, name).await?;
    if let StreamKind::PortForward(port) = kind {
        let declared = application.tcp_ports();
        if !declared.contains(&port) {
            return Err(NodeServerError::PortNotDeclared { name: name.to_owned(), port, declared });
        }
    }
    let Some(node) = application.bound_node().map(str::to_owned) else {
        return Err(NodeServerError::NotPlaced { namespace: namespace.to_owned(), name: name.to_owned() });
    };
    let Some(live) = inner.sessions().get(&node).cloned() else {
        return Err(NodeServerError::NodeUnavailable { node, name: name.to_owned() });
    };
    let word = kind.word();
    let place = Counts::take(inner, &node, caller, word)?;
    let window = inner.config.stream_window;
    let id = live.next_stream.fetch_add(1, Ordering::Relaxed);
    let (events, receiver) = mpsc::unbounded_channel();
    let credit = Arc::new(Semaphore::new(usize::try_from(window).unwrap_or(usize::MAX)));
    live.streams().insert(id, Sink { events, outstanding: 0, window, credit: credit.clone(), kind: word });
    let shared =
        Arc::new(Shared { id, live: live.clone(), active: AtomicU64::new(inner.now_ms()), _place: place });
    let stream = NodeStream {
        input: StreamInputHalf {
            shared: shared.clone(),
            credit,
            window: usize::try_from(window).unwrap_or(usize::MAX),
            kind: word,
        },
        output: StreamOutputHalf { shared, events: receiver, finished: false, kind: word },
    };
    let request =
        StreamOpen { id, namespace: namespace.to_owned(), name: name.to_owned(), uid, window, kind };
    if live.control.send(ControllerMessage::StreamOpen(request)).is_err() {
        return Err(NodeServerError::NodeDisconnected { node: live.node.clone() });
    }
    Ok(stream)
}

/// Routes output from the node to its stream. A node that sends beyond its window, or for a
/// stream that is gone, has the stream cancelled.
pub(crate) fn deliver(live: &Live, output: StreamOutput) {
    let mut streams = live.streams();
    let Some(sink) = streams.get_mut(&output.id) else {
        drop(streams);
        let _ = live.control.send(ControllerMessage::StreamCancel(output.id));
        return;
    };
    sink.outstanding += output.data.len() as u64;
    if sink.outstanding > sink.window {
        let reason = format!("the node sent more {} output than the client allowed", sink.kind);
        let _ = sink.events.send(StreamEvent::End(StreamOutcome::Failed(reason)));
        streams.remove(&output.id);
        drop(streams);
        let _ = live.control.send(ControllerMessage::StreamCancel(output.id));
        return;
    }
    let event = StreamEvent::Output { channel: output.channel, data: output.data, eof: output.eof };
    let _ = sink.events.send(event);
}

/// The node's process took `bytes` more of stream `id`'s input: as much more may be sent (never
/// more than a window ahead).
pub(crate) fn credit(live: &Live, id: u64, bytes: u64) {
    if let Some(sink) = live.streams().get(&id) {
        let room = usize::try_from(sink.window)
            .unwrap_or(usize::MAX)
            .saturating_sub(sink.credit.available_permits());
        sink.credit.add_permits(usize::try_from(bytes).unwrap_or(usize::MAX).min(room));
    }
}

/// The node ended stream `end.id`.
pub(crate) fn end(live: &Live, end: StreamEnd) {
    if let Some(sink) = live.streams().remove(&end.id) {
        let _ = sink.events.send(StreamEvent::End(end.outcome));
        sink.credit.close();
    }
}

/// Ends every stream of a closed session with `reason`.
pub(crate) fn fail_all(live: &Live, reason: &str) {
    for (_, sink) in live.streams().drain() {
        let _ = sink.events.send(StreamEvent::End(StreamOutcome::Failed(reason.to_owned())));
        sink.credit.close();
    }
}

#[cfg(test)]
mod tests;
