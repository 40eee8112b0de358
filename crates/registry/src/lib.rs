//! The registry: Kubernetes semantics over the storage port, for every Kind alike.
//!
//! It turns store revisions into `resourceVersion`s and compare-and-swap into optimistic
//! concurrency; stamps `uid`, `creationTimestamp` and `generation`; keeps `status` apart when it
//! is a subresource; runs finalizers and graceful deletion; serves lists with label and field
//! selectors and consistent pagination. Start at [`Registry`].
//!
//! It knows nothing of HTTP (errors are [`RegistryError`]s that the HTTP adapter maps), of any
//! particular Kind (a [`Resource`] describes one and its [`Strategy`] adds its rules; only the
//! shared naming rules come from `kayra-api`), or of any storage engine (it holds an
//! `Arc<dyn Store>`).

mod error;
pub mod fields;
pub mod labels;
mod object;
mod resource;
mod token;
mod watch;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use kayra_api::validation::FieldError;
use kayra_store::{Compare, Op, Outcome, RangeRequest, Revision, Store, StoreError, Txn};
use serde_json::{Map, Value, json};

pub use error::RegistryError;
pub use object::{Object, finalizers, labels as object_labels, meta_str};
pub use resource::{NoRules, Resource, Strategy, path};

use fields::FieldSelector;
use labels::LabelSelector;
use token::Continue;
pub use watch::{DEFAULT_WINDOW_BYTES, WatchEvent, WatchOptions, WatchStream};

/// How many times a write that lost a race to another writer is retried before the conflict
/// is reported (patches and deletes without preconditions, generated names).
const RETRIES: usize = 8;

/// The most items one list page holds when the client sets no limit of its own.
const MAX_PAGE: usize = 100_000;

/// Where time comes from, so tests can fix it.
pub trait Clock: Send + Sync {
    /// The current time.
    fn now(&self) -> SystemTime;
}

/// The system's clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> SystemTime {
        SystemTime::now()
    }
}

/// Generic create, get, list, update, patch and delete over the storage port.
#[derive(Clone)]
pub struct Registry {
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    root: String,
    caches: Arc<watch::Caches>,
    leases: Arc<Mutex<HashMap<String, SharedLease>>>,
}

/// The lease last granted for one resource's expiring objects. Objects that expire at the same
/// instant share it, so a Kind whose objects expire on whole minutes (Events) grants one lease a
/// minute instead of one per object.
#[derive(Debug, Clone, Copy)]
struct SharedLease {
    expires: SystemTime,
    id: kayra_store::LeaseId,
    /// Whether a second object was put on it: then it is never given back early.
    shared: bool,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry").field("root", &self.root).finish_non_exhaustive()
    }
}

/// Which part of an object a write addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Part {
    /// The object: everything but `status` when status is a subresource.
    #[default]
    Main,
    /// The `/status` subresource: only `status`.
    Status,
    /// The `/approval` subresource of a certificate request: only `status.conditions` (what is
    /// decided there, and what may not be, is the Kind's and admission's to say).
    Approval,
    /// The `/binding` subresource of an Application: the object and its status in one write,
    /// as a placement sets the node and the `Scheduled` condition together. Admission decides
    /// it as a write of the object.
    Binding,
}

impl Part {
    /// Whether a write of this part changes the object itself (not only its status): what
    /// admission's rules about the object decide.
    pub fn writes_object(self) -> bool {
        matches!(self, Part::Main | Part::Binding)
    }
}

/// Options of a write.
#[derive(Clone, Default)]
pub struct WriteOptions {
    /// Validate and answer as if writing, but write nothing (`dryRun=All`).
    pub dry_run: bool,
    /// The object or its status.
    pub part: Part,
    /// What this writer may write, decided on the object as it would be stored.
    pub admission: Option<Arc<dyn Admission>>,
}

impl std::fmt::Debug for WriteOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WriteOptions")
            .field("dry_run", &self.dry_run)
            .field("part", &self.part)
            .field("admission", &self.admission.is_some())
            .finish()
    }
}

/// What a write does to an object, as admission sees it (a patch is an update of the patched
/// result).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    /// A new object.
    Create,
    /// A replaced object: an update or a patch, of the object or of a subresource.
    Update,
    /// A deleted object, or one marked for deletion while finalizers remain.
    Delete,
}

/// One write, as admission decides on it.
#[derive(Debug, Clone, Copy)]
pub struct AdmissionRequest<'a> {
    /// The resource written.
    pub resource: &'a Resource,
    /// What the write does.
    pub operation: Operation,
    /// The object or its status.
    pub part: Part,
    /// Whether nothing will be written (`dryRun=All`): admission decides the same way.
    pub dry_run: bool,
}

/// Why admission refuses a write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// The writer may not make this write (a policy): `Forbidden`, whatever the object.
    Forbidden(String),
    /// The object names something it may not (an invalid reference): `Invalid`, each field
    /// named.
    Invalid(Vec<FieldError>),
    /// The write conflicts with the state of other objects (a Service deleted while
    /// Applications still join it): `Conflict`, saying what holds it.
    Conflict(String),
}

/// A writer's admission: may change the object a create or update would store (after the Kind's
/// defaults, before its validation), then decides on it as it would be stored (defaulted and
/// valid) and on the object it replaces. Called for create, update, patch (on the patched
/// result), subresource writes and delete (with the object as it stands), dry run or not. A
/// refusal writes nothing.
pub trait Admission: Send + Sync {
    /// Changes `object` before it is validated (the mutating plugins); answers whether it
    /// changed it. `old` is what it replaces, on update.
    fn mutate(
        &self,
        request: &AdmissionRequest<'_>,
        object: &mut Object,
        old: Option<&Object>,
    ) -> Result<bool, Refusal>;

    /// Decides on `object` as it would be stored (on delete, as it stands) and on `old`, what
    /// it replaces (on delete, the same object).
    fn validate(
        &self,
        request: &AdmissionRequest<'_>,
        object: &Object,
        old: Option<&Object>,
    ) -> Result<(), Refusal>;
}

/// The registry's side of admission: which request it is, and a refusal as a [`RegistryError`].
fn admission_request<'a>(
    resource: &'a Resource,
    operation: Operation,
    part: Part,
    dry_run: bool,
) -> AdmissionRequest<'a> {
    AdmissionRequest { resource, operation, part, dry_run }
}

fn refused(resource: &Resource, object: &Object, refusal: Refusal) -> RegistryError {
    match refusal {
        Refusal::Forbidden(message) => RegistryError::Forbidden(message),
        Refusal::Invalid(causes) => invalid(resource, object, causes),
        Refusal::Conflict(message) => RegistryError::Conflict {
            resource: resource.qualified(),
            name: meta_str(object, "name").to_owned(),
            message,
        },
    }
}

impl WriteOptions {
    fn mutate(
        &self,
        resource: &Resource,
        operation: Operation,
        object: &mut Object,
        old: Option<&Object>,
    ) -> Result<bool, RegistryError> {
        let Some(admission) = &self.admission else { return Ok(false) };
        let request = admission_request(resource, operation, self.part, self.dry_run);
        admission.mutate(&request, object, old).map_err(|refusal| refused(resource, object, refusal))
    }

    fn validate(
        &self,
        resource: &Resource,
        operation: Operation,
        object: &Object,
        old: Option<&Object>,
    ) -> Result<(), RegistryError> {
        let Some(admission) = &self.admission else { return Ok(()) };
        let request = admission_request(resource, operation, self.part, self.dry_run);
        admission.validate(&request, object, old).map_err(|refusal| refused(resource, object, refusal))
    }
}

/// The patch formats the registry applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchKind {
    /// RFC 7386 JSON merge patch (`application/merge-patch+json`).
    Merge,
    /// RFC 6902 JSON patch (`application/json-patch+json`).
    Json,
}

/// The largest number of operations a JSON patch may hold.
pub const MAX_PATCH_OPERATIONS: usize = 10_000;

/// Options of a list.
#[derive(Debug, Clone, Default)]
pub struct ListOptions {
    /// `labelSelector`.
    pub label_selector: Option<String>,
    /// `fieldSelector`.
    pub field_selector: Option<String>,
    /// `limit`: at most this many items; a continue token brings the rest.
    pub limit: Option<usize>,
    /// `continue`: a token from a previous page.
    pub continue_token: Option<String>,
    /// `resourceVersion`.
    pub resource_version: Option<String>,
    /// `resourceVersionMatch`: `NotOlderThan` or `Exact`.
    pub resource_version_match: Option<String>,
}

/// One page of a list.
#[derive(Debug, Clone, PartialEq)]
pub struct List {
    /// The objects, in key order (namespace, then name).
    pub items: Vec<Object>,
    /// The revision the list was read at, as `metadata.resourceVersion`.
    pub resource_version: String,
    /// The token for the next page, when there is one.
    pub continue_token: Option<String>,
    /// How many more objects the remaining pages hold, when known.
    pub remaining_item_count: Option<u64>,
}

/// One page of a list as each item's JSON, exactly the bytes `serde_json` writes for the
/// object: from the watch cache's shared encodings when it can answer, else freshly encoded.
#[derive(Debug, Clone)]
pub struct JsonList {
    /// Each object's JSON, in key order.
    pub items: Vec<bytes::Bytes>,
    /// The revision the list was read at, as `metadata.resourceVersion`.
    pub resource_version: String,
    /// The token for the next page, when there is one.
    pub continue_token: Option<String>,
    /// How many more objects the remaining pages hold, when known.
    pub remaining_item_count: Option<u64>,
}

/// Preconditions and policy of a delete (the `DeleteOptions` body).
#[derive(Clone, Default)]
pub struct DeleteOptions {
    /// The object must have this uid.
    pub uid: Option<String>,
    /// The object must be at this resourceVersion.
    pub resource_version: Option<String>,
    /// `Orphan`, `Background` or `Foreground`.
    pub propagation_policy: Option<String>,
    /// Accepted for compatibility; deletion is immediate once finalizers are done.
    pub grace_period_seconds: Option<i64>,
    /// Validate and answer as if deleting, but delete nothing.
    pub dry_run: bool,
    /// Whether this deleter may delete the object, decided on the object as it stands.
    pub admission: Option<Arc<dyn Admission>>,
}

impl std::fmt::Debug for DeleteOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeleteOptions")
            .field("uid", &self.uid)
            .field("resource_version", &self.resource_version)
            .field("propagation_policy", &self.propagation_policy)
            .field("grace_period_seconds", &self.grace_period_seconds)
            .field("dry_run", &self.dry_run)
            .field("admission", &self.admission.is_some())
            .finish()
    }
}

impl DeleteOptions {
    fn validate(&self, resource: &Resource, object: &Object) -> Result<(), RegistryError> {
        let Some(admission) = &self.admission else { return Ok(()) };
        let request = admission_request(resource, Operation::Delete, Part::Main, self.dry_run);
        admission
            .validate(&request, object, Some(object))
            .map_err(|refusal| refused(resource, object, refusal))
    }
}

/// The finalizer a `Foreground` delete adds to an object that owns dependents: the garbage
/// collector deletes the dependents that block their owner's deletion, then removes it.
pub const FOREGROUND_FINALIZER: &str = "foregroundDeletion";

/// The finalizer an `Orphan` delete adds to an object that owns dependents: the garbage
/// collector releases the dependents (they stay, owned by nothing), then removes it.
pub const ORPHAN_FINALIZER: &str = "orphan";

const ORPHAN_POLICY: &str = "Orphan";
const FOREGROUND_POLICY: &str = "Foreground";

/// Records a delete's propagation policy in the finalizers of an object that owns dependents,
/// as kube-apiserver does: `Foreground` adds `foregroundDeletion` and drops `orphan`, `Orphan`
/// the reverse, `Background` drops both; no policy changes nothing. Also on an object already
/// terminating, so a second delete may change its mind. Answers whether the finalizers changed.
fn propagate(object: &mut Object, policy: Option<&str>) -> bool {
    let Some(policy) = policy else { return false };
    let wanted = match policy {
        FOREGROUND_POLICY => Some(FOREGROUND_FINALIZER),
        ORPHAN_POLICY => Some(ORPHAN_FINALIZER),
        _ => None,
    };
    let before = finalizers(object);
    let mut after: Vec<String> = before
        .iter()
        .filter(|f| {
            Some(f.as_str()) == wanted || !matches!(f.as_str(), FOREGROUND_FINALIZER | ORPHAN_FINALIZER)
        })
        .cloned()
        .collect();
    if let Some(wanted) = wanted.filter(|wanted| !after.iter().any(|f| f == wanted)) {
        after.push(wanted.to_owned());
    }
    if after == before {
        return false;
    }
    let metadata = object::metadata_mut(object);
    if after.is_empty() {
        metadata.remove("finalizers");
    } else {
        metadata.insert("finalizers".into(), json!(after));
    }
    true
}

/// What a delete did.
#[derive(Debug, Clone, PartialEq)]
pub enum Deleted {
    /// The object is gone; this was its last state.
    Gone(Object),
    /// The object has finalizers: it is marked for deletion and stays until they are removed.
    Pending(Object),
}

impl Registry {
    /// A registry keeping its objects under `root` (such as `/registry/`) in the store.
    pub fn new(store: Arc<dyn Store>, clock: Arc<dyn Clock>, root: impl Into<String>) -> Registry {
        Registry { store, clock, root: root.into(), caches: Arc::default(), leases: Arc::default() }
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
        self.caches.prime(&self.store, &resource.store_prefix(&self.root)).await
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
    fn key(&self, resource: &Resource, namespace: Option<&str>, name: &str) -> String {
        match (resource.namespaced, namespace) {
            (true, Some(namespace)) => format!("{}{namespace}/{name}", resource.store_prefix(&self.root)),
            _ => format!("{}{name}", resource.store_prefix(&self.root)),
        }
    }

    fn now(&self) -> String {
        let now = self.clock.now().duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default();
        let seconds = i64::try_from(now.as_secs()).unwrap_or(i64::MAX);
        jiff::Timestamp::from_second(seconds)
            .unwrap_or(jiff::Timestamp::UNIX_EPOCH)
            .strftime("%Y-%m-%dT%H:%M:%SZ")
            .to_string()
    }

    fn encode(object: &Object) -> Vec<u8> {
        let mut stored = object.clone();
        object::metadata_mut(&mut stored).remove("resourceVersion");
        serde_json::to_vec(&stored).expect("JSON values serialise")
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
            Some(kv) => object::decode_stored(&key, &kv.value, kv.mod_revision),
            None => Err(not_found(resource, name)),
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

    /// Creates an object in `namespace` (ignored for cluster-scoped resources).
    pub async fn create(
        &self,
        resource: &Resource,
        namespace: Option<&str>,
        body: Value,
        options: WriteOptions,
    ) -> Result<Object, RegistryError> {
        let mut object = self.body(resource, namespace, body)?;
        let metadata = object::metadata_mut(&mut object);
        if let Some(rv) = metadata.get("resourceVersion").and_then(Value::as_str).filter(|rv| !rv.is_empty())
        {
            let cause = FieldError::invalid(
                "metadata.resourceVersion",
                format!("\"{rv}\""),
                "resourceVersion should not be set on objects to be created",
            );
            return Err(invalid(resource, &object, vec![cause]));
        }
        let (uid, created) = (Value::String(uuid::Uuid::new_v4().to_string()), Value::String(self.now()));
        let stamp = |object: &mut Object| {
            let metadata = object::metadata_mut(object);
            for field in ["uid", "deletionTimestamp", "deletionGracePeriodSeconds", "selfLink"] {
                metadata.remove(field);
            }
            metadata.insert("uid".into(), uid.clone());
            metadata.insert("creationTimestamp".into(), created.clone());
            metadata.insert("generation".into(), json!(1));
        };
        stamp(&mut object);
        if resource.status_subresource && !resource.strategy.create_keeps_status() {
            object.remove("status");
        }
        resource.strategy.default(&mut object);
        if options.mutate(resource, Operation::Create, &mut object, None)? {
            // A mutating plugin changes only what the writer could: identity stays the server's.
            stamp(&mut object);
        }
        let generate = meta_str(&object, "name").is_empty() && !meta_str(&object, "generateName").is_empty();
        let mut causes = object::check_metadata(&object);
        if !generate {
            causes.extend(name_causes(resource, meta_str(&object, "name")));
        }
        causes.extend(resource.strategy.validate(&object, None));
        if !causes.is_empty() {
            return Err(invalid(resource, &object, causes));
        }
        options.validate(resource, Operation::Create, &object, None)?;
        if resource.namespaced {
            self.check_namespace_accepts(namespace.unwrap_or_default()).await?;
        }
        for _ in 0..RETRIES {
            if generate {
                let name = format!("{}{}", meta_str(&object, "generateName"), random_suffix());
                if let Some(message) = resource.strategy.validate_name(&name) {
                    return Err(invalid(
                        resource,
                        &object,
                        vec![FieldError::invalid("metadata.generateName", format!("\"{name}\""), &message)],
                    ));
                }
                object::metadata_mut(&mut object).insert("name".into(), Value::String(name));
            }
            let name = meta_str(&object, "name").to_owned();
            let key = self.key(resource, namespace, &name);
            if options.dry_run {
                if self.store.get(&key).await?.is_some() {
                    return Err(already_exists(resource, &name));
                }
                return Ok(object);
            }
            match self.create_key(resource, &object, &key).await? {
                Outcome::Applied(revision) => {
                    object::metadata_mut(&mut object)
                        .insert("resourceVersion".into(), Value::String(revision.to_string()));
                    return Ok(object);
                }
                Outcome::Conflict(_) if generate => continue,
                Outcome::Conflict(_) => return Err(already_exists(resource, &name)),
            }
        }
        Err(RegistryError::Conflict {
            resource: resource.qualified(),
            name: meta_str(&object, "generateName").to_owned(),
            message: "no free name could be generated; try again".to_owned(),
        })
    }

    /// Writes a new object's key; one that expires is attached to a lease that ends then.
    async fn create_key(
        &self,
        resource: &Resource,
        object: &Object,
        key: &str,
    ) -> Result<Outcome, RegistryError> {
        let Some(expires) = resource.strategy.expires_at(object) else {
            return Ok(self.store.create(key, Self::encode(object)).await?);
        };
        let value = Self::encode(object);
        let mut lease = self.lease_until(resource, object, expires).await?;
        let mut ended = false;
        let outcome = loop {
            let txn = Txn {
                compares: vec![Compare::Absent(key.to_owned())],
                ops: vec![Op::Put { key: key.to_owned(), value: value.clone(), lease: Some(lease) }],
            };
            match self.store.txn(txn).await {
                // A shared lease that ended early (revoked with everything on it): a fresh one.
                Err(kayra_store::StoreError::LeaseNotFound(_)) if !ended => {
                    ended = true;
                    self.forget_lease(resource, lease);
                    lease = self.lease_until(resource, object, expires).await?;
                }
                result => break Outcome::from(result?),
            }
        };
        if matches!(outcome, Outcome::Conflict(_)) {
            self.give_back(resource, lease).await;
        }
        Ok(outcome)
    }

    /// The lease an updated object lives on: the one it has while its expiry stays, a new one
    /// when its expiry moves, none when it no longer expires. Answers the lease and, when one was
    /// granted here, its id (to give back if the write loses a race).
    async fn lease_for_update(
        &self,
        resource: &Resource,
        old: &Object,
        object: &Object,
        current: Option<kayra_store::LeaseId>,
    ) -> Result<(Option<kayra_store::LeaseId>, Option<kayra_store::LeaseId>), RegistryError> {
        let Some(expires) = resource.strategy.expires_at(object) else { return Ok((None, None)) };
        if current.is_some() && resource.strategy.expires_at(old) == Some(expires) {
            return Ok((current, None));
        }
        let lease = self.lease_until(resource, object, expires).await?;
        Ok((Some(lease), Some(lease)))
    }

    /// A lease that ends at `expires` (at least a second from now): the one the resource's last
    /// object expiring then is on, else a new one; an object that would already have expired is
    /// invalid.
    async fn lease_until(
        &self,
        resource: &Resource,
        object: &Object,
        expires: SystemTime,
    ) -> Result<kayra_store::LeaseId, RegistryError> {
        let ttl = expires.duration_since(self.clock.now()).map_err(|_| {
            let cause = FieldError::invalid(
                "metadata",
                "<expiration>",
                "the object would expire before it is written",
            );
            invalid(resource, object, vec![cause])
        })?;
        let prefix = resource.store_prefix(&self.root);
        if let Some(last) = self.shared_leases().get_mut(&prefix)
            && last.expires == expires
        {
            last.shared = true;
            return Ok(last.id);
        }
        let id = self.store.grant_lease(ttl.max(std::time::Duration::from_secs(1))).await?.id;
        self.shared_leases().insert(prefix, SharedLease { expires, id, shared: false });
        Ok(id)
    }

    /// Gives back a lease granted for a write that lost its race, unless another object may be
    /// on it (then it ends when it was to, with nothing or that object on it).
    async fn give_back(&self, resource: &Resource, lease: kayra_store::LeaseId) {
        {
            let mut leases = self.shared_leases();
            let prefix = resource.store_prefix(&self.root);
            match leases.get(&prefix) {
                Some(last) if last.id == lease && !last.shared => {
                    leases.remove(&prefix);
                }
                _ => return,
            }
        }
        let _ = self.store.revoke_lease(lease).await;
    }

    /// Stops offering `lease` to objects that expire when it ends.
    fn forget_lease(&self, resource: &Resource, lease: kayra_store::LeaseId) {
        let mut leases = self.shared_leases();
        let prefix = resource.store_prefix(&self.root);
        if leases.get(&prefix).is_some_and(|last| last.id == lease) {
            leases.remove(&prefix);
        }
    }

    fn shared_leases(&self) -> std::sync::MutexGuard<'_, HashMap<String, SharedLease>> {
        self.leases.lock().expect("the lease table's lock is never held across a panic")
    }

    /// A namespace that does not exist, or is being deleted, takes no new objects.
    async fn check_namespace_accepts(&self, namespace: &str) -> Result<(), RegistryError> {
        let key = format!("{}core/namespaces/{namespace}", self.root);
        let Some(kv) = self.store.get(&key).await? else {
            return Err(RegistryError::NotFound {
                resource: "namespaces".to_owned(),
                name: namespace.to_owned(),
            });
        };
        let namespace_object = object::decode_stored(&key, &kv.value, kv.mod_revision)?;
        let terminating = !meta_str(&namespace_object, "deletionTimestamp").is_empty()
            || path(&namespace_object, "status.phase").and_then(Value::as_str) == Some("Terminating");
        if terminating {
            return Err(RegistryError::Forbidden(format!(
                "unable to create new content in namespace {namespace} because it is being terminated"
            )));
        }
        Ok(())
    }

    /// Checks a request body's envelope: a map whose `apiVersion`, `kind` and namespace (when
    /// given) agree with the request.
    fn body(
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

    /// Replaces an object (or its status). A `resourceVersion` in the body must be current;
    /// without one the write applies to whatever is current.
    pub async fn update(
        &self,
        resource: &Resource,
        namespace: Option<&str>,
        name: &str,
        body: Value,
        options: WriteOptions,
    ) -> Result<Object, RegistryError> {
        let object = self.body(resource, namespace, body)?;
        let given = meta_str(&object, "name");
        if given != name {
            return Err(RegistryError::BadRequest(format!(
                "the name of the object ({given}) does not match the name on the URL ({name})"
            )));
        }
        let expected = match meta_str(&object, "resourceVersion") {
            "" => None,
            rv => Some(parse_revision(rv)?),
        };
        self.replace(resource, namespace, name, expected, options, |_| Ok(object.clone())).await
    }

    /// Writes what `build` makes of the current object, at `resource_version` when given (else
    /// on whatever is current, built again when another writer won a race): for a subresource
    /// whose write is computed from the object as it stands, such as a binding.
    pub async fn update_with(
        &self,
        resource: &Resource,
        namespace: Option<&str>,
        name: &str,
        resource_version: Option<&str>,
        options: WriteOptions,
        build: impl Fn(&Object) -> Result<Object, RegistryError>,
    ) -> Result<Object, RegistryError> {
        let expected = resource_version.filter(|rv| !rv.is_empty()).map(parse_revision).transpose()?;
        let build = |current: &Object| -> Result<Object, RegistryError> {
            let built = build(current)?;
            let built = self.body(resource, namespace, Value::Object(built))?;
            if meta_str(&built, "name") != name {
                return Err(RegistryError::BadRequest("a write may not change the object's name".to_owned()));
            }
            Ok(built)
        };
        self.replace(resource, namespace, name, expected, options, build).await
    }

    /// Applies a patch to the current object (or its status) and writes the result. A patch
    /// that sets `metadata.resourceVersion` applies only at that version; otherwise a patch
    /// that loses a race to another writer is re-applied to the newer object.
    pub async fn patch(
        &self,
        resource: &Resource,
        namespace: Option<&str>,
        name: &str,
        kind: PatchKind,
        patch: &[u8],
        options: WriteOptions,
    ) -> Result<Object, RegistryError> {
        let patch: Value = serde_json::from_slice(patch)
            .map_err(|error| RegistryError::BadRequest(format!("the patch is not valid JSON: {error}")))?;
        let operations = match kind {
            PatchKind::Json => {
                let operations: json_patch::Patch =
                    serde_json::from_value(patch.clone()).map_err(|error| {
                        RegistryError::BadRequest(format!("the JSON patch is malformed: {error}"))
                    })?;
                if operations.0.len() > MAX_PATCH_OPERATIONS {
                    return Err(RegistryError::BadRequest(format!(
                        "the JSON patch has {} operations, more than the {MAX_PATCH_OPERATIONS} allowed",
                        operations.0.len()
                    )));
                }
                Some(operations)
            }
            PatchKind::Merge => {
                if !patch.is_object() {
                    return Err(RegistryError::BadRequest("a merge patch must be a JSON object".to_owned()));
                }
                None
            }
        };
        let apply = |current: &Object| -> Result<Object, RegistryError> {
            let mut document = Value::Object(current.clone());
            match &operations {
                Some(operations) => apply_bounded(&mut document, operations)?,
                None => json_patch::merge(&mut document, &patch),
            }
            let patched = self.body(resource, namespace, document)?;
            if meta_str(&patched, "name") != name {
                return Err(RegistryError::BadRequest("a patch may not change the object's name".to_owned()));
            }
            Ok(patched)
        };
        let pinned = match kind {
            PatchKind::Merge => patch.pointer("/metadata/resourceVersion").and_then(Value::as_str),
            PatchKind::Json => None,
        };
        let expected = pinned.filter(|rv| !rv.is_empty()).map(parse_revision).transpose()?;
        self.replace(resource, namespace, name, expected, options, apply).await
    }

    /// The heart of update and patch: read, build the new object from the current one, carry
    /// over what clients cannot change, validate, and compare-and-swap; retried when another
    /// writer won a race and the caller did not pin a version.
    async fn replace(
        &self,
        resource: &Resource,
        namespace: Option<&str>,
        name: &str,
        expected: Option<Revision>,
        options: WriteOptions,
        build: impl Fn(&Object) -> Result<Object, RegistryError>,
    ) -> Result<Object, RegistryError> {
        let key = self.key(resource, namespace, name);
        for _ in 0..RETRIES {
            let Some(current) = self.store.get(&key).await? else {
                return Err(not_found(resource, name));
            };
            if expected.is_some_and(|expected| expected != current.mod_revision) {
                return Err(stale(resource, name));
            }
            let old = object::decode_stored(&key, &current.value, current.mod_revision)?;
            let mut object = build(&old)?;
            let mut causes = object::check_metadata(&object);
            if !causes.is_empty() {
                return Err(invalid(resource, &object, std::mem::take(&mut causes)));
            }
            carry_over(resource, &old, &mut object, options.part);
            resource.strategy.default(&mut object);
            if options.mutate(resource, Operation::Update, &mut object, Some(&old))? {
                // A mutating plugin changes only what the writer could: identity, history and
                // the part not written stay as stored.
                carry_over(resource, &old, &mut object, options.part);
            }
            causes.extend(resource.strategy.validate(&object, Some(&old)));
            if !causes.is_empty() {
                return Err(invalid(resource, &object, causes));
            }
            options.validate(resource, Operation::Update, &object, Some(&old))?;
            if object::spec_of(&object) != object::spec_of(&old) {
                let generation = path(&old, "metadata.generation").and_then(Value::as_i64).unwrap_or(0) + 1;
                object::metadata_mut(&mut object).insert("generation".into(), json!(generation));
            }
            let finished =
                !meta_str(&object, "deletionTimestamp").is_empty() && !resource.strategy.finalizing(&object);
            if options.dry_run {
                return Ok(object);
            }
            if finished {
                match self.store.delete_if(&key, current.mod_revision).await? {
                    Outcome::Applied(_) => return Ok(object),
                    Outcome::Conflict(_) if expected.is_none() => continue,
                    Outcome::Conflict(_) => return Err(stale(resource, name)),
                }
            }
            if object == old {
                return Ok(old);
            }
            let (lease, granted) = self.lease_for_update(resource, &old, &object, current.lease).await?;
            let txn = Txn {
                compares: vec![Compare::ModifiedAt(key.clone(), current.mod_revision)],
                ops: vec![Op::Put { key: key.clone(), value: Self::encode(&object), lease }],
            };
            let outcome = match (self.store.txn(txn).await, granted) {
                // A shared lease that ended early (revoked with everything on it): the next
                // attempt is granted a fresh one.
                (Err(kayra_store::StoreError::LeaseNotFound(_)), Some(granted)) => {
                    self.forget_lease(resource, granted);
                    continue;
                }
                (result, _) => Outcome::from(result?),
            };
            if let (Some(granted), Outcome::Conflict(_)) = (granted, &outcome) {
                self.give_back(resource, granted).await;
            }
            match outcome {
                Outcome::Applied(revision) => {
                    object::metadata_mut(&mut object)
                        .insert("resourceVersion".into(), Value::String(revision.to_string()));
                    return Ok(object);
                }
                Outcome::Conflict(None) => return Err(not_found(resource, name)),
                Outcome::Conflict(Some(_)) if expected.is_none() => continue,
                Outcome::Conflict(Some(_)) => return Err(stale(resource, name)),
            }
        }
        Err(stale(resource, name))
    }

    /// Deletes an object, or marks it for deletion while finalizers remain. The deleter's
    /// admission decides on the object as it stands; a refusal deletes nothing, dry run or not.
    pub async fn delete(
        &self,
        resource: &Resource,
        namespace: Option<&str>,
        name: &str,
        options: &DeleteOptions,
    ) -> Result<Deleted, RegistryError> {
        if let Some(policy) = &options.propagation_policy
            && !matches!(policy.as_str(), ORPHAN_POLICY | "Background" | FOREGROUND_POLICY)
        {
            return Err(RegistryError::BadRequest(format!(
                "propagationPolicy {policy:?} is not one of Orphan, Background, Foreground"
            )));
        }
        if options.grace_period_seconds.is_some_and(|seconds| seconds < 0) {
            return Err(RegistryError::BadRequest("gracePeriodSeconds must not be negative".to_owned()));
        }
        let pinned = options
            .resource_version
            .as_deref()
            .filter(|rv| !rv.is_empty())
            .map(parse_revision)
            .transpose()?;
        let key = self.key(resource, namespace, name);
        for _ in 0..RETRIES {
            let Some(current) = self.store.get(&key).await? else {
                return Err(not_found(resource, name));
            };
            let mut object = object::decode_stored(&key, &current.value, current.mod_revision)?;
            if let Some(uid) = options.uid.as_deref().filter(|uid| *uid != meta_str(&object, "uid")) {
                return Err(RegistryError::Conflict {
                    resource: resource.qualified(),
                    name: name.to_owned(),
                    message: format!(
                        "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                        meta_str(&object, "uid")
                    ),
                });
            }
            if let Some(rv) = pinned.filter(|rv| *rv != current.mod_revision) {
                return Err(RegistryError::Conflict {
                    resource: resource.qualified(),
                    name: name.to_owned(),
                    message: format!(
                        "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {}",
                        current.mod_revision
                    ),
                });
            }
            options.validate(resource, &object)?;
            let refinalized = resource.strategy.owns_dependents()
                && propagate(&mut object, options.propagation_policy.as_deref());
            let terminating = !meta_str(&object, "deletionTimestamp").is_empty();
            if resource.strategy.finalizing(&object) {
                if terminating && !refinalized {
                    return Ok(Deleted::Pending(object));
                }
                if !terminating {
                    let metadata = object::metadata_mut(&mut object);
                    metadata.insert("deletionTimestamp".into(), Value::String(self.now()));
                    metadata.insert("deletionGracePeriodSeconds".into(), json!(0));
                    resource.strategy.mark_deleting(&mut object);
                }
                if options.dry_run {
                    return Ok(Deleted::Pending(object));
                }
                // The key stays on its lease: an update does not make an expiring object permanent.
                let txn = Txn {
                    compares: vec![Compare::ModifiedAt(key.clone(), current.mod_revision)],
                    ops: vec![Op::Put {
                        key: key.clone(),
                        value: Self::encode(&object),
                        lease: current.lease,
                    }],
                };
                match Outcome::from(self.store.txn(txn).await?) {
                    Outcome::Applied(revision) => {
                        object::metadata_mut(&mut object)
                            .insert("resourceVersion".into(), Value::String(revision.to_string()));
                        return Ok(Deleted::Pending(object));
                    }
                    Outcome::Conflict(_) => continue,
                }
            }
            if options.dry_run {
                return Ok(Deleted::Gone(object));
            }
            match self.store.delete_if(&key, current.mod_revision).await? {
                Outcome::Applied(_) => return Ok(Deleted::Gone(object)),
                Outcome::Conflict(_) => continue,
            }
        }
        Err(stale(resource, name))
    }

    /// One page of the objects in `namespace` (every namespace when `None`) that match the
    /// selectors, read at one revision however many pages it takes.
    pub async fn list(
        &self,
        resource: &Resource,
        namespace: Option<&str>,
        options: &ListOptions,
    ) -> Result<List, RegistryError> {
        let (labels, fields) = selectors(resource, &options.label_selector, &options.field_selector)?;
        let (base, prefix) = self.list_prefixes(resource, namespace);
        let (revision, start) = self.list_start(options, &base, &prefix).await?;
        let limit = options.limit.filter(|limit| *limit > 0).unwrap_or(MAX_PAGE).min(MAX_PAGE);
        let filtered = !labels.is_empty() || !fields.is_empty();
        let mut items = Vec::new();
        let mut next = start;
        let mut read_at = revision;
        let mut remaining = None;
        let mut continue_from = None;
        'pages: loop {
            // Without selectors every key read is an item, so read exactly what is missing;
            // with them, read in chunks until enough match.
            let chunk = if filtered { (limit - items.len()).max(500) } else { limit - items.len() };
            let request = RangeRequest {
                prefix: prefix.clone(),
                start: Some(next.clone()),
                limit: Some(chunk),
                revision: read_at,
            };
            let page = match self.store.range(&request).await {
                Ok(page) => page,
                Err(StoreError::Compacted { requested, compacted }) => {
                    return Err(expired(
                        options.continue_token.is_some(),
                        &next,
                        &base,
                        requested,
                        compacted,
                    ));
                }
                Err(error) => return Err(error.into()),
            };
            read_at = Some(page.revision);
            let read = page.kvs.len();
            let mut last_key = None;
            for (at, kv) in page.kvs.into_iter().enumerate() {
                let object = object::decode_stored(&kv.key, &kv.value, kv.mod_revision)?;
                if labels.matches(&object::labels(&object)) && fields.matches(&Value::Object(object.clone()))
                {
                    items.push(object);
                }
                if items.len() == limit {
                    if at + 1 < read || page.more {
                        continue_from = Some(format!("{}\0", kv.key));
                        remaining = (!filtered).then(|| (page.count - (at + 1)) as u64);
                    }
                    break 'pages;
                }
                last_key = Some(kv.key);
            }
            match last_key {
                Some(key) if page.more => next = format!("{key}\0"),
                _ => break,
            }
        }
        let revision = read_at.unwrap_or_default();
        let continue_token = continue_from
            .and_then(|key| key.strip_prefix(&base).map(str::to_owned))
            .map(|start| Continue::new(revision, start).encode());
        Ok(List {
            items,
            resource_version: revision.to_string(),
            remaining_item_count: remaining.filter(|_| continue_token.is_some()).filter(|n| *n > 0),
            continue_token,
        })
    }

    /// As [`Registry::list`], each item as its JSON. A list of the latest state (no
    /// `resourceVersion`, or `0`; no continue token, no `resourceVersionMatch`) is answered from
    /// the resource's watch cache once it has applied every change the store had when the list
    /// began, so it is as recent as a read of the store; its items are the cache's encodings,
    /// made once per object version. Anything else, or a cache that lags, reads the store.
    pub async fn list_json(
        &self,
        resource: &Resource,
        namespace: Option<&str>,
        options: &ListOptions,
    ) -> Result<JsonList, RegistryError> {
        let empty = |value: &Option<String>| value.as_deref().is_none_or(str::is_empty);
        let latest = empty(&options.continue_token)
            && empty(&options.resource_version_match)
            && options.resource_version.as_deref().is_none_or(|rv| rv.is_empty() || rv == "0");
        if latest {
            let (labels, fields) = selectors(resource, &options.label_selector, &options.field_selector)?;
            let (base, prefix) = self.list_prefixes(resource, namespace);
            let limit = options.limit.filter(|limit| *limit > 0).unwrap_or(MAX_PAGE).min(MAX_PAGE);
            let current = self.store.revision().await?;
            if let Some(page) = self.caches.page(&base, &prefix, current, labels, fields, limit) {
                let continue_token = page
                    .next
                    .and_then(|key| key.strip_prefix(&base).map(str::to_owned))
                    .map(|start| Continue::new(page.revision, start).encode());
                return Ok(JsonList {
                    items: page.items,
                    resource_version: page.revision.to_string(),
                    remaining_item_count: page
                        .remaining
                        .filter(|_| continue_token.is_some())
                        .filter(|n| *n > 0),
                    continue_token,
                });
            }
        }
        let list = self.list(resource, namespace, options).await?;
        Ok(JsonList {
            items: list
                .items
                .iter()
                .map(|item| {
                    bytes::Bytes::from(serde_json::to_vec(item).expect("a JSON map always serializes"))
                })
                .collect(),
            resource_version: list.resource_version,
            continue_token: list.continue_token,
            remaining_item_count: list.remaining_item_count,
        })
    }

    /// Where a resource's objects are kept, and where those of `namespace` are (every
    /// namespace's, the same, when `None` or for cluster objects).
    fn list_prefixes(&self, resource: &Resource, namespace: Option<&str>) -> (String, String) {
        let base = resource.store_prefix(&self.root);
        let prefix = match (resource.namespaced, namespace) {
            (true, Some(namespace)) => format!("{base}{namespace}/"),
            _ => base.clone(),
        };
        (base, prefix)
    }

    /// Where a list starts: the revision to read at (`None` for the latest) and the first key.
    async fn list_start(
        &self,
        options: &ListOptions,
        base: &str,
        prefix: &str,
    ) -> Result<(Option<Revision>, String), RegistryError> {
        let rv = options.resource_version.as_deref().filter(|rv| !rv.is_empty());
        if let Some(token) = options.continue_token.as_deref().filter(|token| !token.is_empty()) {
            if rv.is_some_and(|rv| rv != "0") {
                return Err(RegistryError::BadRequest(
                    "specifying resource version is not allowed when using continue".to_owned(),
                ));
            }
            let token = Continue::decode(token).ok_or_else(|| {
                RegistryError::BadRequest(
                    "continue key is not valid: it was not issued by this server".to_owned(),
                )
            })?;
            let start = format!("{base}{}", token.start);
            if !start.starts_with(prefix) {
                return Err(RegistryError::BadRequest(
                    "continue key does not belong to this list".to_owned(),
                ));
            }
            return Ok(((token.rv > 0).then_some(token.rv), start));
        }
        let revision = match (rv, options.resource_version_match.as_deref().filter(|m| !m.is_empty())) {
            (None, Some(_)) => {
                return Err(RegistryError::BadRequest(
                    "resourceVersionMatch is forbidden unless resourceVersion is provided".to_owned(),
                ));
            }
            (None | Some("0"), None) => None,
            (Some(rv), Some("Exact")) => Some(parse_revision(rv)?),
            (Some(rv), None | Some("NotOlderThan")) => {
                let requested = parse_revision(rv)?;
                let current = self.store.revision().await?;
                if requested > current {
                    return Err(RegistryError::TooLargeResourceVersion { requested, current });
                }
                None
            }
            (Some(_), Some(other)) => {
                return Err(RegistryError::BadRequest(format!(
                    "resourceVersionMatch {other:?} is not one of NotOlderThan, Exact"
                )));
            }
        };
        Ok((revision, prefix.to_owned()))
    }
}

/// The answer to a list whose revision is older than the retained history: for a continue
/// token, a hint token that lists the rest at the latest revision.
fn expired(
    continuing: bool,
    next: &str,
    base: &str,
    requested: Revision,
    compacted: Revision,
) -> RegistryError {
    if continuing {
        let hint = next.strip_prefix(base).map(|start| Continue::new(0, start.to_owned()).encode());
        return RegistryError::Expired {
            message: "The provided continue parameter is too old to display a consistent list result. You can \
                      start a new list without the continue parameter, or use the continue token in this \
                      response to retrieve the remainder of the results. Continuing with the provided token \
                      results in an inconsistent list - objects that were created, modified, or deleted between \
                      the time the first chunk was returned and now may show up in the list."
                .to_owned(),
            continue_from: hint,
        };
    }
    RegistryError::Expired {
        message: format!("too old resource version: {requested} ({compacted})"),
        continue_from: None,
    }
}

impl Registry {
    /// Moves a terminating namespace along: deletes everything it holds in `contents`, and once
    /// nothing is left (objects with finalizers of their own are waited for), removes the
    /// `kubernetes` finalizer so the namespace itself goes. Answers whether it is gone.
    pub async fn finalize_namespace(
        &self,
        namespaces: &Resource,
        contents: &[Resource],
        name: &str,
    ) -> Result<bool, RegistryError> {
        let namespace = match self.get(namespaces, None, name).await {
            Ok(namespace) => namespace,
            Err(RegistryError::NotFound { .. }) => return Ok(true),
            Err(error) => return Err(error),
        };
        if meta_str(&namespace, "deletionTimestamp").is_empty() {
            return Ok(false);
        }
        let mut remaining = 0;
        for resource in contents.iter().filter(|r| r.namespaced) {
            let list = self.list(resource, Some(name), &ListOptions::default()).await?;
            for item in list.items {
                remaining += 1;
                if meta_str(&item, "deletionTimestamp").is_empty() {
                    match self
                        .delete(resource, Some(name), meta_str(&item, "name"), &DeleteOptions::default())
                        .await
                    {
                        Ok(Deleted::Gone(_)) => remaining -= 1,
                        Ok(Deleted::Pending(_)) | Err(RegistryError::NotFound { .. }) => {}
                        Err(error) => return Err(error),
                    }
                }
            }
        }
        if remaining > 0 {
            return Ok(false);
        }
        let finalizers: Vec<Value> = path(&namespace, "spec.finalizers")
            .and_then(Value::as_array)
            .map(|list| list.iter().filter(|f| f.as_str() != Some("kubernetes")).cloned().collect())
            .unwrap_or_default();
        let patch =
            serde_json::to_vec(&json!({"spec": {"finalizers": finalizers}})).expect("JSON serialises");
        match self.patch(namespaces, None, name, PatchKind::Merge, &patch, WriteOptions::default()).await {
            Ok(_) | Err(RegistryError::NotFound { .. }) => Ok(true),
            Err(error) => Err(error),
        }
    }
}

/// The largest document a JSON patch may build, in bytes: no stored object can be larger.
const MAX_PATCHED_SIZE: usize = 3 * 1024 * 1024;

/// Applies a JSON patch one operation at a time, refusing it as soon as copies and additions
/// would grow the document past [`MAX_PATCHED_SIZE`]: a few `copy` operations can otherwise
/// double it again and again. Measuring costs at most the bound, since each added value counts.
fn apply_bounded(document: &mut Value, operations: &json_patch::Patch) -> Result<(), RegistryError> {
    let size = |value: &Value| serde_json::to_vec(value).map_or(usize::MAX, |bytes| bytes.len());
    let mut total = size(document);
    for operation in &operations.0 {
        let described = serde_json::to_value(operation).unwrap_or(Value::Null);
        let added = match described.get("op").and_then(Value::as_str) {
            Some("add" | "replace") => described.get("value").map_or(0, size),
            Some("copy") => described
                .get("from")
                .and_then(Value::as_str)
                .and_then(|from| document.pointer(from))
                .map_or(0, size),
            _ => 0,
        };
        total = total.saturating_add(added);
        if total > MAX_PATCHED_SIZE {
            return Err(RegistryError::BadRequest(format!(
                "the JSON patch would grow the object past {MAX_PATCHED_SIZE} bytes"
            )));
        }
        json_patch::patch(document, std::slice::from_ref(operation))
            .map_err(|error| RegistryError::BadRequest(format!("the JSON patch does not apply: {error}")))?;
    }
    Ok(())
}

/// Copies onto a written object what the writer may not change: identity and history always,
/// and `status` (on the object), everything but `status` (on `/status`) or everything but
/// `status.conditions` (on `/approval`); a binding writes the object and its status.
fn carry_over(resource: &Resource, old: &Object, object: &mut Object, part: Part) {
    if part == Part::Approval {
        let conditions = object.get("status").and_then(|status| status.get("conditions")).cloned();
        *object = old.clone();
        let status = object.entry("status").or_insert_with(|| Value::Object(Default::default()));
        if let Some(status) = status.as_object_mut() {
            match conditions {
                Some(conditions) => status.insert("conditions".into(), conditions),
                None => status.remove("conditions"),
            };
        }
        return;
    }
    if part == Part::Status {
        let status = object.remove("status");
        *object = old.clone();
        match status {
            Some(status) => object.insert("status".into(), status),
            None => object.remove("status"),
        };
        return;
    }
    if resource.status_subresource && part == Part::Main {
        match old.get("status") {
            Some(status) => object.insert("status".into(), status.clone()),
            None => object.remove("status"),
        };
        resource.strategy.carried_status(old, object);
    }
    let old_metadata = old.get("metadata").and_then(Value::as_object).cloned().unwrap_or_default();
    let metadata = object::metadata_mut(object);
    for field in [
        "uid",
        "creationTimestamp",
        "generation",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "namespace",
        "resourceVersion",
    ] {
        match old_metadata.get(field) {
            Some(value) => metadata.insert(field.into(), value.clone()),
            None => metadata.remove(field),
        };
    }
}

fn parse_revision(rv: &str) -> Result<Revision, RegistryError> {
    rv.parse::<Revision>().map_err(|_| {
        RegistryError::BadRequest(format!("resourceVersion {rv:?} is not one this server issued"))
    })
}

fn name_causes(resource: &Resource, name: &str) -> Vec<FieldError> {
    if name.is_empty() {
        return vec![FieldError::required("metadata.name")];
    }
    resource
        .strategy
        .validate_name(name)
        .map(|message| FieldError::invalid("metadata.name", format!("\"{name}\""), &message))
        .into_iter()
        .collect()
}

fn random_suffix() -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    uuid::Uuid::new_v4().as_bytes()[..5]
        .iter()
        .map(|b| ALPHABET[usize::from(*b) % ALPHABET.len()] as char)
        .collect()
}

fn not_found(resource: &Resource, name: &str) -> RegistryError {
    RegistryError::NotFound { resource: resource.qualified(), name: name.to_owned() }
}

fn already_exists(resource: &Resource, name: &str) -> RegistryError {
    RegistryError::AlreadyExists { resource: resource.qualified(), name: name.to_owned() }
}

fn stale(resource: &Resource, name: &str) -> RegistryError {
    RegistryError::Conflict {
        resource: resource.qualified(),
        name: name.to_owned(),
        message:
            "the object has been modified; please apply your changes to the latest version and try again"
                .to_owned(),
    }
}

fn invalid(resource: &Resource, object: &Object, causes: Vec<FieldError>) -> RegistryError {
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
