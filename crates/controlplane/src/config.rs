//! `kayra.yaml`: every key the controller reads, with its default. Unknown keys are refused.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// The controller's configuration.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct Config {
    /// The deployment's domain: Kayra's API groups are `fleet.<domain>` and so on.
    pub domain: String,
    /// Where the PKI, the token file, the kubeconfig and the embedded store live.
    pub data_dir: PathBuf,
    /// The HTTPS listener (client certificates and bearer tokens).
    pub listen: SocketAddr,
    /// Where the fleet's Services are served in Consul's shape (`consulListen`): plain HTTP on
    /// loopback, HTTPS with the serving certificate elsewhere; off when unset.
    pub consul_listen: Option<SocketAddr>,
    /// How the Consul projection presents the fleet.
    pub consul: ConsulConfig,
    /// Whether `consulListen` is only the first local run's default: then a port already taken
    /// (a Consul agent of the host's own, another controller) leaves Consul's shape off with a
    /// warning instead of stopping the controller.
    #[serde(skip)]
    pub consul_listen_is_default: bool,
    /// The plain-HTTP listener for bearer-token clients; loopback unless deliberately
    /// configured otherwise. Empty to turn it off.
    pub http_listen: Option<SocketAddr>,
    /// Extra names and addresses for the serving certificate.
    pub server_names: Vec<String>,
    /// The service-account issuer (`serviceAccountIssuer`): the `iss` of the tokens
    /// Applications prove themselves with, the API's audience for them, and where verifiers
    /// find `/.well-known/openid-configuration`. Default `https://<first serverName>:<port>`
    /// (the listener's address when no serverName is set).
    pub service_account_issuer: Option<String>,
    /// `sled` (the embedded default), `etcd`, or `memory` (for tests; nothing survives).
    pub store: StoreKind,
    /// The etcd cluster, when `store: etcd`.
    pub etcd: EtcdConfig,
    /// The static token file: `token,user,uid,"group1,group2"` lines. Defaults to
    /// `<dataDir>/tokens.csv`.
    pub token_file: Option<PathBuf>,
    /// The audit log: a JSON line per mutating request. Defaults to `<dataDir>/audit.log`.
    pub audit_log: Option<PathBuf>,
    /// Whether each audit line also goes to the console, beside the operator's log (default
    /// false: the audit log alone holds them).
    pub audit_to_console: bool,
    /// The instance's platform (`INFRAPI_APP_PLATFORM`).
    pub platform: String,
    /// The instance's region (`INFRAPI_APP_REGION`).
    pub region: String,
    /// The catalog's reconciler: `gateway_url`, and the `mode`s registrations name, each a
    /// list of HTTP `steps`.
    pub reconciler: kayra_catalog::steps::ReconcilerConfig,
    /// How long a node may be silent before it is `Ready=Unknown` (seconds; default 40).
    pub node_ready_timeout_seconds: u64,
    /// How long a node may be `Ready=Unknown` before it is lost and what the scheduler placed
    /// there is placed elsewhere (seconds; default 300).
    pub node_lost_timeout_seconds: u64,
    /// Whether the controller also runs a local node named after the host (default true).
    pub agent: bool,
    /// The most connections the HTTPS listener serves at once (default 4096); more wait in the
    /// kernel's backlog. Every node holds one, so a fleet needs more than it has nodes, and the
    /// process's open-file limit (`ulimit -n`) must allow as many.
    pub max_connections: usize,
    /// How long a watch may hold events its client has not taken before the server ends it by
    /// dropping the connection (seconds; default 10); the client watches again from the last
    /// revision it saw, as from kube-apiserver.
    pub watch_stall_timeout_seconds: u64,
    /// The most bytes of recent changes each resource's watch cache keeps for watches resuming
    /// from a revision, and the most one watch may have queued before it is cut off (default
    /// 64 MiB).
    pub watch_window_bytes: usize,
    /// How long an exec, attach or port-forward stream may carry nothing either way before it
    /// is closed (kubelet's `streamingConnectionIdleTimeout`; seconds, default 14400, 4 h).
    pub stream_idle_timeout_seconds: u64,
    /// The most exec, attach and port-forward streams one node carries at once (default 128);
    /// past it a stream is refused with 429.
    pub max_streams_per_node: usize,
    /// The most such streams one user has open at once, across nodes (default 64); each
    /// connection a port-forward carries counts.
    pub max_streams_per_user: usize,
    /// How many past spec states of each Application, ApplicationSet and Service are kept for
    /// `history` and `rollback` (default 10, at most 100; 0 keeps none). Secrets keep none.
    pub history_limit: usize,
    /// The scheduler: `policy` is `spread` (the default: the emptiest node wins) or `binpack`
    /// (the fullest node that fits wins).
    pub scheduler: SchedulerConfig,
    /// Feature gates, by name (`NodeLogs: true`); a name that is no gate is refused at start
    /// (see `features.rs` for the gates and their defaults).
    pub feature_gates: BTreeMap<String, bool>,
}

/// The scheduler's settings.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct SchedulerConfig {
    /// How nodes are scored for resources.
    pub policy: SchedulerPolicy,
}

/// How the scheduler scores nodes for resources.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SchedulerPolicy {
    /// Least allocated first: Applications spread over the nodes.
    #[default]
    Spread,
    /// Most allocated first: Applications pack onto as few nodes as fit them.
    Binpack,
}

/// How the Consul projection presents the fleet (`consul` in `kayra.yaml`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct ConsulConfig {
    /// The one datacenter's name (default `dc1`).
    pub datacenter: String,
    /// The namespace read by a client that names none (default `default`, Consul's own).
    pub default_namespace: String,
}

impl Default for ConsulConfig {
    fn default() -> ConsulConfig {
        ConsulConfig { datacenter: "dc1".to_owned(), default_namespace: "default".to_owned() }
    }
}

/// Which store keeps the state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StoreKind {
    /// sled under `<dataDir>/store`.
    Sled,
    /// An etcd cluster.
    Etcd,
    /// Memory only.
    Memory,
}

/// How to reach etcd.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct EtcdConfig {
    /// Client URLs.
    pub endpoints: Vec<String>,
    /// Every key lives under this prefix.
    pub prefix: String,
}

impl Default for EtcdConfig {
    fn default() -> EtcdConfig {
        EtcdConfig { endpoints: vec!["http://127.0.0.1:2379".to_owned()], prefix: "/kayra/".to_owned() }
    }
}

impl Default for Config {
    fn default() -> Config {
        Config {
            domain: "example.com".to_owned(),
            data_dir: PathBuf::from("./kayra-data"),
            listen: SocketAddr::from(([127, 0, 0, 1], 6443)),
            http_listen: Some(SocketAddr::from(([127, 0, 0, 1], 8080))),
            consul_listen: None,
            consul: ConsulConfig::default(),
            consul_listen_is_default: false,
            server_names: Vec::new(),
            service_account_issuer: None,
            store: StoreKind::Sled,
            etcd: EtcdConfig::default(),
            token_file: None,
            audit_log: None,
            audit_to_console: false,
            platform: String::new(),
            region: String::new(),
            reconciler: kayra_catalog::steps::ReconcilerConfig::default(),
            node_ready_timeout_seconds: 40,
            node_lost_timeout_seconds: 300,
            agent: true,
            max_connections: 4096,
            watch_stall_timeout_seconds: 10,
            watch_window_bytes: kayra_registry::DEFAULT_WINDOW_BYTES,
            stream_idle_timeout_seconds: 4 * 60 * 60,
            max_streams_per_node: 128,
            max_streams_per_user: 64,
            history_limit: kayra_registry::DEFAULT_HISTORY_LIMIT,
            scheduler: SchedulerConfig::default(),
            feature_gates: BTreeMap::new(),
        }
    }
}

impl Config {
    /// Reads `kayra.yaml`; unknown keys and malformed values are errors naming them.
    pub fn from_yaml(text: &str) -> Result<Config, String> {
        if text.trim().is_empty() {
            return Ok(Config::default());
        }
        serde_saphyr::from_str(text).map_err(|error| error.to_string())
    }

    /// The token file in use.
    pub fn token_file(&self) -> PathBuf {
        self.token_file.clone().unwrap_or_else(|| self.data_dir.join("tokens.csv"))
    }

    /// The audit log in use.
    pub fn audit_log(&self) -> PathBuf {
        self.audit_log.clone().unwrap_or_else(|| self.data_dir.join("audit.log"))
    }

    /// The service-account issuer in use.
    pub fn service_account_issuer(&self) -> String {
        if let Some(issuer) = &self.service_account_issuer {
            return issuer.trim_end_matches('/').to_owned();
        }
        let port = self.listen.port();
        match self.server_names.first() {
            Some(name) => format!("https://{}:{port}", crate::address::bracketed(name)),
            None => crate::address::serving_url(crate::address::serving_host(self.listen.ip()), port),
        }
    }

    /// Checks the configuration as a whole.
    pub fn validate(&self) -> Result<(), String> {
        if !kayra_api::validation::is_dns_subdomain(&self.domain) {
            return Err(format!("domain {:?} is not a DNS subdomain", self.domain));
        }
        if self.node_ready_timeout_seconds == 0 {
            return Err("nodeReadyTimeoutSeconds must be at least 1".to_owned());
        }
        if self.node_lost_timeout_seconds == 0 {
            return Err("nodeLostTimeoutSeconds must be at least 1".to_owned());
        }
        if self.max_connections == 0 {
            return Err("maxConnections must be at least 1".to_owned());
        }
        if self.watch_stall_timeout_seconds == 0 {
            return Err("watchStallTimeoutSeconds must be at least 1".to_owned());
        }
        for (value, name) in [
            (self.stream_idle_timeout_seconds, "streamIdleTimeoutSeconds"),
            (self.max_streams_per_node as u64, "maxStreamsPerNode"),
            (self.max_streams_per_user as u64, "maxStreamsPerUser"),
        ] {
            if value == 0 {
                return Err(format!("{name} must be at least 1"));
            }
        }
        if self.watch_window_bytes < 1 << 20 {
            return Err("watchWindowBytes must be at least 1048576 (1 MiB)".to_owned());
        }
        if self.history_limit > kayra_registry::MAX_HISTORY_LIMIT {
            return Err(format!("historyLimit must be at most {}", kayra_registry::MAX_HISTORY_LIMIT));
        }
        if !kayra_api::validation::is_dns_label(&self.consul.datacenter) {
            return Err(format!("consul.datacenter {:?} is not a DNS label", self.consul.datacenter));
        }
        if !kayra_api::validation::is_dns_label(&self.consul.default_namespace) {
            return Err(format!(
                "consul.defaultNamespace {:?} is not a namespace name",
                self.consul.default_namespace
            ));
        }
        if let Some(issuer) = &self.service_account_issuer
            && (!issuer.starts_with("https://")
                || issuer.len() <= "https://".len()
                || issuer.contains(['?', '#', ' ']))
        {
            return Err(format!(
                "serviceAccountIssuer {issuer:?} must be an https:// URL without a query or fragment"
            ));
        }
        if self.store == StoreKind::Etcd && self.etcd.endpoints.is_empty() {
            return Err("store: etcd needs etcd.endpoints".to_owned());
        }
        self.features()?;
        Ok(())
    }

    /// The feature gates as set; an error naming a gate that does not exist.
    pub fn features(&self) -> Result<crate::features::FeatureGates, String> {
        crate::features::FeatureGates::from_map(&self.feature_gates)
            .map_err(|error| format!("featureGates: {error}"))
    }
}

#[cfg(test)]
mod tests;
