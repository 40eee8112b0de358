//! Placement of Applications that name no node, shaped as kube-scheduler.
//!
//! [`framework`] holds the extension points and [`plugins`] one module per plugin; the
//! [`Scheduler`] runs them on the loop runtime over a [`snapshot::Snapshot`] of Nodes and placed
//! Applications that list-and-watch feeds keep current (no list per placement), in the order of
//! its [`queue`]. A decision is reserved by the reserve plugins (by default in the snapshot)
//! and bound by the bind plugins: by default one write of the Application's `binding`
//! subresource through the application layer (so admission sees it), which sets
//! `spec.placement.nodeName`, the scheduled-by annotation and `Scheduled=True` together, as
//! kube-scheduler's `pods/binding` does; binds run concurrently while the next decisions are
//! made. A bound Application gets a `Scheduled` Event; one that fits nowhere gets
//! `Scheduled=False` with kube-scheduler's message and a `FailedScheduling` Event when that
//! message changes. Events and explanations are written on the next 20 ms tick, together
//! with the others due in the same period, so they share the store's flushes; the `Scheduled`
//! Events of one tick reach the store in one call ([`Recorder::record_all`]), and a
//! `FailedScheduling` Event is written with its explanation. The
//! [`taint_manager`] moves scheduler-placed Applications off nodes with `NoExecute` taints
//! they do not tolerate.
//!
//! Placement is decided once (Kubernetes' `IgnoredDuringExecution`): a bound Application stays
//! where it is when labels or its own rules change later, and a pin its author wrote (a node
//! without the annotation) is never changed.

mod error;
pub mod framework;
pub mod metrics;
pub mod model;
pub mod plugins;
pub mod queue;
pub mod snapshot;
pub mod taint_manager;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use kayra_api::kinds::ConditionType;
use kayra_application::client::Client;
use kayra_application::events::{Involved, Occurrence, Recorder, Severity};
use kayra_application::feed::{FollowFeed, Follower};
use kayra_loop::runtime::Loop;
use kayra_loop::source::{Item, Sink, Source};
use kayra_loop::{Action, Key, ReconcileError, Reconciler};
use kayra_registry::{Object, RegistryError, Resource, WatchEvent, meta_str};
use serde_json::{Value, json};
use tokio::sync::{Notify, Semaphore};
use tokio_util::sync::CancellationToken;

pub use error::SchedulerError;
pub use framework::{Framework, Policy};
use model::{App, AppInfo, NodeInfo};
use queue::{Entry, Queue};
use snapshot::Snapshot;

/// The loop key that runs the scheduling queue.
const SCHEDULE: &str = "schedule";
/// The prefix of the loop keys that run the taint manager for one node.
const TAINTS: &str = "taints/";
/// How many Applications one pass decides before their binds are started.
const BATCH: usize = 256;
/// How many binds are written at once.
const BINDS: usize = 32;
/// How many explanations (conditions and Events after a decision) are written at once: they
/// follow the binds, which go first.
const EXPLANATIONS: usize = 8;
/// Explanations of Applications that fit nowhere start on the next tick of this period, so
/// those decided close together are written together and share the store's flushes (group
/// commit) instead of paying one flush each while the API is busy creating more.
const EXPLAIN_TICK: Duration = Duration::from_millis(20);
/// How many times an explanation is written before the Application is tried again instead:
/// each attempt after the first follows a write that met a newer version.
const EXPLAIN_ATTEMPTS: usize = 3;
/// How many Events one writer records at once: those due on one tick beyond it are taken by
/// the tick's other writers, so no one store call holds many.
const EVENTS_AT_ONCE: usize = 64;

/// Places Applications that name no node.
#[derive(Clone)]
pub struct Scheduler {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Scheduler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scheduler").field("framework", &self.inner.framework).finish_non_exhaustive()
    }
}

struct Inner {
    client: Client,
    applications: Resource,
    nodes: Resource,
    domain: String,
    framework: Framework,
    recorder: Recorder,
    state: Mutex<State>,
    wake: Notify,
    binds: Arc<Semaphore>,
    explanations: Arc<Semaphore>,
    /// The Events due on the next tick, recorded together.
    due: Mutex<Vec<Occurrence>>,
    /// Where the explanation ticks are counted from.
    epoch: tokio::time::Instant,
    metrics: metrics::SchedulerMetrics,
}

struct State {
    snapshot: Snapshot,
    queue: Queue,
    /// Which collections were listed at least once (applications, nodes).
    synced: [bool; 2],
    /// The resourceVersion of every Application last recorded, so that a relist decodes only
    /// what changed.
    versions: HashMap<String, String>,
    /// When each scheduler-placed Application (`node`, `id`) was first found tolerating its
    /// node's `NoExecute` taints for a while only: its `tolerationSeconds` count from then.
    tolerating_since: HashMap<(String, String), Instant>,
}

impl AsMut<Snapshot> for State {
    fn as_mut(&mut self) -> &mut Snapshot {
        &mut self.snapshot
    }
}

impl State {
    /// The taint manager's key for the node a scheduler-placed Application is bound to, when
    /// that node has `NoExecute` taints whose verdict on the Application is not known yet: an
    /// Application that lands on such a node is looked at when it lands, not only when the
    /// node's taints change.
    fn landed_on_no_execute(&self, id: &str) -> Option<Key> {
        let (node, app) = self.snapshot.placed(id)?;
        let tainted = self
            .snapshot
            .nodes()
            .get(node)
            .is_some_and(|info| info.taints.iter().any(|t| t.effect == "NoExecute"));
        let known = self.tolerating_since.contains_key(&(node.clone(), id.to_owned()));
        (app.scheduler_placed && tainted && !known).then(|| Key::new(format!("{TAINTS}{node}")))
    }
}

impl Scheduler {
    /// The scheduler, acting as `client`, scoring resources by `policy`. Nodes are trusted on
    /// their `Ready` condition alone until [`Framework::heartbeat_timeout`] says otherwise.
    pub fn new(client: Client, policy: Policy) -> Result<Scheduler, SchedulerError> {
        Scheduler::with_framework(client, Framework::new(policy, None))
    }

    /// The scheduler running `framework`, with `DefaultBinder` writing as `client` after the
    /// framework's own bind plugins.
    pub fn with_framework(client: Client, framework: Framework) -> Result<Scheduler, SchedulerError> {
        let framework = framework.with_bind(plugins::default_binder::DefaultBinder::new(client.clone()));
        let domain = client.layer().scheme().domain().to_owned();
        let served = |source| SchedulerError::Registry {
            what: "finding the resources the scheduler places".to_owned(),
            source: Box::new(source),
        };
        let applications = client.resource(&format!("fleet.{domain}"), "applications").map_err(served)?;
        let nodes = client.resource("", "nodes").map_err(served)?;
        let recorder = Recorder::new(client.clone(), "kayra-scheduler");
        let queue = Queue::new(framework.queue_sort());
        Ok(Scheduler {
            inner: Arc::new(Inner {
                client,
                applications,
                nodes,
                domain,
                framework,
                recorder,
                state: Mutex::new(State {
                    snapshot: Snapshot::default(),
                    queue,
                    synced: [false; 2],
                    versions: HashMap::new(),
                    tolerating_since: HashMap::new(),
                }),
                wake: Notify::new(),
                binds: Arc::new(Semaphore::new(BINDS)),
                explanations: Arc::new(Semaphore::new(EXPLANATIONS)),
                due: Mutex::default(),
                epoch: tokio::time::Instant::now(),
                metrics: metrics::SchedulerMetrics::default(),
            }),
        })
    }

    /// The same scheduler, counting its attempts in `metrics`.
    pub fn with_metrics(mut self, metrics: metrics::SchedulerMetrics) -> Scheduler {
        Arc::get_mut(&mut self.inner)
            .expect("a scheduler is given its metrics before it is shared")
            .metrics = metrics;
        self
    }

    /// The loop: the queue's key, and one key per node for the taint manager.
    pub fn into_loop(self) -> Loop {
        let inner = &self.inner;
        let follow = |resource: &Resource, collection| {
            let follower = SchedulerFollower { scheduler: self.clone(), collection };
            FollowFeed::source(inner.client.clone(), resource.clone(), Arc::new(follower))
        };
        let applications = follow(&inner.applications, Collection::Applications);
        let nodes = follow(&inner.nodes, Collection::Nodes);
        let wake = Wake(self.clone());
        Loop::new("scheduler", self)
            .source(applications)
            .source(nodes)
            .source(wake)
            .concurrency(2)
            .resync(Duration::from_secs(60))
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.inner.state.lock().expect("the scheduler's lock is never held across a panic")
    }

    /// Records an Application; answers the loop keys it concerns.
    fn put_app(&self, object: Arc<Object>) -> Vec<Key> {
        let id = id_of(&object);
        let version = meta_str(&object, "resourceVersion");
        {
            let state = self.state();
            if state.versions.get(&id).is_some_and(|known| known == version) {
                // Recorded already (by its own bind): the taint manager may still have to
                // look at the node it landed on.
                return state.landed_on_no_execute(&id).into_iter().collect();
            }
        }
        let Some(app) = AppInfo::from_object(&object, &self.inner.domain) else { return Vec::new() };
        let app = Arc::new(app);
        let mut state = self.state();
        state.versions.insert(id, app.resource_version.clone());
        let wants = app.wants_placement();
        let freed = if app.node.is_none() && state.snapshot.is_reserved(&app.id) {
            false
        } else {
            state.snapshot.put_app(&app)
        };
        state.queue.upsert(app.clone(), object);
        if freed {
            state.queue.move_unschedulable();
        }
        let mut keys = Vec::new();
        if wants || freed {
            keys.push(Key::new(SCHEDULE));
        }
        keys.extend(state.landed_on_no_execute(&app.id));
        keys
    }

    fn remove_app(&self, object: &Object) -> Vec<Key> {
        let id = format!("{}/{}", meta_str(object, "namespace"), meta_str(object, "name"));
        let mut state = self.state();
        state.queue.remove(&id);
        state.versions.remove(&id);
        let freed = !state.snapshot.is_reserved(&id) && state.snapshot.remove_app(&id);
        if freed {
            state.queue.move_unschedulable();
            vec![Key::new(SCHEDULE)]
        } else {
            Vec::new()
        }
    }

    fn put_node(&self, object: &Object) -> Vec<Key> {
        let Some(node) = NodeInfo::from_object(object) else { return Vec::new() };
        let name = node.name.clone();
        let no_execute = node.taints.iter().any(|t| t.effect == "NoExecute");
        let mut state = self.state();
        if !state.snapshot.put_node(node, self.inner.framework.heartbeat_timeout()) {
            return Vec::new();
        }
        state.queue.move_unschedulable();
        let mut keys = vec![Key::new(SCHEDULE)];
        if no_execute || state.tolerating_since.keys().any(|(n, _)| *n == name) {
            keys.push(Key::new(format!("{TAINTS}{name}")));
        }
        keys
    }

    /// One pass of the queue: decide a batch under the lock, then start its binds.
    async fn schedule(&self) -> Result<Action, ReconcileError> {
        loop {
            let decisions = {
                let mut state = self.state();
                if state.synced != [true, true] {
                    return Ok(Action::AwaitChange);
                }
                let framework = &self.inner.framework;
                let (batch, next) = state.queue.pop(Instant::now(), BATCH);
                if batch.is_empty() {
                    return Ok(match next {
                        Some(at) => Action::RequeueAfter(at.saturating_duration_since(Instant::now())),
                        None => Action::AwaitChange,
                    });
                }
                let now = jiff::Timestamp::now();
                let mut decisions = Vec::with_capacity(batch.len());
                for entry in batch {
                    let started = Instant::now();
                    // A reserve plugin's refusal explains itself in its own words.
                    let decision = match framework.schedule(&entry.app, &state.snapshot, Some(now)) {
                        Ok(node) => framework
                            .reserve(&entry.app, &node, &mut state.snapshot)
                            .map(|()| node)
                            .map_err(|refused| refused.to_string()),
                        Err(unschedulable) => Err(unschedulable.message()),
                    };
                    let result = if decision.is_ok() { "scheduled" } else { "unschedulable" };
                    self.inner.metrics.attempt(result, started.elapsed().as_secs_f64());
                    if decision.is_err() {
                        state.queue.failed(&entry.app.id, Instant::now());
                    }
                    decisions.push((entry, decision));
                }
                self.inner.metrics.pending.set(i64::try_from(state.queue.len()).unwrap_or(i64::MAX));
                decisions
            };
            for (entry, decision) in decisions {
                let permit = self.inner.binds.clone().acquire_owned().await?;
                let scheduler = self.clone();
                tokio::spawn(async move {
                    match decision {
                        Ok(node) => {
                            let bound = scheduler.bind(entry, &node).await;
                            drop(permit);
                            if let Some(bound) = bound {
                                scheduler.scheduled(&bound, &node).await;
                            }
                        }
                        Err(message) => {
                            drop(permit);
                            scheduler.explain(entry, &message).await;
                        }
                    }
                });
            }
        }
    }

    /// Binds a reserved decision through the framework's bind plugins; answers the bound
    /// object. A failed bind has undone the reservation; the Application is tried again.
    async fn bind(&self, entry: Entry, node: &str) -> Option<Arc<Object>> {
        let app = &entry.app;
        let bound = match self.inner.framework.bind(app, node, &self.inner.state).await {
            Ok(bound) => bound,
            Err(error) => {
                let mut state = self.state();
                match error {
                    // A newer version is on its way through the watch, or the Application is gone.
                    SchedulerError::Bind { source, .. }
                        if matches!(
                            *source,
                            RegistryError::Conflict { .. } | RegistryError::NotFound { .. }
                        ) =>
                    {
                        state.queue.retry(&app.id)
                    }
                    error => {
                        self.inner
                            .metrics
                            .attempts
                            .get_or_create(&metrics::ResultLabels { result: "error" })
                            .inc();
                        tracing::warn!(application = %app.id, %node, %error, "binding failed; backing off");
                        state.queue.failed(&app.id, Instant::now());
                    }
                }
                drop(state);
                self.inner.wake.notify_one();
                return None;
            }
        };
        let bound = Arc::new(bound);
        {
            let mut state = self.state();
            state.snapshot.finish_binding(&app.id);
            if let Some(info) = AppInfo::from_object(&bound, &self.inner.domain) {
                let info = Arc::new(info);
                state.versions.insert(info.id.clone(), info.resource_version.clone());
                state.snapshot.put_app(&info);
                state.queue.upsert(info, bound.clone());
            }
        }
        Some(bound)
    }

    /// Records a bind (whose write set `Scheduled=True`): the Event `Scheduled`, written on the
    /// next tick with the others bound in the same period.
    async fn scheduled(&self, bound: &Arc<Object>, node: &str) {
        let message = format!("Successfully assigned {} to {node}", id_of(bound));
        self.record_on_tick(self.occurrence(bound, Severity::Normal, "Scheduled", message)).await;
    }

    /// Records `occurrence` on the next tick, together with the other Events due then
    /// ([`Recorder::record_all`], at most [`EVENTS_AT_ONCE`] in one): each Event's own writer
    /// wakes then, and takes whatever is due, so every one is written by some writer of that
    /// tick.
    async fn record_on_tick(&self, occurrence: Occurrence) {
        self.due().push(occurrence);
        tokio::time::sleep_until(self.next_tick()).await;
        let due: Vec<Occurrence> = {
            let mut due = self.due();
            let taken = due.len().min(EVENTS_AT_ONCE);
            due.drain(..taken).collect()
        };
        if due.is_empty() {
            return;
        }
        for answer in self.inner.recorder.record_all(due).await {
            if let Err(error) = answer {
                tracing::debug!(%error, "a scheduler event was not recorded");
            }
        }
    }

    fn due(&self) -> MutexGuard<'_, Vec<Occurrence>> {
        self.inner.due.lock().expect("the due events' lock is never held across a panic")
    }

    fn occurrence(
        &self,
        application: &Object,
        severity: Severity,
        reason: &str,
        message: String,
    ) -> Occurrence {
        Occurrence { involved: self.involved(application), severity, reason: reason.to_owned(), message }
    }

    /// Explains why an Application fits nowhere: condition and Event, when the message changed.
    /// A write that meets a newer version reads the Application again and explains that one
    /// while it still waits for a node on the same spec; when that keeps failing, the
    /// Application is tried again at once (its backoff still holds), since an unschedulable one
    /// would otherwise wait for a relevant change before it is explained.
    async fn explain(&self, entry: Entry, message: &str) {
        if entry.app.scheduled_message.as_deref() == Some(message) {
            return;
        }
        tokio::time::sleep_until(self.next_tick()).await;
        let Ok(_permit) = self.inner.explanations.acquire().await else { return };
        let involved = self.involved(&entry.object);
        let mut object = entry.object.clone();
        for _ in 0..EXPLAIN_ATTEMPTS {
            match self.unschedulable((*object).clone(), message).await {
                // Its Event is written here, under the explanation's permit: after a burst
                // of Applications that fit nowhere, the explanations' pace is what keeps the
                // API's own writes quick meanwhile.
                Ok(()) => {
                    if let Err(error) = self
                        .inner
                        .recorder
                        .record(&involved, Severity::Warning, "FailedScheduling", message)
                        .await
                    {
                        tracing::debug!(%error, "the FailedScheduling event was not recorded");
                    }
                    return;
                }
                Err(RegistryError::Conflict { .. }) => {}
                Err(error) => {
                    tracing::debug!(application = %entry.app.id, %error, "the Scheduled condition was not written");
                    break;
                }
            }
            let current = match self
                .inner
                .client
                .get(&self.inner.applications, Some(&entry.app.namespace), &entry.app.name)
                .await
            {
                Ok(current) => current,
                Err(RegistryError::NotFound { .. }) => return,
                Err(error) => {
                    tracing::debug!(application = %entry.app.id, %error, "the Application was not read again");
                    break;
                }
            };
            let Some(info) = AppInfo::from_object(&current, &self.inner.domain) else { return };
            let same_spec = info.uid == entry.app.uid && info.generation == entry.app.generation;
            if !info.wants_placement() || !same_spec || info.scheduled_message.as_deref() == Some(message) {
                return;
            }
            object = Arc::new(current);
        }
        self.state().queue.activate(&entry.app.id);
        self.inner.wake.notify_one();
    }

    /// The next [`EXPLAIN_TICK`] boundary: the same instant for every explanation due in one
    /// period, so they run together.
    fn next_tick(&self) -> tokio::time::Instant {
        let tick = EXPLAIN_TICK.as_nanos();
        let next = (self.inner.epoch.elapsed().as_nanos() / tick + 1) * tick;
        self.inner.epoch + Duration::from_nanos(u64::try_from(next).unwrap_or(u64::MAX))
    }

    fn involved(&self, application: &Object) -> Involved {
        Involved {
            api_version: format!("{}/{}", self.inner.applications.group, self.inner.applications.version),
            kind: "Application".into(),
            namespace: meta_str(application, "namespace").into(),
            name: meta_str(application, "name").into(),
            uid: meta_str(application, "uid").into(),
        }
    }

    /// Sets condition `Scheduled=False` with reason `Unschedulable`, the message as the status's
    /// message, and phase `Pending` on an Application with none. (Its binding sets
    /// `Scheduled=True`.)
    async fn unschedulable(&self, mut application: Object, message: &str) -> Result<(), RegistryError> {
        let (status, reason) = ("False", "Unschedulable");
        let (namespace, name) =
            (meta_str(&application, "namespace").to_owned(), meta_str(&application, "name").to_owned());
        let mut current = application.get("status").cloned().unwrap_or_else(|| json!({}));
        let conditions = current.get("conditions").and_then(Value::as_array).cloned().unwrap_or_default();
        let scheduled = ConditionType::Scheduled.as_str();
        let existing = conditions.iter().find(|c| c.get("type").and_then(Value::as_str) == Some(scheduled));
        let now = jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string();
        let since = match existing {
            Some(c) if c["status"] == status => c["lastTransitionTime"].clone(),
            _ => json!(now),
        };
        let condition = json!({"type": scheduled, "status": status, "reason": reason, "message": message, "lastTransitionTime": since});
        let mut conditions: Vec<Value> = conditions
            .into_iter()
            .filter(|c| c.get("type").and_then(Value::as_str) != Some(scheduled))
            .collect();
        conditions.insert(0, condition);
        current["conditions"] = json!(conditions);
        if current.get("phase").is_none() {
            current["phase"] = json!("Pending");
        }
        current["message"] = json!(message);
        application.insert("status".into(), current);
        self.inner
            .client
            .update_status(&self.inner.applications, Some(&namespace), &name, &application)
            .await?;
        Ok(())
    }

    /// The taint manager's pass over one node.
    async fn taints(&self, node: &str) -> Result<Action, ReconcileError> {
        let now = Instant::now();
        let verdict = {
            let mut state = self.state();
            let State { snapshot, tolerating_since, .. } = &mut *state;
            let Some(info) = snapshot.nodes().get(node) else {
                tolerating_since.retain(|(n, _), _| n != node);
                return Ok(Action::AwaitChange);
            };
            let apps: Vec<App> = snapshot
                .usage(node)
                .into_iter()
                .flat_map(|usage| usage.apps.iter())
                .filter_map(|id| snapshot.placed(id).map(|(_, app)| app.clone()))
                .collect();
            let since =
                |app: &App| tolerating_since.get(&(node.to_owned(), app.id.clone())).copied().unwrap_or(now);
            let verdict = taint_manager::verdict(info, &apps, since, now);
            let bounded: Vec<(String, String)> =
                verdict.bounded.iter().map(|(app, _)| (node.to_owned(), app.id.clone())).collect();
            tolerating_since.retain(|key, _| key.0 != node || bounded.contains(key));
            for key in bounded {
                tolerating_since.entry(key).or_insert(now);
            }
            verdict
        };
        for (app, taint) in verdict.evict {
            match self.inner.client.unbind(&app.namespace, &app.name, &app.resource_version).await {
                Ok(moved) => {
                    let message = format!(
                        "Unbinding {} from node {node}: it does not tolerate taint {{{}: {}}}:NoExecute",
                        app.id,
                        taint.key,
                        taint.value.as_deref().unwrap_or_default()
                    );
                    if let Err(error) = self
                        .inner
                        .recorder
                        .record(&self.involved(&moved), Severity::Normal, "TaintManagerEviction", &message)
                        .await
                    {
                        tracing::debug!(%error, "the TaintManagerEviction event was not recorded");
                    }
                }
                // Changed meanwhile; the change brings the node's key back.
                Err(RegistryError::Conflict { .. } | RegistryError::NotFound { .. }) => {
                    return Ok(Action::RequeueAfter(Duration::from_millis(200)));
                }
                Err(error) => return Err(error.into()),
            }
        }
        Ok(match verdict.next {
            Some(at) => Action::RequeueAfter(at.saturating_duration_since(Instant::now())),
            None => Action::AwaitChange,
        })
    }
}

#[async_trait::async_trait]
impl Reconciler for Scheduler {
    async fn reconcile(&self, key: &Key) -> Result<Action, ReconcileError> {
        match key.as_str().strip_prefix(TAINTS) {
            Some(node) => self.taints(node).await,
            None => self.schedule().await,
        }
    }
}

/// The collections the scheduler follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Collection {
    Applications,
    Nodes,
}

/// A collection as the scheduler follows it, into its snapshot and queue.
struct SchedulerFollower {
    scheduler: Scheduler,
    collection: Collection,
}

fn id_of(object: &Object) -> String {
    format!("{}/{}", meta_str(object, "namespace"), meta_str(object, "name"))
}

impl Follower for SchedulerFollower {
    fn listed(&self, objects: Vec<Arc<Object>>) -> Vec<Item> {
        let scheduler = &self.scheduler;
        match self.collection {
            Collection::Nodes => {
                let nodes: Vec<NodeInfo> =
                    objects.iter().filter_map(|node| NodeInfo::from_object(node)).collect();
                let mut state = scheduler.state();
                state.snapshot.replace_nodes(nodes);
                state.queue.move_unschedulable();
                state.synced[1] = true;
                let synced = state.synced == [true, true];
                drop(state);
                // An empty list names no node to carry the queue's key: what waited for the
                // lists is woken here.
                if synced {
                    scheduler.inner.wake.notify_one();
                }
                objects
                    .iter()
                    .map(|object| Item {
                        id: id_of(object),
                        keys: vec![
                            Key::new(SCHEDULE),
                            Key::new(format!("{TAINTS}{}", meta_str(object, "name"))),
                        ],
                    })
                    .collect()
            }
            Collection::Applications => {
                {
                    let mut state = scheduler.state();
                    let listed: std::collections::HashSet<String> =
                        objects.iter().map(|object| id_of(object)).collect();
                    let State { snapshot, queue, versions, .. } = &mut *state;
                    versions.retain(|id, _| listed.contains(id));
                    let gone: Vec<String> = snapshot
                        .usage_ids()
                        .filter(|id| !listed.contains(*id) && !snapshot.is_reserved(id))
                        .cloned()
                        .collect();
                    for id in gone {
                        snapshot.remove_app(&id);
                        queue.remove(&id);
                    }
                    state.synced[0] = true;
                    if state.synced == [true, true] {
                        scheduler.inner.wake.notify_one();
                    }
                }
                let items = objects
                    .into_iter()
                    .map(|object| {
                        let id = id_of(&object);
                        Item { id, keys: scheduler.put_app(object) }
                    })
                    .collect();
                scheduler.state().queue.move_unschedulable();
                items
            }
        }
    }

    fn changed(&self, event: &WatchEvent) -> Option<Item> {
        let object = event.object();
        let id = id_of(object);
        let keys = match (self.collection, event) {
            (Collection::Applications, WatchEvent::Deleted(_)) => self.scheduler.remove_app(object),
            (Collection::Applications, _) => self.scheduler.put_app(Arc::clone(event.shared())),
            (Collection::Nodes, WatchEvent::Deleted(_)) => {
                let name = meta_str(object, "name");
                self.scheduler.state().snapshot.remove_node(name);
                vec![Key::new(format!("{TAINTS}{name}"))]
            }
            (Collection::Nodes, _) => self.scheduler.put_node(object),
        };
        Some(Item { id, keys })
    }
}

/// Queues the scheduling key when a bind's failure frees an Application to be tried again, and
/// once both collections are listed.
struct Wake(Scheduler);

#[async_trait::async_trait]
impl Source for Wake {
    async fn run(&self, sink: Sink, stop: CancellationToken) {
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                () = self.0.inner.wake.notified() => sink.add(Key::new(SCHEDULE)),
            }
        }
    }

    fn known(&self) -> Vec<Key> {
        vec![Key::new(SCHEDULE)]
    }
}

#[cfg(test)]
mod tests;
