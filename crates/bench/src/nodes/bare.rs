//! The ceiling of the node benchmark: a bare tonic `NodeService` behind the same TLS listener
//! (`kayra_apiserver::serve`, mutual TLS with the cluster CA), in a process of its own. It
//! answers each session's first message with a desired state and, on `push <version>` read
//! from stdin, sends every session one desired state of the same size as the controller's, the
//! Secret's resourceVersion set to `<version>`: a fan-out with no store, cache or loop behind it.

use std::io::BufRead;
use std::sync::{Arc, Mutex};

use kayra_grpc::wire;
use kayra_grpc::wire::node_service_server::{NodeService, NodeServiceServer};
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status, Streaming};

type Outbound = mpsc::Sender<Result<wire::ControllerMessage, Status>>;

/// Each open stream's sender, and the message a new one is sent first.
#[derive(Clone)]
struct Bare {
    streams: Arc<Mutex<Vec<Outbound>>>,
    current: Arc<Mutex<wire::ControllerMessage>>,
}

#[tonic::async_trait]
impl NodeService for Bare {
    type SessionStream = ReceiverStream<Result<wire::ControllerMessage, Status>>;

    async fn session(
        &self,
        request: Request<Streaming<wire::NodeMessage>>,
    ) -> Result<Response<Self::SessionStream>, Status> {
        let mut inbound = request.into_inner();
        // As many messages wait per stream as the controller lets wait (kayra-grpc's server).
        let (outbound, stream) = mpsc::channel(16);
        let bare = self.clone();
        tokio::spawn(async move {
            if let Ok(Some(_)) = inbound.message().await {
                let first = bare.current.lock().expect("never poisoned").clone();
                if outbound.send(Ok(first)).await.is_err() {
                    return;
                }
                bare.streams.lock().expect("never poisoned").push(outbound);
            }
            while let Ok(Some(_)) = inbound.message().await {}
        });
        Ok(Response::new(ReceiverStream::new(stream)))
    }
}

fn desired(application: &[u8], secret: &Value, version: &str) -> wire::ControllerMessage {
    let mut secret = secret.clone();
    secret["metadata"]["resourceVersion"] = Value::String(version.to_owned());
    wire::ControllerMessage {
        body: Some(wire::controller_message::Body::Desired(wire::DesiredState {
            applications: vec![application.to_vec()],
            secrets: vec![serde_json::to_vec(&secret).expect("JSON serialises")],
            signature: format!("{:064x}", version.len()),
            tokens: Vec::new(),
        })),
    }
}

/// `kayra-bench nodes-bare-server <pki dir> <application.json> <secret.json> <max connections>`:
/// prints `listening <port>`, then serves until stdin closes.
pub(crate) async fn serve(args: &[String]) -> Result<(), String> {
    let [pki, application, secret, max_connections] = args else {
        return Err(
            "usage: nodes-bare-server <pki dir> <application.json> <secret.json> <max connections>".into()
        );
    };
    let read = |path: String| std::fs::read(&path).map_err(|e| format!("{path}: {e}"));
    let tls = kayra_apiserver::tls_config(
        &read(format!("{pki}/ca.crt"))?,
        &read(format!("{pki}/server.crt"))?,
        &read(format!("{pki}/server.key"))?,
    )?;
    let application = read(application.clone())?;
    let secret: Value = serde_json::from_slice(&read(secret.clone())?).map_err(|e| e.to_string())?;
    let max_connections: usize = max_connections.parse().map_err(|e| format!("max connections: {e}"))?;
    let bare =
        Bare { streams: Arc::default(), current: Arc::new(Mutex::new(desired(&application, &secret, "0"))) };
    let app = kayra_apiserver::with_grpc(
        kayra_apiserver::bare_router(bytes::Bytes::from_static(b"{}")),
        kayra_grpc::SERVICE_PATH,
        NodeServiceServer::new(bare.clone()),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.map_err(|e| e.to_string())?;
    let port = listener.local_addr().map_err(|e| e.to_string())?.port();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(kayra_apiserver::serve(
        listener,
        Some(tls),
        app,
        kayra_apiserver::ServeOptions { max_connections, ..Default::default() },
        async {
            let _ = stopped.await;
        },
    ));
    println!("listening {port}");
    let (lines_tx, mut lines) = mpsc::unbounded_channel::<String>();
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines() {
            let Ok(line) = line else { break };
            if lines_tx.send(line).is_err() {
                break;
            }
        }
    });
    while let Some(line) = lines.recv().await {
        let Some(version) = line.strip_prefix("push ") else { continue };
        let message = desired(&application, &secret, version);
        *bare.current.lock().expect("never poisoned") = message.clone();
        let streams = bare.streams.lock().expect("never poisoned").clone();
        for stream in streams {
            let _ = stream.try_send(Ok(message.clone()));
        }
    }
    let _ = stop.send(());
    let _ = server.await;
    Ok(())
}
