//! The application layer: the scheme, the registry, the admission chain and the authorizer,
//! behind one door that every caller goes through — the REST adapter, the catalog's HTTP
//! surface, the node session, and the loops.
//!
//! [`ApplicationLayer`] holds them. [`client::Client`] acts as one identity: its
//! [`authorize`](client::Client::authorize) decides a [`authorization::Request`] (in the one
//! authorization function, [`authorization`]) and answers a [`permitted::Permitted`], whose
//! operations — reads, writes, subresources, reviews — are the only way to the registry, each
//! admitted as that identity. The client's typed conveniences (get, list, watch, create, update,
//! status, patch, delete) authorize and act in one call, for loops. The loops that keep the layer
//! itself current live here too ([`loops`]): the RBAC index, the bootstrap roles, and the
//! namespace finalizer.
//!
//! This crate knows nothing of HTTP, gRPC or any storage engine: adapters translate their wire
//! to it and back. Start reading at [`ApplicationLayer`], then [`client::Client`] and
//! [`permitted::Permitted`].

pub mod authorization;
pub mod binding;
pub mod client;
pub mod events;
pub mod eviction;
pub mod feed;
pub mod identity;
pub mod loops;
pub mod options;
pub mod permitted;
pub mod placement;
pub mod reviews;
pub mod scale;
mod strategy;
pub mod usage;

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use kayra_api::kinds::application::bound_node;
use kayra_api::scheme::{KindInfo, Scheme};
use kayra_authn::Identity;
use kayra_authz::{Action, Caller, Rbac};
use kayra_registry::{
    Admission, Admit, DeleteOptions, FieldManager, Part, Registry, RegistryError, Resource, WriteOptions,
};
use serde_json::Value;

/// The identity the controller's own loops act under. It is in `system:masters`: the loops are
/// the control plane itself, and the RBAC index loop must be able to read roles before any
/// role is known.
pub fn controller_identity(component: &str) -> Identity {
    Identity::new(format!("system:kayra:{component}"), "", vec![kayra_authz::MASTERS.to_owned()])
}

/// The scheme, the registry with one resource per Kind, and the current RBAC index.
pub struct ApplicationLayer {
    scheme: Arc<Scheme>,
    registry: Registry,
    resources: HashMap<(String, &'static str, &'static str), Resource>,
    rbac: RwLock<Arc<Rbac>>,
    fleet: Arc<placement::FleetIndex>,
    usage: RwLock<Option<Arc<dyn usage::UsageSource>>>,
    issuer: std::sync::OnceLock<identity::Issuer>,
}

impl std::fmt::Debug for ApplicationLayer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApplicationLayer").field("domain", &self.scheme.domain()).finish_non_exhaustive()
    }
}

impl ApplicationLayer {
    /// The layer for `scheme` over `registry`. Until the first RBAC index is set only
    /// `system:masters` may do anything.
    pub fn new(scheme: Arc<Scheme>, registry: Registry) -> ApplicationLayer {
        let resources = scheme
            .kinds()
            .iter()
            .map(|kind| ((kind.group.clone(), kind.version, kind.plural), strategy::resource(kind)))
            .collect();
        ApplicationLayer {
            scheme,
            registry,
            resources,
            rbac: RwLock::new(Arc::new(Rbac::default())),
            fleet: Arc::default(),
            usage: RwLock::new(None),
            issuer: std::sync::OnceLock::new(),
        }
    }

    /// A client acting as `identity`.
    pub fn client(self: &Arc<ApplicationLayer>, identity: Identity) -> client::Client {
        client::Client::new(self.clone(), identity)
    }

    /// The scheme.
    pub fn scheme(&self) -> &Scheme {
        &self.scheme
    }

    /// The scheme, shared.
    pub fn shared_scheme(&self) -> Arc<Scheme> {
        self.scheme.clone()
    }

    /// The registry: reached only from inside this crate, by a [`permitted::Permitted`]'s
    /// operations and the layer's own housekeeping.
    pub(crate) fn registry(&self) -> &Registry {
        &self.registry
    }

    /// Starts every stored resource's watch cache now, so that any list read afterwards can be
    /// watched from its revision (a cache started later begins at its own first list). Servers
    /// prime every resource when they start.
    pub async fn prime(&self, resource: &Resource) -> Result<(), RegistryError> {
        self.registry.prime(resource).await
    }

    /// The registry resource serving a Kind of the scheme.
    pub fn resource(&self, kind: &KindInfo) -> &Resource {
        self.resources
            .get(&(kind.group.clone(), kind.version, kind.plural))
            .expect("every Kind of the scheme has a resource")
    }

    /// The resource `plural` of `group` (empty for core) at `v1`, if the scheme serves it.
    pub fn resource_named(&self, group: &str, plural: &str) -> Option<&Resource> {
        self.scheme.find(group, "v1", plural).map(|kind| self.resource(kind))
    }

    /// Every stored resource of the scheme.
    pub fn stored_resources(&self) -> impl Iterator<Item = &Resource> {
        self.scheme.kinds().iter().filter(|kind| kind.stored()).map(|kind| self.resource(kind))
    }

    /// Replaces the RBAC index every decision is made over.
    pub fn set_rbac(&self, rbac: Rbac) {
        *self.rbac.write().expect("the RBAC lock is never held across a panic") = Arc::new(rbac);
    }

    /// The current RBAC index.
    pub fn rbac(&self) -> Arc<Rbac> {
        self.rbac.read().expect("the RBAC lock is never held across a panic").clone()
    }

    /// Reads what workloads and nodes consume from `source` (the node server, which holds
    /// the samples its sessions report).
    pub fn set_usage_source(&self, source: Arc<dyn usage::UsageSource>) {
        *self.usage.write().expect("the usage source's lock is never held across a panic") = Some(source);
    }

    /// Where usage samples are read from, once one is set.
    pub(crate) fn usage_source(&self) -> Option<Arc<dyn usage::UsageSource>> {
        self.usage.read().expect("the usage source's lock is never held across a panic").clone()
    }

    /// Whether `identity` may do `action`.
    pub fn allows(&self, identity: &Identity, action: &Action) -> bool {
        self.rbac().allows(&caller(identity), action)
    }

    /// What `identity` may store: the standard admission chain over the current RBAC index and
    /// the fleet index.
    pub fn admission(&self, identity: &Identity) -> Arc<dyn Admission> {
        kayra_admission::Chain::standard(self.scheme.domain(), self.rbac(), self.fleet.clone())
            .for_caller(caller(identity))
    }

    /// The options of a write of `part` of a `resource` object by `identity`: always admitted
    /// by its admission chain, once the fleet index holds what placement admission decides on
    /// (see [`ApplicationLayer::placement_current`]). Every write this layer makes for a caller
    /// is built here.
    pub(crate) async fn write_options(
        &self,
        identity: &Identity,
        resource: &Resource,
        part: Part,
        object: Option<&Value>,
        dry_run: bool,
    ) -> WriteOptions {
        self.placement_current(resource, part, object).await;
        self.admitted(identity, part, dry_run)
    }

    /// The options of a write of `part` by `identity`, admitted by its admission chain, for a
    /// write that placement admission does not wait on (see [`ApplicationLayer::write_options`]).
    /// The write is recorded as the manager `identity` stands for ([`options::manager_of`])
    /// until the caller names another.
    pub(crate) fn admitted(&self, identity: &Identity, part: Part, dry_run: bool) -> WriteOptions {
        let manager = FieldManager { name: options::manager_of(identity), subresource: String::new() };
        WriteOptions {
            dry_run,
            part,
            manager,
            author: Some(identity.user.clone()),
            ..WriteOptions::new(Admit::by(self.admission(identity)))
        }
    }

    /// The options of a delete of a `resource` object by `identity`, as `request` asks it:
    /// always admitted by its admission chain, once the fleet index holds what deletion
    /// protection decides on (see [`ApplicationLayer::references_current`]).
    pub(crate) async fn delete_options(
        &self,
        identity: &Identity,
        resource: &Resource,
        request: &options::DeleteRequest,
    ) -> DeleteOptions {
        self.references_current(resource).await;
        DeleteOptions {
            uid: request.uid.clone(),
            resource_version: request.resource_version.clone(),
            propagation_policy: request.propagation_policy.clone(),
            grace_period_seconds: request.grace_period_seconds,
            dry_run: request.dry_run,
            ..DeleteOptions::new(Admit::by(self.admission(identity)))
        }
    }

    /// Before a write of `part` of a `resource` object is admitted: when placement admission
    /// decides it (an Application's binding), waits until the fleet index holds every write
    /// made so far. `object` is the whole object a create or replace stores (`None` for a
    /// patch, whose result is not known yet): one that names no node binds nothing, so it
    /// goes straight on, as does every other write.
    pub(crate) async fn placement_current(
        &self,
        resource: &Resource,
        part: kayra_registry::Part,
        object: Option<&Value>,
    ) {
        let names_a_node = |object: &Value| object.as_object().and_then(bound_node).is_some();
        if object.is_some_and(|object| !names_a_node(object)) {
            return;
        }
        let fleet = format!("fleet.{}", self.scheme.domain());
        let (Some(applications), Some(nodes)) =
            (self.resource_named(&fleet, "applications"), self.resource_named("", "nodes"))
        else {
            return;
        };
        if placement::decided_by_placement(applications, resource, part.writes_object()) {
            self.fleet.caught_up(&self.registry, nodes, applications).await;
        }
    }

    /// Before a delete of a `resource` object is admitted: when deletion protection decides it
    /// (a Service or Secret that Applications may name), waits until the fleet index holds
    /// every write made so far, so an Application created just before holds what it names.
    pub(crate) async fn references_current(&self, resource: &Resource) {
        let fleet = format!("fleet.{}", self.scheme.domain());
        let (Some(applications), Some(nodes)) =
            (self.resource_named(&fleet, "applications"), self.resource_named("", "nodes"))
        else {
            return;
        };
        if placement::decided_by_references(applications, resource) {
            self.fleet.caught_up(&self.registry, nodes, applications).await;
        }
    }

    /// The identity of a bootstrap token, read from its Secret; `None` when there is none,
    /// it expired, or the secret half does not match.
    pub async fn bootstrap_token(
        &self,
        token: &kayra_authn::bootstrap::Token,
    ) -> Option<kayra_authn::Identity> {
        use kayra_api::kinds::secret::{BOOTSTRAP_TOKEN_NAMESPACE, Secret, bootstrap_token_name};
        let kind = self.scheme.find(&format!("fleet.{}", self.scheme.domain()), "v1", "secrets")?;
        let name = bootstrap_token_name(&token.id);
        let object =
            self.registry.get(self.resource(kind), Some(BOOTSTRAP_TOKEN_NAMESPACE), &name).await.ok()?;
        let secret: Secret = serde_json::from_value(Value::Object(object)).ok()?;
        let stored = kayra_authn::bootstrap::secret::decode(&secret)?;
        kayra_authn::bootstrap::authenticate(token, &stored, std::time::SystemTime::now())
    }
}

/// The RBAC caller of an identity.
pub fn caller(identity: &Identity) -> Caller {
    Caller { user: identity.user.clone(), groups: identity.groups.clone() }
}
