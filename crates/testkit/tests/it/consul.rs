//! The fleet in Consul's shape, over real HTTP: what Traefik and py-consul read, blocking
//! queries that wake on what they read and only on it, tokens and RBAC, and Consul's errors.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use kayra_testkit::{Store, TestServer};
use reqwest::StatusCode;
use serde_json::{Value, json};

const FLEET: &str = "/apis/fleet.example.com/v1";

fn free_port() -> SocketAddr {
    std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a free port")
}

async fn admin(server: &TestServer, method: reqwest::Method, path: &str, body: Value) -> Value {
    let response =
        server.admin().request(method, format!("{}{path}", server.url())).json(&body).send().await.unwrap();
    let code = response.status();
    let answer: Value = response.json().await.unwrap_or(Value::Null);
    assert!(code.is_success(), "{path}: {code} {answer}");
    answer
}

fn now() -> String {
    jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// A Node with an address, Ready.
async fn node(server: &TestServer, name: &str, address: &str) {
    admin(
        server,
        reqwest::Method::POST,
        "/api/v1/nodes",
        json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}}),
    )
    .await;
    node_status(server, name, address, "ready").await;
}

async fn node_status(server: &TestServer, name: &str, address: &str, note: &str) {
    let mut node = admin(server, reqwest::Method::GET, &format!("/api/v1/nodes/{name}"), Value::Null).await;
    node["status"] = json!({
        "addresses": [{"type": "InternalIP", "address": address}],
        "conditions": [{"type": "Ready", "status": "True", "reason": "KayraAgentReady", "message": note,
                        "lastHeartbeatTime": now(), "lastTransitionTime": now()}],
    });
    admin(server, reqwest::Method::PUT, &format!("/api/v1/nodes/{name}/status"), node).await;
}

async fn member(server: &TestServer, namespace: &str, name: &str, service: &str, node: &str, ready: &str) {
    let path = format!("{FLEET}/namespaces/{namespace}/applications");
    let application = json!({"apiVersion": "fleet.example.com/v1", "kind": "Application", "metadata": {"name": name},
        "spec": {"command": ["/bin/sleep", "1000"], "serviceName": service, "placement": {"nodeName": node},
                 "ports": [{"name": "http", "port": 8080}]}});
    admin(server, reqwest::Method::POST, &path, application).await;
    set_ready(server, namespace, name, ready).await;
}

async fn set_ready(server: &TestServer, namespace: &str, name: &str, ready: &str) {
    let path = format!("{FLEET}/namespaces/{namespace}/applications/{name}");
    let mut application = admin(server, reqwest::Method::GET, &path, Value::Null).await;
    application["status"] = json!({"phase": "Running", "conditions": [
        {"type": "Ready", "status": ready, "reason": "Probed", "lastTransitionTime": now()}]});
    admin(server, reqwest::Method::PUT, &format!("{path}/status"), application).await;
}

async fn service(server: &TestServer, namespace: &str, name: &str, tags: &[&str]) {
    let path = format!("{FLEET}/namespaces/{namespace}/services");
    let service = json!({"apiVersion": "fleet.example.com/v1", "kind": "Service", "metadata": {"name": name},
        "spec": {"ports": [{"name": "http", "port": 80, "targetName": "http"}], "tags": tags, "meta": {"version": "1"}}});
    admin(server, reqwest::Method::POST, &path, service).await;
}

struct Consul {
    base: String,
    token: String,
    http: reqwest::Client,
}

impl Consul {
    async fn get(&self, path: &str) -> (StatusCode, reqwest::header::HeaderMap, String) {
        let response = self
            .http
            .get(format!("{}{path}", self.base))
            .header("X-Consul-Token", &self.token)
            .send()
            .await
            .unwrap();
        let (code, headers) = (response.status(), response.headers().clone());
        (code, headers, response.text().await.unwrap())
    }

    async fn json(&self, path: &str) -> (u64, Value) {
        let (code, headers, body) = self.get(path).await;
        assert_eq!(code, StatusCode::OK, "{path}: {body}");
        let index = headers["x-consul-index"].to_str().unwrap().parse().unwrap();
        assert!(index >= 1);
        (index, serde_json::from_str(&body).unwrap())
    }

    /// Waits until the projection serves what `ready` accepts.
    async fn until(&self, path: &str, ready: impl Fn(&Value) -> bool) -> (u64, Value) {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let (index, body) = self.json(path).await;
            if ready(&body) {
                return (index, body);
            }
            assert!(Instant::now() < deadline, "{path} never served what was wanted: {body}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

async fn fleet() -> (TestServer, Consul) {
    let address = free_port();
    let server = TestServer::start_with(Store::Memory, |config| config.consul_listen = Some(address)).await;
    node(&server, "node-a", "10.0.0.11").await;
    service(
        &server,
        "default",
        "web",
        &["traefik.enable=true", "traefik.http.routers.web.rule=Host(`web.example.com`)"],
    )
    .await;
    member(&server, "default", "web-1", "web", "node-a", "True").await;
    member(&server, "default", "web-2", "web", "node-a", "False").await;
    admin(
        &server,
        reqwest::Method::POST,
        "/api/v1/namespaces",
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}}),
    )
    .await;
    service(&server, "team-a", "api", &[]).await;
    member(&server, "team-a", "api-1", "api", "node-a", "True").await;
    let consul = Consul {
        base: format!("http://{address}"),
        token: server.admin_token(),
        http: reqwest::Client::new(),
    };
    consul.until("/v1/health/service/web", |body| body.as_array().is_some_and(|a| a.len() == 2)).await;
    (server, consul)
}

#[tokio::test]
async fn services_members_and_checks_read_as_consul_clients_read_them() {
    let (_server, consul) = fleet().await;
    let (_, services) = consul.json("/v1/catalog/services").await;
    assert_eq!(
        services["web"],
        json!(["traefik.enable=true", "traefik.http.routers.web.rule=Host(`web.example.com`)"])
    );
    assert!(services.get("api").is_none(), "another namespace's Service: {services}");
    let (_, headers, _) = consul.get("/v1/catalog/services").await;
    for name in ["x-consul-index", "x-consul-knownleader", "x-consul-lastcontact"] {
        assert!(headers.contains_key(name), "{name}");
    }
    let (_, entries) = consul.json("/v1/health/service/web").await;
    let ids: Vec<&str> =
        entries.as_array().unwrap().iter().map(|e| e["Service"]["ID"].as_str().unwrap()).collect();
    assert_eq!(ids, ["web-1", "web-2"]);
    let first = &entries[0];
    assert_eq!(
        (first["Service"]["Port"].clone(), first["Service"]["Address"].clone()),
        (json!(8080), json!("10.0.0.11"))
    );
    assert_eq!(first["Node"]["Datacenter"], "dc1");
    let statuses: Vec<&str> =
        entries.as_array().unwrap().iter().map(|e| e["Checks"][1]["Status"].as_str().unwrap()).collect();
    assert_eq!(statuses, ["passing", "critical"]);
    let (_, passing) = consul.json("/v1/health/service/web?passing=1").await;
    assert_eq!(passing.as_array().unwrap().len(), 1);
    let (_, tagged) = consul.json("/v1/health/service/web?tag=traefik.enable%3Dtrue").await;
    assert_eq!(tagged.as_array().unwrap().len(), 2);
    assert_eq!(consul.json("/v1/health/service/web?tag=nope").await.1, json!([]));
    assert_eq!(consul.json("/v1/health/service/does-not-exist").await.1, json!([]));
    let (_, rows) = consul.json("/v1/catalog/service/web").await;
    for field in [
        "ID",
        "Node",
        "Address",
        "Datacenter",
        "ServiceID",
        "ServiceName",
        "ServiceTags",
        "ServiceAddress",
        "ServicePort",
        "ServiceMeta",
        "Namespace",
    ] {
        assert!(rows[0].get(field).is_some(), "{field} in {}", rows[0]);
    }
    assert_eq!(rows[0]["ServiceMeta"], json!({"version": "1"}));
    let (_, critical) = consul.json("/v1/health/state/critical").await;
    assert!(critical.as_array().unwrap().iter().any(|c| c["CheckID"] == "service:web-2"), "{critical}");
    let (_, nodes) = consul.json("/v1/catalog/nodes").await;
    assert_eq!(nodes[0]["Node"], "node-a");
    assert_eq!(consul.json("/v1/catalog/node/nope").await.1, Value::Null);
    // Namespaces: the query parameter and the header read the same.
    let (_, team) = consul.json("/v1/catalog/services?ns=team-a").await;
    assert!(team.get("api").is_some() && team.get("web").is_none(), "{team}");
    let by_header = consul
        .http
        .get(format!("{}/v1/catalog/services", consul.base))
        .header("X-Consul-Token", &consul.token)
        .header("X-Consul-Namespace", "team-a")
        .send()
        .await
        .unwrap();
    assert_eq!(by_header.json::<Value>().await.unwrap(), team);
    // What Consul serves without a token.
    let anonymous = reqwest::Client::new();
    for (path, expected) in [
        ("/v1/catalog/datacenters", json!(["dc1"])),
        ("/v1/status/peers", json!([consul.base.trim_start_matches("http://")])),
    ] {
        let answer: Value =
            anonymous.get(format!("{}{path}", consul.base)).send().await.unwrap().json().await.unwrap();
        assert_eq!(answer, expected, "{path}");
    }
}

#[tokio::test]
async fn tokens_rbac_and_bad_input_answer_as_consul_does() {
    let (server, consul) = fleet().await;
    let plain = |token: Option<&str>, path: &str| {
        let mut request = reqwest::Client::new().get(format!("{}{path}", consul.base));
        if let Some(token) = token {
            request = request.header("X-Consul-Token", token);
        }
        async move {
            let response = request.send().await.unwrap();
            (response.status(), response.text().await.unwrap())
        }
    };
    assert_eq!(
        plain(Some("wrong"), "/v1/catalog/services").await,
        (StatusCode::FORBIDDEN, "ACL not found".into())
    );
    assert_eq!(plain(None, "/v1/catalog/services").await.0, StatusCode::FORBIDDEN);
    let bearer =
        reqwest::Client::new().get(format!("{}/v1/catalog/services", consul.base)).bearer_auth(&consul.token);
    assert_eq!(bearer.send().await.unwrap().status(), StatusCode::OK);
    let query = format!("/v1/catalog/services?token={}", consul.token);
    assert_eq!(plain(None, &query).await.0, StatusCode::OK);
    // A token whose RBAC shows nothing: the lists are filtered, and say so.
    server.add_token("limited-token", "limited", "");
    let filtered = reqwest::Client::new()
        .get(format!("{}/v1/catalog/services", consul.base))
        .header("X-Consul-Token", "limited-token")
        .send()
        .await
        .unwrap();
    assert_eq!(filtered.status(), StatusCode::OK);
    assert_eq!(filtered.headers()["x-consul-results-filtered-by-acls"], "true");
    assert_eq!(filtered.json::<Value>().await.unwrap(), json!({}));
    for (path, code, text) in [
        ("/v1/catalog/services?dc=dc9", StatusCode::INTERNAL_SERVER_ERROR, "No path to datacenter"),
        ("/v1/catalog/services?index=abc", StatusCode::BAD_REQUEST, "Bad request: Invalid index \"abc\""),
        ("/v1/catalog/services?wait=soon", StatusCode::BAD_REQUEST, "Bad request: Invalid wait time"),
        ("/v1/health/service/", StatusCode::BAD_REQUEST, "Missing service name"),
        (
            "/v1/health/service/web?filter=Service.ID%3D%3D%22x%22",
            StatusCode::BAD_REQUEST,
            "Bad request: filter not supported",
        ),
        ("/v1/kv/anything", StatusCode::NOT_FOUND, "404 page not found"),
    ] {
        assert_eq!(consul.get(path).await.0, code, "{path}");
        assert_eq!(consul.get(path).await.2, text, "{path}");
    }
    let huge = format!("/v1/health/service/web?filter={}", "a".repeat(20_000));
    assert_eq!(consul.get(&huge).await.0, StatusCode::BAD_REQUEST);
    let put = reqwest::Client::new()
        .put(format!("{}/v1/catalog/register", consul.base))
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(put.status(), StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(put.text().await.unwrap(), "method PUT not allowed");
}

#[tokio::test]
async fn a_held_query_wakes_on_what_it_reads_and_only_on_it() {
    let (server, consul) = fleet().await;
    // The timeout path: the same index, after the wait.
    let (index, _) = consul.json("/v1/catalog/services").await;
    let started = Instant::now();
    let (again, _) = consul.json(&format!("/v1/catalog/services?index={index}&wait=1s")).await;
    let held = started.elapsed();
    assert!(held >= Duration::from_secs(1) && held < Duration::from_millis(1600), "{held:?}");
    assert_eq!(again, index);
    // Traefik's two held queries, and a heartbeat-like Node status write that changes nothing served.
    let (services_index, _) = consul.json("/v1/catalog/services").await;
    let (state_index, _) = consul.json("/v1/health/state/any").await;
    let (health_index, _) = consul.json("/v1/health/service/web").await;
    let held = |path: String| {
        let consul =
            Consul { base: consul.base.clone(), token: consul.token.clone(), http: consul.http.clone() };
        tokio::spawn(async move {
            let started = Instant::now();
            let (index, body) = consul.json(&path).await;
            (started, Instant::now(), index, body)
        })
    };
    let state = held(format!("/v1/health/state/any?index={state_index}&wait=120s"));
    let health = held(format!("/v1/health/service/web?index={health_index}&wait=120s"));
    let services = held(format!("/v1/catalog/services?index={services_index}&wait=5s"));
    // Traefik's pattern: a fleet's heartbeats wake neither of its held queries. The readiness
    // change below comes after every heartbeat, so each held query's answer must be the one that
    // change caused (web-2 passing), not an earlier one a heartbeat caused.
    for beat in 0..100 {
        node_status(&server, "node-a", "10.0.0.11", &format!("heartbeat {beat}")).await;
    }
    let changed = Instant::now();
    set_ready(&server, "default", "web-2", "True").await;
    let (_, answered, index, body) = health.await.unwrap();
    let waited = answered.duration_since(changed);
    assert!(waited < Duration::from_secs(10) && index > health_index, "{waited:?} {index}");
    let statuses: Vec<&str> =
        body.as_array().unwrap().iter().map(|e| e["Checks"][1]["Status"].as_str().unwrap()).collect();
    assert_eq!(statuses, ["passing", "passing"], "a heartbeat woke the held health query: {body}");
    let (_, _, index, body) = state.await.unwrap();
    assert!(index > state_index);
    let web_2 = body.as_array().unwrap().iter().find(|check| check["CheckID"] == "service:web-2");
    assert_eq!(
        web_2.map(|check| &check["Status"]),
        Some(&json!("passing")),
        "a heartbeat woke the held state query: {body}"
    );
    // Woken once: held again at the index it answered, it waits out its wait.
    let (_, _, again, _) = held(format!("/v1/health/state/any?index={index}&wait=1s")).await.unwrap();
    assert_eq!(again, index, "one readiness change is one answer");
    // Readiness changes no Service name or tag: the catalog's held query runs out its wait.
    let (started, answered, index, _) = services.await.unwrap();
    let waited = answered.duration_since(started);
    assert!(waited >= Duration::from_secs(5), "{waited:?}");
    assert_eq!(index, services_index);
}

#[tokio::test]
async fn beyond_loopback_the_projection_speaks_only_tls() {
    let port = free_port().port();
    let everywhere = SocketAddr::from(([0, 0, 0, 0], port));
    let server =
        TestServer::start_with(Store::Memory, |config| config.consul_listen = Some(everywhere)).await;
    let client = server.token_builder(&server.admin_token()).build().unwrap();
    let url = format!("https://127.0.0.1:{port}/v1/status/leader");
    let deadline = Instant::now() + Duration::from_secs(10);
    let leader = loop {
        match client.get(&url).send().await {
            Ok(response) => break response,
            Err(error) if error.is_connect() && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(error) => panic!("TLS with the serving certificate: {error:?}"),
        }
    };
    assert_eq!(leader.status(), StatusCode::OK);
    let plain = reqwest::Client::new().get(format!("http://127.0.0.1:{port}/v1/status/leader")).send().await;
    assert!(plain.is_err() || !plain.unwrap().status().is_success(), "plain HTTP beyond loopback");
}

#[tokio::test]
async fn an_empty_fleet_is_served_too() {
    let address = free_port();
    let server = TestServer::start_with(Store::Memory, |config| config.consul_listen = Some(address)).await;
    let consul = Consul {
        base: format!("http://{address}"),
        token: server.admin_token(),
        http: reqwest::Client::new(),
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let url = format!("{}/v1/catalog/services", consul.base);
        let answer = consul.http.get(url).header("X-Consul-Token", &consul.token).send().await;
        if let Ok(response) = answer
            && response.status() == StatusCode::OK
        {
            assert!(response.headers()["x-consul-index"].to_str().unwrap().parse::<u64>().unwrap() >= 1);
            assert_eq!(response.json::<Value>().await.unwrap(), json!({}));
            break;
        }
        assert!(Instant::now() < deadline, "an empty fleet was never served");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(consul.json("/v1/catalog/nodes").await.1, json!([]));
}
