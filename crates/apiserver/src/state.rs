//! What every request handler shares: the application layer ([`ApplicationLayer`]: the scheme, the
//! registry, admission and the authorizer), and what only HTTP needs — the OpenAPI documents,
//! the token file, the audit log, the metrics registry, and the catalog's REST surface.

use std::sync::Arc;

use kayra_api::scheme::{KindInfo, Scheme};
use kayra_application::ApplicationLayer;
use kayra_registry::{Admission, Registry, Resource};

use crate::openapi::Documents;
use kayra_authn::TokenFile;

/// The shared state of the API.
pub struct ApiState {
    control: Arc<ApplicationLayer>,
    pub(crate) scheme: Arc<Scheme>,
    pub(crate) registry: Registry,
    pub(crate) openapi: Documents,
    pub(crate) tokens: Arc<TokenFile>,
    pub(crate) server_address: String,
    pub(crate) audit: Option<Arc<crate::audit::AuditLog>>,
    pub(crate) catalog: Option<Arc<kayra_catalog::Catalog>>,
    pub(crate) metrics: Option<Arc<prometheus_client::registry::Registry>>,
    pub(crate) nodes: Option<kayra_nodeserver::NodeServer>,
    /// How long a watch may hold events its client has not taken before it is ended.
    pub(crate) watch_stall: std::time::Duration,
}

/// How long a watch may hold events its client has not taken, unless configured otherwise.
pub const DEFAULT_WATCH_STALL: std::time::Duration = std::time::Duration::from_secs(10);

impl ApiState {
    /// State serving `control`'s layer over HTTP, authenticating bearer tokens against
    /// `tokens`; `server_address` is what legacy discovery advertises.
    pub fn new(control: Arc<ApplicationLayer>, tokens: Arc<TokenFile>, server_address: String) -> ApiState {
        let openapi = Documents::build(control.scheme());
        ApiState {
            scheme: control.shared_scheme(),
            registry: control.registry().clone(),
            control,
            openapi,
            tokens,
            server_address,
            audit: None,
            catalog: None,
            metrics: None,
            nodes: None,
            watch_stall: DEFAULT_WATCH_STALL,
        }
    }

    /// Ends a watch, dropping its connection, once it has held events its client has not taken
    /// for `stall`: a client that stops reading holds no more than that much of the server.
    pub fn with_watch_stall_timeout(mut self, stall: std::time::Duration) -> ApiState {
        self.watch_stall = stall;
        self
    }

    /// The application layer this state serves.
    pub fn control(&self) -> &Arc<ApplicationLayer> {
        &self.control
    }

    /// The registry resource serving a Kind.
    pub(crate) fn resource(&self, kind: &KindInfo) -> &Resource {
        self.control.resource(kind)
    }

    /// Serves `registry` at `/metrics`.
    pub fn with_metrics(mut self, registry: Arc<prometheus_client::registry::Registry>) -> ApiState {
        self.metrics = Some(registry);
        self
    }

    /// Streams Applications' logs from their nodes' sessions held by `nodes`.
    pub fn with_nodes(mut self, nodes: kayra_nodeserver::NodeServer) -> ApiState {
        self.nodes = Some(nodes);
        self
    }

    /// Serves the API catalog from `catalog`.
    pub fn with_catalog(mut self, catalog: Arc<kayra_catalog::Catalog>) -> ApiState {
        self.catalog = Some(catalog);
        self
    }

    /// Audits every mutating request to `log`.
    pub fn with_audit_log(mut self, log: crate::audit::AuditLog) -> ApiState {
        self.audit = Some(Arc::new(log));
        self
    }

    /// Whether `identity` may do `action`.
    pub(crate) fn allows(&self, identity: &kayra_authn::Identity, action: &kayra_authz::Action) -> bool {
        self.control.allows(identity, action)
    }

    /// The current RBAC index.
    pub(crate) fn rbac(&self) -> Arc<kayra_authz::Rbac> {
        self.control.rbac()
    }

    /// What `identity` may store: the standard admission chain over the current RBAC index.
    pub(crate) fn admission(&self, identity: &kayra_authn::Identity) -> Arc<dyn Admission> {
        self.control.admission(identity)
    }

    /// The identity of a bootstrap token, read from its Secret; `None` when there is none,
    /// it expired, or the secret half does not match.
    pub(crate) async fn bootstrap_token(
        &self,
        token: &kayra_authn::bootstrap::Token,
    ) -> Option<kayra_authn::Identity> {
        self.control.bootstrap_token(token).await
    }

    /// The scheme.
    pub fn scheme(&self) -> &Scheme {
        &self.scheme
    }

    /// The registry.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }
}

pub(crate) fn caller(identity: &kayra_authn::Identity) -> kayra_authz::Caller {
    kayra_application::caller(identity)
}
