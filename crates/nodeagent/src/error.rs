//! The one error type of the node agent: why a node could not join, or could not run.

use std::path::PathBuf;

use kayra_client::join::JoinError;
use kayra_runtime::runtime::RuntimeError;

/// Why the agent could not join the fleet or run the node.
#[derive(Debug, thiserror::Error)]
pub enum NodeAgentError {
    /// A file or directory of the data directory could not be read, written or resolved.
    #[error("{what}: {source}")]
    Io {
        /// What was being done, naming the file.
        what: String,
        /// Why it failed.
        #[source]
        source: std::io::Error,
    },
    /// Joining the fleet, or reading the credentials a join kept, failed.
    #[error("{0}")]
    Join(#[from] JoinError),
    /// The data directory holds no joined node.
    #[error("{} has not joined a fleet; run `kayra-agent join` first", data_dir.display())]
    NotJoined {
        /// The data directory.
        data_dir: PathBuf,
    },
    /// The data directory was joined as another node than the one asked for.
    #[error(
        "{} belongs to node {joined_as:?}, not {asked:?}; pass --name {joined_as} or another --data-dir",
        data_dir.display()
    )]
    OtherNode {
        /// The data directory.
        data_dir: PathBuf,
        /// The node it was joined as.
        joined_as: String,
        /// The node asked for.
        asked: String,
    },
    /// What `join` kept of the node's registration (`--cordon`, `--register-with-taints`)
    /// cannot be read back.
    #[error("{} is malformed ({why}); join again", path.display())]
    BadRegistration {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        why: String,
    },
    /// The process runtime could not be opened.
    #[error("cannot open the process runtime: {0}")]
    Runtime(#[from] RuntimeError),
}

impl NodeAgentError {
    /// Whether trying again later may succeed: the controller was away or slow, or a file
    /// could not be used for a reason that may pass.
    pub fn is_retryable(&self) -> bool {
        match self {
            NodeAgentError::Join(error) => error.is_retryable(),
            NodeAgentError::Runtime(error) => error.is_retryable(),
            NodeAgentError::Io { .. } => true,
            NodeAgentError::NotJoined { .. }
            | NodeAgentError::OtherNode { .. }
            | NodeAgentError::BadRegistration { .. } => false,
        }
    }

    pub(crate) fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> NodeAgentError {
        let what = what.into();
        move |source| NodeAgentError::Io { what, source }
    }
}
