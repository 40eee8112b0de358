//! The controller's own node: with `agent: true` (the default), `kayra-controller` also runs a
//! node named after the host, in process, joined exactly as any other node joins (a bootstrap
//! token, the CA pinned by hash, a CSR signed by the controller) and holding the same session;
//! like any joined node it registers its Node schedulable, so a fleet of one runs what it is
//! given at once.

use std::time::Duration;

use kayra_nodeagent::AgentConfig;
use tokio_util::sync::CancellationToken;

use crate::ControlPlaneError;
use crate::config::Config;
use crate::token;

/// How long the local node's bootstrap token lives: long enough to join.
const JOIN_TOKEN_TTL: Duration = Duration::from_secs(600);

/// How long the local node waits for the controller to answer before joining.
const READY_WITHIN: Duration = Duration::from_secs(30);

/// The local node's agent configuration: data under `<dataDir>/agent`, named after the host,
/// talking to the controller over loopback.
pub(crate) fn agent_config(config: &Config, https_port: u16) -> Result<AgentConfig, ControlPlaneError> {
    let exe = std::env::current_exe().map_err(ControlPlaneError::io("cannot find this executable"))?;
    Ok(AgentConfig {
        data_dir: config.data_dir.join("agent"),
        node_name: kayra_nodeagent::default_node_name(),
        supervisor: vec![exe.display().to_string(), "supervise".to_owned()],
        server: Some(format!("https://127.0.0.1:{https_port}")),
        session: kayra_nodeagent::SessionConfig::default(),
    })
}

/// Joins the local node if it has not joined yet, then runs it until `stop`.
pub(crate) async fn run(
    config: Config,
    agent: AgentConfig,
    stop: CancellationToken,
) -> Result<(), ControlPlaneError> {
    if !kayra_nodeagent::joined(&agent) {
        let server = agent.server.clone().unwrap_or_default();
        // The controller serves beside this task: its first answers may be a moment away.
        let deadline = tokio::time::Instant::now() + READY_WITHIN;
        let secret = loop {
            match token::create(&config, JOIN_TOKEN_TTL, "the controller's local node", &[]).await {
                Ok(secret) => break secret,
                Err(error) if error.is_retryable() && tokio::time::Instant::now() < deadline => {
                    tracing::debug!(%error, "the controller is not answering yet");
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                Err(error) => return Err(error),
            }
        };
        let hash = token::ca_cert_hash(&config)?;
        kayra_nodeagent::join(&agent, &server, &secret, &hash).await?;
    }
    tracing::info!(node = %agent.node_name, "the local node runs");
    Ok(kayra_nodeagent::run(agent, stop).await?)
}
