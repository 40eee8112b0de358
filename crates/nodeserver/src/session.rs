//! One node's session: what it is sent (the latest desired state, log and stream requests) and what it
//! reports, confined to the node its identity names.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use kayra_api::session::{ControllerMessage, DesiredState, NodeEvent, NodeMessage, UsageSample};
use kayra_application::events::{Involved, Severity};
use kayra_application::usage::Samples;
use kayra_authn::Identity;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use crate::lease::Renewed;
use crate::logs::Sink;
use crate::status::Written;
use crate::streams::Sink as StreamSink;
use crate::{Inner, NodeServerError};

/// Where log traffic for the node waits. Messages wait boxed: a channel allocates its slots 32
/// at a time, and 32 unboxed messages would be ~4.5 KiB held by every idle session.
pub(crate) struct Control(mpsc::UnboundedSender<Box<ControllerMessage>>);

impl Control {
    /// Queues `message` for the node; an error when the session is gone.
    pub(crate) fn send(&self, message: ControllerMessage) -> Result<(), ()> {
        self.0.send(Box::new(message)).map_err(|_| ())
    }
}

/// What the server keeps of a live session.
pub(crate) struct Live {
    pub(crate) node: String,
    pub(crate) identity: Identity,
    epoch: u64,
    last_seen: AtomicU64,
    ended: CancellationToken,
    desired: watch::Sender<Option<Arc<DesiredState>>>,
    pub(crate) control: Control,
    pushed: Mutex<Option<(String, Instant)>>,
    reported: AtomicBool,
    pub(crate) logs: Mutex<HashMap<u64, Sink>>,
    pub(crate) next_log: AtomicU64,
    /// The exec, attach and port-forward streams in flight ([`crate::streams`]).
    pub(crate) streams: Mutex<HashMap<u64, StreamSink>>,
    pub(crate) next_stream: AtomicU64,
    pub(crate) written: Mutex<Option<Written>>,
    /// The node's Lease as this session last renewed it ([`crate::lease`]).
    pub(crate) lease: Mutex<Option<Renewed>>,
    /// Whether the node's registration is known to be recorded ([`crate::registration`]).
    pub(crate) recorded: AtomicBool,
    /// The revision of this replica's claim of the node ([`crate::holder`]); a record naming
    /// another replica at a later revision ends the session. `u64::MAX` until claimed.
    pub(crate) claimed: AtomicU64,
    usage: Mutex<HashMap<(String, String), Samples>>,
}

impl Live {
    /// When the node last said anything, on the server's clock.
    pub(crate) fn last_seen(&self) -> u64 {
        self.last_seen.load(Ordering::Relaxed)
    }

    /// Ends the session (taken over by a newer one).
    pub(crate) fn end(&self) {
        self.ended.cancel();
    }

    /// Whether the node has reported its status in this session: only then is it pushed to.
    pub(crate) fn reported(&self) -> bool {
        self.reported.load(Ordering::Acquire)
    }

    /// Sends `desired` unless this session has it already and was sent it within `resync`.
    pub(crate) fn push(&self, desired: DesiredState, resync: std::time::Duration) -> bool {
        let mut pushed = self.pushed.lock().expect("the push record's lock is never held across a panic");
        if let Some((signature, at)) = pushed.as_ref()
            && *signature == desired.signature
            && at.elapsed() < resync
        {
            return false;
        }
        *pushed = Some((desired.signature.clone(), Instant::now()));
        self.desired.send_replace(Some(Arc::new(desired)));
        true
    }

    pub(crate) fn logs(&self) -> MutexGuard<'_, HashMap<u64, Sink>> {
        self.logs.lock().expect("the log table's lock is never held across a panic")
    }

    pub(crate) fn streams(&self) -> MutexGuard<'_, HashMap<u64, StreamSink>> {
        self.streams.lock().expect("the stream table's lock is never held across a panic")
    }

    /// The last two usage samples of each Application (and of the node, under empty names).
    pub(crate) fn usage(&self) -> MutexGuard<'_, HashMap<(String, String), Samples>> {
        self.usage.lock().expect("the usage table's lock is never held across a panic")
    }
}

/// A node's session, as the transport holds it: feed it what the node sends with
/// [`Session::receive`], send the node what [`Session::next`] yields. Dropping it closes the
/// session and fails its log streams.
pub struct Session {
    live: Arc<Live>,
    inner: Arc<Inner>,
    desired: watch::Receiver<Option<Arc<DesiredState>>>,
    control: mpsc::UnboundedReceiver<Box<ControllerMessage>>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session").field("node", &self.live.node).finish_non_exhaustive()
    }
}

pub(crate) fn open(
    inner: Arc<Inner>,
    node: String,
    identity: Identity,
    epoch: u64,
    now: u64,
) -> (Arc<Live>, Session) {
    let (desired_tx, desired_rx) = watch::channel(None);
    let (control_tx, control_rx) = mpsc::unbounded_channel();
    let live = Arc::new(Live {
        node,
        identity,
        epoch,
        last_seen: AtomicU64::new(now),
        ended: CancellationToken::new(),
        desired: desired_tx,
        control: Control(control_tx),
        pushed: Mutex::new(None),
        reported: AtomicBool::new(false),
        logs: Mutex::default(),
        next_log: AtomicU64::new(1),
        streams: Mutex::default(),
        next_stream: AtomicU64::new(1),
        written: Mutex::new(None),
        lease: Mutex::new(None),
        recorded: AtomicBool::new(false),
        claimed: AtomicU64::new(u64::MAX),
        usage: Mutex::default(),
    });
    let session = Session { live: live.clone(), inner, desired: desired_rx, control: control_rx };
    (live, session)
}

impl Session {
    /// The node this session belongs to.
    pub fn node(&self) -> &str {
        &self.live.node
    }

    /// The next message for the node; `None` once the session has been taken over. Log
    /// traffic goes first; a desired state not yet sent is replaced by a newer one.
    pub async fn next(&mut self) -> Option<ControllerMessage> {
        loop {
            tokio::select! {
                biased;
                () = self.live.ended.cancelled() => return None,
                message = self.control.recv() => return message.map(|message| *message),
                changed = self.desired.changed() => {
                    changed.ok()?;
                    let desired = self.desired.borrow_and_update().clone();
                    if let Some(desired) = desired {
                        return Some(ControllerMessage::Desired((*desired).clone()));
                    }
                }
            }
        }
    }

    /// Handles one message from the node. An error is about that message alone (logged by
    /// the caller); the session goes on.
    pub async fn receive(&self, message: NodeMessage) -> Result<(), NodeServerError> {
        let inner = &self.inner;
        self.live.last_seen.store(inner.now_ms(), Ordering::Relaxed);
        match message {
            NodeMessage::Status(report) => {
                inner.metrics.heartbeats.inc();
                crate::status::write_node(inner, &self.live, report).await?;
                if !self.live.reported.swap(true, Ordering::AcqRel) {
                    inner.trigger.add(&self.live.node);
                }
                Ok(())
            }
            NodeMessage::Application(report) => {
                crate::status::write_application(inner, &self.live, report).await
            }
            NodeMessage::LogChunk(chunk) => {
                crate::logs::deliver(&self.live, chunk);
                Ok(())
            }
            NodeMessage::Usage(sample) => {
                self.usage_of(sample);
                Ok(())
            }
            NodeMessage::Event(event) => self.record(event).await,
            NodeMessage::StreamOutput(output) => {
                crate::streams::deliver(&self.live, output);
                Ok(())
            }
            NodeMessage::StreamCredit { id, bytes } => {
                crate::streams::credit(&self.live, id, bytes);
                Ok(())
            }
            NodeMessage::StreamEnd(end) => {
                crate::streams::end(&self.live, end);
                Ok(())
            }
        }
    }

    fn usage_of(&self, sample: UsageSample) {
        if !sample.name.is_empty() && !self.bound_here(&sample.namespace, &sample.name, &sample.uid) {
            return;
        }
        let key = (sample.namespace.clone(), sample.name.clone());
        let whole_node = sample.name.is_empty();
        let mut usage = self.live.usage();
        match usage.get_mut(&key) {
            Some(samples) => samples.follow(sample),
            None => {
                let samples = Samples { node: self.live.node.clone(), latest: sample, previous: None };
                usage.insert(key, samples);
            }
        }
        // The node's own sample comes once a round: what is no longer bound here goes then.
        if whole_node {
            usage.retain(|(namespace, name), samples| {
                name.is_empty() || self.bound_here(namespace, name, &samples.latest.uid)
            });
        }
    }

    /// Whether Application `namespace/name` with `uid` is bound to this session's node.
    fn bound_here(&self, namespace: &str, name: &str, uid: &str) -> bool {
        self.inner.cache.application(namespace, name).is_some_and(|object| {
            kayra_api::kinds::application::bound_node(&object) == Some(self.live.node.as_str())
                && kayra_registry::meta_str(&object, "uid") == uid
        })
    }

    /// Records what happened to one of the node's Applications as an Event, written as the node.
    async fn record(&self, event: NodeEvent) -> Result<(), NodeServerError> {
        if !self.bound_here(&event.namespace, &event.name, &event.uid) {
            return Err(NodeServerError::EventNotBoundHere {
                namespace: event.namespace,
                name: event.name,
                node: self.live.node.clone(),
            });
        }
        let recorder = self.inner.recorder.on_node(
            self.inner.client_for(self.live.identity.clone()),
            "kayra-agent",
            &self.live.node,
        );
        let involved = Involved {
            api_version: format!("{}/{}", self.inner.applications.group, self.inner.applications.version),
            kind: "Application".into(),
            namespace: event.namespace,
            name: event.name,
            uid: event.uid,
        };
        let severity = Severity::parse(&event.type_).unwrap_or(Severity::Normal);
        let what = format!("recording an event about {}/{}", involved.namespace, involved.name);
        recorder
            .record(&involved, severity, &event.reason, &event.message)
            .await
            .map_err(NodeServerError::registry(what))
    }

    /// The latest usage samples this node reported.
    pub fn usage(&self) -> Vec<UsageSample> {
        self.live.usage().values().map(|samples| samples.latest.clone()).collect()
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        let mut sessions = self.inner.sessions();
        if sessions.get(&self.live.node).is_some_and(|live| live.epoch == self.live.epoch) {
            sessions.remove(&self.live.node);
            self.inner.tokens.forget(&self.live.node);
        }
        drop(sessions);
        crate::logs::fail_all(&self.live, "node disconnected");
        crate::streams::fail_all(&self.live, "the node's session with the controller ended");
    }
}
