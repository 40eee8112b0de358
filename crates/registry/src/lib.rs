//! The registry: Kubernetes semantics over the storage port, for every Kind alike.
//!
//! It turns store revisions into `resourceVersion`s and compare-and-swap into optimistic
//! concurrency; stamps `uid`, `creationTimestamp` and `generation`; keeps `status` apart when it
//! is a subresource; runs finalizers and graceful deletion; serves lists with label and field
//! selectors and consistent pagination.
//!
//! Start at [`Registry`] in this file: the struct, its constructor, reads, and the helpers every
//! operation shares. Each operation has its own module: `create`, `update` (update, patch and
//! the shared replace under both, where `generation` is decided), `delete` (with propagation
//! policy), `list` (pages, continue tokens, answers from the watch cache) and `namespaces`
//! (which namespaces take new objects, and finalizing one). `options` holds what callers pass
//! and get back, `admission` the port through which a writer's admission decides, `leases` the
//! shared leases of expiring objects, `history` the last spec states of the Kinds that keep
//! them (recorded in the same transaction as each write), rollback and the fields only a door
//! writes, and `watch` the watch caches.
//!
//! It knows nothing of HTTP (errors are [`RegistryError`]s that the HTTP adapter maps), of any
//! particular Kind (a [`Resource`] describes one and its [`Strategy`] adds its rules; only the
//! shared naming rules come from `kayra-api`), or of any storage engine (it holds an
//! `Arc<dyn Store>`).

mod admission;
mod apply;
mod create;
mod delete;
mod error;
pub mod fields;
mod history;
pub mod labels;
mod leases;
mod list;
mod namespaces;
mod object;
mod options;
mod resource;
mod token;
mod update;
mod watch;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use kayra_api::clock::Clock;
use kayra_api::validation::FieldError;
use kayra_merge::operation::{Scope, Writer, record_update};
use kayra_store::{Revision, Store};
use serde_json::{Map, Value};

pub use admission::{Admission, AdmissionRequest, Admit, Operation, Refusal};
pub use delete::{FOREGROUND_FINALIZER, ORPHAN_FINALIZER};
pub use error::RegistryError;
pub use history::{DEFAULT_HISTORY_LIMIT, History, HistoryEntry, MAX_HISTORY_LIMIT};
pub use namespaces::namespace_terminating;
pub use object::{Object, finalizers, labels as object_labels, meta_str};
pub use options::{
    Applied, ApplyOptions, Creation, DeleteOptions, Deleted, FieldManager, JsonItems, JsonList, List,
    ListOptions, Part, PatchKind, WriteOptions,
};
pub use resource::{NoRules, Resource, Strategy, path};
pub use update::MAX_PATCH_OPERATIONS;
pub use watch::{DEFAULT_WINDOW_BYTES, WatchCacheStatus, WatchEvent, WatchOptions, WatchStream};

use fields::FieldSelector;
use labels::LabelSelector;
use leases::SharedLease;

/// How many times a write that lost a race to another writer is retried before the conflict
/// is reported (patches and deletes without preconditions, generated names).
const RETRIES: usize = 8;

/// Generic create, get, list, update, patch and delete over the storage port.
#[derive(Clone)]
pub struct Registry {
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    root: String,
    caches: Arc<watch::Caches>,
    leases: Arc<Mutex<HashMap<String, SharedLease>>>,
    history_limit: usize,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry").field("root", &self.root).finish_non_exhaustive()
    }
}

impl Registry {
    /// A registry keeping its objects under `root` (such as `/registry/`) in the store.
    pub fn new(store: Arc<dyn Store>, clock: Arc<dyn Clock>, root: impl Into<String>) -> Registry {
        Registry {
            store,
            clock,
            root: root.into(),
            caches: Arc::default(),
            leases: Arc::default(),
            history_limit: DEFAULT_HISTORY_LIMIT,
        }
    }

    /// The same registry with watch caches whose windows of recent changes, and whose clients'
    /// queues, each hold at most `bytes` (a client further behind is cut off and resumes). Set
    /// before the first watch; caches already started keep their bound.
    pub fn with_watch_window_bytes(mut self, bytes: usize) -> Registry {
        self.caches = Arc::new(watch::Caches::new(bytes));
        self
    }

    /// The store the registry keeps its objects in (and the control plane its elections).
    pub fn store(&self) -> Arc<dyn Store> {
        self.store.clone()
    }

    /// Starts a resource's watch cache now, so that any list read afterwards can be watched from
    /// its revision (a cache started later begins at its own first list). Servers prime every
    /// resource when they start.
    pub async fn prime(&self, resource: &Resource) -> Result<(), RegistryError> {
        self.caches.prime(&self.store, resource, &resource.store_prefix(&self.root)).await
    }

    /// What every started watch cache holds and spans now, one entry per resource, in no
    /// particular order.
    pub fn watch_caches(&self) -> Vec<WatchCacheStatus> {
        self.caches.statuses()
    }

    /// Watches a resource through its watch cache: one store watch per resource, however many
    /// clients. Must be called inside a Tokio runtime, which runs the cache.
    pub async fn watch(
        &self,
        resource: &Resource,
        options: &WatchOptions,
    ) -> Result<WatchStream, RegistryError> {
        self.caches.watch(&self.store, resource, resource.store_prefix(&self.root), options).await
    }

    /// The store key of one object.
    pub(crate) fn key(&self, resource: &Resource, namespace: Option<&str>, name: &str) -> String {
        match (resource.namespaced, namespace) {
            (true, Some(namespace)) => format!("{}{namespace}/{name}", resource.store_prefix(&self.root)),
            _ => format!("{}{name}", resource.store_prefix(&self.root)),
        }
    }

    pub(crate) fn now(&self) -> String {
        let now = self.clock.now().duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default();
        let seconds = i64::try_from(now.as_secs()).unwrap_or(i64::MAX);
        jiff::Timestamp::from_second(seconds)
            .unwrap_or(jiff::Timestamp::UNIX_EPOCH)
            .strftime("%Y-%m-%dT%H:%M:%SZ")
            .to_string()
    }

    /// Records a write that is not an apply in `object`'s `metadata.managedFields`: the
    /// writer takes what it changed from `old` (`None` on create), in the part it writes.
    pub(crate) fn record_update(
        &self,
        resource: &Resource,
        old: Option<&Object>,
        object: &mut Object,
        options: &WriteOptions,
    ) {
        let (time, api_version) = (self.now(), resource.api_version());
        let writer = Writer {
            manager: &options.manager.name,
            subresource: options.subresource(),
            api_version: &api_version,
            time: &time,
        };
        // What a request sends as managed fields counts only on a write of the object itself.
        let honour_request = options.part == Part::Main && options.manager.subresource.is_empty();
        let schema = resource.strategy.merge_schema();
        record_update(schema, old, object, &writer, scope(resource, options.part), honour_request);
    }

    pub(crate) fn encode(object: &Object) -> Vec<u8> {
        serde_json::to_vec(&object::Stored(object)).expect("JSON values serialise")
    }

    /// The object, with `resourceVersion` set to its last write's revision.
    pub async fn get(
        &self,
        resource: &Resource,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Object, RegistryError> {
        let key = self.key(resource, namespace, name);
        match self.store.get(&key).await? {
            Some(kv) => self.stored_object(resource, &key, &kv).map(Arc::unwrap_or_clone),
            None => Err(not_found(resource, name)),
        }
    }

    /// The version `stored` of the object under `key`: the watch cache's decoded copy when it
    /// holds exactly that version (the usual case for a write that follows a read), else
    /// decoded from the stored bytes.
    pub(crate) fn stored_object(
        &self,
        resource: &Resource,
        key: &str,
        stored: &kayra_store::KeyValue,
    ) -> Result<Arc<Object>, RegistryError> {
        self.stored_under(&resource.store_prefix(&self.root), key, stored)
    }

    /// As [`Registry::stored_object`], for the resource whose objects live under `base`.
    pub(crate) fn stored_under(
        &self,
        base: &str,
        key: &str,
        stored: &kayra_store::KeyValue,
    ) -> Result<Arc<Object>, RegistryError> {
        match self.caches.object_at(base, key, stored.mod_revision) {
            Some(object) => Ok(object),
            None => object::decode_stored(key, &stored.value, stored.mod_revision).map(Arc::new),
        }
    }

    /// Hands the object just written under `key` at `revision` to the resource's watch
    /// cache, which then applies that change without decoding the stored bytes.
    pub(crate) fn hand_over(
        &self,
        resource: &Resource,
        key: &str,
        revision: kayra_store::Revision,
        object: &Object,
    ) {
        self.caches.hand_over(&resource.store_prefix(&self.root), key, revision, object);
    }

    /// As [`Registry::get`], the object as its JSON: from the resource's watch cache once it
    /// has applied every change the store had when the read began (waiting for it as a list
    /// does), so that a read of the latest state decodes and encodes nothing; its bytes are the
    /// cache's encoding, kept from the version's second read on. Else from the store.
    pub async fn get_json(
        &self,
        resource: &Resource,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<bytes::Bytes, RegistryError> {
        let base = resource.store_prefix(&self.root);
        let key = self.key(resource, namespace, name);
        let current = self.store.revision().await?;
        self.caches.reach(&base, current).await;
        match self.caches.object_json(&base, &key, current) {
            Some(Some(json)) => Ok(json),
            Some(None) => Err(not_found(resource, name)),
            None => {
                let object = self.get(resource, namespace, name).await?;
                Ok(bytes::Bytes::from(serde_json::to_vec(&object).expect("a JSON map always serializes")))
            }
        }
    }

    /// Checks a read's `resourceVersion` (absent or `0`: any; otherwise the read must not be
    /// older than it): a version the store has not reached yet is refused.
    pub async fn not_older_than(&self, resource_version: Option<&str>) -> Result<(), RegistryError> {
        let Some(rv) = resource_version.filter(|rv| !rv.is_empty() && *rv != "0") else { return Ok(()) };
        let requested = parse_revision(rv)?;
        let current = self.store.revision().await?;
        if requested > current {
            return Err(RegistryError::TooLargeResourceVersion { requested, current });
        }
        Ok(())
    }

    /// Checks a request body's envelope: a map whose `apiVersion`, `kind` and namespace (when
    /// given) agree with the request.
    pub(crate) fn body(
        &self,
        resource: &Resource,
        namespace: Option<&str>,
        body: Value,
    ) -> Result<Object, RegistryError> {
        let Value::Object(mut object) = body else {
            return Err(RegistryError::BadRequest("the request body must be a JSON object".to_owned()));
        };
        match object.get("kind").and_then(Value::as_str) {
            None | Some("") => {
                object.insert("kind".into(), Value::String(resource.kind.clone()));
            }
            Some(kind) if kind == resource.kind => {}
            Some(kind) => {
                return Err(RegistryError::BadRequest(format!(
                    "the body holds a {kind}, but this endpoint serves {}",
                    resource.kind
                )));
            }
        }
        let api_version = resource.api_version();
        match object.get("apiVersion").and_then(Value::as_str) {
            None | Some("") => {
                object.insert("apiVersion".into(), Value::String(api_version));
            }
            Some(given) if given == api_version => {}
            Some(given) => {
                return Err(RegistryError::BadRequest(format!(
                    "the body's apiVersion {given} does not match {api_version}"
                )));
            }
        }
        let metadata = object::metadata_mut(&mut object);
        if resource.namespaced {
            let namespace = namespace.unwrap_or_default();
            match metadata.get("namespace").and_then(Value::as_str) {
                None | Some("") => {
                    metadata.insert("namespace".into(), Value::String(namespace.to_owned()));
                }
                Some(given) if given == namespace => {}
                Some(_) => {
                    return Err(RegistryError::BadRequest(
                        "the namespace of the provided object does not match the namespace sent on the request"
                            .to_owned(),
                    ));
                }
            }
        } else {
            metadata.remove("namespace");
        }
        Ok(object)
    }
}

/// How a write's `metadata.managedFields` are decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Managed {
    /// As the writer's update, from what it changed.
    Recorded,
    /// Already, by the apply that built the object.
    Applied,
}

/// The part of an object a write of `part` may change, for its managers: the object's own
/// write leaves `status` to its subresource when it has one.
pub(crate) fn scope(resource: &Resource, part: Part) -> Scope {
    match part {
        Part::Status | Part::Approval => Scope::OnlyStatus,
        Part::Main | Part::Door(_) if resource.status_subresource => Scope::AllButStatus,
        Part::Main | Part::Door(_) | Part::Binding => Scope::Whole,
    }
}

pub(crate) fn parse_revision(rv: &str) -> Result<Revision, RegistryError> {
    rv.parse::<Revision>().map_err(|_| {
        RegistryError::BadRequest(format!("resourceVersion {rv:?} is not one this server issued"))
    })
}

pub(crate) fn not_found(resource: &Resource, name: &str) -> RegistryError {
    RegistryError::NotFound { resource: resource.qualified(), name: name.to_owned() }
}

pub(crate) fn stale(resource: &Resource, name: &str) -> RegistryError {
    RegistryError::Conflict {
        resource: resource.qualified(),
        name: name.to_owned(),
        message:
            "the object has been modified; please apply your changes to the latest version and try again"
                .to_owned(),
    }
}

pub(crate) fn invalid(resource: &Resource, object: &Object, causes: Vec<FieldError>) -> RegistryError {
    RegistryError::Invalid { kind: resource.kind.clone(), name: meta_str(object, "name").to_owned(), causes }
}

/// A map from a list of pairs, for building objects in tests and strategies.
pub fn map(pairs: impl IntoIterator<Item = (&'static str, Value)>) -> Map<String, Value> {
    pairs.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()
}

/// A list's or a watch's label and field selectors, parsed; a malformed one is the caller's
/// mistake (400).
pub(crate) fn selectors(
    resource: &Resource,
    label_selector: &Option<String>,
    field_selector: &Option<String>,
) -> Result<(LabelSelector, FieldSelector), RegistryError> {
    let labels = LabelSelector::parse(label_selector.as_deref().unwrap_or_default())
        .map_err(|error| RegistryError::BadRequest(error.to_string()))?;
    let fields = FieldSelector::parse(field_selector.as_deref().unwrap_or_default(), &resource.field_labels)
        .map_err(|error| RegistryError::BadRequest(error.to_string()))?;
    Ok((labels, fields))
}
