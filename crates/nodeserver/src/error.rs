//! What goes wrong in the node server: a session refused, a log that cannot be streamed, a
//! report that is not the node's to make, or a write through the application layer that failed.

use kayra_registry::RegistryError;

/// What went wrong in the node server.
#[derive(Debug, thiserror::Error)]
pub enum NodeServerError {
    /// The caller is not a node (`system:node:<name>` in `system:nodes`).
    #[error("\"{user}\" is not a node: a session needs a certificate for system:node:<name> in system:nodes")]
    NotANode {
        /// Who the caller is.
        user: String,
    },
    /// The node's name is not a valid node name.
    #[error("\"{name}\" is not a valid node name")]
    BadNodeName {
        /// The name the caller's certificate gives.
        name: String,
    },
    /// The node already holds a live session.
    #[error("node \"{node}\" already holds a live session; a silent one may be taken over")]
    AlreadyConnected {
        /// The node.
        node: String,
    },
    /// The server is shutting down.
    #[error("the controller is shutting down; connect again shortly")]
    ShuttingDown,
    /// No such Application, so no log of it.
    #[error("application \"{name}\" not found in namespace \"{namespace}\"")]
    ApplicationNotFound {
        /// The namespace asked for.
        namespace: String,
        /// The name asked for.
        name: String,
    },
    /// The Application is not on a node yet, so it has no log.
    #[error("application \"{name}\" is not placed on a node yet, so it has no log")]
    NotPlaced {
        /// The Application's namespace.
        namespace: String,
        /// The Application's name.
        name: String,
    },
    /// The Application's node holds no session with this controller.
    #[error("node \"{node}\", where application \"{name}\" runs, holds no session with this controller")]
    NodeUnavailable {
        /// The node.
        node: String,
        /// The Application.
        name: String,
    },
    /// No such Node, so no log of its agent.
    #[error("nodes \"{node}\" not found")]
    NodeNotFound {
        /// The name asked for.
        node: String,
    },
    /// The node holds no session with this controller, so its agent cannot be asked.
    #[error("node \"{node}\" holds no session with this controller")]
    NoSession {
        /// The node.
        node: String,
    },
    /// The node's session ended as a log was asked of it.
    #[error("node \"{node}\" disconnected")]
    NodeDisconnected {
        /// The node.
        node: String,
    },
    /// Too many log streams are in flight.
    #[error("too many log streams are in flight; try again shortly")]
    TooManyLogStreams,
    /// A log stream ended early: the node went away, broke the flow control, or could not
    /// read the log (its own words).
    #[error("{reason}")]
    LogEnded {
        /// Why, as the node or the server says it.
        reason: String,
    },
    /// Too many exec, attach or port-forward streams are open.
    #[error("too many streams: {what}; close one and try again")]
    TooManyStreams {
        /// Which limit was reached.
        what: String,
    },
    /// A port-forward asked for a port the Application does not declare.
    #[error("{}", port_not_declared(name, *port, declared))]
    PortNotDeclared {
        /// The Application.
        name: String,
        /// The port asked for.
        port: u16,
        /// The TCP ports it declares.
        declared: Vec<u16>,
    },
    /// An exec, attach or port-forward stream ended early.
    #[error("{reason}")]
    StreamEnded {
        /// Why.
        reason: String,
    },
    /// A node asks its Node to start with something no Node may hold (a taint that is not
    /// one), so it is not registered.
    #[error("node {node} asks to be registered with {problems}; its agent must join again with valid flags")]
    BadRegistration {
        /// The node.
        node: String,
        /// What is wrong, field by field.
        problems: String,
    },
    /// A node reported the status of an Application that is not bound to it.
    #[error(
        "application {namespace}/{name} is not bound to node {node}; its status is not the node's to write"
    )]
    NotBoundHere {
        /// The Application's namespace.
        namespace: String,
        /// The Application's name.
        name: String,
        /// The reporting node.
        node: String,
    },
    /// A node reported an event about an Application that is not bound to it.
    #[error("an event about {namespace}/{name}, which is not bound to node {node}, was dropped")]
    EventNotBoundHere {
        /// The Application's namespace.
        namespace: String,
        /// The Application's name.
        name: String,
        /// The reporting node.
        node: String,
    },
    /// A read or write through the application layer failed.
    #[error("{what}: {source}")]
    Registry {
        /// What was being done.
        what: String,
        /// Why it failed.
        #[source]
        source: RegistryError,
    },
}

impl NodeServerError {
    /// Whether trying again later may succeed.
    pub fn is_retryable(&self) -> bool {
        match self {
            NodeServerError::AlreadyConnected { .. }
            | NodeServerError::ShuttingDown
            | NodeServerError::NotPlaced { .. }
            | NodeServerError::NodeUnavailable { .. }
            | NodeServerError::NoSession { .. }
            | NodeServerError::NodeDisconnected { .. }
            | NodeServerError::TooManyLogStreams
            | NodeServerError::TooManyStreams { .. }
            | NodeServerError::StreamEnded { .. }
            | NodeServerError::LogEnded { .. } => true,
            NodeServerError::Registry { source, .. } => source.is_retryable(),
            NodeServerError::NotANode { .. }
            | NodeServerError::BadNodeName { .. }
            | NodeServerError::ApplicationNotFound { .. }
            | NodeServerError::NodeNotFound { .. }
            | NodeServerError::PortNotDeclared { .. }
            | NodeServerError::BadRegistration { .. }
            | NodeServerError::NotBoundHere { .. }
            | NodeServerError::EventNotBoundHere { .. } => false,
        }
    }

    /// Maps a registry error to this one, saying what was being done.
    pub(crate) fn registry(what: impl Into<String>) -> impl FnOnce(RegistryError) -> NodeServerError {
        let what = what.into();
        move |source| NodeServerError::Registry { what, source }
    }
}

/// The refusal of a port-forward to a port the Application does not declare, naming those it
/// does.
fn port_not_declared(name: &str, port: u16, declared: &[u16]) -> String {
    if port == 0 {
        return format!(
            "forwarding to application \"{name}\" is forbidden: it declares no TCP port in spec.ports, and only declared ports may be forwarded"
        );
    }
    let declared = match declared {
        [] => "it declares no TCP port in spec.ports".to_owned(),
        ports => {
            let list: Vec<String> = ports.iter().map(u16::to_string).collect();
            format!("it declares {} in spec.ports", list.join(", "))
        }
    };
    format!(
        "forwarding to port {port} of application \"{name}\" is forbidden: {declared}, and only declared ports may be forwarded"
    )
}
