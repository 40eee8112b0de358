//! `exec`, `attach` and `portforward` of a Pod (or of its Application): a connection upgraded
//! to a stream to the running process, relayed over its node's session (`kayra-nodeserver`'s
//! streams, credit-controlled both ways). Authorized as `create` whatever the method, before
//! anything is upgraded: a refusal is a `metav1.Status`, the same for kubectl's WebSocket `GET`
//! and for the SPDY `POST` it retries with after any refused upgrade.
//!
//! The protocols are kubectl's (1.32): exec and attach over WebSocket `v5.channel.k8s.io` or
//! `v4.channel.k8s.io` ([`remotecommand`]) or over plain SPDY/3.1 ([`spdy_command`]);
//! port-forward over SPDY/3.1, tunnelled in WebSocket (`SPDY/3.1+portforward.k8s.io`) or on a
//! plain upgrade ([`portforward`], framing in [`spdy`]). WebSocket upgrades go through axum's
//! (tokio-tungstenite); the SPDY ones take the connection from hyper as it is.

pub(crate) mod portforward;
pub(crate) mod remotecommand;
pub(crate) mod spdy;
pub(crate) mod spdy_command;

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use axum::extract::FromRequestParts;
use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade};
use axum::http::request::Parts;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use futures_util::stream::{SplitSink, SplitStream};
use futures_util::{SinkExt, StreamExt};
use hyper_util::rt::TokioIo;
use kayra_api::session::{Channels, ExecRequest, StreamKind};
use kayra_application::permitted::Permitted;
use kayra_nodeserver::NodeServerError;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::error::ApiError;
use crate::state::ApiState;

/// The one container a pod view has.
const CONTAINER: &str = "app";

/// The largest WebSocket message a client may send (kubectl's are at most 32 KiB and a byte).
const MAX_MESSAGE: usize = 1 << 20;

/// How the client asked to upgrade.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Upgrade {
    WebSocket,
    Spdy,
}

/// What an exec or attach query asks, as `PodExecOptions` and `PodAttachOptions` spell it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct CommandOptions {
    pub(crate) command: Vec<String>,
    pub(crate) channels: Channels,
    pub(crate) tty: bool,
}

/// Reads an exec's or attach's query: `command` once per word, the booleans false only when
/// absent, `0` or `false` (as kube-apiserver converts them), `container` the pod's one.
pub(crate) fn command_options(query: Option<&str>, exec: bool) -> Result<CommandOptions, ApiError> {
    let pairs: Vec<(String, String)> =
        form_urlencoded::parse(query.unwrap_or_default().as_bytes()).into_owned().collect();
    let flag = |name: &str| {
        pairs
            .iter()
            .any(|(key, value)| key == name && !matches!(value.to_ascii_lowercase().as_str(), "0" | "false"))
    };
    if let Some((_, container)) = pairs.iter().find(|(key, value)| key == "container" && !value.is_empty())
        && container != CONTAINER
    {
        return Err(ApiError::BadRequest(format!(
            "container {container} is not valid for this pod: its one container is \"{CONTAINER}\""
        )));
    }
    let options = CommandOptions {
        command: pairs.iter().filter(|(key, _)| key == "command").map(|(_, value)| value.clone()).collect(),
        channels: Channels { stdin: flag("stdin"), stdout: flag("stdout"), stderr: flag("stderr") },
        tty: flag("tty"),
    };
    if exec && options.command.is_empty() {
        return Err(ApiError::BadRequest("you must specify a command to run (the query's command)".into()));
    }
    let Channels { stdin, stdout, stderr } = options.channels;
    if !(stdin || stdout || stderr) {
        return Err(ApiError::BadRequest("you must specify at least 1 of stdin, stdout, stderr".into()));
    }
    if options.tty && stderr {
        return Err(ApiError::BadRequest(
            "stderr cannot be asked for with a tty: the terminal carries both".into(),
        ));
    }
    Ok(options)
}

/// Serves one stream request (authorized for `create` on its subresource), upgrading the
/// connection once everything that can be refused has been checked. A stream whose node holds
/// its session with another replica goes there, as this very upgrade.
pub(crate) async fn serve(
    state: &Arc<ApiState>,
    permitted: &Permitted,
    parts: &mut Parts,
) -> Result<Response, ApiError> {
    let (namespace, name, subresource) = permitted.stream_source()?;
    let asked = Asked {
        namespace: namespace.to_owned(),
        name: name.to_owned(),
        subresource: subresource.to_owned(),
        caller: permitted.identity().user.clone(),
    };
    match run(state, parts, &asked).await {
        Err(Unserved::Elsewhere(node)) => forward(state, parts, &node, &asked).await,
        Err(Unserved::Refused(error)) => Err(error),
        Ok(response) => Ok(response),
    }
}

/// Serves a stream another replica forwarded, from this replica's session of the node alone.
pub(crate) async fn serve_forwarded(
    state: &Arc<ApiState>,
    permitted: &Permitted,
    parts: &mut Parts,
) -> Result<Response, ApiError> {
    let node = permitted.session_stream_source()?.to_owned();
    let pairs: Vec<(String, String)> =
        form_urlencoded::parse(parts.uri.query().unwrap_or_default().as_bytes()).into_owned().collect();
    let field = |name: &str| {
        pairs
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.clone())
            .ok_or_else(|| ApiError::BadRequest(format!("a forwarded stream names its {name}")))
    };
    let asked = Asked {
        namespace: field("namespace")?,
        name: field("name")?,
        subresource: field("stream")?,
        caller: field("caller")?,
    };
    if !kayra_api::scheme::STREAMS.contains(&asked.subresource.as_str()) {
        return Err(ApiError::BadRequest(format!("{:?} is no stream", asked.subresource)));
    }
    match run(state, parts, &asked).await {
        Err(Unserved::Elsewhere(_)) => {
            Err(ApiError::Unavailable(format!("this replica holds no session of node \"{node}\"")))
        }
        Err(Unserved::Refused(error)) => Err(error),
        Ok(response) => Ok(response),
    }
}

/// What a stream request asks for, and for whom.
struct Asked {
    namespace: String,
    name: String,
    /// `exec`, `attach` or `portforward`.
    subresource: String,
    /// The user whose streams it counts among.
    caller: String,
}

/// Why a stream was not served here.
enum Unserved {
    /// Its node holds its session with another replica.
    Elsewhere(String),
    /// Refused, for this reason.
    Refused(ApiError),
}

impl From<ApiError> for Unserved {
    fn from(error: ApiError) -> Unserved {
        Unserved::Refused(error)
    }
}

/// Refused for `error`, or held elsewhere.
fn unserved(error: NodeServerError) -> Unserved {
    match error {
        NodeServerError::NodeUnavailable { node, .. } => Unserved::Elsewhere(node),
        other => Unserved::Refused(refusal(other)),
    }
}

/// Checks what can be refused, opens what the node streams, and upgrades.
async fn run(state: &Arc<ApiState>, parts: &mut Parts, asked: &Asked) -> Result<Response, Unserved> {
    let nodes = state.nodes.clone().ok_or_else(|| {
        ApiError::Unavailable("this server holds no node sessions, so it runs no streams".into())
    })?;
    let upgrade = upgrade_of(parts)?;
    let (namespace, name, caller) = (asked.namespace.clone(), asked.name.clone(), asked.caller.clone());
    if asked.subresource == "portforward" {
        nodes.forwardable(&namespace, &name).await.map_err(unserved)?;
        let forwarding = Arc::new(portforward::Forwarding { nodes, namespace, name, caller });
        return match upgrade {
            Upgrade::WebSocket => {
                let tunnel = format!("SPDY/3.1+{}", portforward::PROTOCOL);
                let socket = websocket(parts, [tunnel])?;
                Ok(socket.on_upgrade(move |socket| async move {
                    let (sink, source) = socket.split();
                    portforward::serve(WsReader::new(source), WsWriter::new(sink), forwarding).await;
                }))
            }
            Upgrade::Spdy => {
                if !offers(parts, portforward::PROTOCOL) {
                    return Err(unsupported_protocol(&[portforward::PROTOCOL]).into());
                }
                Ok(spdy_upgrade(parts, portforward::PROTOCOL, move |io| async move {
                    let (read, write) = tokio::io::split(io);
                    portforward::serve(read, write, forwarding).await;
                })?)
            }
        };
    }
    let options = command_options(parts.uri.query(), asked.subresource == "exec")?;
    let kind = match asked.subresource.as_str() {
        "exec" => StreamKind::Exec(ExecRequest {
            command: options.command.clone(),
            channels: options.channels,
            tty: options.tty,
        }),
        _ => StreamKind::Attach(options.channels),
    };
    let spdy_protocol = spdy_command::PROTOCOLS.iter().find(|protocol| offers(parts, protocol)).copied();
    if upgrade == Upgrade::Spdy && spdy_protocol.is_none() {
        return Err(unsupported_protocol(&spdy_command::PROTOCOLS).into());
    }
    let stream = nodes.stream(&namespace, &name, kind, &caller).await.map_err(unserved)?;
    match (upgrade, spdy_protocol) {
        (Upgrade::Spdy, Some(protocol)) => {
            Ok(spdy_upgrade(parts, protocol, move |io| spdy_command::serve(io, options, stream))?)
        }
        _ => {
            let socket = websocket(parts, remotecommand::PROTOCOLS)?;
            let protocol = socket.selected_protocol().and_then(|p| p.to_str().ok()).map(str::to_owned);
            Ok(socket.on_upgrade(move |socket| remotecommand::serve(socket, protocol, stream)))
        }
    }
}

/// The headers of a client's upgrade that the replica holding the session needs to answer it.
const UPGRADE_HEADERS: [&str; 7] = [
    "upgrade",
    "connection",
    "sec-websocket-key",
    "sec-websocket-version",
    "sec-websocket-protocol",
    "sec-websocket-extensions",
    "x-stream-protocol-version",
];

/// Opens the stream through the replica the store names as holding `node`'s session, as the
/// client's own upgrade, and relays the connection's bytes both ways; 503 when none does.
async fn forward(
    state: &Arc<ApiState>,
    parts: &mut Parts,
    node: &str,
    asked: &Asked,
) -> Result<Response, ApiError> {
    let unavailable = || ApiError::Unavailable(format!("node \"{node}\" holds no session with any replica"));
    let (Some((peers, me)), Some(nodes)) = (state.peers.as_ref(), state.nodes.as_ref()) else {
        return Err(unavailable());
    };
    let holder = nodes.holder(node).await.map_err(|error| ApiError::Unavailable(error.to_string()))?;
    let Some(holder) = holder.filter(|holder| holder.id != *me) else { return Err(unavailable()) };
    let encode = super::logs::encode;
    let mut query = parts.uri.query().map(str::to_owned).unwrap_or_default();
    for (key, value) in [
        ("namespace", &asked.namespace),
        ("name", &asked.name),
        ("stream", &asked.subresource),
        ("caller", &asked.caller),
    ] {
        if !query.is_empty() {
            query.push('&');
        }
        query.push_str(&format!("{key}={}", encode(value)));
    }
    let url = format!(
        "{}/apis/fleet.{}/v1/nodes/{}/sessionstream?{query}",
        holder.url.trim_end_matches('/'),
        state.scheme().domain(),
        encode(node)
    );
    let headers: Vec<(String, String)> = UPGRADE_HEADERS
        .iter()
        .flat_map(|name| {
            parts
                .headers
                .get_all(*name)
                .iter()
                .filter_map(|value| Some(((*name).to_owned(), value.to_str().ok()?.to_owned())))
        })
        .collect();
    let client = parts.extensions.remove::<hyper::upgrade::OnUpgrade>();
    let answer = peers.upgrade(parts.method.to_string(), url, headers).await.map_err(|reason| {
        ApiError::Unavailable(format!(
            "the replica holding node \"{node}\"'s session did not answer: {reason}"
        ))
    })?;
    match answer {
        crate::peers::PeerUpgrade::Refused(answer) => {
            let mut response = Response::new(axum::body::Body::from_stream(answer.body));
            *response.status_mut() = StatusCode::from_u16(answer.status).unwrap_or(StatusCode::BAD_GATEWAY);
            if let Ok(content_type) = HeaderValue::from_str(&answer.content_type) {
                response.headers_mut().insert(header::CONTENT_TYPE, content_type);
            }
            Ok(response)
        }
        crate::peers::PeerUpgrade::Switched { headers, connection } => {
            let Some(client) = client else {
                return Err(ApiError::BadRequest("this connection cannot be upgraded".into()));
            };
            tokio::spawn(async move {
                let Ok(upgraded) = client.await else { return };
                let mut client = TokioIo::new(upgraded);
                let mut connection = connection;
                let _ = tokio::io::copy_bidirectional(&mut client, &mut connection).await;
            });
            let mut response = StatusCode::SWITCHING_PROTOCOLS.into_response();
            for (name, value) in headers {
                if let (Ok(name), Ok(value)) =
                    (header::HeaderName::from_bytes(name.as_bytes()), HeaderValue::from_str(&value))
                {
                    response.headers_mut().append(name, value);
                }
            }
            Ok(response)
        }
    }
}

/// What a stream the node server could not open answers.
pub(crate) fn refusal(error: NodeServerError) -> ApiError {
    match error {
        NodeServerError::PortNotDeclared { .. } => ApiError::Forbidden(error.to_string()),
        NodeServerError::TooManyStreams { .. } => ApiError::TooManyRequests(error.to_string()),
        other => super::logs::refusal(other),
    }
}

/// The upgrade the request asks for; anything else is refused, as kube-apiserver refuses a
/// stream request without one.
fn upgrade_of(parts: &Parts) -> Result<Upgrade, ApiError> {
    let asked = parts.headers.get(header::UPGRADE).and_then(|value| value.to_str().ok()).unwrap_or_default();
    if asked.eq_ignore_ascii_case("websocket") {
        Ok(Upgrade::WebSocket)
    } else if asked.to_ascii_lowercase().starts_with("spdy/3") {
        Ok(Upgrade::Spdy)
    } else {
        Err(ApiError::BadRequest("Upgrade request required".into()))
    }
}

/// The WebSocket upgrade of `parts`, speaking the first of `protocols` the client offers;
/// refused when it offers none.
fn websocket<P: Into<std::borrow::Cow<'static, str>>>(
    parts: &mut Parts,
    protocols: impl IntoIterator<Item = P>,
) -> Result<WebSocketUpgrade, ApiError> {
    let protocols: Vec<std::borrow::Cow<'static, str>> = protocols.into_iter().map(Into::into).collect();
    let upgrade = futures_util::FutureExt::now_or_never(WebSocketUpgrade::from_request_parts(parts, &()))
        .expect("the WebSocket extractor does not wait")
        .map_err(|rejection| {
            ApiError::BadRequest(format!("the WebSocket upgrade is malformed: {}", rejection.body_text()))
        })?;
    let upgrade = upgrade.protocols(protocols.clone()).max_message_size(MAX_MESSAGE);
    if upgrade.selected_protocol().is_none() {
        let names: Vec<&str> = protocols.iter().map(|p| p.as_ref()).collect();
        return Err(unsupported_protocol(&names));
    }
    Ok(upgrade)
}

fn unsupported_protocol(served: &[&str]) -> ApiError {
    ApiError::BadRequest(format!("unable to upgrade: the stream protocols served are {}", served.join(", ")))
}

/// Whether a SPDY upgrade offers `protocol` in one of its `X-Stream-Protocol-Version` headers.
fn offers(parts: &Parts, protocol: &str) -> bool {
    parts
        .headers
        .get_all("x-stream-protocol-version")
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .any(|offered| offered.trim() == protocol)
}

/// Answers a SPDY upgrade with `101 Switching Protocols` naming `protocol`, and runs `session`
/// on the connection once hyper hands it over.
fn spdy_upgrade<F, S>(parts: &mut Parts, protocol: &str, session: S) -> Result<Response, ApiError>
where
    S: FnOnce(TokioIo<hyper::upgrade::Upgraded>) -> F + Send + 'static,
    F: std::future::Future<Output = ()> + Send + 'static,
{
    let Some(on_upgrade) = parts.extensions.remove::<hyper::upgrade::OnUpgrade>() else {
        return Err(ApiError::BadRequest("this connection cannot be upgraded (SPDY needs HTTP/1.1)".into()));
    };
    tokio::spawn(async move {
        match on_upgrade.await {
            Ok(upgraded) => session(TokioIo::new(upgraded)).await,
            Err(error) => tracing::debug!(%error, "a SPDY upgrade did not complete"),
        }
    });
    let mut response = StatusCode::SWITCHING_PROTOCOLS.into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONNECTION, HeaderValue::from_static("Upgrade"));
    headers.insert(header::UPGRADE, HeaderValue::from_static("SPDY/3.1"));
    headers.insert(
        "x-stream-protocol-version",
        HeaderValue::from_str(protocol).expect("a protocol name is a header value"),
    );
    Ok(response)
}

/// The bytes of a WebSocket's binary messages as one stream (the SPDY tunnel: message
/// boundaries mean nothing). A text message is an error; a Close, the end.
struct WsReader {
    source: SplitStream<WebSocket>,
    buffer: Bytes,
}

impl WsReader {
    fn new(source: SplitStream<WebSocket>) -> WsReader {
        WsReader { source, buffer: Bytes::new() }
    }
}

impl AsyncRead for WsReader {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        loop {
            if !self.buffer.is_empty() {
                let count = self.buffer.len().min(buf.remaining());
                buf.put_slice(&self.buffer.split_to(count));
                return Poll::Ready(Ok(()));
            }
            match ready!(self.source.poll_next_unpin(cx)) {
                Some(Ok(Message::Binary(data))) => self.buffer = data,
                Some(Ok(Message::Ping(_) | Message::Pong(_))) => {}
                Some(Ok(Message::Close(_))) | None => return Poll::Ready(Ok(())),
                Some(Ok(Message::Text(_))) => {
                    return Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        "a text message in a tunnel",
                    )));
                }
                Some(Err(error)) => return Poll::Ready(Err(io::Error::other(error))),
            }
        }
    }
}

/// Writes bytes as WebSocket binary messages; shutting it down sends a Close with code 1000,
/// which the client reads as the end of the stream.
struct WsWriter {
    sink: SplitSink<WebSocket, Message>,
    closing: bool,
}

impl WsWriter {
    fn new(sink: SplitSink<WebSocket, Message>) -> WsWriter {
        WsWriter { sink, closing: false }
    }
}

impl AsyncWrite for WsWriter {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        ready!(self.sink.poll_ready_unpin(cx)).map_err(io::Error::other)?;
        self.sink
            .start_send_unpin(Message::Binary(Bytes::copy_from_slice(data)))
            .map_err(io::Error::other)?;
        Poll::Ready(Ok(data.len()))
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.sink.poll_flush_unpin(cx).map_err(io::Error::other)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if !self.closing {
            ready!(self.sink.poll_ready_unpin(cx)).map_err(io::Error::other)?;
            let close = Message::Close(Some(CloseFrame { code: 1000, reason: "".into() }));
            self.sink.start_send_unpin(close).map_err(io::Error::other)?;
            self.closing = true;
        }
        self.sink.poll_close_unpin(cx).map_err(io::Error::other)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_exec_query_reads_as_kube_apiserver_reads_it() {
        let asked = command_options(
            Some("command=sh&command=-c&command=exit%203&container=app&stderr=true&stdout=true"),
            true,
        )
        .expect("valid");
        assert_eq!(asked.command, ["sh", "-c", "exit 3"]);
        assert_eq!(asked.channels, Channels { stdin: false, stdout: true, stderr: true });
        let terminal =
            command_options(Some("command=sh&stdin=true&stdout=true&tty=true"), true).expect("valid");
        assert!(terminal.tty && terminal.channels.stdin);
        assert!(command_options(Some("stdout=true&stdin=1"), false).expect("an attach").channels.stdin);
        for bad in [
            "command=ls&container=sidecar&stdout=true",
            "stdout=true",
            "command=ls",
            "command=ls&stdout=false&stderr=0",
            "command=sh&tty=true&stdout=true&stderr=true",
        ] {
            assert!(matches!(command_options(Some(bad), true), Err(ApiError::BadRequest(_))), "{bad}");
        }
    }
}
