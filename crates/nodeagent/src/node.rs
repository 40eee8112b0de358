//! The process runtime (`kayra-runtime`) as the session's [`Workloads`]: decodes the desired
//! state's documents, translates statuses, events, usage and logs into the session's messages,
//! and describes the host as the node's status.

use std::path::PathBuf;
use std::sync::Arc;

use futures_util::StreamExt;
use futures_util::stream::BoxStream;
use kayra_api::kinds::application::Application;
use kayra_api::kinds::secret::Secret;
use kayra_api::session::{
    ApplicationReport, DesiredState, Document, LogRequest, NodeEvent, NodeInfo, NodeReport, OutputChannel,
    Registration, StreamKind, StreamOpen, UsageSample,
};
use kayra_runtime::facts::NodeFacts;
use kayra_runtime::runtime::{self, AppReport, Desired, EventType, Runtime};
use serde::de::DeserializeOwned;
use tokio::sync::broadcast;

use crate::own_log;
use crate::session::Workloads;
use crate::streams::{Connected, Process};

/// How many status changes and events wait for a slow session before it must resynchronise.
const BACKLOG: usize = 1024;

/// The node: the runtime, the host it runs on, and what it asks of its Node.
pub(crate) struct Node {
    runtime: Arc<Runtime>,
    facts: NodeFacts,
    registration: Registration,
    statuses: broadcast::Sender<ApplicationReport>,
    events: broadcast::Sender<NodeEvent>,
    /// The agent's own log, served when the controller asks for it.
    own_log: PathBuf,
}

impl Node {
    pub(crate) fn new(runtime: Runtime, registration: Registration, own_log: PathBuf) -> Node {
        let runtime = Arc::new(runtime);
        let facts = Runtime::node_facts();
        let (statuses, _) = broadcast::channel(BACKLOG);
        let (events, _) = broadcast::channel(BACKLOG);
        let address = internal_ip(&facts);
        tokio::spawn(forward_statuses(runtime.clone(), statuses.clone(), address));
        tokio::spawn(forward_events(runtime.clone(), events.clone()));
        Node { runtime, facts, registration, statuses, events, own_log }
    }

    /// Stops supervising; what runs keeps running.
    pub(crate) async fn close(self) {
        if let Ok(runtime) = Arc::try_unwrap(self.runtime) {
            runtime.close().await;
        }
    }
}

fn internal_ip(facts: &NodeFacts) -> Option<String> {
    facts.addresses.iter().find(|a| a.type_ == "InternalIP").map(|a| a.address.clone())
}

/// The session's form of a runtime report; `None` for an Application the runtime forgot.
fn report(report: AppReport, address: Option<&str>) -> Option<ApplicationReport> {
    let mut status = report.status?;
    if status.address.is_none() && status.phase.as_deref() == Some("Running") {
        status.address = address.map(str::to_owned);
    }
    Some(ApplicationReport { namespace: report.namespace, name: report.name, uid: report.uid, status })
}

async fn forward_statuses(
    runtime: Arc<Runtime>,
    out: broadcast::Sender<ApplicationReport>,
    address: Option<String>,
) {
    let (_, mut changes) = runtime.subscribe();
    loop {
        match changes.recv().await {
            Ok(change) => {
                if let Some(change) = report(change, address.as_deref()) {
                    let _ = out.send(change);
                }
            }
            Err(broadcast::error::RecvError::Lagged(_)) => {
                let (known, fresh) = runtime.subscribe();
                changes = fresh;
                for change in known.into_iter().filter_map(|r| report(r, address.as_deref())) {
                    let _ = out.send(change);
                }
            }
            Err(broadcast::error::RecvError::Closed) => return,
        }
    }
}

async fn forward_events(runtime: Arc<Runtime>, out: broadcast::Sender<NodeEvent>) {
    let mut events = runtime.events();
    loop {
        match events.recv().await {
            Ok(event) => {
                // The agent's own log keeps what happened on the node, for whoever reads it there
                // (or through the controller's node log) when the Events have expired.
                let application = format!("{}/{}", event.namespace, event.name);
                match event.type_ {
                    EventType::Normal => {
                        tracing::info!(%application, reason = %event.reason, message = %event.message, "event");
                    }
                    EventType::Warning => {
                        tracing::warn!(%application, reason = %event.reason, message = %event.message, "event");
                    }
                }
                let _ = out.send(NodeEvent {
                    namespace: event.namespace,
                    name: event.name,
                    uid: event.uid,
                    reason: event.reason,
                    message: event.message,
                    type_: match event.type_ {
                        EventType::Normal => "Normal",
                        EventType::Warning => "Warning",
                    }
                    .into(),
                });
            }
            Err(broadcast::error::RecvError::Lagged(missed)) => tracing::warn!(missed, "events were dropped"),
            Err(broadcast::error::RecvError::Closed) => return,
        }
    }
}

fn decode<T: DeserializeOwned>(documents: &[Document], what: &str) -> Vec<T> {
    documents
        .iter()
        .filter_map(|document| match serde::Deserialize::deserialize(&**document) {
            Ok(object) => Some(object),
            Err(error) => {
                tracing::warn!(%error, "a desired {what} does not decode; it is left out");
                None
            }
        })
        .collect()
}

fn read_trimmed(path: &str) -> String {
    std::fs::read_to_string(path).map(|text| text.trim().to_owned()).unwrap_or_default()
}

#[async_trait::async_trait]
impl Workloads for Node {
    fn apply(&self, desired: &DesiredState) {
        self.runtime.apply(Desired {
            applications: decode::<Application>(&desired.applications, "application"),
            secrets: decode::<Secret>(&desired.secrets, "secret"),
            tokens: desired.tokens.clone(),
        });
    }

    fn statuses(&self) -> (Vec<ApplicationReport>, broadcast::Receiver<ApplicationReport>) {
        let changes = self.statuses.subscribe();
        let address = internal_ip(&self.facts);
        let (known, _) = self.runtime.subscribe();
        (known.into_iter().filter_map(|r| report(r, address.as_deref())).collect(), changes)
    }

    fn events(&self) -> broadcast::Receiver<NodeEvent> {
        self.events.subscribe()
    }

    fn usage(&self) -> Vec<UsageSample> {
        let host = kayra_runtime::facts::host_usage();
        let node = UsageSample {
            cpu_usage_usec: host.cpu_usec,
            memory_bytes: host.memory_bytes,
            memory_peak_bytes: 0,
            pids: host.pids,
            oom_kills: host.oom_kills,
            memory_total_bytes: host.memory_total_bytes,
            timestamp: host.at.to_string(),
            ..UsageSample::default()
        };
        self.runtime
            .usage()
            .into_iter()
            .map(|sample| UsageSample {
                namespace: sample.namespace,
                name: sample.name,
                uid: sample.uid,
                cpu_usage_usec: sample.cpu_usec,
                cpu_throttled_usec: sample.cpu_throttled_usec,
                memory_bytes: sample.memory_bytes,
                memory_peak_bytes: sample.memory_peak_bytes,
                pids: sample.pids,
                oom_kills: sample.oom_kills,
                memory_total_bytes: 0,
                timestamp: sample.at.to_string(),
            })
            .chain(std::iter::once(node))
            .collect()
    }

    fn node_report(&self) -> NodeReport {
        let facts = &self.facts;
        let resources: std::collections::BTreeMap<String, String> = [
            ("cpu".to_owned(), facts.cpu_cores.to_string()),
            ("memory".to_owned(), format!("{}Ki", facts.memory_bytes / 1024)),
            ("pods".to_owned(), "110".to_owned()),
        ]
        .into();
        NodeReport {
            capacity: resources.clone(),
            allocatable: resources,
            addresses: facts.addresses.iter().map(|a| (a.type_.clone(), a.address.clone())).collect(),
            info: NodeInfo {
                operating_system: facts.operating_system.clone(),
                architecture: facts.architecture.clone(),
                os_image: facts.os_image.clone(),
                kernel_version: facts.kernel_version.clone(),
                agent_version: format!("v{}", env!("CARGO_PKG_VERSION")),
                machine_id: read_trimmed("/etc/machine-id"),
                boot_id: read_trimmed("/proc/sys/kernel/random/boot_id"),
            },
            conditions: Vec::new(),
            registration: self.registration.clone(),
        }
    }

    async fn logs(
        &self,
        request: &LogRequest,
    ) -> Result<BoxStream<'static, Result<Vec<u8>, String>>, String> {
        if request.agent {
            return Ok(own_log_stream(&self.own_log, request));
        }
        let asked = runtime::LogRequest {
            namespace: request.namespace.clone(),
            name: request.name.clone(),
            tail_lines: request.tail_lines.and_then(|lines| usize::try_from(lines).ok()),
            since_seconds: request.since_seconds.and_then(|seconds| u64::try_from(seconds).ok()),
            since_time: None,
            timestamps: request.timestamps,
            previous: request.previous,
            follow: request.follow,
            limit_bytes: request.limit_bytes.and_then(|bytes| u64::try_from(bytes).ok()),
        };
        let stream = self.runtime.logs(asked).await.map_err(|error| error.to_string())?;
        Ok(stream.map(|chunk| chunk.map(|bytes| bytes.to_vec()).map_err(|error| error.to_string())).boxed())
    }

    async fn open_stream(&self, open: &StreamOpen) -> Result<Connected, String> {
        let known = self.runtime.subscribe().0.into_iter().any(|report| {
            report.uid == open.uid && report.namespace == open.namespace && report.name == open.name
        });
        if !known {
            return Err(format!("application {}/{} does not run on this node", open.namespace, open.name));
        }
        match &open.kind {
            StreamKind::Exec(exec) => {
                let command = runtime::ExecCommand {
                    uid: open.uid.clone(),
                    command: exec.command.clone(),
                    stdin: exec.channels.stdin,
                    stdout: exec.channels.stdout,
                    stderr: exec.channels.stderr && !exec.tty,
                    tty: exec.tty,
                };
                let mut execution = self.runtime.exec(command).await.map_err(|error| error.to_string())?;
                let output = std::mem::replace(&mut execution.output, futures_util::stream::empty().boxed());
                let terminal = execution.terminal.take();
                Ok(Connected {
                    input: execution.stdin.take(),
                    output: outputs(output),
                    resize: terminal.map(|terminal| {
                        Box::new(move |size: kayra_api::session::TerminalSize| {
                            terminal.resize(size.width, size.height)
                        })
                            as Box<dyn Fn(kayra_api::session::TerminalSize) + Send + Sync>
                    }),
                    process: Some(Box::new(execution)),
                })
            }
            StreamKind::Attach(channels) => {
                let attachment = self
                    .runtime
                    .attach(&open.uid, channels.stdin)
                    .await
                    .map_err(|error| error.to_string())?;
                let (stdout, stderr) = (channels.stdout, channels.stderr);
                let output = outputs(attachment.output).filter(move |chunk| {
                    let wanted = match chunk {
                        Ok((OutputChannel::Stdout, _)) => stdout,
                        Ok((OutputChannel::Stderr, _)) => stderr,
                        _ => true,
                    };
                    std::future::ready(wanted)
                });
                Ok(Connected { input: attachment.stdin, output: output.boxed(), resize: None, process: None })
            }
            StreamKind::PortForward(port) => {
                let connection =
                    self.runtime.forward(&open.uid, *port).await.map_err(|error| error.to_string())?;
                let (read, write) = connection.into_split();
                let output = futures_util::stream::unfold(read, |mut read| async move {
                    use tokio::io::AsyncReadExt;
                    let mut buffer = vec![0; 32 * 1024];
                    match read.read(&mut buffer).await {
                        Ok(0) => None,
                        Ok(count) => {
                            buffer.truncate(count);
                            Some((Ok((OutputChannel::Data, buffer)), read))
                        }
                        Err(error) => Some((Err(error.to_string()), read)),
                    }
                });
                Ok(Connected {
                    input: Some(Box::pin(write)),
                    output: output.boxed(),
                    resize: None,
                    process: None,
                })
            }
        }
    }
}

/// A process's output as the session relays it.
fn outputs(
    output: runtime::OutputStream,
) -> futures_util::stream::BoxStream<'static, Result<(OutputChannel, Vec<u8>), String>> {
    output
        .map(|chunk| match chunk {
            Ok((runtime::Output::Stdout, bytes)) => Ok((OutputChannel::Stdout, bytes.to_vec())),
            Ok((runtime::Output::Stderr, bytes)) => Ok((OutputChannel::Stderr, bytes.to_vec())),
            Err(error) => Err(error.to_string()),
        })
        .boxed()
}

#[async_trait::async_trait]
impl Process for runtime::Execution {
    async fn wait(&mut self) -> Result<i32, String> {
        runtime::Execution::wait(self).await.map_err(|error| error.to_string())
    }

    fn hang_up(&mut self, grace: std::time::Duration) {
        runtime::Execution::hang_up(self, grace);
    }
}

/// The agent's own log, as `request` asks: from its lines' own times for `since`.
fn own_log_stream(
    path: &std::path::Path,
    request: &LogRequest,
) -> BoxStream<'static, Result<Vec<u8>, String>> {
    let since = request.since_seconds.and_then(|seconds| {
        jiff::Timestamp::now().checked_sub(jiff::SignedDuration::from_secs(seconds.max(0))).ok()
    });
    let reading = own_log::Reading {
        tail_lines: request.tail_lines.and_then(|lines| usize::try_from(lines).ok()),
        since,
        follow: request.follow,
        limit_bytes: request.limit_bytes.and_then(|bytes| u64::try_from(bytes).ok()),
    };
    let chunks = own_log::read(path, reading);
    futures_util::stream::unfold(chunks, |mut chunks| async move { Some((Ok(chunks.recv().await?), chunks)) })
        .boxed()
}
