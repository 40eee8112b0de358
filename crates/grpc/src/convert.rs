//! Translation between the wire messages and the domain's session messages. A wire message
//! that does not decode (an object that is not JSON, an empty body) is an error naming what was
//! wrong.

use std::sync::Arc;

use kayra_api::kinds::Condition;
use kayra_api::kinds::application::ApplicationStatus;
use kayra_api::session::{
    ApplicationReport, Channels, ControllerMessage, DesiredState, Document, ExecRequest, Input, LogChunk,
    LogRequest, NodeEvent, NodeInfo, NodeMessage, NodeReport, NodeTaint, OutputChannel, ProjectedToken,
    Registration, StreamEnd, StreamInput, StreamKind, StreamOpen, StreamOutcome, StreamOutput, TerminalSize,
    UsageSample,
};
use serde_json::Value;

use crate::wire;
use crate::wire::controller_message::Body as Down;
use crate::wire::node_message::Body as Up;

fn text(value: &str) -> Option<String> {
    (!value.is_empty()).then(|| value.to_owned())
}

fn condition_to_wire(condition: &Condition) -> wire::Condition {
    wire::Condition {
        r#type: condition.type_.clone(),
        status: condition.status.clone(),
        reason: condition.reason.clone().unwrap_or_default(),
        message: condition.message.clone().unwrap_or_default(),
        last_transition_time: condition.last_transition_time.clone().unwrap_or_default(),
    }
}

fn registration_from_wire(registration: wire::Registration) -> Registration {
    Registration {
        unschedulable: registration.unschedulable,
        taints: registration
            .taints
            .into_iter()
            .map(|taint| NodeTaint { key: taint.key, value: taint.value, effect: taint.effect })
            .collect(),
    }
}

fn condition_from_wire(condition: wire::Condition) -> Condition {
    Condition {
        type_: condition.r#type,
        status: condition.status,
        reason: text(&condition.reason),
        message: text(&condition.message),
        last_transition_time: text(&condition.last_transition_time),
        observed_generation: None,
    }
}

/// A node message in its wire form.
pub(crate) fn node_message_to_wire(message: NodeMessage) -> wire::NodeMessage {
    let body = match message {
        NodeMessage::Status(report) => Up::Status(wire::NodeStatus {
            capacity: report.capacity.into_iter().collect(),
            allocatable: report.allocatable.into_iter().collect(),
            addresses: report
                .addresses
                .into_iter()
                .map(|(r#type, address)| wire::NodeAddress { r#type, address })
                .collect(),
            info: Some(wire::NodeInfo {
                operating_system: report.info.operating_system,
                architecture: report.info.architecture,
                os_image: report.info.os_image,
                kernel_version: report.info.kernel_version,
                agent_version: report.info.agent_version,
                machine_id: report.info.machine_id,
                boot_id: report.info.boot_id,
            }),
            conditions: report.conditions.iter().map(condition_to_wire).collect(),
            registration: Some(wire::Registration {
                unschedulable: report.registration.unschedulable,
                taints: report
                    .registration
                    .taints
                    .into_iter()
                    .map(|taint| wire::Taint { key: taint.key, value: taint.value, effect: taint.effect })
                    .collect(),
            }),
        }),
        NodeMessage::Application(report) => {
            let status = report.status;
            Up::Application(wire::ApplicationStatus {
                namespace: report.namespace,
                name: report.name,
                uid: report.uid,
                phase: status.phase.unwrap_or_default(),
                message: status.message.unwrap_or_default(),
                observed_generation: status.observed_generation.unwrap_or_default(),
                conditions: status.conditions.iter().map(condition_to_wire).collect(),
                started_at: status.started_at.unwrap_or_default(),
                finished_at: status.finished_at.unwrap_or_default(),
                exit_code: status.exit_code.and_then(|code| i32::try_from(code).ok()),
                restarts: status.restarts.unwrap_or_default(),
                attempts: status.attempts.unwrap_or_default(),
                address: status.address.unwrap_or_default(),
            })
        }
        NodeMessage::LogChunk(chunk) => Up::LogChunk(wire::LogChunk {
            id: chunk.id,
            data: chunk.data,
            eof: chunk.eof,
            error: chunk.error.unwrap_or_default(),
        }),
        NodeMessage::Usage(sample) => Up::Usage(wire::UsageSample {
            namespace: sample.namespace,
            name: sample.name,
            uid: sample.uid,
            cpu_usage_usec: sample.cpu_usage_usec,
            cpu_throttled_usec: sample.cpu_throttled_usec,
            memory_bytes: sample.memory_bytes,
            memory_peak_bytes: sample.memory_peak_bytes,
            pids: sample.pids,
            oom_kills: sample.oom_kills,
            timestamp: sample.timestamp,
            memory_total_bytes: sample.memory_total_bytes,
        }),
        NodeMessage::Event(event) => Up::Event(wire::NodeEvent {
            namespace: event.namespace,
            name: event.name,
            uid: event.uid,
            reason: event.reason,
            message: event.message,
            r#type: event.type_,
        }),
        NodeMessage::StreamOutput(output) => Up::StreamOutput(wire::StreamOutput {
            id: output.id,
            channel: match output.channel {
                OutputChannel::Stdout => wire::StreamChannel::Stdout,
                OutputChannel::Stderr => wire::StreamChannel::Stderr,
                OutputChannel::Data => wire::StreamChannel::Data,
            } as i32,
            data: output.data,
            eof: output.eof,
        }),
        NodeMessage::StreamCredit { id, bytes } => Up::StreamCredit(wire::StreamCredit { id, bytes }),
        NodeMessage::StreamEnd(end) => Up::StreamEnd(match end.outcome {
            StreamOutcome::Exited(code) => {
                wire::StreamEnd { id: end.id, exit_code: Some(code), error: String::new() }
            }
            StreamOutcome::Failed(error) => wire::StreamEnd { id: end.id, exit_code: None, error },
        }),
    };
    wire::NodeMessage { body: Some(body) }
}

/// A node message from its wire form.
pub(crate) fn node_message_from_wire(message: wire::NodeMessage) -> Result<NodeMessage, String> {
    Ok(match message.body.ok_or("a node message with no body")? {
        Up::Status(status) => {
            let info = status.info.unwrap_or_default();
            NodeMessage::Status(NodeReport {
                capacity: status.capacity.into_iter().collect(),
                allocatable: status.allocatable.into_iter().collect(),
                addresses: status.addresses.into_iter().map(|a| (a.r#type, a.address)).collect(),
                info: NodeInfo {
                    operating_system: info.operating_system,
                    architecture: info.architecture,
                    os_image: info.os_image,
                    kernel_version: info.kernel_version,
                    agent_version: info.agent_version,
                    machine_id: info.machine_id,
                    boot_id: info.boot_id,
                },
                conditions: status.conditions.into_iter().map(condition_from_wire).collect(),
                registration: registration_from_wire(status.registration.unwrap_or_default()),
            })
        }
        Up::Application(status) => NodeMessage::Application(ApplicationReport {
            namespace: status.namespace,
            name: status.name,
            uid: status.uid,
            status: ApplicationStatus {
                phase: text(&status.phase),
                message: text(&status.message),
                observed_generation: (status.observed_generation != 0).then_some(status.observed_generation),
                conditions: status.conditions.into_iter().map(condition_from_wire).collect(),
                started_at: text(&status.started_at),
                finished_at: text(&status.finished_at),
                exit_code: status.exit_code.map(i64::from),
                restarts: Some(status.restarts),
                attempts: Some(status.attempts),
                address: text(&status.address),
            },
        }),
        Up::LogChunk(chunk) => NodeMessage::LogChunk(LogChunk {
            id: chunk.id,
            data: chunk.data,
            eof: chunk.eof,
            error: text(&chunk.error),
        }),
        Up::Usage(sample) => NodeMessage::Usage(UsageSample {
            namespace: sample.namespace,
            name: sample.name,
            uid: sample.uid,
            cpu_usage_usec: sample.cpu_usage_usec,
            cpu_throttled_usec: sample.cpu_throttled_usec,
            memory_bytes: sample.memory_bytes,
            memory_peak_bytes: sample.memory_peak_bytes,
            pids: sample.pids,
            oom_kills: sample.oom_kills,
            memory_total_bytes: sample.memory_total_bytes,
            timestamp: sample.timestamp,
        }),
        Up::Event(event) => NodeMessage::Event(NodeEvent {
            namespace: event.namespace,
            name: event.name,
            uid: event.uid,
            reason: event.reason,
            message: event.message,
            type_: event.r#type,
        }),
        Up::StreamOutput(output) => NodeMessage::StreamOutput(StreamOutput {
            id: output.id,
            channel: match wire::StreamChannel::try_from(output.channel) {
                Ok(wire::StreamChannel::Stdout) => OutputChannel::Stdout,
                Ok(wire::StreamChannel::Stderr) => OutputChannel::Stderr,
                Ok(wire::StreamChannel::Data) => OutputChannel::Data,
                Ok(wire::StreamChannel::Stdin) | Err(_) => {
                    return Err(format!(
                        "stream output on channel {}, which is not an output",
                        output.channel
                    ));
                }
            },
            data: output.data,
            eof: output.eof,
        }),
        Up::StreamCredit(credit) => NodeMessage::StreamCredit { id: credit.id, bytes: credit.bytes },
        Up::StreamEnd(end) => NodeMessage::StreamEnd(StreamEnd {
            id: end.id,
            outcome: match end.exit_code {
                Some(code) => StreamOutcome::Exited(code),
                None => StreamOutcome::Failed(end.error),
            },
        }),
    })
}

fn encode(documents: &[Document]) -> Vec<Vec<u8>> {
    documents
        .iter()
        .map(|document| serde_json::to_vec(&**document).expect("JSON objects serialise"))
        .collect()
}

fn decode(documents: Vec<Vec<u8>>, what: &str) -> Result<Vec<Document>, String> {
    documents
        .into_iter()
        .map(|bytes| match serde_json::from_slice::<Value>(&bytes) {
            Ok(Value::Object(object)) => Ok(Arc::new(object)),
            Ok(_) => Err(format!("a desired {what} is not a JSON object")),
            Err(error) => Err(format!("a desired {what} is not JSON: {error}")),
        })
        .collect()
}

/// A controller message in its wire form.
pub(crate) fn controller_message_to_wire(message: ControllerMessage) -> wire::ControllerMessage {
    let body = match message {
        ControllerMessage::Desired(desired) => Down::Desired(wire::DesiredState {
            applications: encode(&desired.applications),
            secrets: encode(&desired.secrets),
            signature: desired.signature,
            tokens: desired
                .tokens
                .into_iter()
                .map(|token| wire::ProjectedToken {
                    uid: token.uid,
                    path: token.path,
                    token: token.token,
                    expires_at: token.expires_at,
                })
                .collect(),
        }),
        ControllerMessage::LogRequest(request) => Down::LogRequest(wire::LogRequest {
            id: request.id,
            namespace: request.namespace,
            name: request.name,
            uid: request.uid,
            follow: request.follow,
            tail_lines: request.tail_lines,
            since_seconds: request.since_seconds,
            timestamps: request.timestamps,
            previous: request.previous,
            limit_bytes: request.limit_bytes,
            window: request.window,
            agent: request.agent,
        }),
        ControllerMessage::LogCancel(id) => Down::LogCancel(wire::LogCancel { id }),
        ControllerMessage::LogCredit { id, bytes } => Down::LogCredit(wire::LogCredit { id, bytes }),
        ControllerMessage::StreamOpen(open) => Down::StreamOpen(wire::StreamOpen {
            id: open.id,
            namespace: open.namespace,
            name: open.name,
            uid: open.uid,
            window: open.window,
            kind: Some(match open.kind {
                StreamKind::Exec(exec) => wire::stream_open::Kind::Exec(wire::ExecStream {
                    command: exec.command,
                    stdin: exec.channels.stdin,
                    stdout: exec.channels.stdout,
                    stderr: exec.channels.stderr,
                    tty: exec.tty,
                }),
                StreamKind::Attach(channels) => wire::stream_open::Kind::Attach(wire::AttachStream {
                    stdin: channels.stdin,
                    stdout: channels.stdout,
                    stderr: channels.stderr,
                }),
                StreamKind::PortForward(port) => {
                    wire::stream_open::Kind::PortForward(wire::PortForwardStream { port: u32::from(port) })
                }
            }),
        }),
        ControllerMessage::StreamInput(input) => Down::StreamInput(wire::StreamInput {
            id: input.id,
            input: Some(match input.input {
                Input::Data(data) => wire::stream_input::Input::Data(data),
                Input::Close => wire::stream_input::Input::Close(true),
                Input::Resize(size) => wire::stream_input::Input::Resize(wire::TerminalSize {
                    width: u32::from(size.width),
                    height: u32::from(size.height),
                }),
            }),
        }),
        ControllerMessage::StreamCredit { id, bytes } => Down::StreamCredit(wire::StreamCredit { id, bytes }),
        ControllerMessage::StreamCancel(id) => Down::StreamCancel(wire::StreamCancel { id }),
    };
    wire::ControllerMessage { body: Some(body) }
}

/// A controller message from its wire form.
pub(crate) fn controller_message_from_wire(
    message: wire::ControllerMessage,
) -> Result<ControllerMessage, String> {
    Ok(match message.body.ok_or("a controller message with no body")? {
        Down::Desired(desired) => ControllerMessage::Desired(DesiredState {
            applications: decode(desired.applications, "application")?,
            secrets: decode(desired.secrets, "secret")?,
            tokens: desired
                .tokens
                .into_iter()
                .map(|token| ProjectedToken {
                    uid: token.uid,
                    path: token.path,
                    token: token.token,
                    expires_at: token.expires_at,
                })
                .collect(),
            signature: desired.signature,
        }),
        Down::LogRequest(request) => ControllerMessage::LogRequest(LogRequest {
            id: request.id,
            namespace: request.namespace,
            name: request.name,
            uid: request.uid,
            follow: request.follow,
            tail_lines: request.tail_lines,
            since_seconds: request.since_seconds,
            timestamps: request.timestamps,
            previous: request.previous,
            limit_bytes: request.limit_bytes,
            window: request.window,
            agent: request.agent,
        }),
        Down::LogCancel(cancel) => ControllerMessage::LogCancel(cancel.id),
        Down::LogCredit(credit) => ControllerMessage::LogCredit { id: credit.id, bytes: credit.bytes },
        Down::StreamOpen(open) => ControllerMessage::StreamOpen(StreamOpen {
            id: open.id,
            namespace: open.namespace,
            name: open.name,
            uid: open.uid,
            window: open.window,
            kind: match open.kind.ok_or("a stream opened with no kind")? {
                wire::stream_open::Kind::Exec(exec) => StreamKind::Exec(ExecRequest {
                    command: exec.command,
                    channels: Channels { stdin: exec.stdin, stdout: exec.stdout, stderr: exec.stderr },
                    tty: exec.tty,
                }),
                wire::stream_open::Kind::Attach(attach) => StreamKind::Attach(Channels {
                    stdin: attach.stdin,
                    stdout: attach.stdout,
                    stderr: attach.stderr,
                }),
                wire::stream_open::Kind::PortForward(forward) => StreamKind::PortForward(
                    u16::try_from(forward.port)
                        .map_err(|_| format!("port {} is not a TCP port", forward.port))?,
                ),
            },
        }),
        Down::StreamInput(input) => ControllerMessage::StreamInput(StreamInput {
            id: input.id,
            input: match input.input.ok_or("a stream input with nothing in it")? {
                wire::stream_input::Input::Data(data) => Input::Data(data),
                wire::stream_input::Input::Close(_) => Input::Close,
                wire::stream_input::Input::Resize(size) => Input::Resize(TerminalSize {
                    width: u16::try_from(size.width).unwrap_or(u16::MAX),
                    height: u16::try_from(size.height).unwrap_or(u16::MAX),
                }),
            },
        }),
        Down::StreamCredit(credit) => ControllerMessage::StreamCredit { id: credit.id, bytes: credit.bytes },
        Down::StreamCancel(cancel) => ControllerMessage::StreamCancel(cancel.id),
    })
}

#[cfg(test)]
mod tests;
