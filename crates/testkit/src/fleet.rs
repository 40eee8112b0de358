//! A fleet around a [`TestServer`]: real `kayra-agent` processes joined to it with a bootstrap
//! token and the CA's pin, running real workloads, and the real `kubectl` driving it.
//!
//! An [`Agent`] keeps its own data directory; dropping it kills the agent by its PID and then
//! every process whose command line names that directory (its supervisors and workloads), and
//! nothing else.

use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use crate::TestServer;

/// The `kayra-agent` binary of this build: beside the test binary's `deps` directory, where
/// `cargo build -p kayra-agent` puts it.
pub fn agent_binary() -> PathBuf {
    let test = std::env::current_exe().expect("the test binary's path");
    let profile = test.parent().and_then(|deps| deps.parent()).expect("a target directory");
    let path = profile.join("kayra-agent");
    assert!(path.exists(), "{} is missing: build it with `cargo build -p kayra-agent`", path.display());
    path
}

/// A name no other test run uses, for nodes and workload markers.
pub fn unique(prefix: &str) -> String {
    let nanos =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("after 1970").as_nanos();
    format!("{prefix}-{}-{}", std::process::id(), nanos % 1_000_000_000)
}

/// A `kayra-agent` process joined to a test server, with its own name and data directory.
pub struct Agent {
    child: Option<Child>,
    name: String,
    dir: tempfile::TempDir,
}

impl std::fmt::Debug for Agent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Agent").field("name", &self.name).finish_non_exhaustive()
    }
}

impl Agent {
    /// The node's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// What the agent logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("agent.log")).unwrap_or_default()
    }

    /// The agent's data directory.
    pub fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        let marker = self.data_dir().display().to_string();
        for pid in processes_naming(&marker) {
            let _ = Command::new("kill").args(["-KILL", &pid.to_string()]).status();
        }
    }
}

/// Kills, when dropped, every process whose command line carries its marker: what one test
/// started, and nothing else.
#[derive(Debug)]
pub struct Marked(pub String);

impl Drop for Marked {
    fn drop(&mut self) {
        for pid in processes_naming(&self.0) {
            let _ = Command::new("kill").args(["-KILL", &pid.to_string()]).status();
        }
    }
}

/// The processes whose command line contains `marker`.
pub fn processes_naming(marker: &str) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    entries
        .flatten()
        .filter_map(|entry| {
            let pid = entry.file_name().to_string_lossy().parse::<u32>().ok()?;
            let cmdline = std::fs::read(entry.path().join("cmdline")).ok()?;
            (pid != std::process::id() && String::from_utf8_lossy(&cmdline).contains(marker)).then_some(pid)
        })
        .collect()
}

impl TestServer {
    /// Joins a real agent named `name` (made unique) with a fresh bootstrap token; answers once
    /// its Node is registered.
    pub async fn join_agent(&self, name: &str) -> Agent {
        let token = self.bootstrap_token().await;
        let pin = kayra_controlplane::token::ca_cert_hash(&self.config).expect("the CA's pin");
        let dir = tempfile::tempdir().expect("a temporary directory");
        let name = unique(name);
        let log = std::fs::File::create(dir.path().join("agent.log")).expect("the agent's log");
        let child = Command::new(agent_binary())
            .args(["join", "--server", &self.url(), "--token", &token, "--ca-cert-hash", &pin])
            .args(["--name", &name, "--data-dir"])
            .arg(dir.path().join("data"))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("the agent starts");
        let agent = Agent { child: Some(child), name, dir };
        let node = format!("{}/api/v1/nodes/{}", self.url(), agent.name);
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        loop {
            let response = self.admin().get(&node).send().await;
            if response.is_ok_and(|response| response.status() == reqwest::StatusCode::OK) {
                return agent;
            }
            assert!(std::time::Instant::now() < deadline, "the agent never registered:\n{}", agent.log());
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// A fresh bootstrap token, stored as `kayra-controller token create` stores one.
    async fn bootstrap_token(&self) -> String {
        use kayra_authn::bootstrap::{Stored, Token};
        let token = Token::generate();
        let stored = Stored {
            id: token.id.clone(),
            secret_digest: token.secret_digest(),
            expires: std::time::SystemTime::now() + Duration::from_secs(3600),
            extra_groups: Vec::new(),
        };
        let secret =
            kayra_authn::bootstrap::secret::encode(&self.config.domain, &stored, "an e2e test's node");
        let namespace = kayra_api::kinds::secret::BOOTSTRAP_TOKEN_NAMESPACE;
        let path =
            format!("{}/apis/fleet.{}/v1/namespaces/{namespace}/secrets", self.url(), self.config.domain);
        let response = self.admin().post(path).json(&secret).send().await.expect("the server answers");
        assert_eq!(
            response.status(),
            reqwest::StatusCode::CREATED,
            "{}",
            response.text().await.unwrap_or_default()
        );
        token.to_string()
    }

    /// Runs the real kubectl with `token` as its bearer token (no kubeconfig), trusting the
    /// cluster CA, with a fresh discovery cache; on a blocking thread, so that the server in
    /// this process goes on answering meanwhile.
    pub async fn kubectl(&self, token: &str, args: &[&str]) -> Output {
        let mut command = Command::new("kubectl");
        command
            .args(["--kubeconfig", "/dev/null", "--server", &self.url(), "--token", token])
            .arg("--certificate-authority")
            .arg(self.config.data_dir.join("pki/ca.crt"))
            .args(args)
            .stdin(Stdio::null());
        tokio::task::spawn_blocking(move || {
            let cache = tempfile::tempdir().expect("a temporary directory");
            command.arg("--cache-dir").arg(cache.path()).output().expect("kubectl runs")
        })
        .await
        .expect("kubectl's thread ends")
    }
}
