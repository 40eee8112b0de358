//! Workload identity on a real node: the agent keeps an Application's tokens in files only its
//! user may read, mounted where in-cluster clients look, and the official Python `kubernetes`
//! client inside the workload, with `load_incluster_config()` and nothing else, lists what its
//! ServiceAccount's RoleBinding allows and is refused the rest; a verifier elsewhere (PyJWT)
//! accepts the very token the workload holds.

use std::os::unix::fs::MetadataExt;
use std::time::{Duration, Instant};

use kayra_testkit::fleet::{Marked, unique};
use kayra_testkit::{Store, TestServer};
use reqwest::StatusCode;
use serde_json::{Value, json};

use super::identity::{VERIFIER, pyjwt, review};
use super::{APPS, status_of};

const RBAC: &str = "/apis/authorization.example.com/v1/namespaces/default";

/// What the workload runs: the official client, configured from its environment and mounted
/// files alone.
const IN_CLUSTER: &str = r#"
import os, sys, time
from kubernetes import client, config
from kubernetes.client.rest import ApiException
config.load_incluster_config()
api = client.CustomObjectsApi()
names = sorted(item["metadata"]["name"] for item in
               api.list_namespaced_custom_object("fleet.example.com", "v1", "default", "applications")["items"])
try:
    api.list_namespaced_custom_object("fleet.example.com", "v1", "default", "secrets")
    refused = "none"
except ApiException as error:
    refused = error.status
print("RESULT", os.getuid(), ",".join(names), refused, flush=True)
time.sleep(100000)
"#;

async fn admin_json(
    server: &TestServer,
    method: reqwest::Method,
    path: &str,
    body: Value,
) -> (StatusCode, Value) {
    let response = server.admin().request(method, format!("{}{path}", server.url())).json(&body).send().await;
    status_of(response.expect("the server answers")).await
}

#[tokio::test]
async fn a_workload_on_a_node_proves_itself_with_its_mounted_token_through_the_official_client() {
    let root = std::fs::metadata("/proc/self").is_ok_and(|meta| meta.uid() == 0);
    let client_present = std::process::Command::new("/usr/bin/python3")
        .args(["-c", "import kubernetes"])
        .output()
        .is_ok_and(|output| output.status.success());
    if !root || !client_present || pyjwt().is_none() {
        assert!(std::env::var_os("CI").is_none(), "CI runs as root with python3-kubernetes and PyJWT");
        eprintln!("skipped: needs root (for the mount namespace), Debian's python3-kubernetes and PyJWT");
        return;
    }
    let server = TestServer::start(Store::Memory).await;
    let agent = server.join_agent("in-cluster").await;
    let marker = Marked(unique("in-cluster"));
    let role = json!({"apiVersion": "authorization.example.com/v1", "kind": "Role", "metadata": {"name": "app-reader"},
                      "rules": [{"apis": ["fleet.example.com"], "resources": ["applications"], "verbs": ["get", "list"]}]});
    let binding = json!({"apiVersion": "authorization.example.com/v1", "kind": "RoleBinding", "metadata": {"name": "prover-reads"},
                         "subjects": [{"kind": "ServiceAccount", "name": "prover", "namespace": "default"}],
                         "roleRef": {"kind": "Role", "name": "app-reader"}});
    for (path, body) in [(format!("{RBAC}/roles"), role), (format!("{RBAC}/rolebindings"), binding)] {
        let (code, answer) = admin_json(&server, reqwest::Method::POST, &path, body).await;
        assert_eq!(code, StatusCode::CREATED, "{answer}");
    }
    // An argv holds no line break: the script travels hex-encoded.
    let hex: String = IN_CLUSTER.bytes().map(|byte| format!("{byte:02x}")).collect();
    let script = format!("exec(bytes.fromhex('{hex}').decode())");
    let app = json!({"apiVersion": "fleet.example.com/v1", "kind": "Application", "metadata": {"name": "prover"},
                     "spec": {"command": ["/usr/bin/python3", "-c", script, &marker.0],
                              "placement": {"nodeName": agent.name()},
                              "identity": {"tokens": [{"audience": "vault", "path": "vault", "expirationSeconds": 600}]}}});
    let (code, created) = admin_json(&server, reqwest::Method::POST, APPS, app).await;
    assert_eq!(code, StatusCode::CREATED, "{created}");
    let uid = created["metadata"]["uid"].as_str().expect("a uid").to_owned();

    // Its own log says what the client could do.
    let deadline = Instant::now() + Duration::from_secs(60);
    let said = loop {
        let log = server.admin().get(format!("{}{APPS}/prover/log", server.url())).send().await.unwrap();
        let text = log.text().await.unwrap_or_default();
        if let Some(line) = text.lines().find(|line| line.starts_with("RESULT")) {
            break line.to_owned();
        }
        assert!(Instant::now() < deadline, "the workload never said: {text}\n{}", agent.log());
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    assert_eq!(said, "RESULT 65532 prover 403", "it lists what the binding allows, and is refused Secrets");

    // The files, as the node keeps them: the workload's user's, readable by it alone.
    let dir = agent.data_dir().join("apps").join(&uid).join("identity");
    for name in ["token", "vault", "ca.crt", "namespace"] {
        let meta = std::fs::metadata(dir.join(name)).unwrap_or_else(|error| panic!("{name}: {error}"));
        assert_eq!((meta.uid(), meta.mode() & 0o777), (65532, 0o400), "{name}");
    }
    assert_eq!(std::fs::read_to_string(dir.join("namespace")).unwrap(), "default");
    let log = agent.log();
    let api_token = std::fs::read_to_string(dir.join("token")).unwrap();
    let vault = std::fs::read_to_string(dir.join("vault")).unwrap();
    assert!(!log.contains(&api_token) && !log.contains(&vault), "the agent never logs a token");

    // A verifier elsewhere accepts the token the workload holds; the other is for its audience only.
    let ca = server.data_dir().join("pki/ca.crt");
    let mut child = std::process::Command::new("python3")
        .args(["-c", VERIFIER, &server.url(), &ca.display().to_string()])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("python3 runs");
    std::io::Write::write_all(&mut child.stdin.take().expect("a stdin"), api_token.as_bytes()).unwrap();
    let output = tokio::task::spawn_blocking(move || child.wait_with_output()).await.unwrap().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}{}", String::from_utf8_lossy(&output.stderr));
    assert_eq!(stdout.trim(), format!("system:serviceaccount:default:prover {uid}"));
    let status = review(&server, &vault, &["vault"]).await;
    assert_eq!(status["authenticated"], true, "{status}");
    assert_eq!(status["audiences"], json!(["vault"]));
    let status = review(&server, &vault, &[]).await;
    assert_eq!(status["authenticated"], false, "not a credential for the API: {status}");
    drop(agent);
}
