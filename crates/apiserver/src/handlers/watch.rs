//! `GET ...?watch=true`: a chunked stream of `WatchEvent`s, one JSON document per line, with
//! bookmarks when asked for and an `ERROR` event for a revision that is gone. In JSON, an
//! event is its opening, the watch cache's shared encoding of the object and its close,
//! written without copying. A watch whose client has not taken what is pending for the stall
//! timeout ends, dropping its connection; the client watches again from the last revision it
//! saw, as with kube-apiserver.

use std::task::Poll;
use std::time::Duration;

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

/// One watch event (or bookmark, or error) as the pieces its line is written from.
type Frames = Vec<Bytes>;

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
    let (sender, receiver) = tokio::sync::mpsc::channel::<Frames>(WATCH_QUEUE);
    tokio::spawn(async move {
        let deadline = tokio::time::sleep(timeout);
        tokio::pin!(deadline);
        let mut ticker = tokio::time::interval(BOOKMARK_EVERY);
        ticker.tick().await;
        let mut first = true;
        loop {
            let mut event_frames = false;
            let frames = tokio::select! {
                () = &mut deadline => break,
                () = sender.closed() => break,
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
                        deliver(&sender, vec![Bytes::from(line)], stall, disconnect.as_ref(), &cut).await;
                        break;
                    }
                },
            };
            if !deliver(&sender, frames, stall, disconnect.as_ref(), &cut).await {
                break;
            }
            if event_frames {
                sent.inc();
            }
        }
    });
    Ok(respond::stream(Body::from_stream(frames_stream(receiver))))
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

/// Hands one event's `frames` to the response body; false when the client is gone, or has not
/// taken what is pending within `stall`. Then the watch ends: over HTTP/1.1 its connection is
/// dropped (the socket is full, so not even the end of the body could reach the client); over
/// HTTP/2 the stream ends after the whole events already queued, and the connection, shared
/// with the client's other requests, stays (HTTP/2 pings drop it if the client reads nothing).
async fn deliver(
    sender: &tokio::sync::mpsc::Sender<Frames>,
    frames: Frames,
    stall: Duration,
    disconnect: Option<&Disconnect>,
    cut: &prometheus_client::metrics::counter::Counter,
) -> bool {
    match tokio::time::timeout(stall, sender.send(frames)).await {
        Ok(sent) => sent.is_ok(),
        Err(_) => {
            tracing::info!(
                stall_seconds = stall.as_secs_f64(),
                "a watch's client stopped reading; dropping it"
            );
            cut.inc();
            if let Some(disconnect) = disconnect {
                disconnect.now();
            }
            false
        }
    }
}

/// A receiver of events as a stream of their frames, without another dependency.
fn frames_stream(
    mut receiver: tokio::sync::mpsc::Receiver<Frames>,
) -> impl futures_util::Stream<Item = Result<Bytes, std::io::Error>> {
    let mut current = std::collections::VecDeque::new();
    futures_util::stream::poll_fn(move |cx| {
        loop {
            if let Some(frame) = current.pop_front() {
                return Poll::Ready(Some(Ok(frame)));
            }
            match std::task::ready!(receiver.poll_recv(cx)) {
                Some(frames) => current.extend(frames),
                None => return Poll::Ready(None),
            }
        }
    })
}
