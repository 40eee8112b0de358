//! The node agent: [`join`] makes the node a member of the fleet (the controller's CA pinned by
//! hash, a bootstrap token, a key and certificate request made locally); [`run`] holds the
//! node's session with the controller and runs the node's Applications through the process
//! runtime (`kayra-runtime`), renewing the node's certificate before it expires. The
//! `kayra-agent` binary and the controller's in-process local node both start the agent here.
//!
//! Start reading at [`run`]; `session.rs` is the agent's half of the node session protocol,
//! `node.rs` the adapter from desired state to the process runtime, `renewal.rs` the
//! certificate's renewal. This crate never knows the controller's side: it reaches the
//! controller only through `kayra-client` (joining, renewing) and `kayra-grpc` (the session),
//! and it never reads or parses command lines (the binary does).

mod error;
mod node;
pub mod own_log;
mod renewal;
mod servers;
pub mod session;
pub mod streams;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use kayra_api::session::{NodeTaint, Registration};
use kayra_client::join::{self, Credentials as Joined};
use kayra_grpc::client::Credentials;
use tokio_util::sync::CancellationToken;

pub use error::NodeAgentError;
pub use servers::Servers;
pub use session::SessionConfig;

/// Where an agent keeps its state and who it is.
#[derive(Debug, Clone)]
pub struct AgentConfig {
    /// The data directory: credentials under `pki/`, Applications under `apps/`.
    pub data_dir: PathBuf,
    /// The node's name.
    pub node_name: String,
    /// The argv prefix that runs the supervisor program: `[<this executable>, "supervise"]`.
    pub supervisor: Vec<String>,
    /// The controllers to talk to (`https://a:6443,https://b:6443`: one session, to one of
    /// them at a time); `None` is the list the node joined with.
    pub server: Option<String>,
    /// How the session behaves.
    pub session: SessionConfig,
}

/// The data directory by default: `/var/lib/kayra-agent` as root, else `./kayra-agent-data`.
pub fn default_data_dir() -> PathBuf {
    if is_root() { PathBuf::from("/var/lib/kayra-agent") } else { PathBuf::from("./kayra-agent-data") }
}

/// Whether this process runs as root (effective uid 0).
fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            let uids = status.lines().find(|line| line.starts_with("Uid:"))?;
            Some(uids.split_whitespace().nth(2) == Some("0"))
        })
        .unwrap_or(false)
}

/// The node's name by default: the host's name, lower-cased.
pub fn default_node_name() -> String {
    kayra_runtime::facts::node_facts().hostname.to_lowercase()
}

fn pki(data_dir: &Path) -> PathBuf {
    data_dir.join("pki")
}

/// The file naming the controller a joined node talks to.
const SERVER_FILE: &str = "server";

/// The file naming the node a data directory belongs to.
const NAME_FILE: &str = "node-name";

/// The file keeping what the node asks of its Node when it is registered (`--cordon`,
/// `--register-with-taints`), sent with every status.
const REGISTRATION_FILE: &str = "registration.json";

/// Whether the data directory holds a joined node's credentials.
pub fn joined(config: &AgentConfig) -> bool {
    matches!(join::load(&pki(&config.data_dir)), Ok(Some(_))) && config.data_dir.join(SERVER_FILE).exists()
}

/// The node the data directory was joined as; `None` before it joined.
pub fn joined_node_name(data_dir: &Path) -> Result<Option<String>, NodeAgentError> {
    let path = data_dir.join(NAME_FILE);
    match std::fs::read_to_string(&path) {
        Ok(name) => Ok(Some(name.trim().to_owned())),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(error) => Err(NodeAgentError::io(format!("cannot read {}", path.display()))(error)),
    }
}

/// The name a node runs under from `data_dir`: the one it joined as, which `given` (a
/// `--name`) may repeat but not contradict; before a join, `given` or the host's name.
pub fn run_node_name(data_dir: &Path, given: Option<&str>) -> Result<String, NodeAgentError> {
    match (joined_node_name(data_dir)?, given) {
        (Some(joined_as), Some(asked)) if joined_as != asked => Err(NodeAgentError::OtherNode {
            data_dir: data_dir.to_owned(),
            joined_as,
            asked: asked.to_owned(),
        }),
        (Some(joined_as), _) => Ok(joined_as),
        (None, Some(asked)) => Ok(asked.to_owned()),
        (None, None) => Ok(default_node_name()),
    }
}

/// Joins the fleet: verifies the controller by the hash of its CA's public key before anything
/// is sent, then asks for a node certificate with the bootstrap token, and keeps key,
/// certificate, CA and the controller's address under the data directory. The node's Node is
/// registered schedulable, with no taints.
pub async fn join(
    config: &AgentConfig,
    server: &str,
    token: &str,
    ca_cert_hash: &str,
) -> Result<(), NodeAgentError> {
    join_registering(config, server, token, ca_cert_hash, &Registration::default()).await
}

/// Joins as [`join`] does, the node asking that its Node be registered as `registration` says.
/// That is kept under the data directory before anything is sent, so that every later `run`
/// asks the same, whenever the node's first status reaches the controller.
pub async fn join_registering(
    config: &AgentConfig,
    server: &str,
    token: &str,
    ca_cert_hash: &str,
    registration: &Registration,
) -> Result<(), NodeAgentError> {
    std::fs::create_dir_all(&config.data_dir)
        .map_err(NodeAgentError::io(format!("cannot create {}", config.data_dir.display())))?;
    let taints: Vec<String> = registration.taints.iter().map(ToString::to_string).collect();
    let kept = serde_json::json!({"cordon": registration.unschedulable, "registerWithTaints": taints});
    write_private(&config.data_dir.join(REGISTRATION_FILE), &kept.to_string())?;
    let servers = Servers::parse(server, &config.node_name)?;
    let (joined, through) = servers::each_until_answered(&servers, |server| async move {
        let joined =
            join::join(&server, ca_cert_hash, token, &config.node_name, join::DEFAULT_CERTIFICATE_TIMEOUT)
                .await?;
        Ok((joined, server))
    })
    .await?;
    join::store(&pki(&config.data_dir), &joined)?;
    write_private(&config.data_dir.join(SERVER_FILE), &servers.list())?;
    write_private(&config.data_dir.join(NAME_FILE), &config.node_name)?;
    tracing::info!(node = %config.node_name, server = %through, "joined the fleet");
    Ok(())
}

/// What the node asks of its Node, as `join` kept it; a data directory joined without it asks
/// nothing.
fn registration(data_dir: &Path) -> Result<Registration, NodeAgentError> {
    let path = data_dir.join(REGISTRATION_FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(Registration::default()),
        Err(error) => return Err(NodeAgentError::io(format!("cannot read {}", path.display()))(error)),
    };
    let malformed = |why: String| NodeAgentError::BadRegistration { path: path.clone(), why };
    let kept: serde_json::Value =
        serde_json::from_str(&text).map_err(|error| malformed(error.to_string()))?;
    let taints: Vec<&str> = kept["registerWithTaints"]
        .as_array()
        .map(|taints| taints.iter().filter_map(serde_json::Value::as_str).collect())
        .unwrap_or_default();
    let taints = if taints.is_empty() {
        Vec::new()
    } else {
        NodeTaint::parse_list(&taints.join(","))
            .map_err(|error| malformed(format!("{}: {}", error.field, error.message)))?
    };
    Ok(Registration { unschedulable: kept["cordon"].as_bool().unwrap_or(false), taints })
}

fn write_private(path: &Path, text: &str) -> Result<(), NodeAgentError> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let temporary = path.with_extension("tmp");
    let failed = || NodeAgentError::io(format!("cannot write {}", temporary.display()));
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&temporary)
        .map_err(failed())?;
    file.write_all(text.as_bytes()).map_err(failed())?;
    file.sync_all().map_err(failed())?;
    std::fs::rename(&temporary, path).map_err(NodeAgentError::io(format!("cannot write {}", path.display())))
}

/// The session's credentials, read from the data directory at each connection, so that a
/// renewed certificate is used from the next session on.
struct Stored {
    dir: PathBuf,
    servers: Servers,
}

impl session::CredentialSource for Stored {
    fn credentials(&self) -> Result<Credentials, String> {
        match join::load(&self.dir) {
            Ok(Some(Joined { key_pem, cert_pem, ca_pem })) => {
                // Each connection goes to the next controller in turn: a node whose replica is
                // gone, or whose session there ended, moves to another.
                Ok(Credentials { server: self.servers.take().to_owned(), ca_pem, cert_pem, key_pem })
            }
            Ok(None) => {
                Err(format!("no node credentials under {}; run `kayra-agent join` first", self.dir.display()))
            }
            Err(error) => Err(error.to_string()),
        }
    }
}

/// Runs the node until `stop`: opens the process runtime (reattaching to whatever a previous
/// agent left running), holds the session, renews the certificate. Stopping the agent stops
/// nothing it runs. A data directory joined as another node than `config.node_name` is refused.
pub async fn run(config: AgentConfig, stop: CancellationToken) -> Result<(), NodeAgentError> {
    // Supervisors outlive the agent and do not share its working directory: paths are absolute.
    let data_dir = &std::path::absolute(&config.data_dir)
        .map_err(NodeAgentError::io(format!("cannot resolve {}", config.data_dir.display())))?;
    let server = match &config.server {
        Some(server) => server.clone(),
        None => std::fs::read_to_string(data_dir.join(SERVER_FILE))
            .map_err(|_| NodeAgentError::NotJoined { data_dir: data_dir.clone() })?
            .trim()
            .to_owned(),
    };
    if let Some(joined_as) = joined_node_name(data_dir)?
        && joined_as != config.node_name
    {
        return Err(NodeAgentError::OtherNode {
            data_dir: data_dir.clone(),
            joined_as,
            asked: config.node_name.clone(),
        });
    }
    let servers = Servers::parse(&server, &config.node_name)?;
    let mut runtime_config = kayra_runtime::runtime::RuntimeConfig::new(
        config.node_name.clone(),
        data_dir.clone(),
        config.supervisor.clone(),
    );
    // Workloads reach the API where this node does, and trust it through the cluster's CA.
    if let (Some((host, port)), Ok(Some(joined))) = (servers.api_host_port(), join::load(&pki(data_dir))) {
        runtime_config.api = Some(kayra_runtime::runtime::ApiAccess { host, port, ca_pem: joined.ca_pem });
    }
    let registration = registration(data_dir)?;
    let runtime = kayra_runtime::runtime::Runtime::open(runtime_config).await?;
    let workloads = Arc::new(node::Node::new(runtime, registration, data_dir.join(own_log::FILE_NAME)));
    let renewal =
        tokio::spawn(renewal::renew(pki(data_dir), servers.clone(), config.node_name.clone(), stop.clone()));
    let credentials = Arc::new(Stored { dir: pki(data_dir), servers });
    session::run(workloads.clone(), credentials, config.session.clone(), stop).await;
    renewal.abort();
    if let Ok(node) = Arc::try_unwrap(workloads) {
        node.close().await;
    }
    Ok(())
}

#[cfg(test)]
mod tests;
