//! `embed-catalog`: the wiring of a team's own catalog service. It opens a sled store, builds
//! the catalog over it with the team's namespaces and reserved groups, and serves the HTTP API
//! while the reconciler runs, until Ctrl-C.
//!
//! Environment: `LISTEN` (`127.0.0.1:9191`), `DATA_DIR` (`./embed-catalog-data`), `NAMESPACES`
//! (the namespaces that may subscribe, comma-separated: `default`), `RESERVED_GROUPS` (API
//! groups nobody may register, comma-separated), `DOMAIN` (`example.com`), `PLATFORM` and
//! `REGION` (`local`), `GATEWAY_URL` (where registered APIs are reachable; unset, documents
//! cannot be fetched and nothing is reconciled), `RESYNC_SECONDS` (`30`).
//!
//! A registration naming the mode `notify` has each subscriber told of a new build with
//! `POST <gateway>/apis/<api>/v1/namespaces/<namespace>/sync` and `{"sync_id": "..."}`; one
//! naming no mode only records the sync.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use kayra_api::clock::SystemClock;
use kayra_catalog::ports::FixedNamespaces;
use kayra_catalog::steps::{Mode, ReconcilerConfig, Step};
use kayra_catalog::{Catalog, RandomIds, Scope};
use kayra_example_embed_catalog::reconciler::{LoggedEvents, reconciler};
use tokio_util::sync::CancellationToken;

fn env(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.to_owned())
}

fn list(name: &str, default: &str) -> Vec<String> {
    env(name, default).split(',').map(str::trim).filter(|item| !item.is_empty()).map(str::to_owned).collect()
}

/// The one mode this service offers.
fn notify() -> Mode {
    Mode {
        steps: vec![Step {
            name: "notify".to_owned(),
            url:
                "{{ .Gateway }}/apis/{{ .Subscription.Api }}/v1/namespaces/{{ .Subscription.Namespace }}/sync"
                    .to_owned(),
            headers: [("content-type".to_owned(), "application/json".to_owned())].into(),
            body: r#"{"sync_id": "{{ .SyncID }}"}"#.to_owned(),
            ..Step::default()
        }],
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    use std::io::IsTerminal;
    tracing_subscriber::fmt().with_writer(std::io::stderr).with_ansi(std::io::stderr().is_terminal()).init();
    let _ = rustls::crypto::ring::default_provider().install_default();

    let data_dir = PathBuf::from(env("DATA_DIR", "./embed-catalog-data"));
    let store = kayra_store_sled::open(&data_dir.join("store"), kayra_store::mvcc::Options::default())?;
    let scope = Scope {
        root: "/".to_owned(),
        domain: env("DOMAIN", "example.com"),
        platform: env("PLATFORM", "local"),
        region: env("REGION", "local"),
        reserved_groups: list("RESERVED_GROUPS", ""),
    };
    let catalog = Arc::new(Catalog::new(
        Arc::new(store),
        scope,
        Arc::new(FixedNamespaces::new(list("NAMESPACES", "default"))),
        Arc::new(RandomIds),
        Arc::new(SystemClock),
    ));

    let config = ReconcilerConfig {
        gateway_url: std::env::var("GATEWAY_URL").ok(),
        mode: [("notify".to_owned(), notify())].into(),
    };
    let period = Duration::from_secs(env("RESYNC_SECONDS", "30").parse()?);
    let reconciler = reconciler(catalog.clone(), config, Arc::new(LoggedEvents), period)
        .map_err(|error| -> Box<dyn std::error::Error> { error })?;

    let listener = tokio::net::TcpListener::bind(env("LISTEN", "127.0.0.1:9191")).await?;
    tracing::info!(address = %listener.local_addr()?, data = %data_dir.display(), "serving the catalog");
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let until_stopped = |mut stopped: tokio::sync::watch::Receiver<bool>| async move {
        let _ = stopped.wait_for(|stopped| *stopped).await;
    };
    let stop_reconciling = CancellationToken::new();
    let reconciling = tokio::spawn(reconciler.run(stop_reconciling.clone()));
    let serving = tokio::spawn(kayra_example_embed_catalog::serve(
        listener,
        kayra_example_embed_catalog::router(catalog),
        until_stopped(stopped),
    ));
    tokio::signal::ctrl_c().await?;
    let _ = stop.send(true);
    stop_reconciling.cancel();
    serving.await??;
    reconciling.await?;
    Ok(())
}
