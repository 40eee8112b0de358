//! The one error type of the control plane's assembly: why the controller could not be
//! initialised, assembled, served, or asked for a token.

use std::path::PathBuf;

use kayra_client::ClientError;
use kayra_nodeagent::NodeAgentError;
use kayra_pki::PkiError;
use kayra_registry::RegistryError;
use kayra_store::StoreError;

/// Why the control plane could not do what it was asked.
#[derive(Debug, thiserror::Error)]
pub enum ControlPlaneError {
    /// A file or directory of the data directory could not be read, written or created.
    #[error("{what}: {source}")]
    Io {
        /// What was being done, naming the file.
        what: String,
        /// Why it failed.
        #[source]
        source: std::io::Error,
    },
    /// A file `init` writes is missing: the data directory was never initialised.
    #[error("cannot read {}: {source}; run `kayra-controller init` first", path.display())]
    NotInitialised {
        /// The file.
        path: PathBuf,
        /// Why it could not be read.
        #[source]
        source: std::io::Error,
    },
    /// A certificate or key could not be made or read.
    #[error("{what}: {source}")]
    Pki {
        /// What was being done.
        what: String,
        /// The PKI's error.
        #[source]
        source: PkiError,
    },
    /// The serving certificate and key do not make a TLS configuration.
    #[error("the serving certificate is unusable: {0}")]
    Tls(String),
    /// The store could not be opened.
    #[error("{what}: {source}")]
    Store {
        /// What was being opened.
        what: String,
        /// The store's error.
        #[source]
        source: StoreError,
    },
    /// The static token file is unreadable or malformed.
    #[error("{0}")]
    TokenFile(#[from] kayra_authn::TokenFileError),
    /// The application layer refused or could not do a step of the assembly.
    #[error("cannot {what}: {source}")]
    Registry {
        /// The step.
        what: String,
        /// The registry's error.
        #[source]
        source: RegistryError,
    },
    /// The node server (the controller's side of the node sessions) could not start.
    #[error("cannot start the node server: {0}")]
    NodeServer(#[from] kayra_nodeserver::NodeServerError),
    /// The scheduler could not start.
    #[error("cannot start the scheduler: {0}")]
    Scheduler(#[from] kayra_scheduler::SchedulerError),
    /// The node certificate signer could not start.
    #[error("cannot start the node certificate signer: {0}")]
    NodeCsr(#[from] kayra_nodecsr::NodeCsrError),
    /// An HTTP client for the catalog's reconciler could not be built.
    #[error("the catalog reconciler has no HTTP client: {0}")]
    HttpClient(#[source] reqwest::Error),
    /// A listener could not be bound.
    #[error("cannot listen on {address}: {source}")]
    Listen {
        /// The address asked for.
        address: std::net::SocketAddr,
        /// Why it could not be bound.
        #[source]
        source: std::io::Error,
    },
    /// The running controller could not be reached through its API.
    #[error("{what}: {source}")]
    Client {
        /// What was being asked.
        what: String,
        /// The client's error.
        #[source]
        source: ClientError,
    },
    /// A request is not one the control plane can carry out (a bad group, a TTL out of range).
    #[error("{0}")]
    Invalid(String),
    /// The controller's local node could not join or run.
    #[error("the local node cannot run: {0}")]
    LocalNode(#[from] NodeAgentError),
}

impl ControlPlaneError {
    /// Whether trying again later may succeed: the store, the API or the node's controller was
    /// away or slow.
    pub fn is_retryable(&self) -> bool {
        match self {
            ControlPlaneError::Store { source, .. } => source.is_retryable(),
            ControlPlaneError::Registry { source, .. } => source.is_retryable(),
            ControlPlaneError::Client { source, .. } => source.is_retryable(),
            ControlPlaneError::LocalNode(error) => error.is_retryable(),
            ControlPlaneError::NodeServer(error) => error.is_retryable(),
            ControlPlaneError::Scheduler(error) => error.is_retryable(),
            ControlPlaneError::NodeCsr(error) => error.is_retryable(),
            ControlPlaneError::Io { .. }
            | ControlPlaneError::NotInitialised { .. }
            | ControlPlaneError::Pki { .. }
            | ControlPlaneError::Tls(_)
            | ControlPlaneError::TokenFile(_)
            | ControlPlaneError::HttpClient(_)
            | ControlPlaneError::Listen { .. }
            | ControlPlaneError::Invalid(_) => false,
        }
    }

    pub(crate) fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> ControlPlaneError {
        let what = what.into();
        move |source| ControlPlaneError::Io { what, source }
    }

    pub(crate) fn pki(what: impl Into<String>) -> impl FnOnce(PkiError) -> ControlPlaneError {
        let what = what.into();
        move |source| ControlPlaneError::Pki { what, source }
    }

    pub(crate) fn registry(what: impl Into<String>) -> impl FnOnce(RegistryError) -> ControlPlaneError {
        let what = what.into();
        move |source| ControlPlaneError::Registry { what, source }
    }
}
