//! Every session message survives the wire both ways, and malformed ones are named.

use serde_json::json;

use super::*;

fn object(value: Value) -> Document {
    match value {
        Value::Object(object) => Arc::new(object),
        _ => unreachable!("the tests pass objects"),
    }
}

#[test]
fn every_message_survives_the_wire() {
    let up = vec![
        NodeMessage::Status(NodeReport {
            capacity: [("cpu".to_owned(), "2".to_owned())].into(),
            allocatable: [("memory".to_owned(), "1Gi".to_owned())].into(),
            addresses: vec![("InternalIP".into(), "10.0.0.1".into())],
            info: NodeInfo {
                operating_system: "linux".into(),
                agent_version: "v0.1.0".into(),
                ..NodeInfo::default()
            },
            conditions: vec![Condition {
                type_: "DiskPressure".into(),
                status: "False".into(),
                ..Condition::default()
            }],
            registration: Registration {
                unschedulable: true,
                taints: vec![NodeTaint {
                    key: "dedicated".into(),
                    value: "gpu".into(),
                    effect: "NoSchedule".into(),
                }],
            },
        }),
        NodeMessage::Application(ApplicationReport {
            namespace: "demo".into(),
            name: "web".into(),
            uid: "u1".into(),
            status: ApplicationStatus {
                phase: Some("Failed".into()),
                exit_code: Some(137),
                restarts: Some(2),
                attempts: Some(3),
                observed_generation: Some(4),
                finished_at: Some("2026-01-01T00:00:00Z".into()),
                ..ApplicationStatus::default()
            },
        }),
        NodeMessage::LogChunk(LogChunk { id: 7, data: b"hello\n".to_vec(), eof: true, error: None }),
        NodeMessage::Usage(UsageSample {
            name: "web".into(),
            memory_bytes: 5,
            cpu_throttled_usec: 7,
            ..UsageSample::default()
        }),
        NodeMessage::Event(NodeEvent {
            reason: "Started".into(),
            type_: "Normal".into(),
            ..NodeEvent::default()
        }),
        NodeMessage::StreamOutput(StreamOutput {
            id: 4,
            channel: OutputChannel::Stderr,
            data: b"oops".to_vec(),
            eof: true,
        }),
        NodeMessage::StreamOutput(StreamOutput {
            id: 5,
            channel: OutputChannel::Data,
            data: vec![0],
            eof: false,
        }),
        NodeMessage::StreamCredit { id: 4, bytes: 32 },
        NodeMessage::StreamEnd(StreamEnd { id: 4, outcome: StreamOutcome::Exited(3) }),
        NodeMessage::StreamEnd(StreamEnd { id: 5, outcome: StreamOutcome::Failed("refused".into()) }),
    ];
    for message in up {
        assert_eq!(node_message_from_wire(node_message_to_wire(message.clone())), Ok(message));
    }
    let down = vec![
        ControllerMessage::Desired(DesiredState {
            applications: vec![object(json!({"metadata": {"name": "web"}}))],
            secrets: vec![object(json!({"data": {"k": "dg=="}}))],
            tokens: vec![ProjectedToken {
                uid: "u".into(),
                path: "token".into(),
                token: "a.b.c".into(),
                expires_at: 1_800_000_000,
            }],
            signature: "abc".into(),
        }),
        ControllerMessage::LogRequest(LogRequest {
            id: 3,
            tail_lines: Some(10),
            follow: true,
            window: 9,
            ..LogRequest::default()
        }),
        ControllerMessage::LogCancel(3),
        ControllerMessage::LogCredit { id: 3, bytes: 100 },
        ControllerMessage::StreamOpen(StreamOpen {
            id: 4,
            namespace: "demo".into(),
            name: "web".into(),
            uid: "u1".into(),
            window: 65536,
            kind: StreamKind::Exec(ExecRequest {
                command: vec!["sh".into(), "-c".into(), "exit 3".into()],
                channels: Channels { stdin: true, stdout: true, stderr: false },
                tty: true,
            }),
        }),
        ControllerMessage::StreamOpen(StreamOpen {
            id: 5,
            namespace: "demo".into(),
            name: "web".into(),
            uid: "u1".into(),
            window: 1,
            kind: StreamKind::Attach(Channels { stdin: false, stdout: true, stderr: true }),
        }),
        ControllerMessage::StreamOpen(StreamOpen {
            id: 6,
            namespace: "demo".into(),
            name: "web".into(),
            uid: "u1".into(),
            window: 1,
            kind: StreamKind::PortForward(8000),
        }),
        ControllerMessage::StreamInput(StreamInput { id: 4, input: Input::Data(b"ls\n".to_vec()) }),
        ControllerMessage::StreamInput(StreamInput { id: 4, input: Input::Close }),
        ControllerMessage::StreamInput(StreamInput {
            id: 4,
            input: Input::Resize(TerminalSize { width: 120, height: 40 }),
        }),
        ControllerMessage::StreamCredit { id: 4, bytes: 7 },
        ControllerMessage::StreamCancel(4),
    ];
    for message in down {
        assert_eq!(controller_message_from_wire(controller_message_to_wire(message.clone())), Ok(message));
    }
}

#[test]
fn malformed_messages_are_named() {
    assert!(node_message_from_wire(wire::NodeMessage { body: None }).is_err());
    let desired = wire::ControllerMessage {
        body: Some(Down::Desired(wire::DesiredState {
            applications: vec![b"[1]".to_vec()],
            ..Default::default()
        })),
    };
    assert_eq!(
        controller_message_from_wire(desired),
        Err("a desired application is not a JSON object".into())
    );
    let far = wire::ControllerMessage {
        body: Some(Down::StreamOpen(wire::StreamOpen {
            kind: Some(wire::stream_open::Kind::PortForward(wire::PortForwardStream { port: 70000 })),
            ..Default::default()
        })),
    };
    assert_eq!(controller_message_from_wire(far), Err("port 70000 is not a TCP port".into()));
    let stdin_out = wire::NodeMessage {
        body: Some(Up::StreamOutput(wire::StreamOutput { channel: 0, ..Default::default() })),
    };
    assert!(node_message_from_wire(stdin_out).is_err(), "stdin is no output");
}
