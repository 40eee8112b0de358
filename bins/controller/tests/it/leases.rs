//! Node Leases with real `kayra-agent` processes and the real kubectl: each node's heartbeat
//! renews `kube-node-lease/<node>`, `kubectl describe node` shows it and `kubectl get leases`
//! lists it; a node's certificate renews only its own Lease; the node's status is not rewritten
//! by every heartbeat; and a stopped agent's node turns `Ready=Unknown` once its Lease is older
//! than the ready timeout, as it did when the status carried the heartbeat.

use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};

use crate::agents::{Agent, curl_as_node, get_json, kubectl_ok, two_nodes, wait_for};
use crate::{Controller, have_kubectl};

/// The ready timeout these tests run with: the agent's heartbeat comes every 10 s.
const READY_TIMEOUT_SECONDS: i64 = 12;

fn lease(controller: &Controller, node: &str) -> Option<Value> {
    get_json(controller, &["get", "lease", node, "-n", "kube-node-lease"])
}

fn renew_time(lease: &Value) -> jiff::Timestamp {
    lease["spec"]["renewTime"]
        .as_str()
        .and_then(|time| time.parse().ok())
        .unwrap_or_else(|| panic!("{lease}"))
}

fn ready_condition(controller: &Controller, node: &str) -> Option<Value> {
    let node = get_json(controller, &["get", "node", node])?;
    node["status"]["conditions"].as_array()?.iter().find(|c| c["type"] == "Ready").cloned()
}

/// `curl -X POST` of `body` as JSON with node `agent`'s own certificate: the HTTP status.
fn create_as_node(controller: &Controller, agent: &Agent, path: &str, body: &Value) -> u16 {
    let pki = agent.data().join("pki");
    let output = Command::new("curl")
        .args(["-s", "-o", "/dev/null", "-w", "%{http_code}", "-X", "POST", "--cacert"])
        .arg(pki.join("ca.crt"))
        .arg("--cert")
        .arg(pki.join("node.crt"))
        .arg("--key")
        .arg(pki.join("node.key"))
        .args(["-H", "Content-Type: application/json", "-d", &body.to_string()])
        .arg(format!("{}{path}", controller.url()))
        .output()
        .expect("curl runs");
    String::from_utf8_lossy(&output.stdout).trim().parse().unwrap_or(0)
}

#[test]
fn a_nodes_heartbeat_renews_its_own_lease_which_liveness_reads() {
    if !have_kubectl() {
        return;
    }
    let settings = tempfile::tempdir().unwrap();
    let config = settings.path().join("kayra.yaml");
    std::fs::write(&config, format!("nodeReadyTimeoutSeconds: {READY_TIMEOUT_SECONDS}\n")).unwrap();
    let controller = Controller::start(&["--store", "sled", "--config", config.to_str().unwrap()]);
    let (mut a, b) = two_nodes(&controller);

    // The Lease is the node's, held by it, for the ready timeout.
    let first = wait_for("node a's lease", Duration::from_secs(30), || lease(&controller, &a.name));
    assert_eq!(first["spec"]["holderIdentity"], a.name.as_str(), "{first}");
    assert_eq!(first["spec"]["leaseDurationSeconds"], READY_TIMEOUT_SECONDS, "{first}");
    assert_eq!(first["metadata"]["ownerReferences"][0]["kind"], "Node", "{first}");
    let described = kubectl_ok(&controller, &["describe", "node", &a.name]);
    assert!(!described.contains("Failed to get lease"), "{described}");
    let holder = described.lines().find(|line| line.trim_start().starts_with("HolderIdentity:"));
    assert!(holder.is_some_and(|line| line.contains(&a.name)), "{described}");
    let listed = kubectl_ok(&controller, &["get", "leases", "-n", "kube-node-lease"]);
    assert!(listed.lines().next().is_some_and(|header| header.contains("HOLDER")), "{listed}");
    assert!(listed.lines().any(|line| line.starts_with(&b.name)), "{listed}");

    // Heartbeats renew the Lease; an unchanged status is not written again meanwhile.
    let heartbeat = ready_condition(&controller, &a.name).unwrap()["lastHeartbeatTime"].clone();
    let mut renewals = vec![renew_time(&first)];
    while renewals.len() < 3 {
        let renewed = wait_for("the lease's renewal", Duration::from_secs(30), || {
            let at = renew_time(&lease(&controller, &a.name)?);
            (at > *renewals.last().unwrap()).then_some(at)
        });
        renewals.push(renewed);
    }
    let now = ready_condition(&controller, &a.name).unwrap();
    assert_eq!(now["lastHeartbeatTime"], heartbeat, "the status was rewritten by a heartbeat: {now}");
    assert_eq!(now["status"], "True", "{now}");

    // A node's certificate renews its own Lease and no other.
    let leases = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases";
    let renew =
        json!({"spec": {"renewTime": jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()}});
    let own = curl_as_node(&controller, &a, "PATCH", &format!("{leases}/{}", a.name), Some(&renew));
    assert_eq!(own, 200, "a node renews its own lease");
    let other = curl_as_node(&controller, &a, "PATCH", &format!("{leases}/{}", b.name), Some(&renew));
    assert_eq!(other, 403, "a node may not renew another node's lease");
    let removed = curl_as_node(&controller, &a, "DELETE", &format!("{leases}/{}", b.name), None);
    assert_eq!(removed, 403, "a node may not delete another node's lease");
    let elsewhere =
        json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": a.name}});
    let created =
        create_as_node(&controller, &a, "/apis/coordination.k8s.io/v1/namespaces/default/leases", &elsewhere);
    assert_eq!(created, 403, "a node may not hold a lease outside kube-node-lease");

    // The agent keeps its own log in its data directory, beside what it prints.
    let own = std::fs::read_to_string(a.data().join("agent.log")).unwrap_or_default();
    assert!(own.contains("the node session is open"), "agent.log: {own:?}\nprinted: {}", a.log());

    // Stopped, the node turns Unknown once its Lease is older than the ready timeout.
    a.kill();
    let unknown = wait_for("node a to be Ready=Unknown", Duration::from_secs(60), || {
        ready_condition(&controller, &a.name).filter(|ready| ready["status"] == "Unknown")
    });
    let last_renewal = renew_time(&lease(&controller, &a.name).unwrap());
    let turned: jiff::Timestamp = unknown["lastTransitionTime"].as_str().unwrap().parse().unwrap();
    let silence = turned.duration_since(last_renewal).as_secs_f64();
    let timeout = READY_TIMEOUT_SECONDS as f64;
    // Transition times are stamped to the second; the loop looks one second after the timeout.
    assert!(
        (timeout - 1.0..=timeout + 5.0).contains(&silence),
        "Ready=Unknown {silence:.1} s after the last renewal (timeout {timeout} s): {unknown}"
    );
    assert_eq!(
        ready_condition(&controller, &b.name).unwrap()["status"],
        "True",
        "the other node stays Ready"
    );
}
