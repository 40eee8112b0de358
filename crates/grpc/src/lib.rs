//! The node session over gRPC: `proto/node.proto` compiled with protox and tonic, the
//! controller's side ([`server`], served on the API port) and the agent's side ([`client`]).
//! Wire types stay in this crate; both sides hand the domain [`kayra_api::session`] messages.

mod codec;
mod convert;

pub use codec::SessionCodec;

pub mod client;
pub mod server;

/// The generated wire types and service stubs of `kayra.node.v1`.
#[allow(missing_docs, clippy::all, clippy::pedantic)]
pub mod wire {
    tonic::include_proto!("kayra.node.v1");
}

/// The path prefix of the node service, for routing `application/grpc` requests to it.
pub const SERVICE_PATH: &str = "/kayra.node.v1.NodeService";
