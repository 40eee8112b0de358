//! Serving: [`serve`] binds the configured listeners, runs the local node beside the
//! controller when the configuration asks for one, and [`run`]s until told to stop; [`run`]
//! serves the API and the node sessions on listeners it is given, runs the loops, and drains
//! both when its shutdown future resolves.

use std::future::Future;

use kayra_apiserver::ServeOptions;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::ControlPlaneError;
use crate::address;
use crate::assemble::{ControlPlane, assemble};
use crate::config::Config;
use crate::local;
use crate::loops::loops;
use crate::pki::{cover_serving_host, serving_tls};
use crate::store::open_store;

/// Opens the store, assembles the control plane, binds the configured listeners and serves
/// (with the local node, when `agent` is on) until `shutdown` resolves.
pub async fn serve(
    config: &Config,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ControlPlaneError> {
    let store = open_store(config).await?;
    let control_plane = assemble(config, store).await?;
    let https = bind(config.listen).await?;
    let http = match config.http_listen {
        Some(address) => Some(bind(address).await?),
        None => None,
    };
    let bound = |listener: &TcpListener| listener.local_addr().map(|a| a.to_string()).ok();
    let http_address = http.as_ref().and_then(bound).unwrap_or_else(|| "off".to_owned());
    let https_address = bound(&https).unwrap_or_else(|| config.listen.to_string());
    let consul_address = config.consul_listen.map_or_else(|| "off".to_owned(), |address| address.to_string());
    tracing::info!(https = %https_address, http = %http_address, consul = %consul_address, store = ?config.store, "serving");
    let stop = CancellationToken::new();
    let local = if config.agent {
        let port = https.local_addr().map_err(ControlPlaneError::io("cannot read the bound address"))?.port();
        let agent = local::agent_config(config, port)?;
        let (config, stop) = (config.clone(), stop.clone());
        Some(tokio::spawn(async move {
            if let Err(error) = local::run(config, agent, stop).await {
                tracing::error!("the local node stopped: {error}");
            }
        }))
    } else {
        None
    };
    let stopping = stop.clone();
    let served = run(config, control_plane, https, http, async move {
        shutdown.await;
        stopping.cancel();
    })
    .await;
    stop.cancel();
    if let Some(local) = local {
        let _ = local.await;
    }
    served
}

async fn bind(address: std::net::SocketAddr) -> Result<TcpListener, ControlPlaneError> {
    TcpListener::bind(address).await.map_err(|source| ControlPlaneError::Listen { address, source })
}

/// Serves the API on the listeners until `shutdown` resolves, with the loops running; then
/// ends the node sessions, drains the servers and the loops. The URL the HTTPS listener answers
/// to is recorded in the data directory once it serves, and the serving certificate covers it.
pub async fn run(
    config: &Config,
    control_plane: ControlPlane,
    https: TcpListener,
    http: Option<TcpListener>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ControlPlaneError> {
    let bound = https.local_addr().map_err(ControlPlaneError::io("cannot read the bound address"))?;
    let host = address::serving_host(bound.ip());
    cover_serving_host(&config.data_dir, host)?;
    let tls = serving_tls(&config.data_dir)?;
    let loops = loops(config, &control_plane)?;
    let state = control_plane.state;
    let app = kayra_apiserver::router(state.clone());
    // The node session shares the TLS listener; plain HTTP carries no client certificates.
    let https_app = kayra_apiserver::with_grpc(
        app.clone(),
        kayra_grpc::SERVICE_PATH,
        kayra_grpc::server::service(control_plane.nodes.clone()),
    );
    let (stop, _) = tokio::sync::watch::channel(false);
    let stopped = |stop: &tokio::sync::watch::Sender<bool>| {
        let mut receiver = stop.subscribe();
        async move {
            let _ = receiver.wait_for(|stopped| *stopped).await;
        }
    };
    let stop_loops = CancellationToken::new();
    let loop_runtime = loop_runtime()?;
    let mut running = tokio::task::JoinSet::new();
    for lp in loops {
        running.spawn_on(lp.run(stop_loops.child_token()), loop_runtime.handle());
    }
    let mut servers = tokio::task::JoinSet::new();
    servers.spawn(kayra_apiserver::serve(
        https,
        Some(tls.clone()),
        https_app,
        ServeOptions { max_connections: config.max_connections, ..ServeOptions::default() },
        stopped(&stop),
    ));
    let consul = match config.consul_listen {
        Some(address) => match bind(address).await {
            Ok(listener) => Some(listener),
            Err(error) if config.consul_listen_is_default => {
                tracing::warn!(%address, "{error}: the fleet is not served in Consul's shape (--consul-listen chooses where)");
                None
            }
            Err(error) => return Err(error),
        },
        None => None,
    };
    if let Some(consul) = consul {
        let bound = consul.local_addr().map_err(ControlPlaneError::io("cannot read the Consul address"))?;
        let projection = kayra_consul::Projection::default();
        let client = control_plane.application.client(kayra_application::controller_identity("consul"));
        let follow = projection
            .follow(client)
            .map_err(ControlPlaneError::registry("following the fleet for Consul"))?;
        running.spawn_on(follow.run(stop_loops.child_token()), loop_runtime.handle());
        let settings = kayra_consul::Settings {
            datacenter: config.consul.datacenter.clone(),
            default_namespace: config.consul.default_namespace.clone(),
            leader: bound.to_string(),
            node_name: "kayra-controller".to_owned(),
        };
        let router = kayra_consul::router(
            projection,
            control_plane.application.clone(),
            control_plane.tokens.clone(),
            settings,
        );
        // Consul clients speak plain HTTP to a local agent; beyond loopback, tokens need TLS.
        let tls = (!bound.ip().is_loopback()).then(|| tls.clone());
        tracing::info!(consul = %bound, tls = tls.is_some(), "serving the fleet in Consul's shape");
        servers.spawn(kayra_apiserver::serve(consul, tls, router, ServeOptions::default(), stopped(&stop)));
    }
    if let Some(http) = http {
        if let Ok(address) = http.local_addr()
            && !address.ip().is_loopback()
        {
            tracing::warn!(%address, "plain HTTP is served beyond loopback: bearer tokens cross the network in the clear");
        }
        servers.spawn(kayra_apiserver::serve(http, None, app, ServeOptions::default(), stopped(&stop)));
    }
    // What prints a join command names where the controller answers, not what it was told.
    let url = address::serving_url(host, bound.port());
    address::record_serving_url(&config.data_dir, &url)?;
    crate::pki::follow_listener(&config.data_dir, bound.ip(), bound.port())?;
    let nodes = control_plane.nodes.clone();
    // On a shared store the store records which replica holds each node's session, and where
    // it answers; the embedded stores serve one process, which needs no such record.
    if config.store == crate::config::StoreKind::Etcd {
        nodes.serve_as(kayra_nodeserver::Replica { id: control_plane.replica_id.clone(), url });
    }
    shutdown.await;
    // Node sessions never end by themselves: end them so the servers can drain.
    nodes.shutdown();
    let _ = stop.send(true);
    while servers.join_next().await.is_some() {}
    stop_loops.cancel();
    while running.join_next().await.is_some() {}
    // What the loops spawned and left ends with their runtime, before the store may be opened
    // again: shutting a runtime down blocks, so it is done off the async threads.
    let _ = tokio::task::spawn_blocking(move || loop_runtime.shutdown_timeout(LOOP_RUNTIME_SHUTDOWN)).await;
    Ok(())
}

/// How long the loops' runtime is given to drop what its tasks hold once the loops have ended.
const LOOP_RUNTIME_SHUTDOWN: std::time::Duration = std::time::Duration::from_secs(10);

/// The runtime the loops run on: one worker thread of its own. However much work the loops
/// have queued (the scheduler's condition and Event for each of 40 000 Applications no node can
/// take), they then take at most about one core's share of the machine's time, and a request
/// never waits in the API's run queue behind their tasks. Its threads write in the background
/// (`kayra_store::priority`): their writes ride the flushes the API's writes start instead of
/// starting flushes of their own, so a burst of conditions and Events does not keep the disk
/// busy under every user's write.
fn loop_runtime() -> Result<tokio::runtime::Runtime, ControlPlaneError> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("kayra-loops")
        .on_thread_start(kayra_store::priority::mark_thread_background)
        .enable_all()
        .build()
        .map_err(ControlPlaneError::io("cannot start the loops' runtime"))
}
