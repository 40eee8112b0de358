//! A stream through a session, with the node played by the test: the open the node is sent,
//! input held to the node's credit, output credited back as it is taken, a node that oversteps
//! its window cut off, the limits per caller, an undeclared port refused, a dropped stream
//! cancelled on the node, and a closed session ending its streams.

use std::sync::Arc;
use std::time::Duration;

use kayra_api::clock::SystemClock;
use kayra_api::scheme::Scheme;
use kayra_api::session::{
    Channels, ControllerMessage, ExecRequest, Input, NodeMessage, OutputChannel, StreamEnd, StreamInput,
    StreamKind, StreamOutcome, StreamOutput,
};
use kayra_application::ApplicationLayer;
use kayra_authn::Identity;
use kayra_registry::Registry;
use kayra_store::mvcc::{MvccStore, Options};
use serde_json::json;

use crate::{Config, NodeServer, NodeServerError, Session, StreamEvent};

const WINDOW: u64 = 64;

async fn server() -> NodeServer {
    server_with(Config { stream_window: WINDOW, max_streams_per_caller: 1, ..Config::default() }).await
}

async fn server_with(config: Config) -> NodeServer {
    let store = Arc::new(MvccStore::in_memory(Options::default()).expect("a memory store"));
    let registry = Registry::new(store, Arc::new(SystemClock), "/registry/");
    let control = Arc::new(ApplicationLayer::new(Arc::new(Scheme::new("example.com")), registry));
    let admin = control.client(kayra_application::controller_identity("test"));
    let namespaces = admin.resource("", "namespaces").expect("namespaces");
    let namespace = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}});
    admin.create(&namespaces, None, namespace).await.expect("the namespace");
    let nodes = admin.resource("", "nodes").expect("nodes");
    let n1 = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}});
    admin.create(&nodes, None, n1).await.expect("the node");
    let applications = admin.resource("fleet.example.com", "applications").expect("applications");
    let web = json!({"apiVersion": "fleet.example.com/v1", "kind": "Application", "metadata": {"name": "web"},
                     "spec": {"command": ["sleep"], "ports": [{"port": 8000}], "placement": {"nodeName": "n1"}}});
    admin.create(&applications, Some("default"), web).await.expect("the application");
    NodeServer::new(control, config).expect("a node server")
}

fn node(name: &str) -> Identity {
    Identity::new(format!("system:node:{name}"), "", vec!["system:nodes".into()])
}

fn exec() -> StreamKind {
    StreamKind::Exec(ExecRequest {
        command: vec!["cat".into()],
        channels: Channels { stdin: true, stdout: true, stderr: false },
        tty: false,
    })
}

/// The next message for the node, within a second.
async fn sent(session: &mut Session) -> ControllerMessage {
    loop {
        let message = tokio::time::timeout(Duration::from_secs(1), session.next())
            .await
            .expect("a message for the node")
            .expect("the session lasts");
        if !matches!(message, ControllerMessage::Desired(_)) {
            return message;
        }
    }
}

/// Whether the node is sent nothing (but desired states) for a tenth of a second.
async fn quiet(session: &mut Session) -> bool {
    tokio::time::timeout(Duration::from_millis(100), sent(session)).await.is_err()
}

#[tokio::test]
async fn a_stream_relays_both_ways_within_its_window_and_a_dropped_one_is_cancelled() {
    let server = server().await;
    let mut session = server.open(&node("n1")).expect("a session");
    let stream = server.stream("default", "web", exec(), "alice").await.expect("opened");
    let id = match sent(&mut session).await {
        ControllerMessage::StreamOpen(open) => {
            assert_eq!((open.name.as_str(), open.window, open.kind), ("web", WINDOW, exec()));
            assert!(!open.uid.is_empty(), "the node is told which object it is");
            open.id
        }
        other => panic!("the node is asked to open the stream first: {other:?}"),
    };
    assert!(matches!(
        server.stream("default", "web", exec(), "alice").await,
        Err(NodeServerError::TooManyStreams { .. })
    ));
    match server.stream("default", "web", StreamKind::PortForward(9000), "bob").await {
        Err(NodeServerError::PortNotDeclared { port: 9000, declared, .. }) => assert_eq!(declared, [8000]),
        other => panic!("an undeclared port is refused: {other:?}"),
    }

    // Input goes no more than a window ahead of the node's credit.
    let (input, mut output) = stream.split();
    let sending = tokio::spawn(async move {
        input.send(Input::Data(vec![7; 100])).await.expect("sent");
        input
    });
    let first = sent(&mut session).await;
    assert_eq!(first, ControllerMessage::StreamInput(StreamInput { id, input: Input::Data(vec![7; 64]) }));
    assert!(quiet(&mut session).await, "nothing beyond the window before the node's credit");
    session.receive(NodeMessage::StreamCredit { id, bytes: 64 }).await.expect("credit");
    let rest = sent(&mut session).await;
    assert_eq!(rest, ControllerMessage::StreamInput(StreamInput { id, input: Input::Data(vec![7; 36]) }));
    let input = sending.await.expect("the sender ends");

    // Output is credited back as the client takes it.
    let chunk = |id: u64, data: Vec<u8>| {
        NodeMessage::StreamOutput(StreamOutput { id, channel: OutputChannel::Stdout, data, eof: false })
    };
    session.receive(chunk(id, vec![1; 40])).await.expect("delivered");
    assert!(quiet(&mut session).await, "no credit before the client takes it");
    let taken = output.next().await.expect("output");
    assert_eq!(taken, StreamEvent::Output { channel: OutputChannel::Stdout, data: vec![1; 40], eof: false });
    assert_eq!(sent(&mut session).await, ControllerMessage::StreamCredit { id, bytes: 40 });

    // The node's end of the stream ends it for the client.
    session
        .receive(NodeMessage::StreamEnd(StreamEnd { id, outcome: StreamOutcome::Exited(3) }))
        .await
        .expect("ended");
    assert_eq!(output.next().await, Some(StreamEvent::End(StreamOutcome::Exited(3))));
    assert_eq!(output.next().await, None);
    drop((input, output));
    assert!(quiet(&mut session).await, "an ended stream is not cancelled");

    // A node that sends past its window is cut off; a stream the client drops is cancelled.
    let stream = server.stream("default", "web", exec(), "alice").await.expect("the place is free again");
    let ControllerMessage::StreamOpen(open) = sent(&mut session).await else { panic!("an open") };
    let (input, mut output) = stream.split();
    let id = open.id;
    session.receive(chunk(id, vec![2; 65])).await.expect("delivered");
    match output.next().await {
        Some(StreamEvent::End(StreamOutcome::Failed(reason))) => assert!(reason.contains("more"), "{reason}"),
        other => panic!("the stream is cut off: {other:?}"),
    }
    assert_eq!(sent(&mut session).await, ControllerMessage::StreamCancel(id));
    drop((input, output));
    let stream = server.stream("default", "web", exec(), "alice").await.expect("opened");
    let ControllerMessage::StreamOpen(open) = sent(&mut session).await else { panic!("an open") };
    drop(stream);
    assert_eq!(sent(&mut session).await, ControllerMessage::StreamCancel(open.id), "the client went away");

    // A closed session ends its streams.
    let stream = server.stream("default", "web", exec(), "alice").await.expect("opened");
    drop(session);
    let (_input, mut output) = stream.split();
    assert!(matches!(output.next().await, Some(StreamEvent::End(StreamOutcome::Failed(_)))));
}

/// kubelet's `streamingConnectionIdleTimeout`: a stream quiet both ways for it ends, and
/// traffic either way keeps it open. Paused, tokio's clock moves only as the test sleeps.
#[tokio::test(start_paused = true)]
async fn a_stream_quiet_for_the_idle_timeout_ends_and_traffic_keeps_it_open() {
    let idle = Duration::from_secs(60);
    let server = server_with(Config { stream_idle_timeout: idle, ..Config::default() }).await;
    let mut session = server.open(&node("n1")).expect("a session");
    let stream = server.stream("default", "web", exec(), "alice").await.expect("opened");
    let ControllerMessage::StreamOpen(open) = sent(&mut session).await else { panic!("an open") };
    let (input, mut output) = stream.split();
    // Input at 40 s keeps it open past 60 s.
    tokio::time::sleep(Duration::from_secs(40)).await;
    input.send(Input::Data(b"still here".to_vec())).await.expect("sent");
    let waited = tokio::time::Instant::now();
    match output.next().await {
        Some(StreamEvent::End(StreamOutcome::Failed(reason))) => {
            assert!(reason.contains("idle timeout"), "{reason}");
        }
        other => panic!("a quiet stream ends: {other:?}"),
    }
    assert_eq!(waited.elapsed(), idle, "ended a whole timeout after the last traffic");
    drop((input, output));
    loop {
        match sent(&mut session).await {
            ControllerMessage::StreamCancel(id) => {
                assert_eq!(id, open.id, "and cancelled on the node");
                break;
            }
            ControllerMessage::StreamInput(_) => {}
            other => panic!("{other:?}"),
        }
    }
}
