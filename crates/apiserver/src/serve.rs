//! Serving the router on a listener: TLS with optional client certificates (their verified
//! identity goes into each request), or plain HTTP; HTTP/1.1 and HTTP/2; header-read and
//! handshake timeouts, a cap on connections and on streams per connection, graceful
//! shutdown, and a way for a response to have its connection dropped ([`Disconnect`]).

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use rustls::ServerConfig;
use rustls::server::WebPkiClientVerifier;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tower::ServiceExt;

pub use kayra_authn::PeerIdentity;
use kayra_authn::identity_from_certificate;

/// Drops the connection a request came on, whatever is pending on it: the way to end a
/// response whose client stopped reading (its socket is full, so nothing more can be
/// written, not even the end of the body). Every HTTP/1.1 request served by [`serve`] carries
/// one in its extensions.
#[derive(Debug, Clone, Default)]
pub(crate) struct Disconnect {
    dropped: Arc<tokio::sync::Notify>,
    /// A send buffer size the connection's socket is to take before its next write; 0 for none.
    send_buffer: Arc<AtomicUsize>,
}

impl Disconnect {
    /// Drops the connection now.
    pub(crate) fn now(&self) {
        self.dropped.notify_one();
    }

    /// Caps the connection's kernel send buffer at about `bytes` from its next write on.
    pub(crate) fn shrink_send_buffer(&self, bytes: usize) {
        self.send_buffer.store(bytes, Ordering::Relaxed);
    }

    async fn requested(&self) {
        self.dropped.notified().await;
    }
}

/// An accepted TCP connection whose kernel send buffer a request on it may cap
/// ([`Disconnect::shrink_send_buffer`]); the cap is applied by the connection's own task, at
/// its next write.
#[derive(Debug)]
struct Connection {
    stream: tokio::net::TcpStream,
    send_buffer: Arc<AtomicUsize>,
}

impl tokio::io::AsyncRead for Connection {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl tokio::io::AsyncWrite for Connection {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        self.cap_send_buffer();
        std::pin::Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> std::task::Poll<std::io::Result<usize>> {
        self.cap_send_buffer();
        std::pin::Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

impl Connection {
    /// An accepted connection, its writes sent as soon as they are made (`TCP_NODELAY`, as Go's
    /// servers, kube-apiserver among them, set on every connection). Nagle's algorithm would
    /// hold a response's last small write (a chunked body's end) until the client acknowledges
    /// what went before, which a client delays by up to 40 ms.
    fn accepted(stream: tokio::net::TcpStream, send_buffer: Arc<AtomicUsize>) -> Connection {
        if let Err(error) = stream.set_nodelay(true) {
            tracing::debug!(%error, "the connection's writes could not be sent undelayed");
        }
        Connection { stream, send_buffer }
    }

    fn cap_send_buffer(&mut self) {
        let wanted = self.send_buffer.swap(0, Ordering::Relaxed);
        if wanted > 0
            && let Err(error) = socket2::SockRef::from(&self.stream).set_send_buffer_size(wanted)
        {
            tracing::debug!(%error, "the connection's send buffer could not be capped");
        }
    }
}

/// Limits of one listener.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// The most connections served at once; more wait in the kernel's backlog.
    pub max_connections: usize,
    /// The most concurrent HTTP/2 streams per connection.
    pub max_streams: u32,
    /// How long a client may take to send a request's headers or finish the TLS handshake.
    pub header_timeout: Duration,
    /// How long in-flight requests may take to finish after shutdown begins.
    pub grace: Duration,
}

impl Default for ServeOptions {
    fn default() -> ServeOptions {
        ServeOptions {
            max_connections: 4096,
            max_streams: 250,
            header_timeout: Duration::from_secs(30),
            grace: Duration::from_secs(10),
        }
    }
}

/// A TLS configuration serving `cert_pem`/`key_pem`, asking for (but not requiring) client
/// certificates signed by `client_ca_pem`. ring is the crypto provider.
pub fn tls_config(
    client_ca_pem: &[u8],
    cert_pem: &[u8],
    key_pem: &[u8],
) -> Result<Arc<ServerConfig>, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(client_ca_pem) {
        roots
            .add(cert.map_err(|e| format!("the CA certificate is not valid PEM: {e}"))?)
            .map_err(|e| format!("the CA certificate is unusable: {e}"))?;
    }
    let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .allow_unauthenticated()
        .build()
        .map_err(|e| format!("cannot verify client certificates: {e}"))?;
    let chain = CertificateDer::pem_slice_iter(cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("the serving certificate is not valid PEM: {e}"))?;
    let key = PrivateKeyDer::from_pem_slice(key_pem)
        .map_err(|e| format!("the serving key is not valid PEM: {e}"))?;
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_client_cert_verifier(verifier)
        .with_single_cert(chain, key)
        .map_err(|e| format!("the serving certificate and key do not fit: {e}"))?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// Serves `app` on `listener` until `shutdown` resolves, then lets in-flight requests finish
/// within the grace period. With `tls`, connections are TLS and a verified client certificate
/// authenticates its requests.
pub async fn serve(
    listener: TcpListener,
    tls: Option<Arc<ServerConfig>>,
    app: Router,
    options: ServeOptions,
    shutdown: impl Future<Output = ()> + Send + 'static,
) {
    let acceptor = tls.map(tokio_rustls::TlsAcceptor::from);
    let connections = Arc::new(Semaphore::new(options.max_connections));
    let mut builder = Builder::new(TokioExecutor::new());
    builder.http1().timer(TokioTimer::new()).header_read_timeout(options.header_timeout);
    // HTTP/1.1: the header timeout also bounds how long a kept-alive connection may sit idle
    // before its next request. HTTP/2: pings find peers that went away.
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_concurrent_streams(options.max_streams)
        .keep_alive_interval(Some(Duration::from_secs(30)))
        .keep_alive_timeout(Duration::from_secs(20));
    let builder = Arc::new(builder);
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    tokio::pin!(shutdown);
    loop {
        let permit = tokio::select! {
            () = &mut shutdown => break,
            permit = connections.clone().acquire_owned() => permit.expect("the semaphore is never closed"),
        };
        let (stream, remote) = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    tracing::warn!(%error, "accepting a connection failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let (app, builder, acceptor, watcher) =
            (app.clone(), builder.clone(), acceptor.clone(), graceful.watcher());
        let handshake_timeout = options.header_timeout;
        tokio::spawn(async move {
            let _permit = permit;
            let disconnect = Disconnect::default();
            let dropped = disconnect.clone();
            let stream = Connection::accepted(stream, disconnect.send_buffer.clone());
            let service = |peer: Option<PeerIdentity>| {
                hyper::service::service_fn(move |mut request: hyper::Request<Incoming>| {
                    if let Some(peer) = &peer {
                        request.extensions_mut().insert(peer.clone());
                    }
                    request.extensions_mut().insert(axum::extract::ConnectInfo(remote));
                    // Over HTTP/1.1 a watch is alone on its connection; an HTTP/2 connection
                    // carries the client's other requests too, and is never dropped for one.
                    if request.version() < hyper::Version::HTTP_2 {
                        request.extensions_mut().insert(disconnect.clone());
                    }
                    app.clone().oneshot(request.map(Body::new))
                })
            };
            match acceptor {
                Some(acceptor) => {
                    let tls = match tokio::time::timeout(handshake_timeout, acceptor.accept(stream)).await {
                        Ok(Ok(tls)) => tls,
                        Ok(Err(error)) => return tracing::debug!(%error, %remote, "TLS handshake failed"),
                        Err(_) => return tracing::debug!(%remote, "TLS handshake timed out"),
                    };
                    let peer = tls
                        .get_ref()
                        .1
                        .peer_certificates()
                        .and_then(|chain| chain.first())
                        .and_then(|cert| identity_from_certificate(cert))
                        .map(PeerIdentity);
                    let connection = builder.serve_connection_with_upgrades(TokioIo::new(tls), service(peer));
                    tokio::select! {
                        ended = watcher.watch(connection.into_owned()) => if let Err(error) = ended {
                            tracing::debug!(%error, %remote, "connection ended with an error");
                        },
                        () = dropped.requested() => tracing::debug!(%remote, "connection dropped: its client stopped reading"),
                    }
                }
                None => {
                    let connection =
                        builder.serve_connection_with_upgrades(TokioIo::new(stream), service(None));
                    tokio::select! {
                        ended = watcher.watch(connection.into_owned()) => if let Err(error) = ended {
                            tracing::debug!(%error, %remote, "connection ended with an error");
                        },
                        () = dropped.requested() => tracing::debug!(%remote, "connection dropped: its client stopped reading"),
                    }
                }
            }
        });
    }
    drop(listener);
    if tokio::time::timeout(options.grace, graceful.shutdown()).await.is_err() {
        tracing::warn!("connections still open after the grace period were closed");
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::AsyncWriteExt;

    use super::*;

    #[tokio::test]
    async fn a_capped_connection_takes_its_send_buffer_at_its_next_write() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("a listener");
        let client = tokio::net::TcpStream::connect(listener.local_addr().expect("an address"));
        let (client, accepted) = tokio::join!(client, listener.accept());
        let (_client, (stream, _)) = (client.expect("connected"), accepted.expect("accepted"));
        let disconnect = Disconnect::default();
        let mut connection = Connection::accepted(stream, disconnect.send_buffer.clone());
        assert!(connection.stream.nodelay().expect("a socket option"), "writes are sent undelayed");
        let size = |connection: &Connection| socket2::SockRef::from(&connection.stream).send_buffer_size();
        let before = size(&connection).expect("a send buffer");
        disconnect.shrink_send_buffer(8 * 1024);
        assert_eq!(size(&connection).expect("a send buffer"), before, "nothing changes before a write");
        connection.write_all(b"HTTP/1.1 200 OK\r\n").await.expect("written");
        let after = size(&connection).expect("a send buffer");
        // Linux doubles what it is asked for, for its own bookkeeping.
        assert!(after <= 16 * 1024 && after < before, "capped at {after} (was {before})");
    }
}
