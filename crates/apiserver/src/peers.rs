//! The other replicas of the controller, as this one reaches them: a port the assembly answers
//! with an HTTPS client holding this replica's own certificate (group
//! `system:kayra:controllers`). A log whose node holds its session with another replica is read
//! through that replica's `nodes/<name>/sessionlog`, which serves what it holds or refuses: a
//! forwarded request is never forwarded again.

use bytes::Bytes;
use futures_util::future::BoxFuture;
use futures_util::stream::BoxStream;

/// A response body as it arrives from a peer.
pub type PeerBody = BoxStream<'static, Result<Bytes, std::io::Error>>;

/// What a peer answered: its status code, content type and body.
pub struct PeerAnswer {
    /// The HTTP status.
    pub status: u16,
    /// The `Content-Type` it answered with.
    pub content_type: String,
    /// The body, as it streams.
    pub body: PeerBody,
}

/// Reaches the other replicas.
pub trait Peers: Send + Sync + 'static {
    /// `GET url` (a peer's URL, path and query) as this replica.
    fn get(&self, url: String) -> BoxFuture<'static, Result<PeerAnswer, String>>;
}
