//! What goes wrong in the node certificate signer: a request its CA cannot read, a signature
//! its CA cannot make, or the certificate requests not being served.

use kayra_registry::RegistryError;

/// Why the CA behind [`crate::ports::Signer`] failed, in its own terms.
pub type CaError = Box<dyn std::error::Error + Send + Sync>;

/// What went wrong in the node certificate signer.
#[derive(Debug, thiserror::Error)]
pub enum NodeCsrError {
    /// The request does not parse, or its signature does not verify.
    #[error("{source}")]
    UnreadableRequest {
        /// What the CA found wrong with it.
        #[source]
        source: CaError,
    },
    /// The CA could not sign the request.
    #[error("{source}")]
    Signing {
        /// Why the CA could not.
        #[source]
        source: CaError,
    },
    /// A resource the signer works on is not served.
    #[error("{what}: {source}")]
    Registry {
        /// What was being done.
        what: String,
        /// Why it failed.
        #[source]
        source: RegistryError,
    },
}

impl NodeCsrError {
    /// Whether trying again unchanged may succeed: a request stays unreadable and a CA that
    /// cannot sign one request keeps failing it, but a store that was briefly unavailable may
    /// answer next time.
    pub fn is_retryable(&self) -> bool {
        match self {
            NodeCsrError::Registry { source, .. } => source.is_retryable(),
            NodeCsrError::UnreadableRequest { .. } | NodeCsrError::Signing { .. } => false,
        }
    }
}
