//! `GET ...?watch=true`: a chunked stream of `WatchEvent`s, one JSON document per line, with
//! bookmarks when asked for and an `ERROR` event for a revision that is gone. In JSON, an
//! event is its opening, the watch cache's shared encoding of the object and its close,
//! written without copying. A watch whose client has taken nothing of what is pending for the
//! stall timeout ends, dropping its connection; the client watches again from the last
//! revision it saw, as with kube-apiserver. Over HTTP/1.1 a watch's connection keeps a small
//! kernel send buffer, so that a client that stops reading is found out after a little data
//! rather than megabytes, and costs the server little meanwhile.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::task::Poll;
use std::time::Duration;

use tokio::time::Instant;

use axum::body::Body;
use axum::response::Response;
use bytes::Bytes;
use kayra_application::permitted::read::Watch;
use kayra_registry::{RegistryError, WatchEvent};
use serde_json::{Value, json};

use super::{Call, options, respond};
use crate::error::ApiError;
use crate::media::{self, Output};
use crate::serve::Disconnect;
use crate::table;

/// How often an idle watch that asked for bookmarks gets one.
const BOOKMARK_EVERY: Duration = Duration::from_secs(30);

/// The longest a watch runs before the server ends it (clients then watch again).
const MAX_WATCH: Duration = Duration::from_secs(30 * 60);

/// How many events a watch queues for its response body; past them it waits for the client.
const WATCH_QUEUE: usize = 16;

/// How often a watch with frames pending checks that its client still takes them.
const STALL_CHECK: Duration = Duration::from_secs(1);

/// The kernel send buffer of an HTTP/1.1 connection once it carries a watch: a few events'
/// worth of a typical object, far below what the kernel grows a busy socket's buffer to.
const WATCH_SEND_BUFFER: usize = 64 * 1024;

/// One watch event (or bookmark, or error) as the pieces its line is written from.
type Frames = Vec<Bytes>;

/// How the response body takes a watch's frames: when it last took one, and how many are
/// queued for it. A watch whose client takes nothing of what is pending for the stall timeout
/// is ended, however few events it has had meanwhile.
#[derive(Debug)]
struct Taking {
    started: Instant,
    /// When the body last took a frame, in milliseconds after `started`.
    last: AtomicU64,
    /// Frames queued and not taken yet.
    pending: AtomicUsize,
}

impl Taking {
    fn new() -> Taking {
        Taking { started: Instant::now(), last: AtomicU64::new(0), pending: AtomicUsize::new(0) }
    }

    fn took(&self) {
        let now = u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last.store(now, Ordering::Relaxed);
        self.pending.fetch_sub(1, Ordering::Relaxed);
    }

    /// When the stall timeout runs out for the frames pending now, unless the body takes one.
    fn stalls_at(&self, stall: Duration) -> Instant {
        self.started + Duration::from_millis(self.last.load(Ordering::Relaxed)) + stall
    }

    /// Whether frames have waited for the client for the whole stall timeout.
    fn stalled(&self, stall: Duration) -> bool {
        self.pending.load(Ordering::Relaxed) > 0 && self.stalls_at(stall) <= Instant::now()
    }
}

/// Starts the watch and streams it.
pub(crate) async fn serve(call: Call<'_>) -> Result<Response, ApiError> {
    let output = media::output(call.headers).ok_or(ApiError::NotAcceptable)?;
    let query = call.query;
    if query.get("sendInitialEvents").is_some_and(|v| v == "true") {
        return Err(ApiError::BadRequest(
            "sendInitialEvents is not supported by this server; list, then watch".to_owned(),
        ));
    }
    let timeout = match query.get("timeoutSeconds") {
        Some(seconds) => Duration::from_secs(
            seconds.parse().map_err(|_| ApiError::BadRequest("timeoutSeconds must be a number".into()))?,
        ),
        None => MAX_WATCH,
    }
    .min(MAX_WATCH);
    let bookmarks = query.get("allowWatchBookmarks").is_some_and(|v| v == "true");
    let include = query.get("includeObject").cloned();
    let mut stream = match call.permitted.watch(&options::watch(query)).await {
        Ok(stream) => stream,
        Err(RegistryError::Expired { message, .. }) => {
            // A watch from a revision that is gone answers with one ERROR event, as Kubernetes does.
            let (_, status) =
                ApiError::Registry(RegistryError::Expired { message, continue_from: None }).to_status();
            let line = format!("{}\n", json!({"type": "ERROR", "object": status}));
            return Ok(respond::stream(Body::from(line)));
        }
        Err(error) => return Err(error.into()),
    };
    let kind = call.target.kind.clone();
    let (stall, disconnect) = (call.state.watch_stall, call.disconnect);
    let (sent, cut) = match &call.state.requests {
        Some(metrics) => metrics.watches(&kind),
        None => Default::default(),
    };
    if let Some(disconnect) = &disconnect {
        disconnect.shrink_send_buffer(WATCH_SEND_BUFFER);
    }
    let (sender, receiver) = tokio::sync::mpsc::channel::<Frames>(WATCH_QUEUE);
    let taking = Arc::new(Taking::new());
    let body = frames_stream(receiver, taking.clone());
    tokio::spawn(async move {
        let deadline = tokio::time::sleep(timeout);
        tokio::pin!(deadline);
        let mut ticker = tokio::time::interval(BOOKMARK_EVERY);
        ticker.tick().await;
        let mut stall_check = tokio::time::interval(STALL_CHECK);
        let mut first = true;
        loop {
            let mut event_frames = false;
            let frames = tokio::select! {
                () = &mut deadline => break,
                () = sender.closed() => break,
                _ = stall_check.tick() => {
                    if taking.stalled(stall) {
                        cut_off(stall, disconnect.as_ref(), &cut);
                        break;
                    }
                    continue;
                }
                _ = ticker.tick(), if bookmarks => {
                    let bookmark = json!({"type": "BOOKMARK", "object": {"kind": kind.kind, "apiVersion": kind.api_version(),
                           "metadata": {"resourceVersion": stream.revision().to_string()}}});
                    vec![Bytes::from(format!("{bookmark}\n"))]
                }
                event = next(&mut stream, output) => match event {
                    Ok((event, object)) => {
                        let object = match (output, object) {
                            (_, Some(json)) => json,
                            (Output::Table(version), None) => {
                                let shown = event.object();
                                let rv = json!({"resourceVersion": shown.get("metadata").and_then(|m| m.get("resourceVersion")).cloned().unwrap_or(Value::Null)});
                                let rows = table::render(&kind, std::slice::from_ref(shown), rv, version, include.as_deref(), first);
                                Bytes::from(serde_json::to_vec(&rows).expect("JSON values always serialize"))
                            }
                            (Output::Json, None) => super::read::encode(event.object()),
                        };
                        first = false;
                        event_frames = true;
                        vec![event_head(&event), object, Bytes::from_static(b"}\n")]
                    }
                    Err(error) => {
                        let (_, status) = ApiError::Registry(error).to_status();
                        let line = format!("{}\n", json!({"type": "ERROR", "object": status}));
                        deliver(&sender, vec![Bytes::from(line)], &taking, stall, disconnect.as_ref(), &cut).await;
                        break;
                    }
                },
            };
            if !deliver(&sender, frames, &taking, stall, disconnect.as_ref(), &cut).await {
                break;
            }
            if event_frames {
                sent.inc();
            }
        }
    });
    Ok(respond::stream(Body::from_stream(body)))
}

/// The next event, with its object's JSON when the answer is JSON (the watch cache's shared
/// encoding, for stored objects).
async fn next(stream: &mut Watch, output: Output) -> Result<(WatchEvent, Option<Bytes>), RegistryError> {
    match output {
        Output::Json => stream.next_json().await.map(|(event, json)| (event, Some(json))),
        Output::Table(_) => stream.next().await.map(|event| (event, None)),
    }
}

/// The opening of a JSON watch event of each type, before the object's bytes.
fn event_head(event: &WatchEvent) -> Bytes {
    Bytes::from_static(match event {
        WatchEvent::Added(_) => b"{\"type\":\"ADDED\",\"object\":",
        WatchEvent::Modified(_) => b"{\"type\":\"MODIFIED\",\"object\":",
        WatchEvent::Deleted(_) => b"{\"type\":\"DELETED\",\"object\":",
    })
}

/// Hands one event's `frames` to the response body; false when the client is gone, or has
/// taken nothing of what is pending for `stall`. Then the watch ends: over HTTP/1.1 its
/// connection is dropped (the socket is full, so not even the end of the body could reach the
/// client); over HTTP/2 the stream ends after the whole events already queued, and the
/// connection, shared with the client's other requests, stays (HTTP/2 pings drop it if the
/// client reads nothing).
async fn deliver(
    sender: &tokio::sync::mpsc::Sender<Frames>,
    frames: Frames,
    taking: &Taking,
    stall: Duration,
    disconnect: Option<&Disconnect>,
    cut: &prometheus_client::metrics::counter::Counter,
) -> bool {
    loop {
        // The queue is full only while frames are pending, so the stall clock runs from what
        // the body last took, not from when this event came.
        tokio::select! {
            permit = sender.reserve() => {
                let Ok(permit) = permit else { return false };
                taking.pending.fetch_add(frames.len(), Ordering::Relaxed);
                permit.send(frames);
                return true;
            }
            () = tokio::time::sleep_until(taking.stalls_at(stall)) => {
                if taking.stalled(stall) {
                    cut_off(stall, disconnect, cut);
                    return false;
                }
            }
        }
    }
}

/// Ends a watch whose client stopped reading.
fn cut_off(
    stall: Duration,
    disconnect: Option<&Disconnect>,
    cut: &prometheus_client::metrics::counter::Counter,
) {
    tracing::info!(stall_seconds = stall.as_secs_f64(), "a watch's client stopped reading; dropping it");
    cut.inc();
    if let Some(disconnect) = disconnect {
        disconnect.now();
    }
}

/// A receiver of events as a stream of their frames, noting each one the body takes.
fn frames_stream(
    mut receiver: tokio::sync::mpsc::Receiver<Frames>,
    taking: Arc<Taking>,
) -> impl futures_util::Stream<Item = Result<Bytes, std::io::Error>> {
    let mut current = std::collections::VecDeque::new();
    futures_util::stream::poll_fn(move |cx| {
        loop {
            if let Some(frame) = current.pop_front() {
                taking.took();
                return Poll::Ready(Some(Ok(frame)));
            }
            match std::task::ready!(receiver.poll_recv(cx)) {
                Some(frames) => current.extend(frames),
                None => return Poll::Ready(None),
            }
        }
    })
}
