//! The controller's wiring: `init` writes the PKI, an admin kubeconfig and an admin token;
//! [`api`] builds the application layer and the HTTP surface over a store; [`run`] starts the
//! loops and the servers and, when told to stop, drains both. The binary (`main.rs`) and the
//! test kit both start the controller through here.

mod bridges;
pub mod config;
pub mod local;
pub mod token;

use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use kayra_api::clock::SystemClock;
use kayra_api::scheme::Scheme;
use kayra_apiserver::{ApiState, ServeOptions};
use kayra_application::ApplicationLayer;
use kayra_application::events::Recorder;
use kayra_application::loops::bootstrap::BootstrapReconciler;
use kayra_application::loops::namespaces::{FinalizerReconciler, NamespaceContent};
use kayra_application::loops::rbac::IndexReconciler;
use kayra_authn::TokenFile;
use kayra_client::kubeconfig::Kubeconfig;
use kayra_loop::election::Election;
use kayra_loop::runtime::Loop;
use kayra_nodecsr::reconciler::NodeCsrReconciler;
use kayra_pki::{Ca, Usage};
use kayra_registry::Registry;
use kayra_store::Store;
use kayra_store::mvcc::{MvccStore, Options};
use serde_json::json;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

pub use config::{Config, SchedulerPolicy, StoreKind};

/// Where `init` put things.
#[derive(Debug, Clone)]
pub struct Paths {
    /// The CA certificate.
    pub ca_cert: PathBuf,
    /// The admin kubeconfig.
    pub kubeconfig: PathBuf,
    /// The file holding the admin bearer token.
    pub admin_token: PathBuf,
}

fn pki(data_dir: &Path) -> PathBuf {
    data_dir.join("pki")
}

fn write_private(path: &Path, contents: &str) -> anyhow::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("cannot write {}", path.display()))?;
    file.write_all(contents.as_bytes()).with_context(|| format!("cannot write {}", path.display()))
}

/// Writes a CA, a serving certificate, an admin client certificate (`O=system:masters`), an
/// admin kubeconfig and an admin bearer token under the data directory; keeps whatever is
/// already there.
pub fn init(config: &Config) -> anyhow::Result<Paths> {
    let dir = pki(&config.data_dir);
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let paths = Paths {
        ca_cert: dir.join("ca.crt"),
        kubeconfig: config.data_dir.join("admin.kubeconfig"),
        admin_token: config.data_dir.join("admin.token"),
    };
    let ca = if paths.ca_cert.exists() {
        let cert = std::fs::read_to_string(&paths.ca_cert)?;
        let key = std::fs::read_to_string(dir.join("ca.key")).context("the CA key is missing")?;
        Ca::from_pem(&cert, &key)?
    } else {
        let ca = Ca::generate("kayra-ca")?;
        write_private(&dir.join("ca.key"), &ca.issued().key_pem)?;
        std::fs::write(&paths.ca_cert, ca.cert_pem())?;
        ca
    };
    if !dir.join("server.crt").exists() {
        let mut names = vec!["localhost".to_owned(), "127.0.0.1".to_owned(), "::1".to_owned()];
        let listen_ip = config.listen.ip();
        if !listen_ip.is_unspecified() && !names.contains(&listen_ip.to_string()) {
            names.push(listen_ip.to_string());
        }
        // Listening everywhere, the host's own address is the one a join command names.
        if let Some(host) = token::host_address().filter(|_| listen_ip.is_unspecified()) {
            names.push(host.to_string());
        }
        names.extend(config.server_names.iter().cloned());
        let server = ca.issue(Usage::Server, "kayra-controller", None, &names)?;
        write_private(&dir.join("server.key"), &server.key_pem)?;
        std::fs::write(dir.join("server.crt"), &server.cert_pem)?;
    }
    if !paths.kubeconfig.exists() {
        let admin = ca.issue(Usage::Client, "admin", Some("system:masters"), &[])?;
        let host = if config.listen.ip().is_unspecified() {
            "127.0.0.1".to_owned()
        } else {
            config.listen.ip().to_string()
        };
        let host = if host.contains(':') { format!("[{host}]") } else { host };
        let server = format!("https://{host}:{}", config.listen.port());
        write_private(
            &paths.kubeconfig,
            &Kubeconfig::with_client_certificate(
                "kayra",
                &server,
                ca.cert_pem(),
                "admin",
                &admin.cert_pem,
                &admin.key_pem,
            )
            .to_yaml(),
        )?;
    }
    let token_file = config.token_file();
    if !paths.admin_token.exists() {
        let token = random_token();
        write_private(&paths.admin_token, &format!("{token}\n"))?;
        let mut tokens = std::fs::read_to_string(&token_file).unwrap_or_default();
        tokens.push_str(&format!("{token},admin,admin,\"system:masters\"\n"));
        write_private(&token_file, &tokens)?;
    }
    Ok(paths)
}

fn random_token() -> String {
    use ring::rand::SecureRandom;
    let mut bytes = [0u8; 24];
    ring::rand::SystemRandom::new().fill(&mut bytes).expect("the system has randomness");
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Opens the configured store.
pub async fn open_store(config: &Config) -> anyhow::Result<Arc<dyn Store>> {
    Ok(match config.store {
        StoreKind::Sled => {
            let path = config.data_dir.join("store");
            Arc::new(
                kayra_store_sled::open(&path, Options::default())
                    .with_context(|| format!("cannot open the store at {}", path.display()))?,
            )
        }
        StoreKind::Memory => Arc::new(MvccStore::in_memory(Options::default())?),
        StoreKind::Etcd => {
            let options =
                kayra_store_etcd::EtcdOptions::new(config.etcd.endpoints.clone(), config.etcd.prefix.clone());
            Arc::new(kayra_store_etcd::EtcdStore::connect(options).await?)
        }
    })
}

/// The assembled controller: the HTTP surface over the application layer, the catalog, and
/// the metrics its loops report to.
pub struct Controller {
    state: Arc<ApiState>,
    store: Arc<dyn Store>,
    catalog: Arc<kayra_catalog::Catalog>,
    nodes: kayra_nodeserver::NodeServer,
    metrics: kayra_loop::metrics::Metrics,
}

impl std::fmt::Debug for Controller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Controller").finish_non_exhaustive()
    }
}

/// Builds the application layer and the API over `store`: namespaces `default` and
/// `kayra-system`, the bootstrap roles and a first RBAC index exist when it returns.
pub async fn api(config: &Config, store: Arc<dyn Store>) -> anyhow::Result<Controller> {
    let scheme = Arc::new(Scheme::new(&config.domain));
    let registry = Registry::new(store.clone(), Arc::new(SystemClock), "/registry/")
        .with_watch_window_bytes(config.watch_window_bytes);
    let control = Arc::new(ApplicationLayer::new(scheme.clone(), registry));
    let client = control.client(kayra_application::controller_identity("controller"));
    let tokens = Arc::new(TokenFile::load(&config.token_file()).or_else(|error| {
        if config.token_file.is_none() && !config.token_file().exists() {
            Ok(TokenFile::none())
        } else {
            Err(error)
        }
    })?);
    let audit_path = config.audit_log();
    if let Some(dir) = audit_path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    let audit = kayra_apiserver::AuditLog::open(&audit_path)
        .with_context(|| format!("cannot open the audit log {}", audit_path.display()))?;
    let namespaces = client.resource("", "namespaces")?;
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
    for name in ["default", kayra_api::kinds::secret::BOOTSTRAP_TOKEN_NAMESPACE] {
        let namespace = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}});
        patiently(&format!("create namespace {name}"), || async {
            match client.create(&namespaces, None, namespace.clone()).await {
                Ok(_) | Err(kayra_registry::RegistryError::AlreadyExists { .. }) => Ok(()),
                Err(error) => Err(error),
            }
        })
        .await?;
    }
    let bootstrap = BootstrapReconciler::new(client.clone());
    patiently("create the bootstrap roles", || bootstrap.ensure_all()).await?;
    let index = IndexReconciler::new(client.clone())?;
    control.set_rbac(patiently("read the RBAC objects", || index.rebuild()).await?);
    // Every resource's watch cache starts now, so a list can always be watched from its revision.
    for resource in control.stored_resources() {
        patiently(&format!("start watching {}", resource.plural), || control.prime(resource)).await?;
    }
    let mut metrics_registry = prometheus_client::registry::Registry::default();
    let metrics = kayra_loop::metrics::Metrics::register(&mut metrics_registry);
    let ready_timeout = Duration::from_secs(config.node_ready_timeout_seconds);
    let node_config = kayra_nodeserver::Config {
        ready_timeout,
        heartbeat_write: ready_timeout / 4,
        lost_timeout: Duration::from_secs(config.node_lost_timeout_seconds),
        ..kayra_nodeserver::Config::default()
    };
    let nodes = kayra_nodeserver::NodeServer::new(control.clone(), node_config)?;
    let state = ApiState::new(control, tokens, config.listen.to_string())
        .with_audit_log(audit)
        .with_catalog(catalog.clone())
        .with_nodes(nodes.clone())
        .with_metrics(Arc::new(metrics_registry))
        .with_watch_stall_timeout(Duration::from_secs(config.watch_stall_timeout_seconds));
    Ok(Controller { state: Arc::new(state), store, catalog, nodes, metrics })
}

/// How long a starting controller keeps trying a store that does not answer (an etcd still
/// electing a leader, a disk briefly saturated) before it gives up.
const STORE_PATIENCE: Duration = Duration::from_secs(60);

/// Runs `attempt` until it succeeds, retrying what the store may answer later for up to
/// [`STORE_PATIENCE`]; any other error, or the patience running out, fails with `what`.
async fn patiently<T, F, Fut>(what: &str, mut attempt: F) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, kayra_registry::RegistryError>>,
{
    let deadline = tokio::time::Instant::now() + STORE_PATIENCE;
    let mut pause = Duration::from_millis(100);
    loop {
        match attempt().await {
            Ok(value) => return Ok(value),
            Err(error) if error.is_retryable() && tokio::time::Instant::now() < deadline => {
                tracing::warn!(%error, "cannot {what} yet; trying again");
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_secs(5));
            }
            Err(error) => return Err(anyhow::Error::new(error).context(format!("cannot {what}"))),
        }
    }
}

/// How long a stopping controller waits for its loops' in-flight reconciles.
const LOOP_DRAIN: Duration = Duration::from_secs(10);

/// The controller's loops, each on the loop runtime; those that write run only while this
/// replica leads their election, the RBAC index on every replica (each decides its own requests).
fn loops(config: &Config, controller: &Controller) -> anyhow::Result<Vec<Loop>> {
    let control = controller.state.layer();
    let client = |component: &str| control.client(kayra_application::controller_identity(component));
    let candidate = format!("{}-{}", std::process::id(), uuid::Uuid::new_v4());
    let election = |name: &str| {
        Election::new(
            controller.store.clone(),
            format!("/registry/elections/{name}"),
            candidate.clone(),
            ELECTION_TTL,
        )
    };
    let fetcher =
        Arc::new(kayra_client::gateway::Http::new().context("the catalog reconciler has no HTTP client")?);
    let events = Recorder::new(client("catalog-reconciler"), "kayra-catalog-reconciler");
    let subscriptions: Arc<dyn NamespaceContent> =
        Arc::new(bridges::Subscriptions(controller.catalog.clone()));
    let ca = read_ca(&config.data_dir)?;
    let loops = vec![
        IndexReconciler::new(client("rbac-index"))?.into_loop(),
        BootstrapReconciler::new(client("bootstrap-roles")).into_loop().elected(election("bootstrap-roles")),
        FinalizerReconciler::new(client("namespace-finalizer"), vec![subscriptions])?
            .into_loop()
            .elected(election("namespace-finalizer")),
        NodeCsrReconciler::new(client("node-csr-signer"), Arc::new(bridges::CaSigner(ca)))?
            .into_loop()
            .elected(election("node-csr-signer")),
        kayra_catalog::reconciler::Reconciler::new(
            controller.catalog.clone(),
            config.reconciler.clone(),
            fetcher.clone(),
            fetcher,
            Arc::new(bridges::CoreEvents(events)),
        )
        .into_loop(candidate.clone()),
        controller.nodes.push_loop(),
        kayra_scheduler::Scheduler::with_framework(
            client("scheduler"),
            kayra_scheduler::Framework::new(
                match config.scheduler.policy {
                    SchedulerPolicy::Spread => kayra_scheduler::Policy::Spread,
                    SchedulerPolicy::Binpack => kayra_scheduler::Policy::Binpack,
                },
                Some(Duration::from_secs(config.node_ready_timeout_seconds)),
            ),
        )?
        .into_loop()
        .elected(election("scheduler")),
        kayra_gc::reconciler::GarbageCollector::new(client("garbage-collector"))?
            .into_loop()
            .elected(election("garbage-collector")),
        kayra_endpoints::reconciler::EndpointsReconciler::new(client("endpoints"))?
            .into_loop()
            .elected(election("endpoints")),
        kayra_appset::reconciler::SetLoop::new(client("appset"))?.into_loop().elected(election("appset")),
        controller.nodes.liveness_loop().elected(election("node-liveness")),
        controller.nodes.loss_loop().elected(election("node-loss")),
    ];
    Ok(loops.into_iter().map(|lp| lp.metrics(&controller.metrics).drain_deadline(LOOP_DRAIN)).collect())
}

/// The cluster's CA, certificate and key, as `init` wrote them.
fn read_ca(data_dir: &Path) -> anyhow::Result<Ca> {
    let dir = pki(data_dir);
    let read = |name: &str| {
        std::fs::read_to_string(dir.join(name))
            .with_context(|| format!("cannot read {}; run `kayra-controller init`", dir.join(name).display()))
    };
    Ca::from_pem(&read("ca.crt")?, &read("ca.key")?).context("the cluster CA is unusable")
}

/// How long a crashed replica's loops keep the others waiting.
const ELECTION_TTL: Duration = Duration::from_secs(15);

/// Serves the API on the listeners until `shutdown` resolves.
pub async fn run(
    config: &Config,
    controller: Controller,
    https: TcpListener,
    http: Option<TcpListener>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let dir = pki(&config.data_dir);
    let read = |name: &str| {
        std::fs::read(dir.join(name))
            .with_context(|| format!("cannot read {}; run `kayra-controller init`", dir.join(name).display()))
    };
    // The serving chain ends with the CA, so that a joining node can pin the CA by the hash of
    // its public key from the handshake alone (kubeadm's discovery-token-ca-cert-hash).
    let ca = read("ca.crt")?;
    let mut chain = read("server.crt")?;
    if !chain.ends_with(b"\n") {
        chain.push(b'\n');
    }
    chain.extend_from_slice(&ca);
    let tls = kayra_apiserver::tls_config(&ca, &chain, &read("server.key")?).map_err(anyhow::Error::msg)?;
    let loops = loops(config, &controller)?;
    let state = controller.state;
    let app = kayra_apiserver::router(state.clone());
    // The node session shares the TLS listener; plain HTTP carries no client certificates.
    let https_app = kayra_apiserver::with_grpc(
        app.clone(),
        kayra_grpc::SERVICE_PATH,
        kayra_grpc::server::service(controller.nodes.clone()),
    );
    let (stop, _) = tokio::sync::watch::channel(false);
    let stopped = |stop: &tokio::sync::watch::Sender<bool>| {
        let mut receiver = stop.subscribe();
        async move {
            let _ = receiver.wait_for(|stopped| *stopped).await;
        }
    };
    let stop_loops = CancellationToken::new();
    let mut running = tokio::task::JoinSet::new();
    for lp in loops {
        running.spawn(lp.run(stop_loops.child_token()));
    }
    let mut servers = tokio::task::JoinSet::new();
    servers.spawn(kayra_apiserver::serve(
        https,
        Some(tls),
        https_app,
        ServeOptions { max_connections: config.max_connections, ..ServeOptions::default() },
        stopped(&stop),
    ));
    if let Some(http) = http {
        if http.local_addr().is_ok_and(|addr| !addr.ip().is_loopback()) {
            tracing::warn!(address = %http.local_addr()?, "plain HTTP is served beyond loopback: bearer tokens cross the network in the clear");
        }
        servers.spawn(kayra_apiserver::serve(http, None, app, ServeOptions::default(), stopped(&stop)));
    }
    let nodes = controller.nodes.clone();
    shutdown.await;
    // Node sessions never end by themselves: end them so the servers can drain.
    nodes.shutdown();
    let _ = stop.send(true);
    while servers.join_next().await.is_some() {}
    stop_loops.cancel();
    while running.join_next().await.is_some() {}
    Ok(())
}
