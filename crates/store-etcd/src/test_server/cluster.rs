//! A private etcd cluster on loopback, for tests and benchmarks of what a member's death does:
//! several `etcd` processes on free ports, one temporary data directory each, any one of which
//! can be killed (SIGKILL) and started again; every member is killed when the cluster is
//! dropped.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::{StartError, etcd_binary, free_port};
use crate::EtcdOptions;

/// A running etcd cluster.
#[derive(Debug)]
pub struct EtcdCluster {
    members: Vec<Member>,
    data: tempfile::TempDir,
    token: String,
}

#[derive(Debug)]
struct Member {
    name: String,
    client: String,
    peer: String,
    child: Option<Child>,
}

impl EtcdCluster {
    /// Starts a cluster of `size` members and waits until each answers.
    pub async fn start(size: usize) -> Result<EtcdCluster, StartError> {
        let data = tempfile::tempdir().map_err(|error| StartError::Failed(error.to_string()))?;
        let mut members = Vec::with_capacity(size);
        for n in 0..size {
            let (client, peer) = (free_port()?, free_port()?);
            members.push(Member {
                name: format!("m{n}"),
                client: format!("http://127.0.0.1:{client}"),
                peer: format!("http://127.0.0.1:{peer}"),
                child: None,
            });
        }
        let token = format!("kayra-test-{}-{client}", std::process::id(), client = members[0].client);
        let mut cluster = EtcdCluster { members, data, token };
        for n in 0..size {
            cluster.spawn(n, "new")?;
        }
        for n in 0..size {
            cluster.wait_ready(n).await?;
        }
        Ok(cluster)
    }

    fn spawn(&mut self, n: usize, state: &str) -> Result<(), StartError> {
        let binary = etcd_binary().ok_or(StartError::Missing)?;
        let initial: Vec<String> = self.members.iter().map(|m| format!("{}={}", m.name, m.peer)).collect();
        let member = &self.members[n];
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log_path(n))
            .map_err(|error| StartError::Failed(error.to_string()))?;
        let child = Command::new(binary)
            .args(["--name", &member.name, "--data-dir"])
            .arg(self.data.path().join(&member.name))
            .args(["--listen-client-urls", &member.client, "--advertise-client-urls", &member.client])
            .args(["--listen-peer-urls", &member.peer, "--initial-advertise-peer-urls", &member.peer])
            .arg(format!("--initial-cluster={}", initial.join(",")))
            .args(["--initial-cluster-state", state, "--initial-cluster-token", &self.token])
            .args(["--max-request-bytes", "4194304", "--log-level", "warn"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .map_err(|error| StartError::Failed(format!("cannot run etcd: {error}")))?;
        self.members[n].child = Some(child);
        Ok(())
    }

    fn log_path(&self, n: usize) -> PathBuf {
        self.data.path().join(format!("{}.log", self.members[n].name))
    }

    async fn wait_ready(&self, n: usize) -> Result<(), StartError> {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if self.status(n).await.is_some() {
                return Ok(());
            }
            if Instant::now() > deadline {
                let log = std::fs::read_to_string(self.log_path(n)).unwrap_or_default();
                return Err(StartError::Failed(format!(
                    "member {n} did not become ready within 30 s:\n{log}"
                )));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Member `n`'s id and its leader's, as it answers them; `None` when it does not answer or
    /// knows no leader.
    async fn status(&self, n: usize) -> Option<(u64, u64)> {
        let asked = async {
            let mut client = etcd_client::Client::connect([&self.members[n].client], None).await.ok()?;
            let status = client.status().await.ok()?;
            let member = status.header()?.member_id();
            (status.leader() != 0).then_some((member, status.leader()))
        };
        tokio::time::timeout(Duration::from_secs(2), asked).await.ok().flatten()
    }

    /// Every member's client URL.
    pub fn endpoints(&self) -> Vec<String> {
        self.members.iter().map(|member| member.client.clone()).collect()
    }

    /// Options reaching every member, with keys under `prefix`.
    pub fn options(&self, prefix: &str) -> EtcdOptions {
        EtcdOptions::new(self.endpoints(), prefix)
    }

    /// The member that leads, as the members still running say.
    pub async fn leader(&self) -> Option<usize> {
        let mut ids = Vec::new();
        let mut leader = None;
        for n in 0..self.members.len() {
            if self.members[n].child.is_some()
                && let Some((id, led_by)) = self.status(n).await
            {
                ids.push((n, id));
                leader = leader.or(Some(led_by));
            }
        }
        ids.into_iter().find(|(_, id)| Some(*id) == leader).map(|(n, _)| n)
    }

    /// Kills member `n` with SIGKILL, as a crash would.
    pub fn kill(&mut self, n: usize) {
        if let Some(mut child) = self.members[n].child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Stops member `n` with SIGSTOP: it keeps its connections and answers nothing, as a hung
    /// process would, until it is killed or dropped.
    pub fn pause(&self, n: usize) {
        if let Some(child) = &self.members[n].child {
            let _ = Command::new("kill").args(["-STOP", &child.id().to_string()]).status();
        }
    }

    /// Starts member `n` again from its data directory and waits until it answers.
    pub async fn restart(&mut self, n: usize) -> Result<(), StartError> {
        self.kill(n);
        self.spawn(n, "existing")?;
        self.wait_ready(n).await
    }
}

impl Drop for EtcdCluster {
    fn drop(&mut self) {
        for n in 0..self.members.len() {
            self.kill(n);
        }
    }
}
