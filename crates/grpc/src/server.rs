//! The controller's side: the `NodeService` served on the API port. The caller's identity is
//! the verified client certificate the TLS listener put into the request; the node server
//! decides whether it may hold a session.

use std::pin::Pin;

use kayra_authn::PeerIdentity;
use kayra_nodeserver::{NodeServer, NodeServerError};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::{Stream, StreamExt};
use tonic::{Request, Response, Status, Streaming};

use crate::convert::{controller_message_to_wire, node_message_from_wire};
use crate::wire;
use crate::wire::node_service_server::NodeServiceServer;

/// How many messages wait to be sent to one node before the session waits for it.
const OUTBOUND: usize = 16;

/// The node service over a [`NodeServer`].
#[derive(Debug, Clone)]
pub struct NodeService {
    server: NodeServer,
}

/// The tower service to route `application/grpc` requests under
/// [`SERVICE_PATH`](crate::SERVICE_PATH) to.
pub fn service(server: NodeServer) -> NodeServiceServer<NodeService> {
    NodeServiceServer::new(NodeService { server })
}

/// The node server's refusal of a session, as the node is told it.
fn status(error: &NodeServerError) -> Status {
    match error {
        NodeServerError::NotANode { .. } | NodeServerError::BadNodeName { .. } => {
            Status::permission_denied(error.to_string())
        }
        NodeServerError::AlreadyConnected { .. } => Status::already_exists(error.to_string()),
        NodeServerError::ShuttingDown => Status::unavailable(error.to_string()),
        _ if error.is_retryable() => Status::unavailable(error.to_string()),
        _ => Status::internal(error.to_string()),
    }
}

#[tonic::async_trait]
impl wire::node_service_server::NodeService for NodeService {
    type SessionStream =
        Pin<Box<dyn Stream<Item = Result<wire::ControllerMessage, Status>> + Send + 'static>>;

    async fn session(
        &self,
        request: Request<Streaming<wire::NodeMessage>>,
    ) -> Result<Response<Self::SessionStream>, Status> {
        let Some(PeerIdentity(identity)) = request.extensions().get::<PeerIdentity>().cloned() else {
            return Err(Status::unauthenticated(
                "a node session needs a client certificate signed by the cluster CA",
            ));
        };
        let mut session = self.server.open(&identity).map_err(|error| status(&error))?;
        let node = session.node().to_owned();
        tracing::info!(node, "a node session opened");
        let mut inbound = request.into_inner();
        // Messages wait boxed: a channel allocates its slots 32 at a time, and 32 unboxed
        // messages would be ~4.5 KiB held by every idle session.
        let (outbound, stream) = mpsc::channel::<Result<Box<wire::ControllerMessage>, Status>>(OUTBOUND);
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    received = inbound.message() => match received {
                        Ok(Some(message)) => match node_message_from_wire(message) {
                            // Boxed: the write behind a message is a deep future, and inline it
                            // would size every idle session's task for it.
                            Ok(message) => {
                                if let Err(error) = Box::pin(session.receive(message)).await {
                                    tracing::warn!(node, %error, "a message from the node was not taken");
                                }
                            }
                            Err(error) => tracing::warn!(node, %error, "a message from the node was not taken"),
                        },
                        Ok(None) => break,
                        Err(error) => {
                            tracing::debug!(node, %error, "the node's stream failed");
                            break;
                        }
                    },
                    next = session.next() => match next {
                        Some(message) => {
                            if outbound.send(Ok(Box::new(controller_message_to_wire(message)))).await.is_err() {
                                break;
                            }
                        }
                        None => {
                            let _ = outbound.send(Err(Status::aborted("the session was ended by the controller: a newer session of the node took over, or the controller is stopping"))).await;
                            break;
                        }
                    },
                }
            }
            drop(session);
            tracing::info!(node, "a node session closed");
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(stream).map(|message| message.map(|boxed| *boxed)))))
    }
}
