//! The other replicas of the controller, as this one reaches them: a port the assembly answers
//! with an HTTPS client holding this replica's own certificate (group
//! `system:kayra:controllers`). A log whose node holds its session with another replica is read
//! through that replica's `nodes/<name>/sessionlog`, and an exec, attach or port-forward is
//! opened through its `nodes/<name>/sessionstream` as the client's own upgrade, one more hop of
//! the same protocol; each serves what it holds or refuses: a forwarded request is never
//! forwarded again.

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

/// A connection a peer upgraded, both ways.
pub trait PeerConnection: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin {}

impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin> PeerConnection for T {}

/// What a peer answered an upgrade with: `101` and the connection, or its refusal.
pub enum PeerUpgrade {
    /// It switched protocols: its answer's headers, and the connection.
    Switched {
        /// The headers of its `101`.
        headers: Vec<(String, String)>,
        /// The upgraded connection.
        connection: Box<dyn PeerConnection>,
    },
    /// It refused: its answer as it is.
    Refused(PeerAnswer),
}

/// Reaches the other replicas.
pub trait Peers: Send + Sync + 'static {
    /// `GET url` (a peer's URL, path and query) as this replica.
    fn get(&self, url: String) -> BoxFuture<'static, Result<PeerAnswer, String>>;

    /// `method url` over HTTP/1.1 with `headers` (a client's upgrade: `Upgrade`, `Connection`,
    /// its WebSocket key and protocols, its stream protocol versions), as this replica.
    fn upgrade(
        &self,
        method: String,
        url: String,
        headers: Vec<(String, String)>,
    ) -> BoxFuture<'static, Result<PeerUpgrade, String>>;
}
