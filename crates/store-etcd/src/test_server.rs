//! A private etcd server on loopback, for tests and benchmarks: Debian's `etcd` binary on two
//! free ports with a temporary data directory, stopped when dropped. Also [`skip_test`], the one
//! way a test says this machine lacks a tool it needs (etcd, kubectl, nginx).

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::{EtcdOptions, EtcdStore};

mod cluster;

pub use cluster::EtcdCluster;

/// A running etcd, killed when dropped.
#[derive(Debug)]
pub struct EtcdServer {
    child: Child,
    endpoint: String,
    _data: tempfile::TempDir,
}

/// Why no server could be started.
#[derive(Debug)]
pub enum StartError {
    /// No `etcd` binary on this machine (Debian's `etcd-server` package provides it).
    Missing,
    /// The binary is there but the server did not come up.
    Failed(String),
}

/// The environment variable naming the file a skipped test appends its line to. `cargo xtask ci`
/// sets it and prints the file at the end of the run, so a skip cannot pass unseen.
pub const SKIPPED_LOG: &str = "KAYRA_SKIPPED_LOG";

/// Says that the running test cannot run here because `reason` (a missing tool): a failure under
/// CI (`CI` set), where every tool must be present; otherwise it prints `skipped: <reason>` and
/// appends `<test>: <reason>` to the file [`SKIPPED_LOG`] names, if any. The caller returns
/// right after.
pub fn skip_test(reason: impl std::fmt::Display) {
    let thread = std::thread::current();
    let test = thread.name().unwrap_or("an unnamed test");
    let package = std::env::var("CARGO_PKG_NAME").unwrap_or_default();
    assert!(std::env::var_os("CI").is_none(), "{test} cannot be skipped in CI: {reason}");
    eprintln!("skipped: {reason}");
    if let Some(path) = std::env::var_os(SKIPPED_LOG) {
        use std::io::Write;
        // One write of one line to a file opened for appending: lines from tests running in
        // parallel processes do not interleave.
        let line = format!("{package} {test}: {reason}\n");
        let written = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .and_then(|mut file| file.write_all(line.as_bytes()));
        if let Err(error) = written {
            eprintln!("cannot record the skip in {}: {error}", PathBuf::from(path).display());
        }
    }
}

impl EtcdServer {
    /// Starts a server and waits until it answers. A free port may be taken by another test
    /// between its choice and etcd's bind: etcd then exits at once, and is started again on
    /// other ports.
    pub async fn start() -> Result<EtcdServer, StartError> {
        let mut last = String::new();
        for _ in 0..5 {
            match EtcdServer::start_once().await {
                Err(StartError::Failed(reason)) if reason.contains("address already in use") => last = reason,
                started => return started,
            }
        }
        Err(StartError::Failed(format!("no free ports in five tries:\n{last}")))
    }

    async fn start_once() -> Result<EtcdServer, StartError> {
        let binary = etcd_binary().ok_or(StartError::Missing)?;
        let data = tempfile::tempdir().map_err(|error| StartError::Failed(error.to_string()))?;
        let (client_port, peer_port) = (free_port()?, free_port()?);
        let client = format!("http://127.0.0.1:{client_port}");
        let peer = format!("http://127.0.0.1:{peer_port}");
        let log = std::fs::File::create(data.path().join("etcd.log"))
            .map_err(|error| StartError::Failed(error.to_string()))?;
        let child = Command::new(binary)
            .args(["--name", "kayra-test", "--data-dir"])
            .arg(data.path().join("data"))
            .args(["--listen-client-urls", &client, "--advertise-client-urls", &client])
            .args(["--listen-peer-urls", &peer, "--initial-advertise-peer-urls", &peer])
            .arg(format!("--initial-cluster=kayra-test={peer}"))
            .args(["--max-request-bytes", "4194304", "--log-level", "warn"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .map_err(|error| StartError::Failed(format!("cannot run etcd: {error}")))?;
        let mut server = EtcdServer { child, endpoint: client, _data: data };
        let deadline = Instant::now() + Duration::from_secs(20);
        let log = |server: &EtcdServer| {
            std::fs::read_to_string(server._data.path().join("etcd.log")).unwrap_or_default()
        };
        loop {
            let options =
                EtcdOptions { connect_timeout: Duration::from_millis(500), ..server.options("/ready/") };
            if EtcdStore::connect(options).await.is_ok() {
                return Ok(server);
            }
            if let Ok(Some(status)) = server.child.try_wait() {
                return Err(StartError::Failed(format!("etcd exited ({status}):\n{}", log(&server))));
            }
            if Instant::now() > deadline {
                return Err(StartError::Failed(format!(
                    "etcd did not become ready within 20 s:\n{}",
                    log(&server)
                )));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The client URL.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// Options reaching this server, with keys under `prefix`.
    pub fn options(&self, prefix: &str) -> EtcdOptions {
        EtcdOptions::new(vec![self.endpoint.clone()], prefix)
    }
}

impl Drop for EtcdServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn etcd_binary() -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/bin"), PathBuf::from("/usr/local/bin")])
        .map(|dir| dir.join("etcd"))
        .find(|candidate| candidate.is_file())
}

fn free_port() -> Result<u16, StartError> {
    let listener = TcpListener::bind("127.0.0.1:0").map_err(|error| StartError::Failed(error.to_string()))?;
    listener.local_addr().map(|addr| addr.port()).map_err(|error| StartError::Failed(error.to_string()))
}

impl std::fmt::Display for StartError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StartError::Missing => f.write_str("no etcd binary found (install Debian's etcd-server)"),
            StartError::Failed(reason) => write!(f, "etcd did not start: {reason}"),
        }
    }
}
