//! Port-forward as kubectl speaks it: a SPDY/3.1 session (tunnelled in WebSocket binary
//! messages as `SPDY/3.1+portforward.k8s.io`, or on a plain `SPDY/3.1` upgrade) in which each
//! local connection opens a pair of streams with the same `requestid` and `port` headers: an
//! `error` stream and a `data` stream. The pair becomes one stream to the node; the data
//! stream's bytes go to the port and come back; an error is written as text on the error stream,
//! and the end of the connection closes both (FIN), which kubectl waits for.
//!
//! SPDY has no flow control here (kubectl's spdystream honours none), so the session reads the
//! next frame only once the node has taken the last one's bytes: a port that stops reading
//! holds the session, as it does kubelet's, and nothing piles up in memory.

use std::collections::HashMap;
use std::sync::Arc;

use kayra_api::session::{Input, StreamKind, StreamOutcome};
use kayra_nodeserver::{NodeServer, StreamEvent, StreamInputHalf};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::spdy::{Frame, FrameReader, FrameWriter, REFUSED_STREAM};

/// The subprotocol of port-forward, in `X-Stream-Protocol-Version` and after `SPDY/3.1+` in the
/// WebSocket tunnel's `Sec-WebSocket-Protocol`.
pub(crate) const PROTOCOL: &str = "portforward.k8s.io";

/// How many frames wait to be written before a writer waits.
const OUTBOUND: usize = 16;

/// Who the session forwards for: the Application and the caller whose streams are counted.
pub(crate) struct Forwarding {
    pub(crate) nodes: NodeServer,
    pub(crate) namespace: String,
    pub(crate) name: String,
    pub(crate) caller: String,
}

/// One local connection's pair of streams, as far as they have been opened.
#[derive(Default)]
struct Pair {
    error: Option<u32>,
    data: Option<u32>,
    port: Option<String>,
    /// Where the data stream's bytes go, once the node stream is open.
    input: Option<Arc<StreamInputHalf>>,
    /// The data bytes that came before the node stream was open.
    early: Vec<Input>,
    /// Ends the forwarding: the client reset the data stream, or the session ended.
    cancel: CancellationToken,
}

/// Serves a port-forward session on `read`/`write` until the client ends it.
pub(crate) async fn serve(
    read: impl AsyncRead + Unpin + Send,
    write: impl AsyncWrite + Unpin + Send + 'static,
    forwarding: Arc<Forwarding>,
) {
    let (frames, outbound) = mpsc::channel::<Frame>(OUTBOUND);
    let writer = tokio::spawn(write_frames(write, outbound));
    let mut reader = FrameReader::new(read);
    let mut pairs: HashMap<String, Pair> = HashMap::new();
    let mut by_stream: HashMap<u32, String> = HashMap::new();
    let (opened, mut ready) = mpsc::unbounded_channel::<(String, Result<Arc<StreamInputHalf>, ()>)>();
    loop {
        let frame = tokio::select! {
            frame = reader.read() => frame,
            Some((request, input)) = ready.recv() => {
                if let Some(pair) = pairs.get_mut(&request) {
                    match input {
                        Ok(input) => {
                            for early in pair.early.drain(..) {
                                let _ = input.send(early).await;
                            }
                            pair.input = Some(input);
                        }
                        Err(()) => pair.early.clear(),
                    }
                }
                continue;
            }
        };
        let frame = match frame {
            Ok(Some(frame)) => frame,
            Ok(None) => break,
            Err(error) => {
                tracing::info!(%error, "a port-forward session ended on a bad frame");
                break;
            }
        };
        match frame {
            Frame::SynStream { stream, headers, .. } => {
                if frames.send(Frame::SynReply { stream }).await.is_err() {
                    break;
                }
                let kind = Frame::header(&headers, "streamtype").unwrap_or_default().to_owned();
                let request = Frame::header(&headers, "requestid").unwrap_or_default().to_owned();
                let port = Frame::header(&headers, "port").map(str::to_owned);
                let pair = pairs.entry(request.clone()).or_default();
                match kind.as_str() {
                    "error" => pair.error = Some(stream),
                    "data" => pair.data = Some(stream),
                    _ => {
                        let _ = frames.send(Frame::RstStream { stream, status: REFUSED_STREAM }).await;
                        continue;
                    }
                }
                pair.port = pair.port.take().or(port);
                by_stream.insert(stream, request.clone());
                if let (Some(error), Some(data)) = (pair.error, pair.data) {
                    let port = pair.port.clone().unwrap_or_default();
                    tokio::spawn(forward(
                        forwarding.clone(),
                        request,
                        port,
                        (error, data),
                        frames.clone(),
                        opened.clone(),
                        pair.cancel.clone(),
                    ));
                }
            }
            Frame::Data { stream, data, fin } => {
                let Some(request) = by_stream.get(&stream) else { continue };
                let Some(pair) = pairs.get_mut(request) else { continue };
                if pair.data != Some(stream) {
                    // The error stream carries nothing from the client (it half-closes it).
                    continue;
                }
                let mut pieces = Vec::new();
                if !data.is_empty() {
                    pieces.push(Input::Data(data));
                }
                if fin {
                    pieces.push(Input::Close);
                }
                match pair.input.clone() {
                    Some(input) => {
                        for piece in pieces {
                            // Waits while the port has not taken what came before.
                            let _ = input.send(piece).await;
                        }
                    }
                    None => pair.early.extend(pieces),
                }
            }
            Frame::RstStream { stream, .. } => {
                if let Some(request) = by_stream.remove(&stream)
                    && let Some(pair) = pairs.get_mut(&request)
                    && pair.data == Some(stream)
                {
                    // The client is done with the connection: what is still open of it goes.
                    pair.cancel.cancel();
                    pairs.remove(&request);
                }
            }
            Frame::Ping(id) => {
                if frames.send(Frame::Ping(id)).await.is_err() {
                    break;
                }
            }
            Frame::GoAway { .. } => break,
            Frame::SynReply { .. } | Frame::Ignored => {}
        }
    }
    for pair in pairs.values() {
        pair.cancel.cancel();
    }
    drop(frames);
    drop(pairs);
    let _ = writer.await;
}

/// Writes frames as they come, in order; the connection's end when every sender is gone.
async fn write_frames(mut write: impl AsyncWrite + Unpin + Send, mut outbound: mpsc::Receiver<Frame>) {
    let mut encoder = FrameWriter::new();
    while let Some(frame) = outbound.recv().await {
        if write.write_all(&encoder.encode(&frame)).await.is_err() || write.flush().await.is_err() {
            return;
        }
    }
    let _ = write.shutdown().await;
}

/// Forwards one local connection: opens the node stream to `port` and relays its bytes back
/// on the data stream; any failure is written on the error stream. Both streams are closed
/// (FIN) at the end.
async fn forward(
    forwarding: Arc<Forwarding>,
    request: String,
    port: String,
    (error, data): (u32, u32),
    frames: mpsc::Sender<Frame>,
    opened: mpsc::UnboundedSender<(String, Result<Arc<StreamInputHalf>, ()>)>,
    cancel: CancellationToken,
) {
    let pod = format!("{}/{}", forwarding.namespace, forwarding.name);
    let failure = match port.parse::<u16>() {
        Ok(0) | Err(_) => Some(format!("invalid port {port:?}: a port is a number from 1 to 65535")),
        Ok(number) => {
            let opening = forwarding.nodes.stream(
                &forwarding.namespace,
                &forwarding.name,
                StreamKind::PortForward(number),
                &forwarding.caller,
            );
            match opening.await {
                Err(refused) => Some(format!("error forwarding port {number} to pod {pod}: {refused}")),
                Ok(stream) => {
                    let (input, mut output) = stream.split();
                    let _ = opened.send((request.clone(), Ok(Arc::new(input))));
                    let mut failure = None;
                    loop {
                        let event = tokio::select! {
                            () = cancel.cancelled() => return,
                            event = output.next() => event,
                        };
                        let Some(event) = event else { break };
                        match event {
                            StreamEvent::Output { data: bytes, .. } => {
                                let frame = Frame::Data { stream: data, data: bytes, fin: false };
                                if frames.send(frame).await.is_err() {
                                    return;
                                }
                            }
                            StreamEvent::End(StreamOutcome::Exited(_)) => break,
                            StreamEvent::End(StreamOutcome::Failed(reason)) => {
                                failure =
                                    Some(format!("error forwarding port {number} to pod {pod}: {reason}"));
                                break;
                            }
                        }
                    }
                    failure
                }
            }
        }
    };
    if failure.is_some() {
        let _ = opened.send((request, Err(())));
    }
    let _ = frames.send(Frame::Data { stream: data, data: Vec::new(), fin: true }).await;
    if let Some(failure) = failure {
        let _ = frames.send(Frame::Data { stream: error, data: failure.into_bytes(), fin: false }).await;
    }
    let _ = frames.send(Frame::Data { stream: error, data: Vec::new(), fin: true }).await;
}
