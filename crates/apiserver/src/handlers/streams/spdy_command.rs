//! Exec and attach over plain SPDY/3.1, where kubectl falls back when its WebSocket upgrade is
//! refused: the remote-command protocol `v4.channel.k8s.io`, as the kubelet serves it. The
//! client opens one stream per channel, named by its `streamtype` header (`error`, `stdin`,
//! `stdout`, `stderr`, `resize`); once every stream the query asked for is open the process's
//! output flows on `stdout`/`stderr`, `stdin`'s FIN closes its stdin, `resize` carries terminal
//! sizes as JSON, and the end is one `metav1.Status` on `error`, the streams' FINs and a GOAWAY.

use std::collections::HashMap;
use std::time::Duration;

use kayra_api::session::{Input, OutputChannel, StreamOutcome};
use kayra_nodeserver::{NodeStream, StreamEvent, StreamOutputHalf};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;

use super::CommandOptions;
use super::remotecommand::{sizes, status};
use super::spdy::{Frame, FrameReader, FrameWriter};

/// The remote-command protocols served over SPDY.
pub(crate) const PROTOCOLS: [&str; 1] = ["v4.channel.k8s.io"];

/// How long the client has to open every stream it asked for, as the kubelet waits.
const STREAMS_WITHIN: Duration = Duration::from_secs(30);

/// Serves one exec or attach on the upgraded connection `io`, relaying `stream`.
pub(crate) async fn serve(
    io: impl AsyncRead + AsyncWrite + Unpin + Send + 'static,
    options: CommandOptions,
    stream: NodeStream,
) {
    let (read, write) = tokio::io::split(io);
    let (frames, outbound) = mpsc::channel::<Frame>(16);
    let writer = tokio::spawn(write_frames(write, outbound));
    let (input, output) = stream.split();
    let mut output = Some(output);
    let mut reader = FrameReader::new(read);
    let mut streams: HashMap<String, u32> = HashMap::new();
    let channels = options.channels;
    let mut expected = vec!["error"];
    for (wanted, name) in [
        (channels.stdin, "stdin"),
        (channels.stdout, "stdout"),
        (channels.stderr, "stderr"),
        (options.tty, "resize"),
    ] {
        if wanted {
            expected.push(name);
        }
    }
    let deadline = tokio::time::Instant::now() + STREAMS_WITHIN;
    let mut relaying: Option<tokio::task::JoinHandle<()>> = None;
    loop {
        let frame = match relaying.as_mut() {
            None => match tokio::time::timeout_at(deadline, reader.read()).await {
                Ok(frame) => frame,
                Err(_) => {
                    tracing::debug!("a SPDY exec did not open its streams in time");
                    break;
                }
            },
            Some(relay) => tokio::select! {
                frame = reader.read() => frame,
                _ = relay => break,
            },
        };
        let frame = match frame {
            Ok(Some(frame)) => frame,
            Ok(None) | Err(_) => break,
        };
        match frame {
            Frame::SynStream { stream, headers, .. } => {
                if frames.send(Frame::SynReply { stream }).await.is_err() {
                    break;
                }
                if let Some(kind) = Frame::header(&headers, "streamtype") {
                    streams.insert(kind.to_owned(), stream);
                }
                if relaying.is_none() && expected.iter().all(|name| streams.contains_key(*name)) {
                    let output = output.take().expect("the relay starts once");
                    relaying = Some(tokio::spawn(relay(output, streams.clone(), frames.clone())));
                }
            }
            Frame::Data { stream, data, fin } => {
                let sent = if Some(&stream) == streams.get("stdin") {
                    let mut sent = Ok(());
                    if !data.is_empty() {
                        sent = input.send(Input::Data(data)).await;
                    }
                    if fin {
                        sent = input.send(Input::Close).await;
                    }
                    sent
                } else if Some(&stream) == streams.get("resize") {
                    let mut sent = Ok(());
                    for size in sizes(&data) {
                        sent = input.send(Input::Resize(size)).await;
                    }
                    sent
                } else {
                    Ok(())
                };
                if sent.is_err() {
                    // The stream ended; its relay says how.
                    continue;
                }
            }
            Frame::Ping(id) => {
                if frames.send(Frame::Ping(id)).await.is_err() {
                    break;
                }
            }
            Frame::GoAway { .. } => break,
            Frame::RstStream { .. } | Frame::SynReply { .. } | Frame::Ignored => {}
        }
    }
    if let Some(relay) = relaying {
        relay.abort();
    }
    drop(frames);
    let _ = writer.await;
}

/// Relays the process's output to the client's streams, then its end: the status on `error`,
/// the streams closed, and a GOAWAY.
async fn relay(mut output: StreamOutputHalf, streams: HashMap<String, u32>, frames: mpsc::Sender<Frame>) {
    let outcome = loop {
        match output.next().await {
            Some(StreamEvent::Output { channel, data, .. }) => {
                let name = match channel {
                    OutputChannel::Stderr => "stderr",
                    OutputChannel::Stdout | OutputChannel::Data => "stdout",
                };
                let Some(&stream) = streams.get(name) else { continue };
                if frames.send(Frame::Data { stream, data, fin: false }).await.is_err() {
                    return;
                }
            }
            Some(StreamEvent::End(outcome)) => break outcome,
            None => break StreamOutcome::Failed("the stream ended without its end".into()),
        }
    };
    let error = streams.get("error").copied().unwrap_or_default();
    let body = serde_json::to_vec(&status(&outcome)).expect("a status serialises");
    let _ = frames.send(Frame::Data { stream: error, data: body, fin: false }).await;
    for name in ["stdout", "stderr", "error"] {
        if let Some(&stream) = streams.get(name) {
            let _ = frames.send(Frame::Data { stream, data: Vec::new(), fin: true }).await;
        }
    }
    let last = streams.values().copied().max().unwrap_or_default();
    let _ = frames.send(Frame::GoAway { last }).await;
}

/// Writes frames as they come; the connection's end when every sender is gone.
async fn write_frames(mut write: impl AsyncWrite + Unpin, mut outbound: mpsc::Receiver<Frame>) {
    let mut encoder = FrameWriter::new();
    while let Some(frame) = outbound.recv().await {
        let goaway = matches!(frame, Frame::GoAway { .. });
        if write.write_all(&encoder.encode(&frame)).await.is_err() || write.flush().await.is_err() {
            return;
        }
        if goaway {
            break;
        }
    }
    let _ = write.shutdown().await;
}
