//! The catalog over the storage port: registrations scoped to this instance's platform and
//! region, their short names kept unique in the same transaction as the write, dependencies that
//! may cross scopes, subscriptions per namespace, syncs, and the sync status.
//!
//! Objects are stored as JSON in the Kubernetes envelope (`apiVersion`, `kind`, `metadata`)
//! around the flat fields users write, so that the API can serve them like any other Kind.
//! Keys, under `<root>catalog.<domain>/`:
//!
//! - `apiregistrations/<platform>/<region>/<name>`
//! - `shortnames/<platform>/<region>/<short_name>` (holds the registration's name)
//! - `subscriptions/<platform>/<region>/<namespace>/<api>`

use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use kayra_api::clock::Clock;
use kayra_store::{Compare, KeyValue, Op, RangeRequest, Revision, Store, StoreError, Txn, TxnResult};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};

use crate::ports::{NamespaceState, Namespaces};
use crate::{
    ApiRegistration, IdGenerator, Problem, RegistrationStatus, Subscription, SyncError, SyncRequest, status,
    sync, validate,
};

mod reconcile;

pub use reconcile::{Attempt, Report, SpecFetcher, StoredSpec};

/// How many times a write that lost a race is retried.
const RETRIES: usize = 8;

/// Where this catalog lives: the store's root, the deployment's domain, the instance's
/// platform and region, and the API groups the embedder serves itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scope {
    /// The store prefix every Kayra key starts with (`/registry/`).
    pub root: String,
    /// The deployment's domain (`example.com`).
    pub domain: String,
    /// This instance's platform.
    pub platform: String,
    /// This instance's region.
    pub region: String,
    /// API groups the embedder serves itself, which no registration may take (Kayra passes
    /// every group of its scheme: `fleet.<domain>`, `authorization.k8s.io`, ...). The catalog's
    /// own group, `catalog.<domain>`, is reserved whatever this holds.
    pub reserved_groups: Vec<String>,
}

/// Why a catalog operation failed, as the API reports it.
#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    /// The request is malformed or names something invalid (400).
    #[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    Invalid(Vec<Problem>),
    /// What the request addresses does not exist (404): a registration, a subscription, or
    /// the namespace a subscription would live in.
    #[error("{0}")]
    NotFound(String),
    /// The namespace a subscription would live in is being deleted, so it takes no new
    /// subscriptions (403).
    #[error("unable to create new content in namespace {0} because it is being terminated")]
    NamespaceTerminating(String),
    /// The request conflicts with what is stored (409).
    #[error("{0}")]
    Conflict(String),
    /// A canary names a namespace that is not subscribed (404).
    #[error(transparent)]
    Sync(#[from] SyncError),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A stored object does not decode.
    #[error("the stored object at {key} does not decode: {reason}")]
    Corrupt {
        /// Its key.
        key: String,
        /// Why.
        reason: String,
    },
}

impl CatalogError {
    /// Whether trying again unchanged may succeed: the store was away, or another writer won a
    /// race.
    pub fn is_retryable(&self) -> bool {
        match self {
            CatalogError::Store(error) => error.is_retryable(),
            CatalogError::Conflict(_) => true,
            CatalogError::Invalid(_)
            | CatalogError::NotFound(_)
            | CatalogError::NamespaceTerminating(_)
            | CatalogError::Sync(_)
            | CatalogError::Corrupt { .. } => false,
        }
    }
}

/// An object as stored: its fields, its metadata, and the revision it was written at.
#[derive(Debug, Clone, PartialEq)]
pub struct Stored<T> {
    /// The object.
    pub object: T,
    /// Its `metadata` (name, namespace, uid, creationTimestamp), without `resourceVersion`.
    pub metadata: Map<String, Value>,
    /// The store revision of its last write.
    pub revision: Revision,
}

impl<T: Serialize> Stored<T> {
    /// The object as the API answers it: its fields, `apiVersion`, `kind`, and `metadata` with
    /// `resourceVersion`.
    pub fn to_json(&self, api_version: &str, kind: &str) -> Value {
        let mut value = serde_json::to_value(&self.object).unwrap_or_else(|_| json!({}));
        let mut metadata = self.metadata.clone();
        metadata.insert("resourceVersion".into(), Value::String(self.revision.to_string()));
        if let Value::Object(map) = &mut value {
            map.insert("apiVersion".into(), Value::String(api_version.to_owned()));
            map.insert("kind".into(), Value::String(kind.to_owned()));
            map.insert("metadata".into(), Value::Object(metadata));
        }
        value
    }
}

/// The catalog of one instance, over a store.
pub struct Catalog {
    store: Arc<dyn Store>,
    scope: Scope,
    namespaces: Arc<dyn Namespaces>,
    ids: Arc<dyn IdGenerator>,
    clock: Arc<dyn Clock>,
    /// The registrations whose document could not be fetched, and when to try again.
    fetches: Mutex<reconcile::backoff::FetchBackoff>,
}

impl std::fmt::Debug for Catalog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Catalog").field("scope", &self.scope).finish_non_exhaustive()
    }
}

impl Catalog {
    /// The catalog of `scope` over `store`, its subscribers living in `namespaces`.
    pub fn new(
        store: Arc<dyn Store>,
        scope: Scope,
        namespaces: Arc<dyn Namespaces>,
        ids: Arc<dyn IdGenerator>,
        clock: Arc<dyn Clock>,
    ) -> Catalog {
        Catalog { store, scope, namespaces, ids, clock, fetches: Mutex::default() }
    }

    /// The store the catalog keeps its objects in.
    pub fn store(&self) -> Arc<dyn Store> {
        self.store.clone()
    }

    /// The key of this instance's election for a loop named `name`: replicas of one platform
    /// and region share it, other scopes have their own.
    pub fn election_key(&self, name: &str) -> String {
        format!("{}elections/{name}/{}", self.scope.root, self.scope_path())
    }

    /// `catalog.<domain>/v1`.
    pub fn api_version(&self) -> String {
        format!("catalog.{}/v1", self.scope.domain)
    }

    fn folder(&self, what: &str) -> String {
        format!("{}catalog.{}/{what}/", self.scope.root, self.scope.domain)
    }

    fn registration_key_in(&self, platform: &str, region: &str, name: &str) -> String {
        format!("{}{}/{}/{name}", self.folder("apiregistrations"), segment(platform), segment(region))
    }

    /// `<platform>/<region>/` of this instance, as keys spell it.
    fn scope_path(&self) -> String {
        format!("{}/{}/", segment(&self.scope.platform), segment(&self.scope.region))
    }

    /// Watches every change to the catalog, in every scope, from now on.
    pub async fn changes(&self) -> Result<kayra_store::Watcher, CatalogError> {
        let revision = self.store.revision().await?;
        Ok(self.store.watch(&self.changes_prefix(), revision).await?)
    }

    /// The store prefix holding the whole catalog, every scope: what a loop over it watches.
    pub fn changes_prefix(&self) -> String {
        format!("{}catalog.{}/", self.scope.root, self.scope.domain)
    }

    fn registration_key(&self, name: &str) -> String {
        self.registration_key_in(&self.scope.platform, &self.scope.region, name)
    }

    fn short_name_key(&self, short: &str) -> String {
        format!("{}{}{short}", self.folder("shortnames"), self.scope_path())
    }

    fn subscriptions_prefix(&self) -> String {
        format!("{}{}", self.folder("subscriptions"), self.scope_path())
    }

    fn subscription_key(&self, namespace: &str, api: &str) -> String {
        format!("{}{namespace}/{api}", self.subscriptions_prefix())
    }

    fn metadata(&self, name: &str, namespace: Option<&str>) -> Map<String, Value> {
        let mut metadata = Map::new();
        metadata.insert("name".into(), Value::String(name.to_owned()));
        if let Some(namespace) = namespace {
            metadata.insert("namespace".into(), Value::String(namespace.to_owned()));
        }
        metadata.insert("uid".into(), Value::String(uuid::Uuid::new_v4().to_string()));
        metadata.insert("creationTimestamp".into(), Value::String(timestamp(self.clock.now())));
        metadata
    }

    /// Creates a registration in this instance's scope: platform and region stamped whatever
    /// the body says, a sync_id minted when none is given, the short name claimed. A reserved
    /// group (see [`Scope::reserved_groups`]) cannot be registered.
    pub async fn create_registration(
        &self,
        mut body: ApiRegistration,
    ) -> Result<Stored<ApiRegistration>, CatalogError> {
        body.platform.clone_from(&self.scope.platform);
        body.region.clone_from(&self.scope.region);
        body.canary_namespaces.clear();
        if self.is_reserved(&body.name) {
            return Err(CatalogError::Invalid(vec![Problem::Invalid {
                field: "name".to_owned(),
                message: format!(
                    "{:?} is an API group this instance serves itself and cannot be registered",
                    body.name
                ),
            }]));
        }
        self.check(&body).await?;
        if body.sync_id.is_empty() {
            body.sync_id = self.ids.sync_id();
        }
        let key = self.registration_key(&body.name);
        let metadata = self.metadata(&body.name, None);
        let mut compares = vec![Compare::Absent(key.clone())];
        let mut ops = vec![Op::put(&key, encode(&self.api_version(), "ApiRegistration", &body, &metadata))];
        if !body.short_name.is_empty() {
            let short = self.short_name_key(&body.short_name);
            compares.push(Compare::Absent(short.clone()));
            ops.push(Op::put(short, body.name.clone()));
        }
        match self.store.txn(Txn { compares, ops }).await? {
            TxnResult::Applied { revision, .. } => Ok(Stored { object: body, metadata, revision }),
            TxnResult::Conflict { .. } => Err(self.create_conflict(&body).await?),
        }
    }

    /// Whether `group` is the catalog's own group or one the embedder serves itself.
    fn is_reserved(&self, group: &str) -> bool {
        group == format!("catalog.{}", self.scope.domain)
            || self.scope.reserved_groups.iter().any(|reserved| reserved == group)
    }

    /// Why a create lost: the name, or the short name, is taken.
    async fn create_conflict(&self, body: &ApiRegistration) -> Result<CatalogError, CatalogError> {
        if self.store.get(&self.registration_key(&body.name)).await?.is_some() {
            return Ok(CatalogError::Conflict(format!("apiregistration {:?} already exists", body.name)));
        }
        Ok(self.short_name_taken(&body.short_name).await)
    }

    async fn short_name_taken(&self, short: &str) -> CatalogError {
        let holder = match self.store.get(&self.short_name_key(short)).await {
            Ok(Some(kv)) => String::from_utf8_lossy(&kv.value).into_owned(),
            _ => "another registration".to_owned(),
        };
        CatalogError::Conflict(format!(
            "short_name {short:?} is already used by {holder} in {}/{}",
            self.scope.platform, self.scope.region
        ))
    }

    /// Validation and dependency existence, for create and update.
    async fn check(&self, registration: &ApiRegistration) -> Result<(), CatalogError> {
        let mut problems = validate(registration);
        if problems.is_empty() {
            for (at, dependency) in registration.depends_on.iter().enumerate() {
                let key =
                    self.registration_key_in(&dependency.platform, &dependency.region, &dependency.name);
                if self.store.get(&key).await?.is_none() {
                    problems.push(Problem::Invalid {
                        field: format!("depends_on[{at}]"),
                        message: format!(
                            "no registration {} in {}/{}",
                            dependency.name, dependency.platform, dependency.region
                        ),
                    });
                }
            }
        }
        if problems.is_empty() { Ok(()) } else { Err(CatalogError::Invalid(problems)) }
    }

    /// The registration of this scope named `name`.
    pub async fn registration(&self, name: &str) -> Result<Stored<ApiRegistration>, CatalogError> {
        let key = self.registration_key(name);
        let kv = self.store.get(&key).await?;
        let kv = kv.ok_or_else(|| CatalogError::NotFound(format!("apiregistration {name:?} not found")))?;
        decode(&kv)
    }

    /// The folder of this scope's `apiregistrations` or `subscriptions`.
    fn collection(&self, plural: &str) -> String {
        format!("{}{}", self.folder(plural), self.scope_path())
    }

    /// Every object of this scope's `apiregistrations` or `subscriptions` as the API answers
    /// it, and the revision the read was taken at (what a watch continues from).
    pub async fn snapshot(&self, plural: &str) -> Result<(Vec<Value>, Revision), CatalogError> {
        let range = self.store.range(&RangeRequest::prefix(self.collection(plural))).await?;
        let kind = kind_of(plural);
        let objects =
            range.kvs.iter().map(|kv| as_json(kv, &self.api_version(), kind)).collect::<Result<_, _>>()?;
        Ok((objects, range.revision))
    }

    /// Every change to this scope's `apiregistrations` or `subscriptions` after `after`.
    pub async fn watch(&self, plural: &str, after: Revision) -> Result<kayra_store::Watcher, CatalogError> {
        Ok(self.store.watch(&self.collection(plural), after).await?)
    }

    /// A watch event as the API streams it: `ADDED`, `MODIFIED` or `DELETED` and the object
    /// (for a delete, as it was, at the delete's revision).
    pub fn event(
        &self,
        plural: &str,
        event: &kayra_store::Event,
    ) -> Result<(&'static str, Value), CatalogError> {
        let kind = kind_of(plural);
        match event.kind {
            kayra_store::EventKind::Put => {
                let kind_of_change = if event.kv.version == 1 { "ADDED" } else { "MODIFIED" };
                Ok((kind_of_change, as_json(&event.kv, &self.api_version(), kind)?))
            }
            kayra_store::EventKind::Delete => {
                let before = event.prev.clone().unwrap_or_else(|| event.kv.clone());
                let mut object = as_json(&before, &self.api_version(), kind)?;
                object["metadata"]["resourceVersion"] = Value::String(event.kv.mod_revision.to_string());
                Ok(("DELETED", object))
            }
        }
    }

    /// Every registration of this scope, by name.
    pub async fn registrations(&self) -> Result<Vec<Stored<ApiRegistration>>, CatalogError> {
        let prefix = format!("{}{}", self.folder("apiregistrations"), self.scope_path());
        self.all(&prefix).await
    }

    async fn all<T: DeserializeOwned>(&self, prefix: &str) -> Result<Vec<Stored<T>>, CatalogError> {
        let range = self.store.range(&RangeRequest::prefix(prefix)).await?;
        range.kvs.iter().map(decode).collect()
    }

    /// Changes the fields `changes` names, as decoding a request body into the stored record
    /// does: fields the body leaves out keep their values. Platform and region stay the
    /// instance's, a pending canary is the sync endpoint's alone, and `name` must be the one in
    /// the path.
    pub async fn update_registration(
        &self,
        name: &str,
        changes: &Map<String, Value>,
    ) -> Result<Stored<ApiRegistration>, CatalogError> {
        if let Some(given) = changes.get("name").filter(|given| given.as_str() != Some(name)) {
            return Err(CatalogError::Invalid(vec![Problem::Invalid {
                field: "name".to_owned(),
                message: format!("{given} does not match the name in the path, {name:?}"),
            }]));
        }
        let current = self.registration(name).await?;
        let merged = merge(&current.object, changes)?;
        self.check(&ApiRegistration {
            platform: self.scope.platform.clone(),
            region: self.scope.region.clone(),
            ..merged
        })
        .await?;
        self.modify(name, |current| {
            let mut next = merge(current, changes)?;
            next.platform.clone_from(&self.scope.platform);
            next.region.clone_from(&self.scope.region);
            if next.sync_id.is_empty() {
                next.sync_id.clone_from(&current.sync_id);
            }
            next.canary_namespaces.clone_from(&current.canary_namespaces);
            let problems = validate(&next);
            if problems.is_empty() { Ok(next) } else { Err(CatalogError::Invalid(problems)) }
        })
        .await
    }

    /// Read, change, compare-and-swap; the short-name claim moves with the write.
    async fn modify(
        &self,
        name: &str,
        change: impl Fn(&ApiRegistration) -> Result<ApiRegistration, CatalogError>,
    ) -> Result<Stored<ApiRegistration>, CatalogError> {
        let key = self.registration_key(name);
        for _ in 0..RETRIES {
            let current = self.registration(name).await?;
            let next = change(&current.object)?;
            let mut compares = vec![Compare::ModifiedAt(key.clone(), current.revision)];
            let mut ops =
                vec![Op::put(&key, encode(&self.api_version(), "ApiRegistration", &next, &current.metadata))];
            if next.short_name != current.object.short_name {
                if !current.object.short_name.is_empty() {
                    ops.push(Op::delete(self.short_name_key(&current.object.short_name)));
                }
                if !next.short_name.is_empty() {
                    let short = self.short_name_key(&next.short_name);
                    compares.push(Compare::Absent(short.clone()));
                    ops.push(Op::put(short, next.name.clone()));
                }
            }
            match self.store.txn(Txn { compares, ops }).await? {
                TxnResult::Applied { revision, .. } => {
                    return Ok(Stored { object: next, metadata: current.metadata, revision });
                }
                TxnResult::Conflict { .. } => {
                    let still = self.store.get(&key).await?.map(|kv| kv.mod_revision);
                    if still == Some(current.revision) {
                        return Err(self.short_name_taken(&next.short_name).await);
                    }
                }
            }
        }
        Err(CatalogError::Conflict(format!("apiregistration {name:?} kept changing; try again")))
    }

    /// Deletes a registration nobody refers to: no registration in any scope depends on it and
    /// no subscription names it.
    pub async fn delete_registration(&self, name: &str) -> Result<Stored<ApiRegistration>, CatalogError> {
        for _ in 0..RETRIES {
            let current = self.registration(name).await?;
            let me = current.object.reference();
            let everywhere: Vec<Stored<ApiRegistration>> = self.all(&self.folder("apiregistrations")).await?;
            if let Some(dependent) = everywhere.iter().find(|other| other.object.depends_on.contains(&me)) {
                return Err(CatalogError::Conflict(format!(
                    "apiregistration {name:?} is a dependency of {} in {}/{}",
                    dependent.object.name, dependent.object.platform, dependent.object.region
                )));
            }
            if let Some(subscriber) = self.subscriptions(name).await?.first() {
                return Err(CatalogError::Conflict(format!(
                    "apiregistration {name:?} has subscriptions, in namespace {} and perhaps others",
                    subscriber.object.namespace
                )));
            }
            let key = self.registration_key(name);
            let mut ops =
                vec![Op::delete(&key), Op::delete(self.spec_key(name)), Op::delete(self.document_key(name))];
            if !current.object.short_name.is_empty() {
                ops.push(Op::delete(self.short_name_key(&current.object.short_name)));
            }
            let txn = Txn { compares: vec![Compare::ModifiedAt(key, current.revision)], ops };
            if let TxnResult::Applied { .. } = self.store.txn(txn).await? {
                return Ok(current);
            }
        }
        Err(CatalogError::Conflict(format!(
            "apiregistration {name:?} kept changing while being deleted; try again"
        )))
    }

    /// `PUT .../apiregistrations/<name>/sync`.
    pub async fn sync(
        &self,
        name: &str,
        request: &SyncRequest,
    ) -> Result<Stored<ApiRegistration>, CatalogError> {
        // Any subscription makes a canary, active or not: an inactive one is reconciled to the
        // canary's build once it is turned on, before everyone else.
        let subscribed: Vec<String> =
            self.subscriptions(name).await?.into_iter().map(|s| s.object.namespace).collect();
        self.modify(name, |current| {
            let mut next = current.clone();
            sync(
                &mut next,
                request,
                |namespace| subscribed.iter().any(|s| s == namespace),
                self.ids.as_ref(),
            )?;
            Ok(next)
        })
        .await
    }

    /// Subscribes `namespace` to the registration its body names; the subscription is named
    /// after the registration. The namespace must exist and not be being deleted (a namespace
    /// deleted just after this check has its subscriptions ended by whoever finalizes it).
    pub async fn subscribe(
        &self,
        namespace: &str,
        body: Subscription,
    ) -> Result<Stored<Subscription>, CatalogError> {
        if body.api.is_empty() {
            return Err(CatalogError::Invalid(vec![Problem::Invalid {
                field: "api".to_owned(),
                message: "names the registration to subscribe to, and is required".to_owned(),
            }]));
        }
        match self.namespaces.state(namespace).await? {
            NamespaceState::Active => {}
            NamespaceState::Absent => {
                return Err(CatalogError::NotFound(format!("namespaces \"{namespace}\" not found")));
            }
            NamespaceState::Terminating => {
                return Err(CatalogError::NamespaceTerminating(namespace.to_owned()));
            }
        }
        let subscription = Subscription::new(namespace, &body.api, body.active);
        let key = self.subscription_key(namespace, &body.api);
        let metadata = self.metadata(&body.api, Some(namespace));
        for _ in 0..RETRIES {
            // The registration must still be as read when the subscription is written, so that
            // a concurrent delete of it cannot leave the subscription dangling.
            let registration = self.registration(&body.api).await?;
            let txn = Txn {
                compares: vec![
                    Compare::Absent(key.clone()),
                    Compare::ModifiedAt(self.registration_key(&body.api), registration.revision),
                ],
                ops: vec![Op::put(
                    &key,
                    encode(&self.api_version(), "Subscription", &subscription, &metadata),
                )],
            };
            match self.store.txn(txn).await? {
                TxnResult::Applied { revision, .. } => {
                    return Ok(Stored { object: subscription, metadata, revision });
                }
                TxnResult::Conflict { .. } if self.store.get(&key).await?.is_some() => {
                    return Err(CatalogError::Conflict(format!(
                        "namespace {namespace} already subscribes to {}",
                        body.api
                    )));
                }
                TxnResult::Conflict { .. } => {}
            }
        }
        Err(CatalogError::Conflict(format!("apiregistration {:?} kept changing; try again", body.api)))
    }

    /// The subscription of `namespace` to `api`.
    pub async fn subscription(
        &self,
        namespace: &str,
        api: &str,
    ) -> Result<Stored<Subscription>, CatalogError> {
        let kv = self.store.get(&self.subscription_key(namespace, api)).await?;
        let kv = kv.ok_or_else(|| {
            CatalogError::NotFound(format!("subscription {api:?} not found in namespace {namespace}"))
        })?;
        decode(&kv)
    }

    /// Every subscription to `api` in this scope, by namespace.
    pub async fn subscriptions(&self, api: &str) -> Result<Vec<Stored<Subscription>>, CatalogError> {
        let all = self.all_subscriptions().await?;
        Ok(all.into_iter().filter(|s| s.object.api == api).collect())
    }

    /// Every subscription of this scope, by namespace and API.
    pub async fn all_subscriptions(&self) -> Result<Vec<Stored<Subscription>>, CatalogError> {
        self.all(&self.subscriptions_prefix()).await
    }

    /// Turns a subscription on or off; the rest of it is the reconciler's.
    pub async fn set_active(
        &self,
        namespace: &str,
        api: &str,
        active: bool,
    ) -> Result<Stored<Subscription>, CatalogError> {
        let key = self.subscription_key(namespace, api);
        for _ in 0..RETRIES {
            let current = self.subscription(namespace, api).await?;
            if current.object.active == active {
                return Ok(current);
            }
            let next = Subscription { active, ..current.object.clone() };
            let value = encode(&self.api_version(), "Subscription", &next, &current.metadata);
            let txn = Txn {
                compares: vec![Compare::ModifiedAt(key.clone(), current.revision)],
                ops: vec![Op::put(&key, value)],
            };
            if let TxnResult::Applied { revision, .. } = self.store.txn(txn).await? {
                return Ok(Stored { object: next, metadata: current.metadata, revision });
            }
        }
        Err(CatalogError::Conflict(format!("subscription {api:?} in {namespace} kept changing; try again")))
    }

    /// Ends a subscription.
    pub async fn unsubscribe(
        &self,
        namespace: &str,
        api: &str,
    ) -> Result<Stored<Subscription>, CatalogError> {
        let key = self.subscription_key(namespace, api);
        // The reconciler writes subscriptions too; a delete that loses to it tries again.
        for _ in 0..RETRIES {
            let current = self.subscription(namespace, api).await?;
            let txn = Txn {
                compares: vec![Compare::ModifiedAt(key.clone(), current.revision)],
                ops: vec![Op::delete(&key)],
            };
            if let TxnResult::Applied { .. } = self.store.txn(txn).await? {
                return Ok(current);
            }
        }
        Err(CatalogError::Conflict(format!("subscription {api:?} in {namespace} kept changing; try again")))
    }

    /// `GET .../apiregistrations/<name>/status`.
    pub async fn status(&self, name: &str) -> Result<RegistrationStatus, CatalogError> {
        let registration = self.registration(name).await?;
        let subscriptions: Vec<Subscription> =
            self.subscriptions(name).await?.into_iter().map(|s| s.object).collect();
        Ok(status(&registration.object, &subscriptions))
    }
}

/// `changes` laid over `current`, top-level field by field; what the server owns is ignored.
fn merge(current: &ApiRegistration, changes: &Map<String, Value>) -> Result<ApiRegistration, CatalogError> {
    const SERVER_OWNED: [&str; 6] =
        ["apiVersion", "kind", "metadata", "platform", "region", "canary_namespaces"];
    let Value::Object(mut merged) = serde_json::to_value(current).unwrap_or_else(|_| json!({})) else {
        return Err(CatalogError::Conflict("the stored registration does not encode".to_owned()));
    };
    for (field, value) in changes.iter().filter(|(field, _)| !SERVER_OWNED.contains(&field.as_str())) {
        merged.insert(field.clone(), value.clone());
    }
    serde_json::from_value(Value::Object(merged)).map_err(|error| {
        CatalogError::Invalid(vec![Problem::Invalid { field: "body".to_owned(), message: error.to_string() }])
    })
}

/// The Kind stored under a catalog folder.
fn kind_of(plural: &str) -> &'static str {
    if plural == "subscriptions" { "Subscription" } else { "ApiRegistration" }
}

/// A stored object as the API answers it, its `resourceVersion` the key's revision.
fn as_json(kv: &KeyValue, api_version: &str, kind: &str) -> Result<Value, CatalogError> {
    if kind == "Subscription" {
        decode::<Subscription>(kv).map(|stored| stored.to_json(api_version, kind))
    } else {
        decode::<ApiRegistration>(kv).map(|stored| stored.to_json(api_version, kind))
    }
}

/// A platform or region as a key segment: `_` when empty (an instance with neither set).
fn segment(value: &str) -> &str {
    if value.is_empty() { "_" } else { value }
}

fn encode<T: Serialize>(api_version: &str, kind: &str, object: &T, metadata: &Map<String, Value>) -> Vec<u8> {
    let stored = Stored { object, metadata: metadata.clone(), revision: 0 };
    let mut value = stored.to_json(api_version, kind);
    if let Some(metadata) = value.get_mut("metadata").and_then(Value::as_object_mut) {
        metadata.remove("resourceVersion");
    }
    serde_json::to_vec(&value).expect("a JSON value serializes")
}

fn decode<T: DeserializeOwned>(kv: &KeyValue) -> Result<Stored<T>, CatalogError> {
    let corrupt = |reason: String| CatalogError::Corrupt { key: kv.key.clone(), reason };
    let mut value: Value = serde_json::from_slice(&kv.value).map_err(|e| corrupt(e.to_string()))?;
    let metadata = match value.as_object_mut().and_then(|map| map.remove("metadata")) {
        Some(Value::Object(metadata)) => metadata,
        _ => Map::new(),
    };
    let object = serde_json::from_value(value).map_err(|e| corrupt(e.to_string()))?;
    Ok(Stored { object, metadata, revision: kv.mod_revision })
}

/// RFC 3339 in whole seconds, as Kubernetes writes times.
fn timestamp(time: SystemTime) -> String {
    jiff::Timestamp::try_from(time)
        .map(|time| time.strftime("%Y-%m-%dT%H:%M:%SZ").to_string())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests;
