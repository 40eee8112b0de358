//! The agent's session against the real controller (in process, real gRPC and mutual TLS),
//! with the node's workloads simulated: registration, desired state, status, logs under flow
//! control, and reconnection across a controller restart that changes nothing on the node.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::stream::BoxStream;
use kayra_api::kinds::application::ApplicationStatus;
use kayra_api::session::{ApplicationReport, DesiredState, LogRequest, NodeEvent, NodeReport, UsageSample};
use kayra_grpc::client::Credentials;
use kayra_nodeagent::session::{self, CredentialSource, SessionConfig, Workloads};
use kayra_pki::{Ca, Usage};
use kayra_testkit::{Store, TestServer};
use serde_json::{Value, json};
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

/// Workloads that only record what they are asked.
struct Simulated {
    applied: Mutex<Vec<DesiredState>>,
    statuses: broadcast::Sender<ApplicationReport>,
    events: broadcast::Sender<NodeEvent>,
}

/// The bytes the simulated log holds: more than one credit window, so flow control is used.
fn log_bytes() -> Vec<u8> {
    (0..20_000)
        .flat_map(|line| format!("line {line:05} of the simulated application's output\n").into_bytes())
        .collect()
}

#[async_trait::async_trait]
impl Workloads for Simulated {
    fn apply(&self, desired: &DesiredState) {
        self.applied.lock().unwrap().push(desired.clone());
    }

    fn statuses(&self) -> (Vec<ApplicationReport>, broadcast::Receiver<ApplicationReport>) {
        (Vec::new(), self.statuses.subscribe())
    }

    fn events(&self) -> broadcast::Receiver<NodeEvent> {
        self.events.subscribe()
    }

    fn usage(&self) -> Vec<UsageSample> {
        Vec::new()
    }

    fn node_report(&self) -> NodeReport {
        NodeReport {
            capacity: [("cpu".to_owned(), "1".to_owned())].into(),
            allocatable: [("cpu".to_owned(), "1".to_owned())].into(),
            ..NodeReport::default()
        }
    }

    async fn logs(
        &self,
        request: &LogRequest,
    ) -> Result<BoxStream<'static, Result<Vec<u8>, String>>, String> {
        assert_eq!(request.name, "web");
        let chunks: Vec<Result<Vec<u8>, String>> =
            log_bytes().chunks(64 * 1024).map(|c| Ok(c.to_vec())).collect();
        Ok(Box::pin(futures_util::stream::iter(chunks)))
    }

    async fn open_stream(
        &self,
        _open: &kayra_api::session::StreamOpen,
    ) -> Result<kayra_nodeagent::streams::Connected, String> {
        Err("the simulated node runs no processes to stream".into())
    }
}

/// Credentials whose server address the test changes when the controller moves.
struct Movable(Mutex<Credentials>);

impl CredentialSource for Movable {
    fn credentials(&self) -> Result<Credentials, String> {
        Ok(self.0.lock().unwrap().clone())
    }
}

async fn wait_for(what: &str, mut check: impl AsyncFnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while !check().await {
        assert!(tokio::time::Instant::now() < deadline, "{what} did not happen within 20 s");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn get(server: &TestServer, path: &str) -> Value {
    let response = server.admin().get(format!("{}{path}", server.url())).send().await.unwrap();
    response.json().await.unwrap_or(Value::Null)
}

#[tokio::test]
async fn the_session_registers_applies_reports_streams_logs_and_survives_a_controller_restart() {
    let mut server = TestServer::start(Store::Sled).await;
    let ca_pem = String::from_utf8(server.pki_file("ca.crt")).unwrap();
    let ca = Ca::from_pem(&ca_pem, &String::from_utf8(server.pki_file("ca.key")).unwrap()).unwrap();
    let issued = ca.issue(Usage::Client, "system:node:agent-1", Some("system:nodes"), &[]).unwrap();
    let credentials =
        Credentials { server: server.url(), ca_pem, cert_pem: issued.cert_pem, key_pem: issued.key_pem };
    let (statuses, _) = broadcast::channel(16);
    let (events, _) = broadcast::channel(16);
    let workloads = Arc::new(Simulated { applied: Mutex::default(), statuses, events });
    let stop = CancellationToken::new();
    let config = SessionConfig {
        heartbeat: Duration::from_millis(500),
        first_backoff: Duration::from_millis(100),
        ..SessionConfig::default()
    };
    let source = Arc::new(Movable(Mutex::new(credentials)));
    let agent = tokio::spawn(session::run(workloads.clone(), source.clone(), config, stop.clone()));

    wait_for("the node's registration", async || {
        get(&server, "/api/v1/nodes/agent-1").await["kind"] == "Node"
    })
    .await;
    let created = server
        .admin()
        .post(format!("{}/apis/fleet.example.com/v1/namespaces/default/applications", server.url()))
        .json(
            &json!({"apiVersion": "fleet.example.com/v1", "kind": "Application", "metadata": {"name": "web"},
                      "spec": {"command": ["/bin/sleep", "1000"], "placement": {"nodeName": "agent-1"}}}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201);
    let has_web = |workloads: &Simulated| {
        workloads
            .applied
            .lock()
            .unwrap()
            .last()
            .is_some_and(|d| d.applications.iter().any(|a| a["metadata"]["name"] == "web"))
    };
    wait_for("web's desired state", async || has_web(&workloads)).await;
    let uid = get(&server, "/apis/fleet.example.com/v1/namespaces/default/applications/web").await["metadata"]["uid"]
        .as_str()
        .unwrap()
        .to_owned();
    let running = ApplicationReport {
        namespace: "default".into(),
        name: "web".into(),
        uid,
        status: ApplicationStatus { phase: Some("Running".into()), ..ApplicationStatus::default() },
    };
    workloads.statuses.send(running.clone()).unwrap();
    wait_for("web's status", async || {
        get(&server, "/apis/fleet.example.com/v1/namespaces/default/applications/web").await["status"]["phase"] == "Running"
    })
    .await;

    // More than the credit window arrives whole and in order.
    let log = server
        .admin()
        .get(format!("{}/api/v1/namespaces/default/pods/web/log", server.url()))
        .send()
        .await
        .unwrap();
    assert_eq!(log.status(), 200);
    assert_eq!(log.bytes().await.unwrap().as_ref(), log_bytes().as_slice());

    // A controller restart: the agent reconnects and is sent the same state, not an empty one.
    // An Event raised while the controller is away reaches it once the session is back.
    let before = workloads.applied.lock().unwrap().len();
    server.shutdown().await;
    let web_uid = running.uid.clone();
    let crashed = NodeEvent {
        namespace: "default".into(),
        name: "web".into(),
        uid: web_uid,
        reason: "BackOff".into(),
        message: "raised while the controller was away".into(),
        type_: "Warning".into(),
    };
    workloads.events.send(crashed).unwrap();
    server.boot().await;
    source.0.lock().unwrap().server = server.url();
    wait_for("a push after the restart", async || workloads.applied.lock().unwrap().len() > before).await;
    wait_for("the Event raised while the controller was away", async || {
        let events =
            get(&server, "/api/v1/namespaces/default/events?fieldSelector=involvedObject.name=web").await;
        events["items"]
            .as_array()
            .is_some_and(|items| items.iter().any(|e| e["message"] == "raised while the controller was away"))
    })
    .await;
    let applied = workloads.applied.lock().unwrap().clone();
    let first = applied.iter().position(|d| !d.applications.is_empty()).unwrap();
    for desired in &applied[first..] {
        assert_eq!(desired.applications.len(), 1, "no push after web's creation left it out");
    }
    stop.cancel();
    agent.await.unwrap();
}
