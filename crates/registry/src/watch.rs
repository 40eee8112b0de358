//! The watch cache: one store watch per resource, fanned out to every client watching it.
//!
//! A cache lists the resource once, then follows one store watch from that revision, keeping
//! the current objects and a bounded window of recent events. A client watch is served from
//! it: from "now" with a synthetic ADDED per current object, or from any revision inside the
//! window by replaying it; older revisions are answered as expired, as Kubernetes does. Each
//! client gets its events through a queue bounded by count and by bytes and is cut off, never
//! skipped, when it falls behind; it then resumes from the last revision it saw.
//!
//! Every object version is decoded once and, when a client first asks for it, encoded as JSON
//! once: all clients share both, so a change fanned out to many watchers costs one encoding and
//! a watcher's queue holds references, not copies. The window is bounded by count and by the
//! bytes of the changes it holds. What each cache holds and spans can be read at any time
//! (`status`), for the controller's metrics.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};
use std::time::Duration;

use bytes::Bytes;
use kayra_store::{EventKind, RangeRequest, Revision, Store, StoreError};
use serde_json::Value;
use tokio::sync::{mpsc, watch};

use crate::fields::FieldSelector;
use crate::labels::LabelSelector;
use crate::object::{self, Object};
use crate::{RegistryError, Resource};

mod event;
mod follow;
mod pages;
mod status;
mod stream;
mod written;

pub use event::WatchEvent;
use pages::Pages;
pub use status::WatchCacheStatus;
use stream::Pending;
pub use stream::WatchStream;
use written::Written;

/// How many recent events a cache keeps for clients resuming from a revision.
const WINDOW: usize = 4096;

/// How many bytes of changes a cache's window holds at most, unless configured otherwise.
pub const DEFAULT_WINDOW_BYTES: usize = 64 << 20;

/// How many events a client may have queued before it is cut off as too slow.
const CLIENT_QUEUE: usize = 1024;

/// How long a watch from a revision the cache has not reached yet waits for it.
const CATCH_UP: Duration = Duration::from_secs(3);

/// The first key after every key that starts with `prefix`: the prefix with its last byte
/// raised by one; `None` for an empty prefix or one ending outside ASCII, which are then
/// bounded by comparing each key.
fn prefix_end(prefix: &str) -> Option<String> {
    let mut end = prefix.as_bytes().to_vec();
    let last = end.pop()?;
    if last >= 0x7f {
        return None;
    }
    end.push(last + 1);
    String::from_utf8(end).ok()
}

/// The folder a key sits in: everything up to and including its last `/`.
fn folder(key: &str) -> &str {
    key.rfind('/').map_or(key, |slash| &key[..=slash])
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

/// An object version as a cache holds it: decoded once, and encoded as JSON once for every
/// client when the encoding pays for itself (see [`Entry::json_for_list`]).
#[derive(Debug)]
pub(crate) struct Entry {
    object: Arc<Object>,
    json: OnceLock<Bytes>,
    /// Whether a list has encoded this version already, without keeping the encoding.
    listed: AtomicBool,
    /// About what the object weighs: the length of its stored form.
    size: usize,
}

impl Entry {
    fn new(object: Object, size: usize) -> Arc<Entry> {
        Arc::new(Entry {
            object: Arc::new(object),
            json: OnceLock::new(),
            listed: AtomicBool::new(false),
            size,
        })
    }

    /// The object, shared with every other holder of this version.
    pub(crate) fn shared(&self) -> &Arc<Object> {
        &self.object
    }

    /// The object as JSON, exactly as `serde_json` writes it: the bytes a read of this
    /// version answers with, kept for every later reader. A change's encoding is kept at
    /// once, since every watcher of it sends the same bytes.
    fn json(&self) -> Bytes {
        self.json.get_or_init(|| encode(&self.object)).clone()
    }

    /// The object as JSON for a read: the kept encoding when there is one, else a fresh one
    /// that is kept only from the second read of this version on. So the first list of a
    /// resource holds no second copy of every object beside the response it streams, and an
    /// object read again and again is encoded once.
    pub(crate) fn json_for_list(&self) -> Bytes {
        if let Some(json) = self.json.get() {
            return json.clone();
        }
        if self.listed.swap(true, Ordering::Relaxed) {
            return self.json();
        }
        encode(&self.object)
    }
}

fn encode(object: &Object) -> Bytes {
    Bytes::from(serde_json::to_vec(object).expect("a JSON map always serializes"))
}

/// A page of a list as a cache answers it: each item's JSON, encoded once per object version
/// and shared with every other list and watch that serves it.
pub(crate) struct CachedPage {
    /// The revision the page shows every object at.
    pub(crate) revision: Revision,
    /// The page's objects, encoded as the response takes them.
    pub(crate) items: Vec<Arc<Entry>>,
    /// The key the next page starts at, when more keys follow.
    pub(crate) next: Option<String>,
    /// How many keys follow the page, counted only without selectors.
    pub(crate) remaining: Option<u64>,
}

/// The caches of one registry, one per resource, started on first use.
pub(crate) struct Caches {
    caches: Mutex<HashMap<String, Arc<Cache>>>,
    /// The most bytes of changes one cache's window holds, and one client may have queued.
    window_bytes: usize,
    /// The runtime the registry was made on, which runs every cache's store watch: a cache
    /// first asked for by a loop (which may run on a runtime of its own) serves the API too.
    runtime: Option<tokio::runtime::Handle>,
}

impl Default for Caches {
    fn default() -> Caches {
        Caches::new(DEFAULT_WINDOW_BYTES)
    }
}

impl Caches {
    /// Caches whose windows, and clients' queues, hold at most `window_bytes` each.
    pub(crate) fn new(window_bytes: usize) -> Caches {
        Caches {
            caches: Mutex::new(HashMap::new()),
            window_bytes: window_bytes.max(1),
            runtime: tokio::runtime::Handle::try_current().ok(),
        }
    }

    fn cache(&self, store: &Arc<dyn Store>, resource: &Resource, prefix: &str) -> Arc<Cache> {
        let mut caches = self.caches.lock().expect("watch caches lock poisoned");
        caches
            .entry(prefix.to_owned())
            .or_insert_with(|| {
                let name = CacheName { group: resource.group.clone(), resource: resource.plural.clone() };
                Cache::start(store.clone(), prefix.to_owned(), name, self.window_bytes, self.runtime.as_ref())
            })
            .clone()
    }

    /// A page of the objects under `prefix` (inside the resource's `base`) that match the
    /// selectors, from the resource's cache if it is running and has applied every change up to
    /// `current`; `None` otherwise (then the store answers).
    pub(crate) fn page(
        &self,
        base: &str,
        prefix: &str,
        current: Revision,
        labels: LabelSelector,
        fields: FieldSelector,
        limit: usize,
    ) -> Option<CachedPage> {
        let cache = self.caches.lock().expect("watch caches lock poisoned").get(base).cloned()?;
        let filter = Filter { namespace: None, labels, fields };
        let state = cache.state.lock().expect("watch cache lock poisoned");
        if !state.primed || state.readable < current {
            return None;
        }
        Some(state.page(base, prefix, &filter, limit))
    }

    /// The JSON of the object stored under `key` in the cache kept under `base`, when that
    /// cache has applied every change up to `current`: `Some(None)` when there is no such
    /// object; `None` when the cache cannot answer (then the store does).
    pub(crate) fn object_json(&self, base: &str, key: &str, current: Revision) -> Option<Option<Bytes>> {
        let cache = self.caches.lock().expect("watch caches lock poisoned").get(base).cloned()?;
        let entry = {
            let state = cache.state.lock().expect("watch cache lock poisoned");
            if !state.primed || state.readable < current {
                return None;
            }
            state.objects.get(key).cloned()
        };
        Some(entry.map(|entry| entry.json_for_list()))
    }

    /// The object stored under `key` at `revision`, decoded, when the cache kept under `base`
    /// holds exactly that version: a writer that read the stored bytes then need not decode
    /// them again. `None` when the cache holds another version, or none.
    pub(crate) fn object_at(&self, base: &str, key: &str, revision: Revision) -> Option<Arc<Object>> {
        let cache = self.caches.lock().expect("watch caches lock poisoned").get(base).cloned()?;
        let state = cache.state.lock().expect("watch cache lock poisoned");
        let entry = state.objects.get(key)?;
        let object = entry.shared();
        let version = crate::meta_str(object, "resourceVersion").parse::<Revision>().ok()?;
        (version == revision).then(|| object.clone())
    }

    /// Hands the cache kept under `base` the object this registry just wrote under `key` at
    /// `revision`, so that the change, when the cache applies it, need not decode what the
    /// object was encoded into. Nothing when no cache is kept there or it holds many already.
    pub(crate) fn hand_over(&self, base: &str, key: &str, revision: Revision, object: &Object) {
        let Some(cache) = self.caches.lock().expect("watch caches lock poisoned").get(base).cloned() else {
            return;
        };
        if cache.written().late(revision) {
            return;
        }
        let object = object.clone();
        // The change may have been applied while the object was copied: then it is late.
        cache.written().offer(key, revision, object);
    }

    /// Waits until the cache kept under `base` has applied every change up to `current`, at
    /// most [`CATCH_UP`], asking its store watch for progress so that a cache whose resource
    /// is quiet learns at once that nothing of it changed (as kube-apiserver's consistent reads
    /// from its cache do). Answers at once when no primed cache is kept there or its store
    /// watch reports no progress, and without complaint when the time runs out: the caller
    /// then reads the store.
    pub(crate) async fn reach(&self, base: &str, current: Revision) {
        let Some(cache) = self.caches.lock().expect("watch caches lock poisoned").get(base).cloned() else {
            return;
        };
        let mut progress = cache.progress.subscribe();
        {
            let state = cache.state.lock().expect("watch cache lock poisoned");
            if !state.primed || state.readable >= current {
                return;
            }
        }
        let Some(requester) = cache.progress_requester.lock().expect("watch cache lock poisoned").clone()
        else {
            return;
        };
        requester.request();
        let _ = tokio::time::timeout(CATCH_UP, progress.wait_for(|reached| *reached >= current)).await;
    }

    /// Starts a resource's cache and waits until it has listed, so that every list read from
    /// then on can be watched from its revision.
    pub(crate) async fn prime(
        &self,
        store: &Arc<dyn Store>,
        resource: &Resource,
        prefix: &str,
    ) -> Result<(), RegistryError> {
        let cache = self.cache(store, resource, prefix);
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
        let (labels, fields) = crate::selectors(resource, &options.label_selector, &options.field_selector)?;
        let from = match options.resource_version.as_deref().filter(|rv| !rv.is_empty() && *rv != "0") {
            Some(rv) => Some(rv.parse::<Revision>().map_err(|_| {
                RegistryError::BadRequest(format!("resourceVersion {rv:?} is not one this server issued"))
            })?),
            None => None,
        };
        let cache = self.cache(store, resource, &prefix);
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
            && (self.labels.is_empty() || self.labels.matches(&object::labels(object)))
            && self.fields.matches(object)
    }

    /// The event a change is for this client, if any.
    fn translate(&self, change: &Change) -> Option<Pending> {
        let was = change.prev.as_ref().filter(|prev| self.matches(&prev.object));
        let is = change.object.as_ref().filter(|entry| self.matches(&entry.object));
        let (event, entry) = match (was, is) {
            (None, Some(entry)) => (WatchEvent::Added(entry.object.clone()), entry.clone()),
            (Some(_), Some(entry)) => (WatchEvent::Modified(entry.object.clone()), entry.clone()),
            (Some(prev), None) => {
                // The last state that matched, at the revision of the change: one copy for
                // every client.
                let gone = change
                    .gone
                    .get_or_init(|| {
                        let mut last = (*prev.object).clone();
                        object::metadata_mut(&mut last)
                            .insert("resourceVersion".into(), Value::String(change.revision.to_string()));
                        Entry::new(last, prev.size)
                    })
                    .clone();
                (WatchEvent::Deleted(gone.object.clone()), gone)
            }
            (None, None) => return None,
        };
        Some(Pending { revision: change.revision, event, entry })
    }
}

/// One stored change, decoded once for every client.
struct Change {
    revision: Revision,
    key: String,
    /// The object after the change; `None` for a delete.
    object: Option<Arc<Entry>>,
    /// The object before the change; `None` for a create. The cache's own entry for the key,
    /// taken as the change is applied: the store's previous version, decoded once already.
    prev: Option<Arc<Entry>>,
    /// The object before the change at the change's revision: what a DELETED event carries.
    gone: OnceLock<Arc<Entry>>,
}

impl Change {
    /// What the change weighs in a window.
    fn size(&self) -> usize {
        self.object.as_ref().map_or(0, |entry| entry.size) + self.prev.as_ref().map_or(0, |entry| entry.size)
    }
}

/// The resource a cache serves, as its metrics name it.
#[derive(Debug, Clone)]
struct CacheName {
    group: String,
    resource: String,
}

pub(crate) struct Cache {
    name: CacheName,
    state: Mutex<State>,
    progress: watch::Sender<Revision>,
    /// Dropped with the cache, which ends its store watch (and lets go of the store).
    _stop: tokio::sync::oneshot::Sender<()>,
    /// Asks the store watch the cache follows for a progress report.
    progress_requester: Mutex<Option<kayra_store::watch::ProgressRequester>>,
    /// Objects this registry wrote, for the changes their writes make.
    written: Mutex<Written>,
}

struct State {
    /// Every event up to this revision has been applied.
    revision: Revision,
    /// The revision of the fresh list or the store's latest progress report, whichever is
    /// later: every change at or below it was said to be applied already.
    reported: Revision,
    /// Every change up to this revision has been applied, as the fresh list, the changes
    /// themselves or the store's ordered progress reports show: what a read of the latest
    /// state may be answered at. Below `revision` only while the store's progress reports
    /// may run ahead of its changes.
    readable: Revision,
    /// Whether the store watch followed reports progress only after the changes it covers.
    ordered_progress: bool,
    /// The window holds every change in `(window_start, revision]`.
    window_start: Revision,
    objects: BTreeMap<String, Arc<Entry>>,
    /// How many objects each folder of keys holds (a namespace's, or the resource's own for
    /// cluster objects), so that a page knows what follows it without walking it.
    folders: HashMap<String, usize>,
    window: VecDeque<Arc<Change>>,
    /// What the window's changes weigh together.
    window_size: usize,
    /// The most the window, and one client's queue, may weigh.
    window_bytes: usize,
    clients: Vec<Client>,
    /// Whether the first list has completed.
    primed: bool,
    /// Changes received from the store since the cache started, across relists.
    received: u64,
    /// The pages asked for since the objects last changed, and the encodings kept of them.
    pages: Pages,
}

impl State {
    /// A page of the objects under `prefix` (inside the resource's `base`) that `filter`
    /// passes, at the revision the cache can be read at.
    fn page(&self, base: &str, prefix: &str, filter: &Filter, limit: usize) -> CachedPage {
        let filtered = !filter.labels.is_empty() || !filter.fields.is_empty();
        // Bounded on both sides, so that counting what follows the page walks the map
        // without comparing keys.
        let end = prefix_end(prefix);
        let upper = end.as_deref().map_or(Bound::Unbounded, Bound::Excluded);
        let bounded = end.is_some();
        let mut range = self
            .objects
            .range::<str, _>((Bound::Included(prefix), upper))
            .take_while(|(key, _)| bounded || key.starts_with(prefix));
        let mut items = Vec::new();
        let (mut next, mut remaining) = (None, None);
        for (key, entry) in range.by_ref() {
            if !filtered || filter.matches(&entry.object) {
                items.push(entry.clone());
            }
            if items.len() == limit {
                // Unfiltered, every object in the range before this one is on the page, so
                // what follows is the range's count less the page; filtered, only whether
                // anything follows is needed.
                let total = if prefix == base {
                    Some(self.objects.len())
                } else {
                    self.folders.get(prefix).copied().filter(|_| prefix.ends_with('/'))
                };
                let after = match total {
                    Some(total) if !filtered => total.saturating_sub(limit),
                    _ if filtered => usize::from(range.next().is_some()),
                    _ => range.count(),
                };
                if after > 0 {
                    next = Some(format!("{key}\0"));
                    remaining = (!filtered).then_some(after as u64);
                }
                break;
            }
        }
        CachedPage { revision: self.readable, items, next, remaining }
    }
}

struct Client {
    filter: Arc<Filter>,
    sender: mpsc::Sender<Pending>,
    /// Bytes queued for the client and not taken yet.
    queued: Arc<AtomicUsize>,
}

impl Client {
    /// Queues `pending`; false when the client is gone or too far behind (then it is cut off).
    fn offer(&self, pending: Pending, limit: usize) -> bool {
        let size = pending.entry.size;
        if self.queued.load(Ordering::Relaxed) + size > limit && self.queued.load(Ordering::Relaxed) > 0 {
            return false;
        }
        self.queued.fetch_add(size, Ordering::Relaxed);
        if self.sender.try_send(pending).is_err() {
            self.queued.fetch_sub(size, Ordering::Relaxed);
            return false;
        }
        true
    }
}

impl Cache {
    fn start(
        store: Arc<dyn Store>,
        prefix: String,
        name: CacheName,
        window_bytes: usize,
        runtime: Option<&tokio::runtime::Handle>,
    ) -> Arc<Cache> {
        let (progress, _) = watch::channel(0);
        let state = State {
            revision: 0,
            reported: 0,
            readable: 0,
            ordered_progress: true,
            window_start: 0,
            objects: BTreeMap::new(),
            folders: HashMap::new(),
            window: VecDeque::new(),
            window_size: 0,
            window_bytes,
            clients: Vec::new(),
            primed: false,
            received: 0,
            pages: Pages::default(),
        };
        let (stop, stopped) = tokio::sync::oneshot::channel();
        let cache = Arc::new(Cache {
            name,
            state: Mutex::new(state),
            progress,
            _stop: stop,
            progress_requester: Mutex::new(None),
            written: Mutex::default(),
        });
        let follower = follow::follow(Arc::downgrade(&cache), store, prefix);
        let following = async move {
            tokio::select! {
                () = follower => {}
                _ = stopped => {}
            }
        };
        match runtime {
            Some(runtime) => drop(runtime.spawn(following)),
            None => drop(tokio::spawn(following)),
        }
        cache
    }

    fn written(&self) -> MutexGuard<'_, Written> {
        self.written.lock().expect("watch cache lock poisoned")
    }

    /// The object written under `key` at `revision`, when this registry wrote it and handed it
    /// over (see [`Written::take`]).
    fn take_written(&self, key: &str, revision: Revision) -> Option<Object> {
        self.written().take(key, revision)
    }

    /// The revision up to which the cache has certainly applied every change.
    fn readable(&self) -> Revision {
        self.state.lock().expect("watch cache lock poisoned").readable
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
        let backlog: VecDeque<Pending> = match from {
            None => state
                .objects
                .values()
                .filter(|entry| filter.matches(&entry.object))
                .map(|entry| Pending {
                    revision: state.readable,
                    event: WatchEvent::Added(entry.object.clone()),
                    entry: entry.clone(),
                })
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
                .filter_map(|change| filter.translate(change))
                .collect(),
        };
        let (sender, receiver) = mpsc::channel(CLIENT_QUEUE);
        let queued = Arc::new(AtomicUsize::new(0));
        state.clients.retain(|client| !client.sender.is_closed());
        state.clients.push(Client { filter, sender, queued: queued.clone() });
        let last = from.unwrap_or(state.readable);
        Ok(WatchStream { backlog, receiver, queued, cache: Arc::downgrade(self), last })
    }

    /// Replaces the cache's contents with a fresh list; every client must start over.
    fn reset(&self, revision: Revision, objects: BTreeMap<String, Arc<Entry>>) {
        self.written().listed(revision);
        let mut state = self.state.lock().expect("watch cache lock poisoned");
        state.revision = revision;
        state.reported = revision;
        state.readable = revision;
        state.window_start = revision;
        state.folders = HashMap::new();
        for key in objects.keys() {
            *state.folders.entry(folder(key).to_owned()).or_default() += 1;
        }
        state.objects = objects;
        state.pages.changed();
        state.window.clear();
        state.window_size = 0;
        state.clients.clear();
        state.primed = true;
        drop(state);
        self.progress.send_replace(revision);
    }

    /// Whether a change at `revision` comes after what the cache applied: not below a change
    /// it applied, nor at or below the list it started from or a progress report it took.
    /// A store whose progress report can run ahead of the changes it has still to send (etcd
    /// before 3.4.25 and 3.5.8) breaks this; the cache then starts over rather than hand its
    /// clients a change at or below a revision they were told they had.
    fn in_order(&self, revision: Revision) -> bool {
        let state = self.state.lock().expect("watch cache lock poisoned");
        revision >= state.revision && revision > state.reported
    }

    /// Notes that the store reported every change up to `reached`.
    fn progressed(&self, reached: Revision) {
        {
            let mut state = self.state.lock().expect("watch cache lock poisoned");
            state.reported = state.reported.max(reached);
            if state.ordered_progress {
                state.readable = state.readable.max(reached);
            }
        }
        self.apply(Vec::new(), reached);
    }

    /// Applies `changes`, in order, each coming right after what the cache holds; each takes the
    /// entry it replaces as its `prev`.
    fn apply(&self, changes: Vec<Change>, revision: Revision) {
        let mut state = self.state.lock().expect("watch cache lock poisoned");
        let state = &mut *state;
        state.received += changes.len() as u64;
        if !changes.is_empty() {
            state.readable = state.readable.max(revision);
            state.pages.changed();
        }
        for mut change in changes {
            change.prev = match &change.object {
                Some(object) => state.objects.insert(change.key.clone(), object.clone()),
                None => state.objects.remove(&change.key),
            };
            let change = Arc::new(change);
            let (before, after) = (change.prev.is_some(), change.object.is_some());
            if before != after {
                let count = state.folders.entry(folder(&change.key).to_owned()).or_default();
                if after {
                    *count += 1;
                } else {
                    *count = count.saturating_sub(1);
                    if *count == 0 {
                        state.folders.remove(folder(&change.key));
                    }
                }
            }
            let limit = state.window_bytes;
            state.clients.retain(|client| match client.filter.translate(&change) {
                Some(pending) => client.offer(pending, limit),
                None => !client.sender.is_closed(),
            });
            // The window keeps at most WINDOW changes and `window_bytes` of them (always the
            // newest change, however large).
            state.window_size += change.size();
            state.window.push_back(change);
            while state.window.len() > WINDOW
                || (state.window_size > state.window_bytes && state.window.len() > 1)
            {
                let Some(oldest) = state.window.pop_front() else { break };
                state.window_size -= oldest.size();
                state.window_start = oldest.revision;
            }
        }
        state.revision = state.revision.max(revision);
        let reached = state.revision;
        self.progress.send_replace(reached);
    }
}

#[cfg(test)]
mod tests;
