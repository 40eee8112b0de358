//! `kayra-controller`: with no subcommand, initialise the data directory if needed and serve,
//! printing the lines to paste into a shell; `init` and `serve` do one half each.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use kayra_controlplane::config::{Config, StoreKind};
use kayra_controlplane::pki::{AdminToken, Initialised};

/// mimalloc rather than glibc's malloc: under load the API's threads, the loops' and the
/// store's allocate and free each other's memory, and in a scheduler's tail of follow-up writes
/// glibc's malloc, free and arena consolidation took over half of the API threads' time.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(name = "kayra-controller", version, about = "The Kayra control plane")]
struct Cli {
    /// The configuration file (every key is documented in the README).
    #[arg(long, global = true)]
    config: Option<PathBuf>,
    /// Overrides `dataDir`.
    #[arg(long, global = true)]
    data_dir: Option<PathBuf>,
    /// Overrides `store`: sled, etcd or memory.
    #[arg(long, global = true)]
    store: Option<String>,
    /// Overrides `etcd.endpoints` (comma-separated).
    #[arg(long, global = true, value_delimiter = ',')]
    etcd_endpoints: Vec<String>,
    /// Overrides `listen` (the HTTPS address).
    #[arg(long, global = true)]
    listen: Option<std::net::SocketAddr>,
    /// Overrides `httpListen` (the plain-HTTP address); `off` turns it off.
    #[arg(long, global = true)]
    http_listen: Option<String>,
    /// Overrides `consulListen` (where the fleet is served in Consul's shape); `off` turns it
    /// off. The first local run (no subcommand) serves it at 127.0.0.1:8500 unless told.
    #[arg(long, global = true)]
    consul_listen: Option<String>,
    /// Overrides `domain`.
    #[arg(long, global = true)]
    domain: Option<String>,
    /// Runs no local node (as `agent: false`).
    #[arg(long, global = true)]
    no_agent: bool,
    /// Sets feature gates, `Name=bool,...`, over `featureGates` (unknown names are refused).
    #[arg(long, global = true)]
    feature_gates: Option<String>,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Write the PKI, the admin kubeconfig and the admin token into the data directory.
    Init,
    /// Serve the API.
    Serve,
    /// Bootstrap tokens, for nodes to join with.
    #[command(subcommand)]
    Token(TokenCommand),
    /// The service-account issuer that Applications' tokens are signed by.
    #[command(subcommand)]
    Identity(IdentityCommand),
    /// The supervisor of one of the local node's Applications (started by the controller).
    #[command(hide = true)]
    Supervise {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
}

#[derive(Subcommand)]
enum IdentityCommand {
    /// Make a new signing key current through the running controller; the old one stays in
    /// the JWKS until every token it signed has expired.
    RotateKey,
}

#[derive(Subcommand)]
enum TokenCommand {
    /// Mint a bootstrap token through the running controller and print it.
    Create {
        /// How long the token authenticates (at most 7 days).
        #[arg(long, default_value = "24h")]
        ttl: String,
        /// What the token is for.
        #[arg(long, default_value = "")]
        description: String,
        /// Extra groups, each `system:bootstrappers:...`.
        #[arg(long, value_delimiter = ',')]
        groups: Vec<String>,
        /// Print the `kayra-agent join` command a new host runs, instead of the bare token.
        #[arg(long)]
        print_join_command: bool,
        /// The server the join command names (default: the address the controller listens on).
        #[arg(long)]
        server: Option<String>,
    },
}

fn config(cli: &Cli) -> Result<Config, String> {
    let mut config = match &cli.config {
        Some(path) => {
            let text =
                std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
            Config::from_yaml(&text).map_err(|e| format!("{}: {e}", path.display()))?
        }
        None => Config::default(),
    };
    if let Ok(platform) = std::env::var("INFRAPI_APP_PLATFORM") {
        config.platform = platform;
    }
    if let Ok(region) = std::env::var("INFRAPI_APP_REGION") {
        config.region = region;
    }
    if let Some(dir) = &cli.data_dir {
        config.data_dir = dir.clone();
    }
    if let Some(store) = &cli.store {
        config.store = match store.as_str() {
            "sled" => StoreKind::Sled,
            "etcd" => StoreKind::Etcd,
            "memory" => StoreKind::Memory,
            other => return Err(format!("--store {other}: expected sled, etcd or memory")),
        };
    }
    if !cli.etcd_endpoints.is_empty() {
        config.etcd.endpoints = cli.etcd_endpoints.clone();
    }
    if let Some(listen) = cli.listen {
        config.listen = listen;
    }
    match cli.http_listen.as_deref() {
        Some("off") => config.http_listen = None,
        Some(address) => {
            config.http_listen = Some(address.parse().map_err(|e| format!("--http-listen {address}: {e}"))?)
        }
        None => {}
    }
    match cli.consul_listen.as_deref() {
        Some("off") => config.consul_listen = None,
        Some(address) => {
            config.consul_listen =
                Some(address.parse().map_err(|e| format!("--consul-listen {address}: {e}"))?)
        }
        // The first local run answers Consul's clients where they look by default.
        None if cli.command.is_none() && config.consul_listen.is_none() => {
            config.consul_listen = Some(std::net::SocketAddr::from(([127, 0, 0, 1], 8500)));
            config.consul_listen_is_default = true;
        }
        None => {}
    }
    if let Some(domain) = &cli.domain {
        config.domain = domain.clone();
    }
    if cli.no_agent {
        config.agent = false;
    }
    if let Some(gates) = &cli.feature_gates {
        config.feature_gates.extend(kayra_controlplane::features::parse_flag(gates)?);
    }
    config.validate()?;
    Ok(config)
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Some(Command::Supervise { args }) = cli.command {
        let code = kayra_runtime::supervise_main(args);
        return ExitCode::from(u8::try_from(code).unwrap_or(1));
    }
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("KAYRA_LOG").unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let config = match config(&cli) {
        Ok(config) => config,
        Err(error) => {
            eprintln!("kayra-controller: {error}");
            return ExitCode::from(64);
        }
    };
    let _ = rustls::crypto::ring::default_provider().install_default();
    let runtime = tokio::runtime::Runtime::new().expect("a Tokio runtime starts");
    let result = runtime.block_on(async {
        match cli.command {
            Some(Command::Init) => {
                kayra_controlplane::pki::init(&config).map(|initialised| announce(&initialised))?
            }
            Some(Command::Serve) => kayra_controlplane::run::serve(&config, shutdown_signal()).await?,
            Some(Command::Token(TokenCommand::Create {
                ttl,
                description,
                groups,
                print_join_command,
                server,
            })) => {
                use kayra_controlplane::token;
                let ttl = token::parse_ttl(&ttl).map_err(anyhow::Error::msg)?;
                // The pin is read first: a data directory without a CA mints no token.
                let pin = if print_join_command { Some(token::ca_cert_hash(&config)?) } else { None };
                let minted = token::create(&config, ttl, &description, &groups).await?;
                match pin {
                    Some(pin) => {
                        let server = token::join_server(&config, server.as_deref());
                        print_result(&token::join_command(&server, &minted, &pin));
                    }
                    None => print_result(&minted),
                }
            }
            Some(Command::Identity(IdentityCommand::RotateKey)) => {
                let rotation = kayra_controlplane::identity::rotate_key(&config).await?;
                print_result(&format!(
                    "signing key {} is current; the JWKS publishes {}",
                    rotation.current,
                    rotation.published.join(", ")
                ));
            }
            Some(Command::Supervise { .. }) => unreachable!("handled before the runtime starts"),
            None => {
                announce(&kayra_controlplane::pki::init(&config)?);
                kayra_controlplane::run::serve(&config, shutdown_signal()).await?
            }
        }
        anyhow::Ok(())
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("kayra-controller: {error}");
            ExitCode::FAILURE
        }
    }
}

/// A command's result, on stdout for scripts to capture (everything else goes to stderr).
#[expect(clippy::print_stdout, reason = "the token is what the command outputs")]
fn print_result(text: &str) {
    println!("{text}");
}

/// The lines to paste into a shell. The admin token stays in its file, so that logs and
/// service managers never hold it; it is shown at most once, on the terminal that made it.
fn announce(initialised: &Initialised) {
    let absolute = |path: &std::path::Path| std::fs::canonicalize(path).unwrap_or_else(|_| path.to_owned());
    let paths = &initialised.paths;
    eprintln!("Kayra is initialised. To use it from a shell:\n");
    eprintln!("  export KUBECONFIG={}", absolute(&paths.kubeconfig).display());
    eprintln!("  export TOKEN=$(cat {})\n", absolute(&paths.admin_token).display());
    if initialised.admin_token == AdminToken::Created && std::io::IsTerminal::is_terminal(&std::io::stderr())
    {
        let token = std::fs::read_to_string(&paths.admin_token).unwrap_or_default();
        eprintln!("The admin bearer token, shown this once: {}\n", token.trim());
    }
}

async fn shutdown_signal() {
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .expect("SIGTERM can be handled");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = terminate.recv() => {}
    }
    tracing::info!("shutting down");
}
