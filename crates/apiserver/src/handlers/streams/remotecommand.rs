//! Exec and attach over WebSocket, in the channel protocols kubectl speaks
//! (`v5.channel.k8s.io`, and `v4.channel.k8s.io`, which lacks the close signal): every message
//! is binary, its first byte the channel — 0 stdin, 1 stdout, 2 stderr, 3 the status, 4 the
//! terminal's size as JSON, 255 (v5) `[255, channel]` closing one. The session ends with one
//! `metav1.Status` on channel 3 (a non-zero exit as `NonZeroExitCode` with the code as its
//! cause, which kubectl exits with) and a Close frame with code 1000.

use axum::extract::ws::{CloseFrame, Message, WebSocket};
use bytes::Bytes;
use futures_util::{SinkExt, StreamExt};
use kayra_api::session::{Input, OutputChannel, StreamOutcome, TerminalSize};
use kayra_nodeserver::{NodeStream, StreamEvent};
use serde::Deserialize;

/// The remote-command protocols served, the newest first.
pub(crate) const PROTOCOLS: [&str; 2] = ["v5.channel.k8s.io", "v4.channel.k8s.io"];

const STDIN: u8 = 0;
const STDOUT: u8 = 1;
const STDERR: u8 = 2;
const STATUS: u8 = 3;
const RESIZE: u8 = 4;
const CLOSE: u8 = 255;

/// A terminal size as kubectl's Go encoder writes it (`{"Width":80,"Height":24}`); Go's decoder
/// matches names without regard to case.
#[derive(Debug, Deserialize)]
struct Size {
    #[serde(alias = "width", alias = "Width")]
    width: u16,
    #[serde(alias = "height", alias = "Height")]
    height: u16,
}

/// The terminal sizes one resize message holds (kubectl sends one, ended by a newline).
pub(crate) fn sizes(message: &[u8]) -> Vec<TerminalSize> {
    serde_json::Deserializer::from_slice(message)
        .into_iter::<Size>()
        .map_while(Result::ok)
        .map(|size| TerminalSize { width: size.width, height: size.height })
        .collect()
}

/// The status that ends a remote command: kube-apiserver's words, which kubectl reads (a
/// non-zero code in the `ExitCode` cause is what it exits with).
pub(crate) fn status(outcome: &StreamOutcome) -> serde_json::Value {
    match outcome {
        StreamOutcome::Exited(0) => serde_json::json!({"metadata": {}, "status": "Success"}),
        StreamOutcome::Exited(code) => serde_json::json!({
            "metadata": {},
            "status": "Failure",
            "message": format!("command terminated with non-zero exit code: error executing command [exit {code}], exit code {code}"),
            "reason": "NonZeroExitCode",
            "details": {"causes": [{"reason": "ExitCode", "message": code.to_string()}]},
        }),
        StreamOutcome::Failed(message) => serde_json::json!({
            "metadata": {},
            "status": "Failure",
            "message": message,
            "reason": "InternalError",
            "code": 500,
        }),
    }
}

/// Serves one exec or attach over `socket` (which speaks `protocol`), relaying `stream`.
pub(crate) async fn serve(socket: WebSocket, protocol: Option<String>, stream: NodeStream) {
    let v5 = protocol.as_deref() == Some(PROTOCOLS[0]);
    let (input, mut output) = stream.split();
    let (mut sink, mut source) = socket.split();
    // The client's messages: stdin, resizes, the close of stdin; its Close or its going away
    // ends the session.
    let reading = async move {
        while let Some(message) = source.next().await {
            let data = match message {
                Ok(Message::Binary(data)) => data,
                Ok(Message::Ping(_) | Message::Pong(_)) => continue,
                Ok(Message::Close(_)) | Err(_) => return,
                Ok(Message::Text(_)) => {
                    tracing::debug!("a text frame on a binary remote-command protocol ends the session");
                    return;
                }
            };
            let Some((&channel, payload)) = data.split_first() else { continue };
            let sent = match channel {
                STDIN => input.send(Input::Data(payload.to_vec())).await,
                RESIZE => {
                    let mut sent = Ok(());
                    for size in sizes(payload) {
                        sent = input.send(Input::Resize(size)).await;
                    }
                    sent
                }
                CLOSE if v5 && payload == [STDIN] => input.send(Input::Close).await,
                CLOSE if v5 && payload.len() == 1 => Ok(()),
                other => {
                    tracing::debug!(channel = other, "a message on an unknown channel ends the session");
                    return;
                }
            };
            if sent.is_err() {
                return;
            }
        }
    };
    let writing = async move {
        let outcome = loop {
            match output.next().await {
                Some(StreamEvent::Output { channel, data, .. }) => {
                    let byte = match channel {
                        OutputChannel::Stderr => STDERR,
                        OutputChannel::Stdout | OutputChannel::Data => STDOUT,
                    };
                    let mut framed = Vec::with_capacity(data.len() + 1);
                    framed.push(byte);
                    framed.extend_from_slice(&data);
                    if sink.send(Message::Binary(Bytes::from(framed))).await.is_err() {
                        return;
                    }
                }
                Some(StreamEvent::End(outcome)) => break outcome,
                None => break StreamOutcome::Failed("the stream ended without its end".into()),
            }
        };
        let mut framed = vec![STATUS];
        framed.extend(serde_json::to_vec(&status(&outcome)).expect("a status serialises"));
        let _ = sink.send(Message::Binary(Bytes::from(framed))).await;
        let close = CloseFrame { code: 1000, reason: "".into() };
        let _ = sink.send(Message::Close(Some(close))).await;
    };
    // Either side's end ends the session: the client's going away cancels the stream on the
    // node (its halves are dropped with these futures); the stream's end closes the socket.
    tokio::select! {
        () = reading => {}
        () = writing => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_resize_reads_as_kubectl_writes_it() {
        let sizes = sizes(b"{\"Width\":120,\"Height\":40}\n");
        assert_eq!(sizes, vec![TerminalSize { width: 120, height: 40 }]);
        assert!(super::sizes(b"not json").is_empty());
    }

    #[test]
    fn the_exit_code_reaches_kubectl_as_the_cause_it_exits_with() {
        assert_eq!(status(&StreamOutcome::Exited(0))["status"], "Success");
        let failed = status(&StreamOutcome::Exited(3));
        assert_eq!(failed["reason"], "NonZeroExitCode");
        assert_eq!(failed["details"]["causes"][0], serde_json::json!({"reason": "ExitCode", "message": "3"}));
        assert_eq!(status(&StreamOutcome::Failed("no process".into()))["message"], "no process");
    }
}
