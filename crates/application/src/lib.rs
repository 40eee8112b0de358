//! The application layer: the scheme, the registry, the admission chain and the authorizer,
//! which every caller goes through — the REST adapter, the node session, and the loops.
//!
//! [`ApplicationLayer`] holds them; [`client::Client`] is how a loop or the node session acts: a typed
//! in-process client (get, list, watch, create, update, status, patch, delete) under an explicit
//! identity, authorized and admitted exactly as an HTTP request of that identity would be, with
//! no HTTP in between. The loops that keep the layer itself current live here too
//! ([`loops`]): the RBAC index, the bootstrap roles, and the namespace finalizer.
//!
//! This crate knows nothing of HTTP, gRPC or any storage engine: adapters translate their wire
//! to it and back. Start reading at [`ApplicationLayer`], then [`client::Client`].

pub mod binding;
pub mod client;
pub mod events;
pub mod eviction;
pub mod feed;
pub mod loops;
pub mod placement;
pub mod scale;
mod strategy;

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use kayra_api::kinds::application::bound_node;
use kayra_api::scheme::{KindInfo, Scheme};
use kayra_authn::Identity;
use kayra_authz::{Action, Caller, Rbac};
use kayra_registry::{Admission, Registry, Resource};
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

    /// The registry.
    pub fn registry(&self) -> &Registry {
        &self.registry
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

    /// Before a write of `part` of a `resource` object is admitted: when placement admission
    /// decides it (an Application's binding), waits until the fleet index holds every write
    /// made so far. `object` is the whole object a create or replace stores (`None` for a
    /// patch, whose result is not known yet): one that names no node binds nothing, so it
    /// goes straight on, as does every other write.
    pub async fn placement_current(
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
    pub async fn references_current(&self, resource: &Resource) {
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
        use kayra_api::kinds::secret::{
            BOOTSTRAP_TOKEN_NAMESPACE, BOOTSTRAP_TOKEN_TYPE, Secret, bootstrap_token_name,
        };
        let kind = self.scheme.find(&format!("fleet.{}", self.scheme.domain()), "v1", "secrets")?;
        let name = bootstrap_token_name(&token.id);
        let object =
            self.registry.get(self.resource(kind), Some(BOOTSTRAP_TOKEN_NAMESPACE), &name).await.ok()?;
        let secret: Secret = serde_json::from_value(Value::Object(object)).ok()?;
        let for_authentication = secret.text("usage-bootstrap-authentication").as_deref() == Some("true");
        if secret.type_.as_deref() != Some(BOOTSTRAP_TOKEN_TYPE) || !for_authentication {
            return None;
        }
        let expires: jiff::Timestamp = secret.text("expiration")?.parse().ok()?;
        let stored = kayra_authn::bootstrap::Stored {
            id: secret.text("token-id")?,
            secret_digest: secret.text("token-secret-sha256")?,
            expires: expires.into(),
            extra_groups: secret
                .text("auth-extra-groups")
                .unwrap_or_default()
                .split(',')
                .filter(|group| !group.is_empty())
                .map(str::to_owned)
                .collect(),
        };
        kayra_authn::bootstrap::authenticate(token, &stored, std::time::SystemTime::now())
    }
}

/// The RBAC caller of an identity.
pub fn caller(identity: &Identity) -> Caller {
    Caller { user: identity.user.clone(), groups: identity.groups.clone() }
}
