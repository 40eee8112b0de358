//! The watch cache: one store watch per resource, fanned out to every client watching it.
//!
//! A cache lists the resource once, then follows one store watch from that revision, keeping
//! the current objects and a bounded window of recent events. A client watch is served from
//! it: from "now" with a synthetic ADDED per current object, or from any revision inside the
//! window by replaying it; older revisions are answered as expired, as Kubernetes does. Each
//! client gets its events through a bounded queue and is cut off, never skipped, when it falls
//! behind; it then resumes from the last revision it saw.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use kayra_store::{EventKind, RangeRequest, Revision, Store, StoreError};
use serde_json::Value;
use tokio::sync::{mpsc, watch};

use crate::fields::FieldSelector;
use crate::labels::LabelSelector;
use crate::object::{self, Object};
use crate::{RegistryError, Resource};

/// How many recent events a cache keeps for clients resuming from a revision.
const WINDOW: usize = 4096;

/// How many events a client may have queued before it is cut off as too slow.
const CLIENT_QUEUE: usize = 1024;

/// How long a watch from a revision the cache has not reached yet waits for it.
const CATCH_UP: Duration = Duration::from_secs(3);

/// One change as a client sees it, through its selectors.
#[derive(Debug, Clone, PartialEq)]
pub enum WatchEvent {
    /// The object is new to the client: created, or changed so that it now matches.
    Added(Arc<Object>),
    /// The object changed and still matches.
    Modified(Arc<Object>),
    /// The object was deleted, or changed so that it no longer matches (then it is the last
    /// state that matched, at the revision of the change).
    Deleted(Arc<Object>),
}

impl WatchEvent {
    /// The object the event carries.
    pub fn object(&self) -> &Object {
        match self {
            WatchEvent::Added(object) | WatchEvent::Modified(object) | WatchEvent::Deleted(object) => object,
        }
    }

    /// `ADDED`, `MODIFIED` or `DELETED`.
    pub fn kind(&self) -> &'static str {
        match self {
            WatchEvent::Added(_) => "ADDED",
            WatchEvent::Modified(_) => "MODIFIED",
            WatchEvent::Deleted(_) => "DELETED",
        }
    }
}

/// What a client watch selects.
#[derive(Debug, Clone, Default)]
pub struct WatchOptions {
    /// Only objects in this namespace; every namespace when `None`.
    pub namespace: Option<String>,
    /// `labelSelector`.
    pub label_selector: Option<String>,
    /// `fieldSelector`.
    pub field_selector: Option<String>,
    /// `resourceVersion`: absent or `0` starts with the current objects; otherwise every
    /// change after it.
    pub resource_version: Option<String>,
}

/// A client's stream of events. Dropping it ends the watch.
#[derive(Debug)]
pub struct WatchStream {
    backlog: VecDeque<(Revision, WatchEvent)>,
    receiver: mpsc::Receiver<(Revision, WatchEvent)>,
    cache: Weak<Cache>,
    last: Revision,
}

impl WatchStream {
    /// The next event; an error once the stream was cut off (too slow, or the cache had to
    /// start over), after which the client resumes from [`WatchStream::revision`].
    pub async fn next(&mut self) -> Result<WatchEvent, RegistryError> {
        if let Some((revision, event)) = self.backlog.pop_front() {
            self.last = self.last.max(revision);
            return Ok(event);
        }
        match self.receiver.recv().await {
            Some((revision, event)) => {
                self.last = revision;
                Ok(event)
            }
            None => Err(RegistryError::Expired {
                message: format!(
                    "the watch was closed after revision {}: it fell behind, or the server restarted it; \
                     watch again from there",
                    self.last
                ),
                continue_from: None,
            }),
        }
    }

    /// The latest revision the client has been brought up to: the revision of its last event,
    /// or of the cache when nothing it selects changed since. A bookmark reports this.
    pub fn revision(&self) -> Revision {
        // The cache's revision first: every event at or before it was queued before it was
        // reached, so an empty, open queue means the client has them all.
        let cache = self.cache.upgrade().map_or(0, |cache| cache.revision());
        let idle = self.backlog.is_empty() && self.receiver.is_empty() && !self.receiver.is_closed();
        if idle { self.last.max(cache) } else { self.last }
    }
}

/// The caches of one registry, one per resource, started on first use.
#[derive(Default)]
pub(crate) struct Caches {
    caches: Mutex<HashMap<String, Arc<Cache>>>,
}

impl Caches {
    fn cache(&self, store: &Arc<dyn Store>, prefix: &str) -> Arc<Cache> {
        let mut caches = self.caches.lock().expect("watch caches lock poisoned");
        caches
            .entry(prefix.to_owned())
            .or_insert_with(|| Cache::start(store.clone(), prefix.to_owned()))
            .clone()
    }

    /// Starts a resource's cache and waits until it has listed, so that every list read from
    /// then on can be watched from its revision.
    pub(crate) async fn prime(&self, store: &Arc<dyn Store>, prefix: &str) -> Result<(), RegistryError> {
        let cache = self.cache(store, prefix);
        let mut progress = cache.progress.subscribe();
        let primed = async {
            while !cache.state.lock().expect("watch cache lock poisoned").primed {
                if progress.changed().await.is_err() {
                    return;
                }
            }
        };
        tokio::time::timeout(Duration::from_secs(30), primed).await.map_err(|_| {
            RegistryError::Store(StoreError::Unavailable {
                message: "the watch cache did not list in time".to_owned(),
                source: None,
            })
        })
    }

    pub(crate) async fn watch(
        &self,
        store: &Arc<dyn Store>,
        resource: &Resource,
        prefix: String,
        options: &WatchOptions,
    ) -> Result<WatchStream, RegistryError> {
        let labels = LabelSelector::parse(options.label_selector.as_deref().unwrap_or_default())
            .map_err(|error| RegistryError::BadRequest(error.to_string()))?;
        let fields = FieldSelector::parse(
            options.field_selector.as_deref().unwrap_or_default(),
            &resource.field_labels,
        )
        .map_err(|error| RegistryError::BadRequest(error.to_string()))?;
        let from = match options.resource_version.as_deref().filter(|rv| !rv.is_empty() && *rv != "0") {
            Some(rv) => Some(rv.parse::<Revision>().map_err(|_| {
                RegistryError::BadRequest(format!("resourceVersion {rv:?} is not one this server issued"))
            })?),
            None => None,
        };
        let cache = {
            let mut caches = self.caches.lock().expect("watch caches lock poisoned");
            caches
                .entry(prefix.clone())
                .or_insert_with(|| Cache::start(store.clone(), prefix.clone()))
                .clone()
        };
        let filter =
            Filter { namespace: options.namespace.clone().filter(|_| resource.namespaced), labels, fields };
        cache.subscribe(filter, from).await
    }
}

/// Which objects a client sees.
struct Filter {
    namespace: Option<String>,
    labels: LabelSelector,
    fields: FieldSelector,
}

impl Filter {
    fn matches(&self, object: &Object) -> bool {
        self.namespace.as_deref().is_none_or(|namespace| object::meta_str(object, "namespace") == namespace)
            && self.labels.matches(&object::labels(object))
            && self.fields.matches(&Value::Object(object.clone()))
    }

    /// The event a change is for this client, if any.
    fn translate(&self, change: &Change) -> Option<WatchEvent> {
        let was = change.prev.as_ref().filter(|prev| self.matches(prev));
        let is = change.object.as_ref().filter(|object| self.matches(object));
        match (was, is) {
            (None, Some(object)) => Some(WatchEvent::Added(object.clone())),
            (Some(_), Some(object)) => Some(WatchEvent::Modified(object.clone())),
            (Some(prev), None) => {
                let mut last = (**prev).clone();
                object::metadata_mut(&mut last)
                    .insert("resourceVersion".into(), Value::String(change.revision.to_string()));
                Some(WatchEvent::Deleted(Arc::new(last)))
            }
            (None, None) => None,
        }
    }
}

/// One stored change, decoded once for every client.
struct Change {
    revision: Revision,
    key: String,
    /// The object after the change; `None` for a delete.
    object: Option<Arc<Object>>,
    /// The object before the change; `None` for a create.
    prev: Option<Arc<Object>>,
}

pub(crate) struct Cache {
    state: Mutex<State>,
    progress: watch::Sender<Revision>,
    /// Dropped with the cache, which ends its store watch (and lets go of the store).
    _stop: tokio::sync::oneshot::Sender<()>,
}

struct State {
    /// Every event up to this revision has been applied.
    revision: Revision,
    /// The window holds every change in `(window_start, revision]`.
    window_start: Revision,
    objects: BTreeMap<String, Arc<Object>>,
    window: VecDeque<Arc<Change>>,
    clients: Vec<Client>,
    /// Whether the first list has completed.
    primed: bool,
}

struct Client {
    filter: Arc<Filter>,
    sender: mpsc::Sender<(Revision, WatchEvent)>,
}

impl Cache {
    fn start(store: Arc<dyn Store>, prefix: String) -> Arc<Cache> {
        let (progress, _) = watch::channel(0);
        let state = State {
            revision: 0,
            window_start: 0,
            objects: BTreeMap::new(),
            window: VecDeque::new(),
            clients: Vec::new(),
            primed: false,
        };
        let (stop, stopped) = tokio::sync::oneshot::channel();
        let cache = Arc::new(Cache { state: Mutex::new(state), progress, _stop: stop });
        let follower = follow(Arc::downgrade(&cache), store, prefix);
        tokio::spawn(async move {
            tokio::select! {
                () = follower => {}
                _ = stopped => {}
            }
        });
        cache
    }

    fn revision(&self) -> Revision {
        self.state.lock().expect("watch cache lock poisoned").revision
    }

    async fn subscribe(
        self: &Arc<Self>,
        filter: Filter,
        from: Option<Revision>,
    ) -> Result<WatchStream, RegistryError> {
        let filter = Arc::new(filter);
        let mut progress = self.progress.subscribe();
        let deadline = tokio::time::Instant::now() + CATCH_UP;
        loop {
            {
                let mut state = self.state.lock().expect("watch cache lock poisoned");
                let reached = state.primed && from.is_none_or(|from| from <= state.revision);
                if reached {
                    return self.attach(&mut state, filter, from);
                }
            }
            let waited = tokio::time::timeout_at(deadline, progress.changed()).await;
            if !matches!(waited, Ok(Ok(()))) {
                let state = self.state.lock().expect("watch cache lock poisoned");
                return Err(match from {
                    Some(requested) if state.primed => {
                        RegistryError::TooLargeResourceVersion { requested, current: state.revision }
                    }
                    _ => RegistryError::Store(StoreError::Unavailable {
                        message: "the watch cache has not finished its first list".to_owned(),
                        source: None,
                    }),
                });
            }
        }
    }

    fn attach(
        self: &Arc<Self>,
        state: &mut State,
        filter: Arc<Filter>,
        from: Option<Revision>,
    ) -> Result<WatchStream, RegistryError> {
        let backlog: VecDeque<(Revision, WatchEvent)> = match from {
            None => state
                .objects
                .values()
                .filter(|object| filter.matches(object))
                .map(|object| (state.revision, WatchEvent::Added(object.clone())))
                .collect(),
            Some(from) if from < state.window_start => {
                return Err(RegistryError::Expired {
                    message: format!("too old resource version: {from} ({})", state.window_start),
                    continue_from: None,
                });
            }
            Some(from) => state
                .window
                .iter()
                .filter(|change| change.revision > from)
                .filter_map(|change| filter.translate(change).map(|event| (change.revision, event)))
                .collect(),
        };
        let (sender, receiver) = mpsc::channel(CLIENT_QUEUE);
        state.clients.retain(|client| !client.sender.is_closed());
        state.clients.push(Client { filter, sender });
        let last = from.unwrap_or(state.revision);
        Ok(WatchStream { backlog, receiver, cache: Arc::downgrade(self), last })
    }

    /// Replaces the cache's contents with a fresh list; every client must start over.
    fn reset(&self, revision: Revision, objects: BTreeMap<String, Arc<Object>>) {
        let mut state = self.state.lock().expect("watch cache lock poisoned");
        state.revision = revision;
        state.window_start = revision;
        state.objects = objects;
        state.window.clear();
        state.clients.clear();
        state.primed = true;
        drop(state);
        self.progress.send_replace(revision);
    }

    fn apply(&self, changes: Vec<Change>, revision: Revision) {
        let mut state = self.state.lock().expect("watch cache lock poisoned");
        let state = &mut *state;
        for change in changes {
            let change = Arc::new(change);
            match &change.object {
                Some(object) => state.objects.insert(change.key.clone(), object.clone()),
                None => state.objects.remove(&change.key),
            };
            state.clients.retain(|client| match client.filter.translate(&change) {
                Some(event) => client.sender.try_send((change.revision, event)).is_ok(),
                None => !client.sender.is_closed(),
            });
            if state.window.len() == WINDOW
                && let Some(oldest) = state.window.pop_front()
            {
                state.window_start = oldest.revision;
            }
            state.window.push_back(change);
        }
        state.revision = state.revision.max(revision);
        let reached = state.revision;
        self.progress.send_replace(reached);
    }
}

/// Lists, then follows the store from the list's revision for as long as the cache lives;
/// starts over with a fresh list when the store's history no longer reaches back far enough.
async fn follow(cache: Weak<Cache>, store: Arc<dyn Store>, prefix: String) {
    let mut backoff = Duration::from_millis(50);
    loop {
        match follow_once(&cache, &store, &prefix).await {
            Ok(()) => return,
            Err(error) => {
                tracing::warn!(%error, %prefix, "watch cache restarting");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(5));
            }
        }
        if cache.strong_count() == 0 {
            return;
        }
    }
}

async fn follow_once(cache: &Weak<Cache>, store: &Arc<dyn Store>, prefix: &str) -> Result<(), RegistryError> {
    let (revision, objects) = list(store, prefix, 0).await?;
    let Some(live) = cache.upgrade() else { return Ok(()) };
    live.reset(revision, objects);
    drop(live);
    let mut watcher = store.watch(prefix, revision).await?;
    loop {
        let event = match watcher.next_change().await {
            Some(Ok(kayra_store::Change::Event(event))) => event,
            Some(Ok(kayra_store::Change::Progress(reached))) => {
                // Nothing of this resource changed up to `reached`: watches from there may start.
                let Some(live) = cache.upgrade() else { return Ok(()) };
                live.apply(Vec::new(), reached);
                continue;
            }
            Some(Err(StoreError::WatchLagged { resume_after })) => {
                watcher = store.watch(prefix, resume_after).await?;
                continue;
            }
            Some(Err(error)) => return Err(error.into()),
            None => return Ok(()),
        };
        let Some(live) = cache.upgrade() else { return Ok(()) };
        let revision = event.revision();
        let decode = |kv: &kayra_store::KeyValue| {
            object::decode_stored(&kv.key, &kv.value, kv.mod_revision).map(Arc::new)
        };
        let change = Change {
            revision,
            key: event.kv.key.clone(),
            object: match event.kind {
                EventKind::Put => Some(decode(&event.kv)?),
                EventKind::Delete => None,
            },
            prev: event.prev.as_ref().map(decode).transpose()?,
        };
        live.apply(vec![change], revision);
    }
}

/// Every object under the prefix, at one revision.
async fn list(
    store: &Arc<dyn Store>,
    prefix: &str,
    revision: Revision,
) -> Result<(Revision, BTreeMap<String, Arc<Object>>), RegistryError> {
    let mut objects = BTreeMap::new();
    let mut request =
        RangeRequest { limit: Some(1000), revision: Some(revision), ..RangeRequest::prefix(prefix) };
    loop {
        let page = store.range(&request).await?;
        request.revision = Some(page.revision);
        let last = page.kvs.last().map(|kv| format!("{}\0", kv.key));
        for kv in page.kvs {
            let object = object::decode_stored(&kv.key, &kv.value, kv.mod_revision)?;
            objects.insert(kv.key, Arc::new(object));
        }
        match last {
            Some(start) if page.more => request.start = Some(start),
            _ => return Ok((page.revision, objects)),
        }
    }
}
