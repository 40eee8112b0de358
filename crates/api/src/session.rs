//! The node session's messages as the domain sees them: what a node reports and what the
//! controller sends it. `proto/node.proto` is their wire form and documents the contract; the
//! gRPC adapter translates between the two, so neither the controller's node server nor the
//! agent sees a wire type.

use std::collections::BTreeMap;

use std::sync::Arc;

use serde_json::{Map, Value};

use crate::kinds::Condition;
use crate::kinds::application::ApplicationStatus;
use crate::validation::{FieldError, is_dns_subdomain};

/// What a node sends.
#[derive(Debug, Clone, PartialEq)]
pub enum NodeMessage {
    /// The node's own status; also its heartbeat.
    Status(NodeReport),
    /// One Application's status.
    Application(ApplicationReport),
    /// Bytes of a requested log.
    LogChunk(LogChunk),
    /// Resource use of an Application or of the node.
    Usage(UsageSample),
    /// Something that happened to an Application.
    Event(NodeEvent),
    /// Bytes a stream produced.
    StreamOutput(StreamOutput),
    /// The process of stream `id` took `bytes` more of its input.
    StreamCredit {
        /// The stream.
        id: u64,
        /// How many more bytes of input may be sent.
        bytes: u64,
    },
    /// How a stream ended.
    StreamEnd(StreamEnd),
}

/// What the controller sends a node.
#[derive(Debug, Clone, PartialEq)]
pub enum ControllerMessage {
    /// Everything the node should run.
    Desired(DesiredState),
    /// Start streaming a log.
    LogRequest(LogRequest),
    /// Stop streaming log `id`.
    LogCancel(u64),
    /// The reader of log `id` took `bytes` more.
    LogCredit {
        /// The stream.
        id: u64,
        /// How many more bytes may be sent.
        bytes: u64,
    },
    /// Open an exec, attach or port-forward stream.
    StreamOpen(StreamOpen),
    /// What the client sends into a stream.
    StreamInput(StreamInput),
    /// The client of stream `id` took `bytes` more of its output.
    StreamCredit {
        /// The stream.
        id: u64,
        /// How many more bytes of output may be sent.
        bytes: u64,
    },
    /// The client of stream `id` went away: end it.
    StreamCancel(u64),
}

/// The node's own view of itself: core v1 `Node.status` less the heartbeat.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NodeReport {
    /// Resources of the host (`cpu`, `memory`, `pods`), as quantities.
    pub capacity: BTreeMap<String, String>,
    /// What the node offers to Applications.
    pub allocatable: BTreeMap<String, String>,
    /// `(type, address)` pairs: `InternalIP`, `ExternalIP`, `Hostname`.
    pub addresses: Vec<(String, String)>,
    /// Facts about the host and the agent.
    pub info: NodeInfo,
    /// Conditions the node judges itself (the controller owns `Ready`'s heartbeat).
    pub conditions: Vec<Condition>,
    /// What the node asks of its Node when the controller creates it.
    pub registration: Registration,
}

/// What a node asks of its Node when the controller creates it, as kubelet's registration
/// flags do (`--register-with-taints`; `--cordon` for `--register-schedulable=false`). Its
/// first registration after joining is as asked; a Node the controller re-creates after it was
/// deleted is cordoned whatever the node asks, with its taints.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Registration {
    /// Start cordoned (`spec.unschedulable`).
    pub unschedulable: bool,
    /// The taints the Node starts with.
    pub taints: Vec<NodeTaint>,
}

impl Registration {
    /// What is wrong with the registration: each taint as [`NodeTaint::validate`] has it, and
    /// no two taints with one key and effect.
    pub fn validate(&self) -> Vec<FieldError> {
        let mut errors = Vec::new();
        for (at, taint) in self.taints.iter().enumerate() {
            let field = format!("spec.taints[{at}]");
            errors.extend(taint.validate(&field));
            let earlier = &self.taints[..at];
            if earlier.iter().any(|other| other.key == taint.key && other.effect == taint.effect) {
                errors.push(FieldError::duplicate(field, &format!("{}:{}", taint.key, taint.effect)));
            }
        }
        errors
    }
}

/// A taint, as core v1 `Taint` holds it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeTaint {
    /// The key, a qualified name (`dedicated`, `example.com/gpu`).
    pub key: String,
    /// The value, a label value; may be empty.
    pub value: String,
    /// `NoSchedule`, `PreferNoSchedule` or `NoExecute`.
    pub effect: String,
}

impl NodeTaint {
    /// The effects a taint may have.
    pub const EFFECTS: [&'static str; 3] = ["NoSchedule", "PreferNoSchedule", "NoExecute"];

    /// Reads taints as kubelet's `--register-with-taints` spells them: comma-separated
    /// `key=value:Effect` or `key:Effect`.
    pub fn parse_list(text: &str) -> Result<Vec<NodeTaint>, FieldError> {
        let mut taints = Vec::new();
        for (at, word) in text.split(',').enumerate() {
            let field = format!("taints[{at}]");
            let Some((key_value, effect)) = word.rsplit_once(':') else {
                return Err(FieldError::invalid(field, word, "a taint is key=value:Effect or key:Effect"));
            };
            let (key, value) = key_value.split_once('=').unwrap_or((key_value, ""));
            let taint = NodeTaint { key: key.to_owned(), value: value.to_owned(), effect: effect.to_owned() };
            if let Some(error) = taint.validate(&field).into_iter().next() {
                return Err(error);
            }
            taints.push(taint);
        }
        Ok(taints)
    }

    /// What is wrong with the taint, its fields named under `field`: the key must be a
    /// qualified name, the value a label value, the effect one of [`NodeTaint::EFFECTS`].
    pub fn validate(&self, field: &str) -> Vec<FieldError> {
        let mut errors = Vec::new();
        if !is_qualified_name(&self.key) {
            let why = "a qualified name: at most 63 alphanumerics, '-', '_' or '.', alphanumeric at both ends, with an optional DNS subdomain prefix and '/'";
            errors.push(FieldError::invalid(format!("{field}.key"), &self.key, why));
        }
        if !self.value.is_empty() && !is_name_part(&self.value) {
            let why = "a label value: at most 63 alphanumerics, '-', '_' or '.', alphanumeric at both ends";
            errors.push(FieldError::invalid(format!("{field}.value"), &self.value, why));
        }
        if !NodeTaint::EFFECTS.contains(&self.effect.as_str()) {
            errors.push(FieldError::not_supported(
                format!("{field}.effect"),
                &self.effect,
                &NodeTaint::EFFECTS,
            ));
        }
        errors
    }
}

impl std::fmt::Display for NodeTaint {
    /// As kubelet's flag and `kubectl taint` spell it: `key=value:Effect`, or `key:Effect`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.value.is_empty() {
            write!(f, "{}:{}", self.key, self.effect)
        } else {
            write!(f, "{}={}:{}", self.key, self.value, self.effect)
        }
    }
}

/// Whether `key` is a Kubernetes qualified name: `[prefix/]name`.
fn is_qualified_name(key: &str) -> bool {
    match key.split_once('/') {
        Some((prefix, name)) => is_dns_subdomain(prefix) && is_name_part(name),
        None => is_name_part(key),
    }
}

/// Whether `name` is at most 63 alphanumerics, `-`, `_` or `.`, alphanumeric at both ends.
fn is_name_part(name: &str) -> bool {
    let bytes = name.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 63
        && bytes[0].is_ascii_alphanumeric()
        && bytes[bytes.len() - 1].is_ascii_alphanumeric()
        && bytes.iter().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// Facts about the host and the agent.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NodeInfo {
    /// `linux`.
    pub operating_system: String,
    /// `amd64`, `arm64`, ...
    pub architecture: String,
    /// The distribution's name, such as `Debian GNU/Linux 12 (bookworm)`.
    pub os_image: String,
    /// The kernel's release.
    pub kernel_version: String,
    /// The agent's version, shown as `kubeletVersion`.
    pub agent_version: String,
    /// `/etc/machine-id`, when the host has one.
    pub machine_id: String,
    /// The kernel's boot id.
    pub boot_id: String,
}

/// One Application's status, replacing the stored one whole.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ApplicationReport {
    /// The Application's namespace.
    pub namespace: String,
    /// The Application's name.
    pub name: String,
    /// The uid of the object the node was given; a report for another uid is stale.
    pub uid: String,
    /// The status.
    pub status: ApplicationStatus,
}

/// Bytes of a log stream.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LogChunk {
    /// The stream, as the request numbered it.
    pub id: u64,
    /// The bytes.
    pub data: Vec<u8>,
    /// The stream ended.
    pub eof: bool,
    /// The stream ended with this error.
    pub error: Option<String>,
}

/// Resource use sampled on a node.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct UsageSample {
    /// The Application's namespace, empty for the whole node.
    pub namespace: String,
    /// The Application's name, empty for the whole node.
    pub name: String,
    /// The Application's uid.
    pub uid: String,
    /// CPU time used so far, in microseconds.
    pub cpu_usage_usec: u64,
    /// Time held back by the CPU limit so far, in microseconds.
    pub cpu_throttled_usec: u64,
    /// Memory in use.
    pub memory_bytes: u64,
    /// The most memory used.
    pub memory_peak_bytes: u64,
    /// Processes and threads.
    pub pids: u64,
    /// Out-of-memory kills so far.
    pub oom_kills: u64,
    /// The node's total memory (node samples only).
    pub memory_total_bytes: u64,
    /// When it was sampled (RFC 3339).
    pub timestamp: String,
}

/// Something that happened to an Application on a node.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NodeEvent {
    /// The Application's namespace.
    pub namespace: String,
    /// The Application's name.
    pub name: String,
    /// The Application's uid.
    pub uid: String,
    /// kubelet's reasons: `Started`, `BackOff`, `Killing`, `Unhealthy`, `Failed`, ...
    pub reason: String,
    /// What happened.
    pub message: String,
    /// `Normal` or `Warning`.
    pub type_: String,
}

/// One API object as it travels in a desired state: shared, since the same Secret may go to
/// many nodes.
pub type Document = Arc<Map<String, Value>>;

/// Everything one node should run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DesiredState {
    /// The Applications bound to the node, as API objects.
    pub applications: Vec<Document>,
    /// Exactly the Secrets they reference, as API objects.
    pub secrets: Vec<Document>,
    /// The service-account tokens of those Applications, each to be written to its file.
    pub tokens: Vec<ProjectedToken>,
    /// A digest of the state's identity: equal signatures, equal states.
    pub signature: String,
}

/// A token for one file of an Application's identity directory. Its text never appears in
/// `Debug` output, so it cannot leak into a log.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct ProjectedToken {
    /// The Application's uid: the token is bound to it.
    pub uid: String,
    /// The file, a plain name within the identity directory.
    pub path: String,
    /// The signed token.
    pub token: String,
    /// When it expires, in seconds since the epoch.
    pub expires_at: i64,
}

impl std::fmt::Debug for ProjectedToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProjectedToken")
            .field("uid", &self.uid)
            .field("path", &self.path)
            .field("expires_at", &self.expires_at)
            .finish_non_exhaustive()
    }
}

/// A request for an Application's log, or for the node agent's own.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LogRequest {
    /// Numbers the stream within the session.
    pub id: u64,
    /// The Application's namespace.
    pub namespace: String,
    /// The Application's name.
    pub name: String,
    /// The Application's uid.
    pub uid: String,
    /// Keep following new output, across restarts.
    pub follow: bool,
    /// Only the last lines.
    pub tail_lines: Option<i64>,
    /// Only lines newer than this.
    pub since_seconds: Option<i64>,
    /// Prefix lines with their time.
    pub timestamps: bool,
    /// The previous run's log.
    pub previous: bool,
    /// Stop after this many bytes.
    pub limit_bytes: Option<i64>,
    /// Bytes the node may send before waiting for credit.
    pub window: u64,
    /// The agent's own log instead of an Application's (which is then unnamed).
    pub agent: bool,
}

/// Opens a stream to a running Application (`proto/node.proto`'s `StreamOpen` documents the
/// contract: credit in both directions, exactly one [`StreamEnd`]).
#[derive(Debug, Clone, PartialEq)]
pub struct StreamOpen {
    /// Numbers the stream within the session.
    pub id: u64,
    /// The Application's namespace.
    pub namespace: String,
    /// The Application's name.
    pub name: String,
    /// The Application's uid.
    pub uid: String,
    /// Bytes either side may send ahead of the other's credit.
    pub window: u64,
    /// What the stream is.
    pub kind: StreamKind,
}

/// What a stream connects to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StreamKind {
    /// A command run beside the process, as its user, in its cgroup, with its environment.
    Exec(ExecRequest),
    /// The process's own output from now on, and its stdin when it keeps one.
    Attach(Channels),
    /// One TCP connection to this port on the node's loopback address.
    PortForward(u16),
}

impl StreamKind {
    /// `exec`, `attach` or `portforward`: the subresource that opens it.
    pub fn word(&self) -> &'static str {
        match self {
            StreamKind::Exec(_) => "exec",
            StreamKind::Attach(_) => "attach",
            StreamKind::PortForward(_) => "portforward",
        }
    }
}

/// The standard streams a client asks for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Channels {
    /// It writes to the process's stdin.
    pub stdin: bool,
    /// It reads the process's stdout.
    pub stdout: bool,
    /// It reads the process's stderr (never with a terminal).
    pub stderr: bool,
}

/// A command to run beside an Application's process.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExecRequest {
    /// The program and its arguments.
    pub command: Vec<String>,
    /// Which standard streams the client uses.
    pub channels: Channels,
    /// Run it on a pseudo-terminal.
    pub tty: bool,
}

/// What the client sends into a stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamInput {
    /// The stream.
    pub id: u64,
    /// What it is.
    pub input: Input,
}

/// One piece of a stream's input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Input {
    /// Bytes for the process's stdin, or for the forwarded connection.
    Data(Vec<u8>),
    /// The client's stdin, or its side of the connection, ended.
    Close,
    /// The client's terminal has a new size.
    Resize(TerminalSize),
}

impl Input {
    /// What the input costs of the receiver's credit: its bytes, or 16 for a control.
    pub fn cost(&self) -> u64 {
        match self {
            Input::Data(data) => data.len() as u64,
            Input::Close | Input::Resize(_) => 16,
        }
    }
}

/// A terminal's size in characters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TerminalSize {
    /// Columns.
    pub width: u16,
    /// Rows.
    pub height: u16,
}

/// Which part of a stream output belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputChannel {
    /// The process's stdout, or a terminal's output.
    Stdout,
    /// The process's stderr.
    Stderr,
    /// A forwarded connection's bytes.
    Data,
}

/// Bytes a stream produced, within the controller's credit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamOutput {
    /// The stream.
    pub id: u64,
    /// Which output.
    pub channel: OutputChannel,
    /// The bytes.
    pub data: Vec<u8>,
    /// That output ended.
    pub eof: bool,
}

/// How a stream ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamEnd {
    /// The stream.
    pub id: u64,
    /// What ended it.
    pub outcome: StreamOutcome,
}

/// What ended a stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StreamOutcome {
    /// The exec'd command exited with this code (128 + the signal that killed it); an attach or
    /// a forwarded connection that ended cleanly ends with 0.
    Exited(i32),
    /// The stream could not be opened, or went on no longer, for this reason.
    Failed(String),
}

#[cfg(test)]
mod tests;
