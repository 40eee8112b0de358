//! The fleet in Consul's shape: a read-only projection of Services (with their tags and
//! metadata), their member Applications and Nodes, served on Consul's HTTP API so that Traefik
//! and any Consul client find the fleet unmodified.
//!
//! One datacenter; Kayra namespaces are Consul namespaces. Every read carries `X-Consul-Index`
//! and may block (`index`, `wait`) until what it reads changed; a change to something it does
//! not read (a Node's heartbeat, another Service) does not answer it. Tokens are Kayra
//! identities and reads are authorized by Kayra's RBAC.

pub mod http;
pub mod model;
pub mod projection;
pub mod query;
pub mod shapes;

pub use http::{Settings, router};
pub use projection::Projection;
