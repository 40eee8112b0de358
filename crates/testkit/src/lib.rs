//! End-to-end test support: [`TestServer`] boots the controller exactly as the binary wires it
//! (PKI from `init`, the API over a memory or sled store), in-process, on port 0, with real
//! TLS and real HTTP, and hands out clients with the admin's certificate, a bearer token, or
//! no credentials at all.

pub mod fleet;

use std::net::SocketAddr;

use base64::Engine;
use kayra_controlplane::config::{Config, StoreKind};
use reqwest::{Certificate, Client, Identity};
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// Which store the server keeps its state in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Store {
    /// In memory.
    Memory,
    /// sled in the server's data directory, so it survives a [`TestServer::restart`].
    Sled,
}

/// A running controller, stopped when dropped.
pub struct TestServer {
    config: Config,
    /// Holds the data directory; removed when the server is dropped.
    _dir: tempfile::TempDir,
    https: SocketAddr,
    http: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for TestServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestServer").field("https", &self.https).finish_non_exhaustive()
    }
}

impl TestServer {
    /// Initialises a fresh data directory and starts serving.
    pub async fn start(store: Store) -> TestServer {
        TestServer::start_with(store, |_| {}).await
    }

    /// As [`TestServer::start`], with `configure` changing the configuration first.
    pub async fn start_with(store: Store, configure: impl FnOnce(&mut Config)) -> TestServer {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let dir = tempfile::tempdir().expect("a temporary directory");
        let mut config = Config {
            data_dir: dir.path().join("data"),
            store: match store {
                Store::Memory => StoreKind::Memory,
                Store::Sled => StoreKind::Sled,
            },
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            ..Config::default()
        };
        configure(&mut config);
        kayra_controlplane::pki::init(&config).expect("init writes the PKI");
        let mut server = TestServer {
            config,
            _dir: dir,
            https: SocketAddr::from(([127, 0, 0, 1], 0)),
            http: SocketAddr::from(([127, 0, 0, 1], 0)),
            stop: None,
            task: None,
        };
        server.boot().await;
        server
    }

    /// Starts the server on its data directory, on fresh ports: after [`TestServer::shutdown`],
    /// the same controller comes back as after a restart.
    pub async fn boot(&mut self) {
        let https = TcpListener::bind("127.0.0.1:0").await.expect("a port");
        let http = TcpListener::bind("127.0.0.1:0").await.expect("a port");
        (self.https, self.http) = (https.local_addr().expect("bound"), http.local_addr().expect("bound"));
        // The issuer stays the first boot's URL, so tokens minted before a restart still verify.
        if self.config.service_account_issuer.is_none() {
            self.config.service_account_issuer = Some(format!("https://127.0.0.1:{}", self.https.port()));
        }
        // The embedded store is released once the last task of the previous run lets go of it.
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
        let store = loop {
            match kayra_controlplane::store::open_store(&self.config).await {
                Ok(store) => break store,
                Err(error) if tokio::time::Instant::now() > deadline => {
                    panic!("the store does not open: {error}")
                }
                Err(_) => tokio::task::yield_now().await,
            }
        };
        let state =
            kayra_controlplane::assemble::assemble(&self.config, store).await.expect("the API assembles");
        let (stop, stopped) = oneshot::channel::<()>();
        let config = self.config.clone();
        self.task = Some(tokio::spawn(async move {
            let shutdown = async move {
                let _ = stopped.await;
            };
            kayra_controlplane::run::run(&config, state, https, Some(http), shutdown)
                .await
                .expect("the server runs");
        }));
        self.stop = Some(stop);
    }

    /// Stops the server and starts it again on the same data directory.
    pub async fn restart(&mut self) {
        self.shutdown().await;
        self.boot().await;
    }

    /// Stops the server, letting in-flight requests finish.
    pub async fn shutdown(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }

    /// The HTTPS base URL.
    pub fn url(&self) -> String {
        format!("https://127.0.0.1:{}", self.https.port())
    }

    /// The plain-HTTP base URL.
    pub fn http_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.http.port())
    }

    fn read(&self, name: &str) -> Vec<u8> {
        std::fs::read(self.config.data_dir.join(name)).expect("init wrote it")
    }

    fn builder(&self) -> reqwest::ClientBuilder {
        let ca = Certificate::from_pem(&self.read("pki/ca.crt")).expect("the CA is PEM");
        Client::builder().tls_certs_only([ca])
    }

    /// A file of the server's PKI (`ca.crt`, `server.crt`, `server.key`).
    pub fn pki_file(&self, name: &str) -> Vec<u8> {
        self.read(&format!("pki/{name}"))
    }

    /// A client presenting the admin's certificate (`O=system:masters`).
    pub fn admin(&self) -> Client {
        self.admin_builder().build().expect("a client")
    }

    /// A client builder trusting the cluster CA and presenting the admin's certificate, for
    /// callers that tune the client (HTTP version, pool size).
    pub fn admin_builder(&self) -> reqwest::ClientBuilder {
        let kubeconfig = String::from_utf8(self.read("admin.kubeconfig")).expect("UTF-8");
        let field = |name: &str| {
            let line =
                kubeconfig.lines().find(|l| l.trim_start().starts_with(name)).expect("the kubeconfig has it");
            let encoded = line.split_once(": ").expect("a value").1.trim();
            base64::engine::general_purpose::STANDARD.decode(encoded).expect("base64 in the kubeconfig")
        };
        let pem = [field("client-certificate-data"), field("client-key-data")].concat();
        self.builder().identity(Identity::from_pem(&pem).expect("the admin identity"))
    }

    /// A client with no credentials.
    pub fn anonymous(&self) -> Client {
        self.builder().build().expect("a client")
    }

    /// A client builder trusting the cluster CA and sending `token` as its bearer token.
    pub fn token_builder(&self, token: &str) -> reqwest::ClientBuilder {
        let mut headers = reqwest::header::HeaderMap::new();
        let value = format!("Bearer {token}").parse().expect("a token is a valid header value");
        headers.insert(reqwest::header::AUTHORIZATION, value);
        self.builder().default_headers(headers)
    }

    /// The admin bearer token.
    pub fn admin_token(&self) -> String {
        String::from_utf8(self.read("admin.token")).expect("UTF-8").trim().to_owned()
    }

    /// Adds a line to the static token file (picked up on its next use).
    pub fn add_token(&self, token: &str, user: &str, groups: &str) {
        let path = self.config.token_file();
        let mut text = std::fs::read_to_string(&path).unwrap_or_default();
        text.push_str(&format!("{token},{user},{user},\"{groups}\"\n"));
        std::fs::write(path, text).expect("the token file is writable");
    }

    /// The server's data directory (PKI, tokens, store, audit log).
    pub fn data_dir(&self) -> &std::path::Path {
        &self.config.data_dir
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}
