//! Lists and watches served from shared, pre-encoded bytes answer exactly what a fresh encoding
//! of the stored object is, for every Kind; and watchers that stop reading are dropped within
//! the stall timeout without slowing anyone else.

use std::time::{Duration, Instant};

use base64::Engine;
use kayra_testkit::{Store, TestServer};
use reqwest::{Client, StatusCode};
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;

const FLEET: &str = "/apis/fleet.example.com/v1";
const RBAC: &str = "/apis/authorization.example.com/v1";

/// How many 100 KB objects are written while watchers are stuck: enough to fill what the
/// kernel buffers on both ends of a loopback socket.
const WRITES: usize = 100;

/// Every collection served from the registry, cluster-wide.
const COLLECTIONS: &[&str] = &[
    "/api/v1/namespaces",
    "/api/v1/nodes",
    "/api/v1/events",
    "/api/v1/pods",
    "/apis/fleet.example.com/v1/applications",
    "/apis/fleet.example.com/v1/applicationsets",
    "/apis/fleet.example.com/v1/services",
    "/apis/fleet.example.com/v1/secrets",
    "/apis/certificates.k8s.io/v1/certificatesigningrequests",
    "/apis/authorization.example.com/v1/roles",
    "/apis/authorization.example.com/v1/rolebindings",
    "/apis/authorization.example.com/v1/clusterroles",
    "/apis/authorization.example.com/v1/clusterrolebindings",
];

/// Where a listed object is read on its own.
fn object_path(collection: &str, item: &Value) -> String {
    let name = item["metadata"]["name"].as_str().expect("a name");
    match item["metadata"]["namespace"].as_str() {
        Some(namespace) => {
            let (group, plural) = collection.rsplit_once('/').expect("a plural");
            format!("{group}/namespaces/{namespace}/{plural}/{name}")
        }
        None => format!("{collection}/{name}"),
    }
}

async fn ok(response: reqwest::Response) -> Value {
    let status = response.status();
    let url = response.url().clone();
    let body: Value = response.json().await.unwrap_or(Value::Null);
    assert!(status.is_success(), "{url}: {status}: {body}");
    body
}

/// The watch's lines, each split into its type and the exact bytes of its object, read until
/// the server ends the watch.
async fn watch_events(client: &Client, url: &str) -> Vec<(String, Vec<u8>)> {
    let response = client.get(url).send().await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let body = tokio::time::timeout(Duration::from_secs(20), response.bytes())
        .await
        .expect("the watch ends by itself")
        .unwrap();
    body.split(|b| *b == b'\n')
        .filter(|line| !line.is_empty())
        .map(|line| {
            let event: Value = serde_json::from_slice(line).expect("a JSON event");
            let kind = event["type"].as_str().expect("a type").to_owned();
            let head = format!("{{\"type\":\"{kind}\",\"object\":");
            let object = line
                .strip_prefix(head.as_bytes())
                .and_then(|rest| rest.strip_suffix(b"}"))
                .unwrap_or_else(|| {
                    panic!("an event is its type, then its object: {}", String::from_utf8_lossy(line))
                })
                .to_vec();
            (kind, object)
        })
        .collect()
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|window| window == needle)
}

/// For every collection: each item a list answers is byte for byte the JSON a GET of it
/// answers, and so is each object a watch carries (ADDED from the cache, MODIFIED and
/// DELETED from the window) when it is the object's current version.
async fn every_served_object_is_its_fresh_encoding(
    server: &TestServer,
    since: &str,
) -> std::collections::BTreeMap<&'static str, usize> {
    let client = server.admin();
    let mut counts = std::collections::BTreeMap::new();
    for collection in COLLECTIONS {
        let compared = counts.entry(*collection).or_insert(0);
        let url = format!("{}{collection}", server.url());
        let list = client.get(&url).send().await.unwrap();
        assert_eq!(list.status(), StatusCode::OK, "{collection}");
        let list_bytes = list.bytes().await.unwrap();
        let parsed: Value = serde_json::from_slice(&list_bytes).expect("a list parses as JSON");
        assert!(parsed["metadata"]["resourceVersion"].is_string(), "{collection}: {parsed}");
        for item in parsed["items"].as_array().expect("items") {
            let fresh = client
                .get(format!("{}{}", server.url(), object_path(collection, item)))
                .send()
                .await
                .unwrap();
            assert_eq!(fresh.status(), StatusCode::OK, "{collection}: {item}");
            let fresh = fresh.bytes().await.unwrap();
            let fresh_value: Value = serde_json::from_slice(&fresh).unwrap();
            if fresh_value["metadata"]["resourceVersion"] != item["metadata"]["resourceVersion"] {
                continue; // changed since the list (a node's heartbeat): compared next time
            }
            assert!(
                contains(&list_bytes, &fresh),
                "{collection}: the list's bytes of {item} differ from a GET's"
            );
            *compared += 1;
        }
        for query in ["", since] {
            let events = watch_events(&client, &format!("{url}?watch=true&timeoutSeconds=1{query}")).await;
            for (kind, object) in events {
                let value: Value = serde_json::from_slice(&object).expect("the event's object parses");
                if kind == "DELETED" {
                    continue;
                }
                let fresh = client
                    .get(format!("{}{}", server.url(), object_path(collection, &value)))
                    .send()
                    .await
                    .unwrap();
                if fresh.status() == StatusCode::NOT_FOUND {
                    continue;
                }
                let fresh = fresh.bytes().await.unwrap();
                let fresh_value: Value = serde_json::from_slice(&fresh).unwrap();
                if fresh_value["metadata"]["resourceVersion"] == value["metadata"]["resourceVersion"] {
                    assert_eq!(
                        String::from_utf8_lossy(&object),
                        String::from_utf8_lossy(&fresh),
                        "{collection}: a {kind} event's bytes differ from a GET's"
                    );
                    *compared += 1;
                } else {
                    assert_eq!(value["kind"], fresh_value["kind"], "{collection}");
                }
            }
        }
    }
    counts
}

#[tokio::test]
async fn lists_and_watches_serve_exactly_a_fresh_encoding_of_every_kind() {
    let server = TestServer::start(Store::Memory).await;
    let client = server.admin();
    let base = server.url();
    let start: Value = ok(client.get(format!("{base}/api/v1/namespaces")).send().await.unwrap()).await;
    let since = format!("&resourceVersion={}", start["metadata"]["resourceVersion"].as_str().unwrap());
    let secret = base64::engine::general_purpose::STANDARD.encode("wq-fresh-encoding");
    let key = kayra_pki::generate_key().unwrap();
    let subject = kayra_pki::Subject {
        common_name: "system:node:wq-node".into(),
        organizations: vec!["system:nodes".into()],
    };
    let request = base64::engine::general_purpose::STANDARD
        .encode(kayra_pki::certificate_request(&key, &subject).unwrap());
    let fixtures = [
        (
            "/api/v1/nodes",
            json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "wq-node"},
                   "spec": {"taints": [{"key": "wq", "effect": "NoSchedule"}]}}),
        ),
        (
            "/apis/certificates.k8s.io/v1/certificatesigningrequests",
            json!({"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
                   "metadata": {"name": "wq-csr"},
                   "spec": {"request": request, "signerName": "example.com/wq-signer", "usages": ["client auth"]}}),
        ),
        (
            &*format!("{FLEET}/namespaces/default/applicationsets"),
            json!({"apiVersion": "fleet.example.com/v1", "kind": "ApplicationSet", "metadata": {"name": "wq-set"},
                   "spec": {"applications": [{"name": "api", "spec": {"command": ["/bin/sleep", "100", "wq-set"]},
                                              "scale": {"replicas": 2}}]}}),
        ),
        (
            "/api/v1/namespaces",
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "wq-encoding"}}),
        ),
        (
            "/api/v1/namespaces/default/events",
            json!({"apiVersion": "v1", "kind": "Event", "metadata": {"name": "wq-event"},
                   "involvedObject": {"kind": "Application", "name": "wq-app", "namespace": "default"},
                   "reason": "Checked", "message": "wq-fresh-encoding", "type": "Normal"}),
        ),
        (
            &*format!("{FLEET}/namespaces/default/applications"),
            json!({"apiVersion": "fleet.example.com/v1", "kind": "Application", "metadata": {"name": "wq-app"},
                   "spec": {"command": ["/bin/sleep", "100", "wq-fresh-encoding"]}}),
        ),
        (
            &*format!("{FLEET}/namespaces/default/services"),
            json!({"apiVersion": "fleet.example.com/v1", "kind": "Service", "metadata": {"name": "wq-svc"},
                   "spec": {"ports": [{"name": "http", "port": 80, "targetPort": 8080, "protocol": "TCP"}]}}),
        ),
        (
            &*format!("{FLEET}/namespaces/default/secrets"),
            json!({"apiVersion": "fleet.example.com/v1", "kind": "Secret", "metadata": {"name": "wq-secret"},
                   "data": {"token": secret}}),
        ),
        (
            &*format!("{RBAC}/clusterroles"),
            json!({"apiVersion": "authorization.example.com/v1", "kind": "ClusterRole", "metadata": {"name": "wq-reader"},
                   "rules": [{"apis": ["fleet.example.com"], "resources": ["applications"], "verbs": ["get"]}]}),
        ),
        (
            &*format!("{RBAC}/namespaces/default/roles"),
            json!({"apiVersion": "authorization.example.com/v1", "kind": "Role", "metadata": {"name": "wq-reader"},
                   "rules": [{"apis": ["fleet.example.com"], "resources": ["services"], "verbs": ["get"]}]}),
        ),
        (
            &*format!("{RBAC}/namespaces/default/rolebindings"),
            json!({"apiVersion": "authorization.example.com/v1", "kind": "RoleBinding", "metadata": {"name": "wq-reader"},
                   "roleRef": {"kind": "Role", "name": "wq-reader"},
                   "subjects": [{"kind": "User", "name": "wq-someone"}]}),
        ),
        (
            &*format!("{RBAC}/namespaces/default/rolebindings"),
            json!({"apiVersion": "authorization.example.com/v1", "kind": "RoleBinding", "metadata": {"name": "wq-stays"},
                   "roleRef": {"kind": "Role", "name": "wq-reader"},
                   "subjects": [{"kind": "Group", "name": "wq-team"}]}),
        ),
        (
            &*format!("{RBAC}/clusterrolebindings"),
            json!({"apiVersion": "authorization.example.com/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "wq-reader"},
                   "roleRef": {"kind": "ClusterRole", "name": "wq-reader"},
                   "subjects": [{"kind": "User", "name": "wq-someone"}]}),
        ),
    ];
    for (collection, object) in &fixtures {
        let created = ok(client.post(format!("{base}{collection}")).json(object).send().await.unwrap()).await;
        let path = format!("{base}{collection}/{}", created["metadata"]["name"].as_str().unwrap());
        // An update (a new label), and a status write where the Kind has one.
        let label = json!({"metadata": {"labels": {"wq-step": "updated"}}});
        let updated = client
            .patch(&path)
            .header("Content-Type", "application/merge-patch+json")
            .json(&label)
            .send()
            .await
            .unwrap();
        let updated = ok(updated).await;
        if matches!(updated["kind"].as_str(), Some("Application" | "Namespace" | "Node")) {
            let status = json!({"status": {"message": "wq-status-written"}});
            let patch = client
                .patch(format!("{path}/status"))
                .header("Content-Type", "application/merge-patch+json")
                .json(&status)
                .send()
                .await
                .unwrap();
            ok(patch).await;
        }
    }
    // A deleted object's last state reaches watchers from the window as DELETED.
    ok(client
        .delete(format!("{base}{RBAC}/namespaces/default/rolebindings/wq-reader"))
        .send()
        .await
        .unwrap())
    .await;
    let compared = every_served_object_is_its_fresh_encoding(&server, &since).await;
    let none: Vec<_> =
        compared.iter().filter(|(_, count)| **count == 0).map(|(collection, _)| *collection).collect();
    assert!(none.is_empty(), "nothing compared in {none:?}: {compared:?}");
    assert!(compared.values().sum::<usize>() >= 40, "compared only {compared:?}");
}

/// Opens a watch on a raw socket with a tiny receive buffer and never reads from it.
async fn stuck_watch(server: &TestServer, token: &str, path: &str) -> tokio::net::TcpStream {
    let address: std::net::SocketAddr = server.http_url().trim_start_matches("http://").parse().unwrap();
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let mut stream = socket.connect(address).await.unwrap();
    let request =
        format!("GET {path}?watch=true HTTP/1.1\r\nHost: kayra\r\nAuthorization: Bearer {token}\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    stream
}

/// Whether the server closed the connection: reading it to its end takes a bounded time then.
async fn closed_by_server(stream: &mut tokio::net::TcpStream, within: Duration) -> bool {
    use tokio::io::AsyncReadExt;
    let mut buffer = vec![0u8; 1 << 16];
    let deadline = tokio::time::Instant::now() + within;
    loop {
        match tokio::time::timeout_at(deadline, stream.read(&mut buffer)).await {
            Err(_) => return false,
            Ok(Ok(0) | Err(_)) => return true,
            Ok(Ok(_)) => {}
        }
    }
}

#[tokio::test]
async fn watchers_that_stop_reading_are_dropped_and_slow_no_one() {
    let stall = Duration::from_secs(2);
    let server = TestServer::start_with(Store::Memory, |config| config.watch_stall_timeout_seconds = 2).await;
    let client = server.admin();
    let token = server.admin_token();
    let secrets = format!("{FLEET}/namespaces/default/secrets");
    let mut stuck = Vec::new();
    for _ in 0..20 {
        stuck.push(stuck_watch(&server, &token, &secrets).await);
    }
    // A watcher that reads, on the same HTTP/2 connection as the writes and GETs below.
    let mut reader = client.get(format!("{}{secrets}?watch=true", server.url())).send().await.unwrap();
    let reading = tokio::spawn(async move {
        let mut seen = 0;
        let mut pending = Vec::new();
        while seen < WRITES {
            let chunk = tokio::time::timeout(Duration::from_secs(30), reader.chunk())
                .await
                .expect("the reading watcher keeps receiving")
                .unwrap()
                .expect("the reading watcher is not cut off");
            pending.extend_from_slice(&chunk);
            while let Some(end) = pending.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = pending.drain(..=end).collect();
                let event: Value = serde_json::from_slice(&line).unwrap();
                if event["object"]["metadata"]["name"]
                    .as_str()
                    .is_some_and(|name| name.starts_with("wq-big-"))
                {
                    seen += 1;
                }
            }
        }
    });
    let blob = base64::engine::general_purpose::STANDARD.encode(vec![b'w'; 75 * 1024]);
    let mut latencies = Vec::new();
    for n in 0..WRITES {
        let secret = json!({"apiVersion": "fleet.example.com/v1", "kind": "Secret",
                            "metadata": {"name": format!("wq-big-{n}")}, "data": {"blob": blob}});
        ok(client.post(format!("{}{secrets}", server.url())).json(&secret).send().await.unwrap()).await;
        let started = Instant::now();
        ok(client.get(format!("{}/api/v1/namespaces/default", server.url())).send().await.unwrap()).await;
        latencies.push(started.elapsed());
    }
    let written_at = Instant::now();
    // The reading watcher sees every write.
    reading.await.unwrap();
    latencies.sort();
    let worst = latencies[latencies.len() - 1];
    assert!(worst < Duration::from_secs(2), "a reader's GET took {worst:?} while watchers were stuck");
    // Every stuck watcher's connection is dropped within the stall timeout (with slack).
    // Reading would unstick a watcher, so the check waits out the timeout first.
    tokio::time::sleep_until((written_at + stall + Duration::from_secs(2)).into()).await;
    for (n, stream) in stuck.iter_mut().enumerate() {
        assert!(
            closed_by_server(stream, Duration::from_secs(10)).await,
            "stuck watcher {n} is still connected {:?} after the last write",
            written_at.elapsed()
        );
    }
}

/// A watcher that stops reading while only a few events are pending for it is dropped too, as
/// soon as it has taken nothing for the stall timeout, however quiet the resource is after.
#[tokio::test]
async fn a_watcher_that_stops_reading_during_a_few_events_is_dropped_after_the_stall_timeout() {
    let stall = Duration::from_secs(2);
    let server = TestServer::start_with(Store::Memory, |config| config.watch_stall_timeout_seconds = 2).await;
    let client = server.admin();
    let token = server.admin_token();
    let secrets = format!("{FLEET}/namespaces/default/secrets");
    let mut stuck = Vec::new();
    for _ in 0..10 {
        stuck.push(stuck_watch(&server, &token, &secrets).await);
    }
    let blob = base64::engine::general_purpose::STANDARD.encode(vec![b'f'; 75 * 1024]);
    for n in 0..12 {
        let secret = json!({"apiVersion": "fleet.example.com/v1", "kind": "Secret",
                            "metadata": {"name": format!("wf-few-{n}")}, "data": {"blob": blob}});
        ok(client.post(format!("{}{secrets}", server.url())).json(&secret).send().await.unwrap()).await;
    }
    let written_at = Instant::now();
    // Reading would unstick a watcher, so the check waits out the timeout and the second it may
    // take to be noticed (and a second more for a busy machine) before it reads.
    tokio::time::sleep_until((written_at + stall + Duration::from_secs(2)).into()).await;
    for (n, stream) in stuck.iter_mut().enumerate() {
        assert!(
            closed_by_server(stream, Duration::from_secs(5)).await,
            "stuck watcher {n} is still connected {:?} after the last of a few writes",
            written_at.elapsed()
        );
    }
}
