//! The agent's side: one session to the controller over mutual TLS, with the node's client
//! certificate, verified against the cluster CA.

use kayra_api::session::{ControllerMessage, NodeMessage};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity};

use crate::convert::{controller_message_from_wire, node_message_to_wire};
use crate::wire;
use crate::wire::node_service_client::NodeServiceClient;

/// How many node messages wait to be sent before the sender waits.
const OUTBOUND: usize = 64;

/// Where the controller is and how to prove who the node is.
#[derive(Debug, Clone)]
pub struct Credentials {
    /// The controller's URL, `https://host:port`.
    pub server: String,
    /// The cluster CA, PEM: the only root the controller's certificate is checked against.
    pub ca_pem: String,
    /// The node's client certificate, PEM.
    pub cert_pem: String,
    /// Its key, PEM.
    pub key_pem: String,
}

/// Why a session could not be opened or went on no longer.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// The controller could not be reached.
    #[error("cannot reach the controller at {server}: {message}")]
    Connect {
        /// The controller's URL.
        server: String,
        /// What failed.
        message: String,
    },
    /// The controller refused or ended the session.
    #[error("the controller ended the session: {0}")]
    Refused(String),
    /// The controller sent something that does not decode.
    #[error("the controller sent a malformed message: {0}")]
    Malformed(String),
}

impl SessionError {
    /// Whether opening the session again may succeed: the controller was unreachable or ended
    /// the session (a restart, a takeover); a malformed message is a fault of the peer.
    pub fn is_retryable(&self) -> bool {
        match self {
            SessionError::Connect { .. } | SessionError::Refused(_) => true,
            SessionError::Malformed(_) => false,
        }
    }
}

/// An open session: send node messages through [`Connection::sender`], take controller
/// messages with [`Connection::next`].
#[derive(Debug)]
pub struct Connection {
    sender: mpsc::Sender<NodeMessage>,
    inbound: tonic::Streaming<wire::ControllerMessage>,
}

/// Opens a session. The first message to send is the node's status (see `proto/node.proto`).
pub async fn connect(credentials: &Credentials) -> Result<Connection, SessionError> {
    let connect_error =
        |message: String| SessionError::Connect { server: credentials.server.clone(), message };
    let tls = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(&credentials.ca_pem))
        .identity(Identity::from_pem(&credentials.cert_pem, &credentials.key_pem));
    let endpoint = Endpoint::from_shared(credentials.server.clone())
        .map_err(|error| connect_error(error.to_string()))?
        .tls_config(tls)
        .map_err(|error| connect_error(error.to_string()))?
        .connect_timeout(std::time::Duration::from_secs(10))
        .http2_keep_alive_interval(std::time::Duration::from_secs(20))
        .keep_alive_timeout(std::time::Duration::from_secs(20))
        .keep_alive_while_idle(true);
    let channel: Channel = endpoint.connect().await.map_err(|error| connect_error(source_chain(&error)))?;
    let (sender, receiver) = mpsc::channel::<NodeMessage>(OUTBOUND);
    let (wire_sender, wire_receiver) = mpsc::channel(OUTBOUND);
    tokio::spawn(async move {
        let mut receiver = receiver;
        while let Some(message) = receiver.recv().await {
            if wire_sender.send(node_message_to_wire(message)).await.is_err() {
                break;
            }
        }
    });
    let response = NodeServiceClient::new(channel)
        .session(ReceiverStream::new(wire_receiver))
        .await
        .map_err(|status| SessionError::Refused(status.message().to_owned()))?;
    Ok(Connection { sender, inbound: response.into_inner() })
}

fn source_chain(error: &dyn std::error::Error) -> String {
    let mut message = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        message.push_str(": ");
        message.push_str(&cause.to_string());
        source = cause.source();
    }
    message
}

impl Connection {
    /// A handle to send node messages with; the session ends when every handle is dropped.
    pub fn sender(&self) -> mpsc::Sender<NodeMessage> {
        self.sender.clone()
    }

    /// The next message from the controller; `Ok(None)` when it closed the session.
    pub async fn next(&mut self) -> Result<Option<ControllerMessage>, SessionError> {
        match self.inbound.message().await {
            Ok(Some(message)) => {
                controller_message_from_wire(message).map(Some).map_err(SessionError::Malformed)
            }
            Ok(None) => Ok(None),
            Err(status) => Err(SessionError::Refused(format!("{}: {}", status.code(), status.message()))),
        }
    }
}
