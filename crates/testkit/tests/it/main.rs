//! End-to-end tests of the assembled server over real TLS and HTTP.

use std::time::Duration;

use kayra_testkit::{Store, TestServer};
use reqwest::StatusCode;
use serde_json::{Value, json};

mod apply;
mod catalog;
mod check;
mod consul;
mod history;
mod identity;
mod in_cluster;
mod leases;
mod metrics;
mod node_lease_gc;
mod node_logs_gate;
mod nodes;
mod placement;
mod prometheus;
mod rbac_table;
mod scale;
mod security;
mod surface;
mod usage;
mod watching;

const APPS: &str = "/apis/fleet.example.com/v1/namespaces/default/applications";

fn app(name: &str) -> Value {
    json!({"apiVersion": "fleet.example.com/v1", "kind": "Application", "metadata": {"name": name, "labels": {"tier": "web"}},
           "spec": {"command": ["/bin/sleep", "100"]}})
}

async fn status_of(response: reqwest::Response) -> (StatusCode, Value) {
    let code = response.status();
    (code, response.json().await.unwrap_or(Value::Null))
}

#[tokio::test]
async fn discovery_negotiates_aggregated_v2_v2beta1_and_legacy() {
    let server = TestServer::start(Store::Memory).await;
    let client = server.admin();
    for version in ["v2", "v2beta1"] {
        let accept = format!(
            "application/json;g=apidiscovery.k8s.io;v={version};as=APIGroupDiscoveryList,application/json"
        );
        for path in ["/api", "/apis"] {
            let response =
                client.get(format!("{}{path}", server.url())).header("Accept", &accept).send().await.unwrap();
            assert_eq!(response.status(), StatusCode::OK);
            let content_type = response.headers()["content-type"].to_str().unwrap().to_owned();
            for param in ["g=apidiscovery.k8s.io", &format!("v={version}"), "as=APIGroupDiscoveryList"] {
                assert!(content_type.contains(param), "{path}: {content_type}");
            }
            let body: Value = response.json().await.unwrap();
            assert_eq!(body["apiVersion"], format!("apidiscovery.k8s.io/{version}"));
            for group in body["items"].as_array().unwrap() {
                for gv in group["versions"].as_array().unwrap() {
                    for resource in gv["resources"].as_array().unwrap() {
                        assert!(
                            resource["responseKind"]["kind"].as_str().is_some_and(|k| !k.is_empty()),
                            "{resource}"
                        );
                        assert!(matches!(resource["scope"].as_str(), Some("Namespaced" | "Cluster")));
                    }
                }
            }
        }
    }
    let legacy = |path: &'static str| {
        client.get(format!("{}{path}", server.url())).header("Accept", "application/json").send()
    };
    assert_eq!(legacy("/apis").await.unwrap().json::<Value>().await.unwrap()["kind"], "APIGroupList");
    assert_eq!(legacy("/api").await.unwrap().json::<Value>().await.unwrap()["kind"], "APIVersions");
    assert_eq!(legacy("/api/v1").await.unwrap().json::<Value>().await.unwrap()["kind"], "APIResourceList");
    let openapi: Value = legacy("/openapi/v3").await.unwrap().json().await.unwrap();
    let url = openapi["paths"]["apis/fleet.example.com/v1"]["serverRelativeURL"].as_str().unwrap().to_owned();
    let document: Value =
        client.get(format!("{}{url}", server.url())).send().await.unwrap().json().await.unwrap();
    let patch =
        &document["paths"]["/apis/fleet.example.com/v1/namespaces/{namespace}/applications/{name}"]["patch"];
    assert!(patch["parameters"].as_array().unwrap().iter().any(|p| p["name"] == "fieldValidation"));
    assert!(patch["requestBody"]["content"].get("application/strategic-merge-patch+json").is_none());
}

#[tokio::test]
async fn errors_are_statuses_with_the_kubernetes_reason() {
    let server = TestServer::start(Store::Memory).await;
    let (admin, anonymous) = (server.admin(), server.anonymous());
    let url = server.url();

    let (code, body) = status_of(anonymous.get(format!("{url}{APPS}")).send().await.unwrap()).await;
    assert_eq!((code, body["reason"].as_str()), (StatusCode::UNAUTHORIZED, Some("Unauthorized")));
    let (code, body) = status_of(anonymous.get(format!("{url}/nope")).send().await.unwrap()).await;
    assert_eq!(
        (code, body["kind"].as_str()),
        (StatusCode::UNAUTHORIZED, Some("Status")),
        "unknown paths are 401 to strangers"
    );
    let (code, body) = status_of(admin.get(format!("{url}/nope")).send().await.unwrap()).await;
    assert_eq!(
        (code, body["message"].as_str()),
        (StatusCode::NOT_FOUND, Some("the server could not find the requested resource"))
    );
    let (code, _) =
        status_of(anonymous.get(format!("{url}/api/v1/namespaces/a%2Fb/events")).send().await.unwrap()).await;
    assert_eq!(code, StatusCode::BAD_REQUEST, "non-canonical paths are refused before anything else");

    admin.post(format!("{url}{APPS}")).json(&app("a")).send().await.unwrap();
    let (code, body) =
        status_of(admin.post(format!("{url}{APPS}")).json(&app("a")).send().await.unwrap()).await;
    assert_eq!(
        (code, body["reason"].as_str(), body["details"]["kind"].as_str()),
        (StatusCode::CONFLICT, Some("AlreadyExists"), Some("applications"))
    );
    let mut invalid = app("neg");
    invalid["spec"]["command"] = json!([]);
    let (code, body) =
        status_of(admin.post(format!("{url}{APPS}")).json(&invalid).send().await.unwrap()).await;
    assert_eq!((code, body["reason"].as_str()), (StatusCode::UNPROCESSABLE_ENTITY, Some("Invalid")));
    assert_eq!(body["details"]["causes"][0]["field"], "spec.command");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .starts_with("Application.fleet.example.com \"neg\" is invalid: spec.command")
    );

    let smp = admin
        .patch(format!("{url}{APPS}/a"))
        .header("Content-Type", "application/strategic-merge-patch+json")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(status_of(smp).await.0, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    let yaml = admin.get(format!("{url}{APPS}")).header("Accept", "application/yaml").send().await.unwrap();
    assert_eq!(status_of(yaml).await.0, StatusCode::NOT_ACCEPTABLE);
    let huge = json!({"kind": "Application", "metadata": {"name": "huge"}, "spec": {"command": ["x".repeat(4 * 1024 * 1024)]}});
    let (code, body) = status_of(admin.post(format!("{url}{APPS}")).json(&huge).send().await.unwrap()).await;
    assert_eq!((code, body["kind"].as_str()), (StatusCode::PAYLOAD_TOO_LARGE, Some("Status")));
    let big = json!({"kind": "Application", "metadata": {"name": "big"}, "spec": {"command": ["x".repeat(2 * 1024 * 1024)]}});
    let (code, body) = status_of(admin.post(format!("{url}{APPS}")).json(&big).send().await.unwrap()).await;
    assert_eq!(
        (code, body["reason"].as_str()),
        (StatusCode::PAYLOAD_TOO_LARGE, Some("RequestEntityTooLarge")),
        "over the store's limit"
    );
    let future = admin
        .get(format!("{url}{APPS}?resourceVersion=999999&resourceVersionMatch=Exact"))
        .send()
        .await
        .unwrap();
    assert_eq!(
        status_of(future).await.0,
        StatusCode::GATEWAY_TIMEOUT,
        "a future revision is not a server error"
    );
    let (code, _) = status_of(
        admin.get(format!("{url}{APPS}?fieldSelector=metadata.name%3D%C3%A9")).send().await.unwrap(),
    )
    .await;
    assert_eq!(code, StatusCode::OK, "non-ASCII selectors are fine");
    let collection_delete =
        admin.delete(format!("{url}/api/v1/namespaces/default/pods")).send().await.unwrap();
    assert_eq!(
        status_of(collection_delete).await.0,
        StatusCode::METHOD_NOT_ALLOWED,
        "pods are a read-only view"
    );
    let not_json = admin
        .post(format!("{url}{APPS}"))
        .header("Content-Type", "application/json")
        .body("{nope")
        .send()
        .await
        .unwrap();
    assert_eq!(status_of(not_json).await.0, StatusCode::BAD_REQUEST);
}

/// Retries `request` until it answers `expected` (the RBAC index follows changes within a
/// moment), and answers the last status.
async fn eventually(expected: StatusCode, request: impl Fn() -> reqwest::RequestBuilder) -> StatusCode {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let status = request().send().await.unwrap().status();
        if status == expected || std::time::Instant::now() > deadline {
            return status;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn rbac_decides_every_request() {
    let server = TestServer::start(Store::Memory).await;
    server.add_token("alice-token", "alice", "dev");
    let (admin, client, url) = (server.admin(), server.anonymous(), server.url());
    let as_alice = |request: reqwest::RequestBuilder| request.header("Authorization", "Bearer alice-token");
    let (code, body) = status_of(as_alice(client.get(format!("{url}{APPS}/x"))).send().await.unwrap()).await;
    assert_eq!(code, StatusCode::FORBIDDEN);
    assert_eq!(
        body["message"],
        "applications.fleet.example.com \"x\" is forbidden: User \"alice\" cannot get resource \"applications\" in API group \"fleet.example.com\" in the namespace \"default\""
    );
    let discovery = eventually(StatusCode::OK, || as_alice(client.get(format!("{url}/apis")))).await;
    assert_eq!(discovery, StatusCode::OK, "system:discovery is bound to every authenticated caller");

    let namespace = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-b"}});
    admin.post(format!("{url}/api/v1/namespaces")).json(&namespace).send().await.unwrap();
    let binding = json!({"apiVersion": "authorization.example.com/v1", "kind": "RoleBinding", "metadata": {"name": "alice-edits"},
                         "subjects": [{"kind": "User", "name": "alice"}], "roleRef": {"kind": "ClusterRole", "name": "edit"}});
    let bindings = format!("{url}/apis/authorization.example.com/v1/namespaces/default/rolebindings");
    assert_eq!(admin.post(&bindings).json(&binding).send().await.unwrap().status(), StatusCode::CREATED);
    let created =
        eventually(StatusCode::CREATED, || as_alice(client.post(format!("{url}{APPS}")).json(&app("mine"))))
            .await;
    assert_eq!(created, StatusCode::CREATED, "edit in default lets alice create there");
    let elsewhere =
        as_alice(client.get(format!("{url}/apis/fleet.example.com/v1/namespaces/team-b/applications")))
            .send()
            .await
            .unwrap();
    assert_eq!(elsewhere.status(), StatusCode::FORBIDDEN, "and nowhere else");
    let cluster_wide =
        as_alice(client.get(format!("{url}/apis/fleet.example.com/v1/applications"))).send().await.unwrap();
    assert_eq!(cluster_wide.status(), StatusCode::FORBIDDEN, "a namespaced grant is not a cluster-wide one");
    let rbac_write = json!({"apiVersion": "authorization.example.com/v1", "kind": "RoleBinding", "metadata": {"name": "sneaky"},
                            "subjects": [{"kind": "User", "name": "alice"}], "roleRef": {"kind": "ClusterRole", "name": "cluster-admin"}});
    let sneaky = as_alice(client.post(&bindings).json(&rbac_write)).send().await.unwrap();
    assert_eq!(sneaky.status(), StatusCode::FORBIDDEN, "edit grants no RBAC writes");

    let view = json!({"apiVersion": "authorization.example.com/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "dev-views"},
                      "subjects": [{"kind": "Group", "name": "dev"}], "roleRef": {"kind": "ClusterRole", "name": "view"}});
    admin
        .post(format!("{url}/apis/authorization.example.com/v1/clusterrolebindings"))
        .json(&view)
        .send()
        .await
        .unwrap();
    let listed = eventually(StatusCode::OK, || {
        as_alice(client.get(format!("{url}/apis/fleet.example.com/v1/applications")))
    })
    .await;
    assert_eq!(listed, StatusCode::OK, "a cluster-wide view through the group");

    admin.delete(format!("{bindings}/alice-edits")).send().await.unwrap();
    let revoked = eventually(StatusCode::FORBIDDEN, || {
        as_alice(client.post(format!("{url}{APPS}")).json(&app("more")))
    })
    .await;
    assert_eq!(revoked, StatusCode::FORBIDDEN, "removing the binding removes the grant");
    let over_http = server
        .anonymous()
        .get(format!("{}{APPS}", server.http_url()))
        .bearer_auth(server.admin_token())
        .send()
        .await
        .unwrap();
    assert_eq!(over_http.status(), StatusCode::OK);
}

#[tokio::test]
async fn tables_print_columns_and_partial_metadata() {
    let server = TestServer::start(Store::Memory).await;
    let client = server.admin();
    client.post(format!("{}{APPS}", server.url())).json(&app("t")).send().await.unwrap();
    let table: Value = client
        .get(format!("{}{APPS}?limit=500", server.url()))
        .header("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io,application/json")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        (table["kind"].as_str(), table["apiVersion"].as_str()),
        (Some("Table"), Some("meta.k8s.io/v1"))
    );
    let names: Vec<&str> =
        table["columnDefinitions"].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["Name", "Phase", "Node", "Restarts", "Command", "Address", "Age"]);
    assert_eq!(table["columnDefinitions"][4]["priority"], 1, "wide columns have priority 1");
    let row = &table["rows"][0];
    assert_eq!(row["cells"][0], "t");
    assert_eq!(row["object"]["kind"], "PartialObjectMetadata");
    assert_eq!(row["object"]["metadata"]["labels"]["tier"], "web");
    let one: Value = client
        .get(format!("{}{APPS}/t?includeObject=Object", server.url()))
        .header("Accept", "application/json;as=Table;v=v1beta1;g=meta.k8s.io")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        (one["apiVersion"].as_str(), one["rows"][0]["object"]["kind"].as_str()),
        (Some("meta.k8s.io/v1beta1"), Some("Application"))
    );
}

#[tokio::test]
async fn watches_stream_events_and_end_when_asked() {
    let server = TestServer::start(Store::Memory).await;
    let client = server.admin();
    client.post(format!("{}{APPS}", server.url())).json(&app("w")).send().await.unwrap();
    // The server counts the timeout from the request, before its headers can arrive here.
    let started = std::time::Instant::now();
    let response = client
        .get(format!("{}{APPS}?watch=true&timeoutSeconds=2", server.url()))
        .header("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
        .send()
        .await
        .unwrap();
    assert_eq!(response.version(), reqwest::Version::HTTP_2, "h2 is negotiated by ALPN");
    let body = tokio::time::timeout(Duration::from_secs(10), response.bytes())
        .await
        .expect("the watch ends by itself")
        .unwrap();
    assert!(started.elapsed() >= Duration::from_secs(2));
    let events: Vec<Value> = body
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_slice(l).unwrap())
        .collect();
    assert_eq!(events[0]["type"], "ADDED");
    assert_eq!(events[0]["object"]["kind"], "Table");
    assert!(!events[0]["object"]["columnDefinitions"].as_array().unwrap().is_empty());

    let list: Value =
        client.get(format!("{}{APPS}", server.url())).send().await.unwrap().json().await.unwrap();
    let rv = list["metadata"]["resourceVersion"].as_str().unwrap().to_owned();
    let mut response =
        client.get(format!("{}{APPS}?watch=1&resourceVersion={rv}", server.url())).send().await.unwrap();
    client.post(format!("{}{APPS}", server.url())).json(&app("w2")).send().await.unwrap();
    let mut seen = String::new();
    while !seen.contains("\"w2\"") {
        let chunk = tokio::time::timeout(Duration::from_secs(10), response.chunk())
            .await
            .expect("an event")
            .unwrap()
            .unwrap();
        seen.push_str(&String::from_utf8_lossy(&chunk));
    }
    assert!(seen.contains("\"type\":\"ADDED\""));

    let gone = client.get(format!("{}{APPS}?watch=1&resourceVersion=1", server.url())).send().await.unwrap();
    let text = gone.text().await.unwrap();
    assert!(
        text.contains("\"type\":\"ERROR\"") && text.contains("\"code\":410"),
        "history older than the cache is gone: {text}"
    );
}

#[tokio::test]
async fn state_survives_a_restart_on_sled() {
    let mut server = TestServer::start(Store::Sled).await;
    // Pinned, so that no placement writes its status between the create and the restart.
    let mut kept = app("kept");
    kept["spec"]["placement"] = json!({"nodeName": "n1"});
    let node = server
        .admin()
        .post(format!("{}/api/v1/nodes", server.url()))
        .json(&json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}}))
        .send()
        .await
        .unwrap();
    assert_eq!(node.status(), reqwest::StatusCode::CREATED, "a pin names a Node that exists");
    let created: Value = server
        .admin()
        .post(format!("{}{APPS}", server.url()))
        .json(&kept)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(created["kind"], "Application", "{created}");
    server.restart().await;
    let read: Value = server
        .admin()
        .get(format!("{}{APPS}/kept", server.url()))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(read["metadata"]["uid"], created["metadata"]["uid"]);
    assert_eq!(read["metadata"]["resourceVersion"], created["metadata"]["resourceVersion"]);
    let namespaces: Value = server
        .admin()
        .get(format!("{}/api/v1/namespaces", server.url()))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let names: Vec<&str> = namespaces["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["default", "kayra-system", "kube-node-lease"],
        "the built-in namespaces are created once"
    );
}

/// A TCP forwarder to `target` on loopback: answers its port and the number of connections it
/// has accepted so far.
async fn counting_forwarder(target: u16) -> (u16, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let accepted = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = accepted.clone();
    tokio::spawn(async move {
        while let Ok((mut inbound, _)) = listener.accept().await {
            counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            tokio::spawn(async move {
                let Ok(mut outbound) = tokio::net::TcpStream::connect(("127.0.0.1", target)).await else {
                    return;
                };
                let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
            });
        }
    });
    (port, accepted)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_requests_share_one_http2_connection() {
    let server = TestServer::start(Store::Memory).await;
    let https_port: u16 = server.url().rsplit(':').next().unwrap().parse().unwrap();
    let (port, accepted) = counting_forwarder(https_port).await;
    let base = format!("https://127.0.0.1:{port}");
    let client = server.admin();
    // The first request opens the connection (and learns through ALPN that it speaks HTTP/2);
    // every request after it, however concurrent, is a stream on that connection.
    let first = client.get(format!("{base}/version")).send().await.unwrap();
    assert_eq!(first.version(), reqwest::Version::HTTP_2);
    first.bytes().await.unwrap();
    let creates: Vec<_> = (0..64)
        .map(|t| {
            let (client, url) = (client.clone(), format!("{base}{APPS}"));
            tokio::spawn(async move {
                for i in 0..40 {
                    let response = client.post(&url).json(&app(&format!("c-{t}-{i}"))).send().await;
                    let response = response.unwrap_or_else(|e| panic!("create {t}/{i}: {e:?}"));
                    assert_eq!(response.status(), StatusCode::CREATED);
                }
            })
        })
        .collect();
    for task in creates {
        task.await.unwrap();
    }
    for path in ["/version", "/api/v1/namespaces/default"] {
        let tasks: Vec<_> = (0..64)
            .map(|_| {
                let (client, url) = (client.clone(), format!("{base}{path}"));
                tokio::spawn(async move {
                    for i in 0..200 {
                        let response = client.get(&url).send().await;
                        let response = response.unwrap_or_else(|e| panic!("{url} request {i}: {e:?}"));
                        assert_eq!(response.version(), reqwest::Version::HTTP_2);
                        response.bytes().await.unwrap();
                    }
                })
            })
            .collect();
        for task in tasks {
            task.await.unwrap();
        }
    }
    assert_eq!(
        accepted.load(std::sync::atomic::Ordering::SeqCst),
        1,
        "1 + 64 × 40 + 2 × 64 × 200 requests travel on one connection"
    );
}
