//! The assembly: the application layer over the store, the catalog beside it, the node server,
//! the metrics the loops report to, and the HTTP surface's state over all of them. What exists
//! when [`assemble`] returns: namespaces `default` and `kayra-system`, the service-account
//! signing key, the bootstrap roles, a first RBAC index, and a watch cache for every stored
//! resource.

use std::sync::Arc;
use std::time::Duration;

use kayra_api::clock::SystemClock;
use kayra_api::scheme::Scheme;
use kayra_apiserver::ApiState;
use kayra_application::ApplicationLayer;
use kayra_application::loops::bootstrap::BootstrapReconciler;
use kayra_application::loops::rbac::IndexReconciler;
use kayra_authn::TokenFile;
use kayra_registry::Registry;
use kayra_store::Store;
use serde_json::json;

use crate::ControlPlaneError;
use crate::bridges;
use crate::config::Config;
use crate::retry::patiently;

/// The assembled control plane: the application layer, the HTTP surface's state over it, the
/// catalog, the node server, and the metrics its loops report to.
pub struct ControlPlane {
    pub(crate) application: Arc<ApplicationLayer>,
    /// The store, for the loops' elections.
    pub(crate) store: Arc<dyn Store>,
    pub(crate) state: Arc<ApiState>,
    pub(crate) catalog: Arc<kayra_catalog::Catalog>,
    pub(crate) nodes: kayra_nodeserver::NodeServer,
    pub(crate) metrics: kayra_loop::metrics::Metrics,
    pub(crate) scheduler_metrics: kayra_scheduler::metrics::SchedulerMetrics,
    pub(crate) gc_metrics: kayra_gc::reconciler::GcMetrics,
    /// The static tokens, which the Consul projection authenticates too.
    pub(crate) tokens: Arc<TokenFile>,
    /// This replica's id among the replicas sharing the store.
    pub(crate) replica_id: String,
}

impl std::fmt::Debug for ControlPlane {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ControlPlane").finish_non_exhaustive()
    }
}

/// Builds the application layer and the API over `store`: namespaces `default` and
/// `kayra-system`, the bootstrap roles and a first RBAC index exist when it returns. A store
/// that belongs to another cluster (another CA) is refused before anything is written.
pub async fn assemble(config: &Config, store: Arc<dyn Store>) -> Result<ControlPlane, ControlPlaneError> {
    // Before anything is written: a replica of another cluster stops here.
    if let Some(ca_hash) = crate::cluster::local_ca(config)? {
        crate::cluster::claim(store.as_ref(), &config.platform, &config.region, &ca_hash).await?;
    }
    let mut metrics_registry = prometheus_client::registry::Registry::default();
    let engine = match config.store {
        crate::config::StoreKind::Sled => "sled",
        crate::config::StoreKind::Etcd => "etcd",
        crate::config::StoreKind::Memory => "memory",
    };
    let store = crate::metered::metered(store, engine, &mut metrics_registry);
    let scheme = Arc::new(Scheme::new(&config.domain));
    let registry = Registry::new(store.clone(), Arc::new(SystemClock), "/registry/")
        .with_watch_window_bytes(config.watch_window_bytes)
        .with_history_limit(config.history_limit);
    let watch_caches = crate::watch_metrics::WatchCacheCollector { registry: registry.clone() };
    let application = Arc::new(ApplicationLayer::new(scheme.clone(), registry));
    let client = application.client(kayra_application::controller_identity("controller"));
    let tokens = Arc::new(TokenFile::load(&config.token_file()).or_else(|error| {
        if config.token_file.is_none() && !config.token_file().exists() {
            Ok(TokenFile::none())
        } else {
            Err(error)
        }
    })?);
    let audit_path = config.audit_log();
    if let Some(dir) = audit_path.parent() {
        std::fs::create_dir_all(dir)
            .map_err(ControlPlaneError::io(format!("cannot create {}", dir.display())))?;
    }
    let audit = kayra_apiserver::AuditLog::open(&audit_path)
        .map_err(ControlPlaneError::io(format!("cannot open the audit log {}", audit_path.display())))?
        .with_console(config.audit_to_console);
    let namespaces =
        client.resource("", "namespaces").map_err(ControlPlaneError::registry("find namespaces"))?;
    // Kayra's own groups cannot be registered, and subscribers live in Kayra's namespaces.
    let mut reserved_groups: Vec<String> = scheme.kinds().iter().map(|kind| kind.group.clone()).collect();
    reserved_groups.retain(|group| !group.is_empty());
    reserved_groups.sort();
    reserved_groups.dedup();
    let catalog = Arc::new(kayra_catalog::Catalog::new(
        store.clone(),
        kayra_catalog::Scope {
            root: "/registry/".to_owned(),
            domain: config.domain.clone(),
            platform: config.platform.clone(),
            region: config.region.clone(),
            reserved_groups,
        },
        Arc::new(bridges::RegistryNamespaces { client: client.clone(), namespaces: namespaces.clone() }),
        Arc::new(kayra_catalog::RandomIds),
        Arc::new(SystemClock),
    ));
    for name in [
        "default",
        kayra_api::kinds::secret::BOOTSTRAP_TOKEN_NAMESPACE,
        kayra_api::kinds::lease::NODE_LEASE_NAMESPACE,
    ] {
        let namespace = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}});
        patiently(&format!("create namespace {name}"), || async {
            match client.create(&namespaces, None, namespace.clone()).await {
                Ok(_) | Err(kayra_registry::RegistryError::AlreadyExists { .. }) => Ok(()),
                Err(error) => Err(error),
            }
        })
        .await?;
    }
    application.set_issuer(config.service_account_issuer());
    // Every replica races to create the one signing key; the losers read the winner's.
    patiently("create the service-account signing key", || application.signing_keys()).await?;
    let bootstrap = BootstrapReconciler::new(client.clone());
    patiently("create the bootstrap roles", || bootstrap.ensure_all()).await?;
    let index = IndexReconciler::new(client.clone()).map_err(ControlPlaneError::registry("index RBAC"))?;
    application.set_rbac(patiently("read the RBAC objects", || index.rebuild()).await?);
    // Every resource's watch cache starts now, so a list can always be watched from its revision.
    for resource in application.stored_resources() {
        patiently(&format!("start watching {}", resource.plural), || application.prime(resource)).await?;
    }
    let metrics = kayra_loop::metrics::Metrics::register(&mut metrics_registry);
    let requests = kayra_apiserver::metrics::RequestMetrics::register(&mut metrics_registry);
    let scheduler_metrics = kayra_scheduler::metrics::SchedulerMetrics::register(&mut metrics_registry);
    let gc_metrics = kayra_gc::reconciler::register_metrics(&mut metrics_registry);
    metrics_registry.register_collector(Box::new(crate::process::ProcessCollector));
    metrics_registry.register_collector(Box::new(watch_caches));
    let ready_timeout = Duration::from_secs(config.node_ready_timeout_seconds);
    let node_config = kayra_nodeserver::Config {
        ready_timeout,
        heartbeat_write: ready_timeout / 4,
        lost_timeout: Duration::from_secs(config.node_lost_timeout_seconds),
        stream_idle_timeout: Duration::from_secs(config.stream_idle_timeout_seconds),
        max_streams_per_node: config.max_streams_per_node,
        max_streams_per_caller: config.max_streams_per_user,
        ..kayra_nodeserver::Config::default()
    };
    let nodes = kayra_nodeserver::NodeServer::new(application.clone(), node_config)?;
    application.set_usage_source(nodes.usage_source());
    nodes.register_metrics(&mut metrics_registry);
    let features = config.features().map_err(ControlPlaneError::Invalid)?;
    let replica_id = format!("{}-{}", std::process::id(), uuid::Uuid::new_v4());
    let mut state = ApiState::new(application.clone(), tokens.clone(), config.listen.to_string())
        .with_gates(kayra_apiserver::Gates { node_logs: features.node_logs() })
        .with_audit_log(audit)
        .with_catalog(catalog.clone())
        .with_nodes(nodes.clone())
        .with_metrics(Arc::new(metrics_registry))
        .with_request_metrics(requests)
        .with_watch_stall_timeout(Duration::from_secs(config.watch_stall_timeout_seconds));
    if crate::cluster::local_ca(config)?.is_some() {
        let peers = Arc::new(crate::peers::HttpsPeers::new(&config.data_dir, &replica_id)?);
        application.set_usage_source(Arc::new(crate::usage::ReplicatedUsage::new(
            nodes.clone(),
            peers.clone(),
            &config.domain,
        )));
        state = state.with_peers(peers, replica_id.clone());
    }
    Ok(ControlPlane {
        application,
        store,
        state: Arc::new(state),
        catalog,
        nodes,
        metrics,
        scheduler_metrics,
        gc_metrics,
        tokens,
        replica_id,
    })
}

#[cfg(test)]
mod tests;
