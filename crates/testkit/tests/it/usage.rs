//! What real workloads consume, as a real agent samples it: an Application's `metrics`
//! subresource, and `kubectl top node` and `kubectl top pod` (sorted, selected by label, across
//! namespaces, per container) over `metrics.k8s.io`, refused to a caller without the grant.

use std::time::{Duration, Instant};

use kayra_testkit::fleet::{Marked, unique};
use kayra_testkit::{Store, TestServer};
use reqwest::StatusCode;
use serde_json::{Value, json};

const FLEET: &str = "/apis/fleet.example.com/v1/namespaces/default";

fn python(name: &str, node: &str, role: &str, script: &str, marker: &str) -> Value {
    json!({"apiVersion": "fleet.example.com/v1", "kind": "Application",
           "metadata": {"name": name, "labels": {"role": role}},
           "spec": {"command": ["/usr/bin/python3", "-c", script, marker], "placement": {"nodeName": node}}})
}

async fn admin_json(
    server: &TestServer,
    method: reqwest::Method,
    path: &str,
    body: Option<Value>,
) -> (StatusCode, Value) {
    let mut request = server.admin().request(method, format!("{}{path}", server.url()));
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.expect("the server answers");
    let code = response.status();
    (code, response.json().await.unwrap_or(Value::Null))
}

/// kubectl's output; panics with its error when it fails.
async fn kubectl_ok(server: &TestServer, token: &str, args: &[&str]) -> String {
    let output = server.kubectl(token, args).await;
    assert!(output.status.success(), "kubectl {args:?}: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// `NAME CPU MEMORY` rows of `kubectl top pod --no-headers`: millicores and MiB.
fn rows(text: &str) -> Vec<(String, u64, u64)> {
    text.lines()
        .filter_map(|line| {
            let words: Vec<&str> = line.split_whitespace().collect();
            let [name, cpu, memory] = words[words.len().checked_sub(3)?..] else { return None };
            Some((
                name.to_owned(),
                cpu.trim_end_matches('m').parse().ok()?,
                memory.trim_end_matches("Mi").parse().ok()?,
            ))
        })
        .collect()
}

#[tokio::test]
async fn kubectl_top_shows_what_real_workloads_consume_to_those_granted_it() {
    let server = TestServer::start(Store::Memory).await;
    let agent = server.join_agent("top").await;
    let node = agent.name().to_owned();
    let marker = Marked(unique("top-workload"));
    let deadline = Instant::now() + Duration::from_secs(30);
    while admin_json(&server, reqwest::Method::GET, &format!("/api/v1/nodes/{node}"), None).await.0
        != StatusCode::OK
    {
        assert!(Instant::now() < deadline, "the agent never registered:\n{}", agent.log());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let spin = python("spinner", &node, "spin", "while True: pass", &marker.0);
    let hold =
        python("holder", &node, "hold", "import time; a = b'x' * (120 << 20); time.sleep(1000)", &marker.0);
    // Pinned to a node with no agent: it exists, but nothing measured it.
    let silent = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "nowhere"}});
    let (code, answer) = admin_json(&server, reqwest::Method::POST, "/api/v1/nodes", Some(silent)).await;
    assert_eq!(code, StatusCode::CREATED, "{answer}");
    let idle = python("idle", "nowhere", "idle", "pass", &marker.0);
    for body in [spin, hold, idle] {
        let (code, answer) =
            admin_json(&server, reqwest::Method::POST, &format!("{FLEET}/applications"), Some(body)).await;
        assert_eq!(code, StatusCode::CREATED, "{answer}");
    }
    let token = server.admin_token();

    // No sample yet: a clear 404, never zeros.
    let (code, answer) =
        admin_json(&server, reqwest::Method::GET, &format!("{FLEET}/applications/idle/metrics"), None).await;
    assert_eq!(code, StatusCode::NOT_FOUND, "{answer}");
    assert!(answer["message"].as_str().unwrap().contains("has no usage sample yet"), "{answer}");
    let (code, answer) =
        admin_json(&server, reqwest::Method::GET, &format!("{FLEET}/applications/absent/metrics"), None)
            .await;
    assert_eq!(code, StatusCode::NOT_FOUND, "{answer}");
    let (code, answer) = admin_json(
        &server,
        reqwest::Method::GET,
        "/apis/metrics.k8s.io/v1beta1/namespaces/default/pods/idle",
        None,
    )
    .await;
    assert_eq!(code, StatusCode::NOT_FOUND, "{answer}");

    // Listed in legacy discovery too (kubectl top reads the aggregated one).
    let (code, groups) = admin_json(&server, reqwest::Method::GET, "/apis", None).await;
    assert_eq!(code, StatusCode::OK);
    let listed = groups["groups"].as_array().unwrap().iter().any(|group| {
        group["name"] == "metrics.k8s.io"
            && group["preferredVersion"]["groupVersion"] == "metrics.k8s.io/v1beta1"
    });
    assert!(listed, "{groups}");
    let (code, resources) =
        admin_json(&server, reqwest::Method::GET, "/apis/metrics.k8s.io/v1beta1", None).await;
    assert_eq!(code, StatusCode::OK, "{resources}");
    let mut served: Vec<(String, String, Value)> = resources["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["name"].as_str().unwrap().to_owned(),
                r["kind"].as_str().unwrap().to_owned(),
                r["verbs"].clone(),
            )
        })
        .collect();
    served.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        served,
        [
            ("nodes".to_owned(), "NodeMetrics".to_owned(), json!(["get", "list"])),
            ("pods".to_owned(), "PodMetrics".to_owned(), json!(["get", "list"]))
        ],
        "{resources}"
    );

    // Two heartbeats give a rate: the spinner near one core, the holder at least 100 MiB.
    let deadline = Instant::now() + Duration::from_secs(90);
    let pods = loop {
        let output = server.kubectl(&token, &["top", "pod", "--no-headers"]).await;
        let rows = rows(&String::from_utf8_lossy(&output.stdout));
        if output.status.success()
            && rows.len() == 2
            && rows.iter().any(|(name, cpu, _)| name == "spinner" && *cpu > 0)
        {
            break rows;
        }
        assert!(
            Instant::now() < deadline,
            "kubectl top pod never showed both: {rows:?} {}\n{}",
            String::from_utf8_lossy(&output.stderr),
            agent.log()
        );
        tokio::time::sleep(Duration::from_secs(2)).await;
    };
    let of = |name: &str| {
        pods.iter().find(|(pod, _, _)| pod == name).cloned().unwrap_or_else(|| panic!("{name} in {pods:?}"))
    };
    let (_, spinner_cpu, _) = of("spinner");
    let (_, _, holder_memory) = of("holder");
    // One core at most; less when the machine's cores are busy with other work than the test's.
    assert!((200..=1100).contains(&spinner_cpu), "a process spinning one core shows up to 1000m: {pods:?}");
    assert!(holder_memory >= 100, "a process holding 120 MiB shows at least 100Mi: {pods:?}");

    let sorted =
        rows(&kubectl_ok(&server, &token, &["top", "pod", "--sort-by=memory", "--no-headers"]).await);
    assert_eq!(sorted.first().map(|row| row.0.as_str()), Some("holder"), "{sorted:?}");
    let sorted = rows(&kubectl_ok(&server, &token, &["top", "pod", "--sort-by=cpu", "--no-headers"]).await);
    assert_eq!(sorted.first().map(|row| row.0.as_str()), Some("spinner"), "{sorted:?}");
    let selected =
        rows(&kubectl_ok(&server, &token, &["top", "pod", "-l", "role=spin", "--no-headers"]).await);
    assert_eq!(selected.iter().map(|row| row.0.as_str()).collect::<Vec<_>>(), ["spinner"]);
    let everywhere = kubectl_ok(&server, &token, &["top", "pod", "-A", "--no-headers"]).await;
    assert!(
        everywhere.lines().any(|line| line.starts_with("default ") && line.contains("holder")),
        "{everywhere}"
    );
    let containers =
        kubectl_ok(&server, &token, &["top", "pod", "holder", "--containers", "--no-headers"]).await;
    assert!(
        containers.split_whitespace().take(2).eq(["holder", "holder"]),
        "one container named after the Application: {containers}"
    );
    let nodes = kubectl_ok(&server, &token, &["top", "node", "--no-headers"]).await;
    let line =
        nodes.lines().find(|line| line.starts_with(&node)).unwrap_or_else(|| panic!("{node} in {nodes}"));
    let cores: u64 = line.split_whitespace().nth(1).unwrap().trim_end_matches('m').parse().unwrap();
    assert!(cores >= 200, "the node runs the spinner: {line}");

    // The subresource: cumulative figures from the last sample, of the node that took it.
    let (code, metrics) =
        admin_json(&server, reqwest::Method::GET, &format!("{FLEET}/applications/holder/metrics"), None)
            .await;
    assert_eq!(code, StatusCode::OK, "{metrics}");
    assert_eq!(
        (metrics["kind"].as_str(), metrics["node"].as_str()),
        (Some("ApplicationMetrics"), Some(node.as_str()))
    );
    assert!(metrics["memoryBytes"].as_u64().unwrap() >= 100 << 20, "{metrics}");
    assert!(
        metrics["memoryPeakBytes"].as_u64().unwrap() >= metrics["memoryBytes"].as_u64().unwrap(),
        "{metrics}"
    );
    assert!(
        metrics["cpuMicroseconds"].as_u64().unwrap() > 0 && metrics["pids"].as_u64().unwrap() >= 1,
        "{metrics}"
    );
    for field in ["cpuThrottledMicroseconds", "oomKills", "timestamp"] {
        assert!(!metrics[field].is_null(), "{field} in {metrics}");
    }

    // A viewer of `default` reads its pods' usage, not the nodes'; a caller with no grant
    // reads neither.
    server.add_token("viewer-token", "viewer", "");
    server.add_token("nobody-token", "nobody", "");
    let binding = json!({"apiVersion": "authorization.example.com/v1", "kind": "RoleBinding",
        "metadata": {"name": "viewer", "namespace": "default"},
        "subjects": [{"kind": "User", "name": "viewer"}], "roleRef": {"kind": "ClusterRole", "name": "view"}});
    let path = "/apis/authorization.example.com/v1/namespaces/default/rolebindings";
    let (code, answer) = admin_json(&server, reqwest::Method::POST, path, Some(binding)).await;
    assert_eq!(code, StatusCode::CREATED, "{answer}");
    let deadline = Instant::now() + Duration::from_secs(20);
    let viewed = loop {
        let output = server.kubectl("viewer-token", &["top", "pod", "--no-headers"]).await;
        if output.status.success() {
            break String::from_utf8_lossy(&output.stdout).into_owned();
        }
        assert!(
            Instant::now() < deadline,
            "the viewer never read pod metrics: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(rows(&viewed).len(), 2, "{viewed}");
    let (code, _) =
        admin_json(&server, reqwest::Method::GET, "/apis/metrics.k8s.io/v1beta1/nodes", None).await;
    assert_eq!(code, StatusCode::OK);
    for (token, args) in [("viewer-token", &["top", "node"][..]), ("nobody-token", &["top", "pod"][..])] {
        let output = server.kubectl(token, args).await;
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            !output.status.success() && stderr.contains("forbidden"),
            "{token} kubectl {args:?}: {stderr}"
        );
    }
    let response = server
        .token_builder("nobody-token")
        .build()
        .unwrap()
        .get(format!("{}/apis/metrics.k8s.io/v1beta1/namespaces/default/pods", server.url()))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::FORBIDDEN);
    drop(agent);
}
