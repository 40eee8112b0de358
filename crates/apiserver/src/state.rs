//! What every layer and handler shares: the application layer (the scheme, the registry,
//! admission and the authorizer, reached only through its client), and what only HTTP needs —
//! the OpenAPI documents, the token file, the audit log, the metrics registry, the catalog's
//! service and the node sessions that stream logs.

use std::sync::Arc;

use kayra_api::scheme::Scheme;
use kayra_application::ApplicationLayer;
use kayra_authn::TokenFile;

use crate::middleware::audit::AuditLog;
use crate::openapi::Documents;

/// The shared state of the API.
pub struct ApiState {
    layer: Arc<ApplicationLayer>,
    scheme: Arc<Scheme>,
    pub(crate) openapi: Documents,
    pub(crate) tokens: Arc<TokenFile>,
    pub(crate) server_address: String,
    pub(crate) audit: Option<Arc<AuditLog>>,
    pub(crate) catalog: Option<Arc<kayra_catalog::Catalog>>,
    pub(crate) metrics: Option<Arc<prometheus_client::registry::Registry>>,
    pub(crate) requests: Option<crate::metrics::RequestMetrics>,
    pub(crate) nodes: Option<kayra_nodeserver::NodeServer>,
    /// How long a watch may hold events its client has not taken before it is ended.
    pub(crate) watch_stall: std::time::Duration,
    /// The routes feature gates turn on.
    pub(crate) gates: crate::routes::Gates,
    /// The other replicas, and this one's id among them: logs held elsewhere are read there.
    pub(crate) peers: Option<(Arc<dyn crate::peers::Peers>, String)>,
    /// How often anyone may fetch the issuer's public documents.
    pub(crate) issuer_requests: crate::issuer::Bucket,
}

/// How long a watch may hold events its client has not taken, unless configured otherwise.
pub const DEFAULT_WATCH_STALL: std::time::Duration = std::time::Duration::from_secs(10);

impl ApiState {
    /// State serving `layer` over HTTP, authenticating bearer tokens against `tokens`;
    /// `server_address` is what legacy discovery advertises.
    pub fn new(layer: Arc<ApplicationLayer>, tokens: Arc<TokenFile>, server_address: String) -> ApiState {
        let openapi = Documents::build(layer.scheme());
        ApiState {
            scheme: layer.shared_scheme(),
            layer,
            openapi,
            tokens,
            server_address,
            audit: None,
            catalog: None,
            metrics: None,
            requests: None,
            nodes: None,
            watch_stall: DEFAULT_WATCH_STALL,
            gates: crate::routes::Gates::default(),
            peers: None,
            issuer_requests: crate::issuer::Bucket::default(),
        }
    }

    /// Ends a watch, dropping its connection, once it has held events its client has not taken
    /// for `stall`: a client that stops reading holds no more than that much of the server.
    pub fn with_watch_stall_timeout(mut self, stall: std::time::Duration) -> ApiState {
        self.watch_stall = stall;
        self
    }

    /// The application layer this state serves.
    pub fn layer(&self) -> &Arc<ApplicationLayer> {
        &self.layer
    }

    /// The scheme.
    pub fn scheme(&self) -> &Scheme {
        &self.scheme
    }

    /// Serves `registry` at `/metrics`.
    pub fn with_metrics(mut self, registry: Arc<prometheus_client::registry::Registry>) -> ApiState {
        self.metrics = Some(registry);
        self
    }

    /// Counts, times and gauges every routed request in `requests`.
    pub fn with_request_metrics(mut self, requests: crate::metrics::RequestMetrics) -> ApiState {
        self.requests = Some(requests);
        self
    }

    /// Serves the routes `gates` turn on; the others do not exist (404, as a typo).
    pub fn with_gates(mut self, gates: crate::routes::Gates) -> ApiState {
        self.gates = gates;
        self
    }

    /// Reads logs whose node holds its session with another replica through `peers`; `me` is
    /// this replica's id, as the store's session records name it.
    pub fn with_peers(mut self, peers: Arc<dyn crate::peers::Peers>, me: String) -> ApiState {
        self.peers = Some((peers, me));
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
    pub fn with_audit_log(mut self, log: AuditLog) -> ApiState {
        self.audit = Some(Arc::new(log));
        self
    }
}
