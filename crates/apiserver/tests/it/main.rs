//! The listener's limits, over a real socket.

use std::time::Duration;

use axum::Router;
use kayra_apiserver::{ServeOptions, serve};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

async fn server(options: ServeOptions) -> std::net::SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let app = Router::new().fallback(|| async { "ok" });
    tokio::spawn(serve(listener, None, app, options, std::future::pending()));
    address
}

async fn read_until_closed(stream: &mut TcpStream, within: Duration) -> Option<Vec<u8>> {
    let mut received = Vec::new();
    let mut buffer = [0u8; 4096];
    tokio::time::timeout(within, async {
        loop {
            match stream.read(&mut buffer).await {
                Ok(0) | Err(_) => return received,
                Ok(n) => received.extend_from_slice(&buffer[..n]),
            }
        }
    })
    .await
    .ok()
}

#[tokio::test]
async fn a_client_that_never_finishes_its_headers_is_cut_off() {
    let address =
        server(ServeOptions { header_timeout: Duration::from_millis(300), ..ServeOptions::default() }).await;
    let mut stream = TcpStream::connect(address).await.unwrap();
    stream.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n").await.unwrap();
    assert!(
        read_until_closed(&mut stream, Duration::from_secs(5)).await.is_some(),
        "the server closes the connection"
    );
}

#[tokio::test]
async fn an_idle_kept_alive_connection_is_closed() {
    let address =
        server(ServeOptions { header_timeout: Duration::from_millis(300), ..ServeOptions::default() }).await;
    let mut stream = TcpStream::connect(address).await.unwrap();
    stream.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n").await.unwrap();
    let answered = read_until_closed(&mut stream, Duration::from_secs(5)).await.expect("closed once idle");
    assert!(String::from_utf8_lossy(&answered).starts_with("HTTP/1.1 200"), "the request was served first");
}
