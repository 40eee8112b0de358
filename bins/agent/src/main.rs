//! `kayra-agent`: `join` a fleet once (and go straight on to run), then `run`. The hidden
//! `supervise` subcommand is the per-Application supervisor the runtime starts.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use kayra_nodeagent::AgentConfig;
use tokio_util::sync::CancellationToken;
use tracing_subscriber::fmt::writer::BoxMakeWriter;

#[derive(Parser)]
#[command(name = "kayra-agent", version, about = "The Kayra node agent")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Args, Clone)]
struct Node {
    /// The node's name (default: the one the data directory joined as, else the host's name).
    #[arg(long)]
    name: Option<String>,
    /// Where the agent keeps its credentials and Applications (default `/var/lib/kayra-agent`
    /// as root, else `./kayra-agent-data`).
    #[arg(long)]
    data_dir: Option<PathBuf>,
}

#[derive(Subcommand)]
enum Command {
    /// Join a fleet with a bootstrap token, then run (what `kayra-controller token create
    /// --print-join-command` prints).
    Join {
        /// The controller, `https://<host>:6443`, or each replica's, comma-separated
        /// (`https://a:6443,https://b:6443`): the node holds one session, to one of them.
        #[arg(long)]
        server: String,
        /// The bootstrap token, `<id>.<secret>`.
        #[arg(long)]
        token: String,
        /// The SHA-256 of the cluster CA's public key, `sha256:<hex>`: the controller is
        /// trusted only if it presents that CA, checked before the token is sent.
        #[arg(long)]
        ca_cert_hash: String,
        #[command(flatten)]
        node: Node,
        /// Join only; do not go on to run.
        #[arg(long)]
        join_only: bool,
        /// Register the node cordoned (`spec.unschedulable`): it takes no work until `kubectl
        /// uncordon`. Kept with the data directory, as the taints are.
        #[arg(long)]
        cordon: bool,
        /// The taints the node's Node starts with, as kubelet spells them:
        /// `key=value:Effect[,...]` (`NoSchedule`, `PreferNoSchedule` or `NoExecute`).
        #[arg(long, value_name = "TAINTS", value_parser = taints)]
        register_with_taints: Option<Taints>,
    },
    /// Run the node: hold its session and run its Applications.
    Run {
        #[command(flatten)]
        node: Node,
        /// The controllers to talk to instead of those the node joined with, comma-separated.
        #[arg(long)]
        server: Option<String>,
    },
    /// The supervisor of one Application's process (started by the agent itself).
    #[command(hide = true)]
    Supervise {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
}

/// Taints as `--register-with-taints` spells them.
#[derive(Clone)]
struct Taints(Vec<kayra_api::session::NodeTaint>);

fn taints(text: &str) -> Result<Taints, String> {
    kayra_api::session::NodeTaint::parse_list(text).map(Taints).map_err(|error| error.message)
}

/// The agent's configuration, for the node named `node_name`.
fn config(node: &Node, node_name: String) -> Result<AgentConfig, String> {
    let exe = std::env::current_exe().map_err(|error| format!("cannot find this executable: {error}"))?;
    if !node_name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.')
        || node_name.is_empty()
    {
        return Err(format!("the node name {node_name:?} is not a DNS subdomain; pass --name"));
    }
    Ok(AgentConfig {
        data_dir: data_dir(node),
        node_name,
        supervisor: vec![exe.display().to_string(), "supervise".to_owned()],
        server: None,
        session: kayra_nodeagent::SessionConfig::default(),
    })
}

fn data_dir(node: &Node) -> PathBuf {
    node.data_dir.clone().unwrap_or_else(kayra_nodeagent::default_data_dir)
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Command::Supervise { args } = cli.command {
        let code = kayra_runtime::supervise_main(args);
        return ExitCode::from(u8::try_from(code).unwrap_or(1));
    }
    // The agent's own log goes to its data directory too (rotated), and to standard error.
    let own_log = match &cli.command {
        Command::Join { node, .. } | Command::Run { node, .. } => {
            let dir = data_dir(node);
            match kayra_nodeagent::own_log::OwnLog::open(&dir, kayra_nodeagent::own_log::DEFAULT_LIMIT) {
                Ok(log) => Some(log),
                Err(error) => {
                    eprintln!("kayra-agent: cannot open its log in {}: {error}", dir.display());
                    None
                }
            }
        }
        Command::Supervise { .. } => None,
    };
    let writer = match own_log {
        Some(log) => BoxMakeWriter::new(move || log.with_stderr()),
        None => BoxMakeWriter::new(std::io::stderr),
    };
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("KAYRA_LOG").unwrap_or_else(|_| "info".into()),
        )
        .with_writer(writer)
        .with_ansi(false)
        .init();
    let _ = rustls::crypto::ring::default_provider().install_default();
    let runtime = tokio::runtime::Runtime::new().expect("a Tokio runtime starts");
    let result = runtime.block_on(async {
        let (node, join) = match &cli.command {
            Command::Join { server, token, ca_cert_hash, node, join_only, cordon, register_with_taints } => {
                let registration = kayra_api::session::Registration {
                    unschedulable: *cordon,
                    taints: register_with_taints.clone().map(|taints| taints.0).unwrap_or_default(),
                };
                (node, Some((server, token, ca_cert_hash, *join_only, registration)))
            }
            Command::Run { node, .. } => (node, None),
            Command::Supervise { .. } => unreachable!("handled before the runtime starts"),
        };
        // A join names the node; a later run takes the name the data directory was joined as.
        let node_name = match join {
            Some(_) => node.name.clone().unwrap_or_else(kayra_nodeagent::default_node_name),
            None => kayra_nodeagent::run_node_name(&data_dir(node), node.name.as_deref())?,
        };
        let mut config = config(node, node_name).map_err(anyhow::Error::msg)?;
        if let Command::Run { server: Some(server), .. } = &cli.command {
            config.server = Some(server.clone());
        }
        if let Some((server, token, hash, join_only, registration)) = join {
            kayra_nodeagent::join_registering(&config, server, token, hash, &registration).await?;
            if join_only {
                return Ok(());
            }
        }
        let stop = CancellationToken::new();
        tokio::spawn({
            let stop = stop.clone();
            async move {
                shutdown_signal().await;
                stop.cancel();
            }
        });
        kayra_nodeagent::run(config, stop).await.map_err(anyhow::Error::from)
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("kayra-agent: {error}");
            ExitCode::FAILURE
        }
    }
}

async fn shutdown_signal() {
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .expect("SIGTERM can be handled");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = terminate.recv() => {}
    }
    tracing::info!("stopping; the node's Applications keep running");
}
