//! The catalog end to end: Kayra (in-process, sled), a real nginx as the team's gateway, and
//! this example app behind it. Registrations, subscriptions in several namespaces, a sync, a
//! canary and its release, a broken document, a failing step, a controller restart mid-rollout,
//! and the app's own RBAC through Kayra's `/check`.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use kayra_catalog::steps::{Mode, ReconcilerConfig, Step};
use kayra_testkit::{Store, TestServer};
use serde_json::{Value, json};

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A process stopped when dropped: asked with SIGTERM, so that a server with workers (nginx)
/// stops them too, then killed if it has not ended within five seconds.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = Command::new("kill").args(["-TERM", &self.0.id().to_string()]).status();
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.0.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn wait_for_port(port: u16) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "nothing listens on {port}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// nginx routing `/apis/compute.example.com/` to the app, in a directory of its own.
fn nginx(dir: &std::path::Path, port: u16, app: u16) -> Option<Running> {
    let binary = ["/usr/sbin/nginx", "/usr/bin/nginx"].into_iter().find(|p| std::path::Path::new(p).exists());
    let Some(binary) = binary else {
        kayra_store_etcd::test_server::skip_test("nginx is not installed");
        return None;
    };
    let config = format!(
        "daemon off;\nworker_processes 1;\npid {dir}/nginx.pid;\nerror_log {dir}/error.log;\nevents {{ worker_connections 256; }}\nhttp {{\n  access_log {dir}/access.log;\n  client_body_temp_path {dir}/body;\n  proxy_temp_path {dir}/proxy;\n  fastcgi_temp_path {dir}/fastcgi;\n  uwsgi_temp_path {dir}/uwsgi;\n  scgi_temp_path {dir}/scgi;\n  server {{\n    listen 127.0.0.1:{port};\n    location /apis/compute.example.com/ {{ proxy_pass http://127.0.0.1:{app}; proxy_set_header Authorization $http_authorization; }}\n    location / {{ return 404; }}\n  }}\n}}\n",
        dir = dir.display()
    );
    let path = dir.join("nginx.conf");
    std::fs::write(&path, config).unwrap();
    let child = Command::new(binary)
        .arg("-c")
        .arg(&path)
        .arg("-p")
        .arg(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("nginx starts");
    wait_for_port(port);
    Some(Running(child))
}

struct World {
    server: TestServer,
    http: reqwest::Client,
    gateway: String,
}

impl World {
    async fn kayra(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> (u16, Value) {
        let mut request = self
            .http
            .request(method, format!("{}{path}", self.server.http_url()))
            .bearer_auth(self.server.admin_token());
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.unwrap();
        let code = response.status().as_u16();
        (code, response.json().await.unwrap_or(Value::Null))
    }

    async fn through_gateway(
        &self,
        method: reqwest::Method,
        path: &str,
        token: &str,
        body: Option<Value>,
    ) -> u16 {
        let mut request = self.http.request(method, format!("{}{path}", self.gateway)).bearer_auth(token);
        if let Some(body) = body {
            request = request.json(&body);
        }
        request.send().await.unwrap().status().as_u16()
    }

    async fn status(&self) -> Value {
        self.kayra(
            reqwest::Method::GET,
            "/apis/catalog.example.com/v1/apiregistrations/compute.example.com/status",
            None,
        )
        .await
        .1
    }

    /// Waits until every namespace in `expected` reports that state and build.
    async fn settle(&self, expected: &[(&str, &str, &str)]) -> Value {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let status = self.status().await;
            let reached = expected.iter().all(|(namespace, state, build)| {
                status["subscriptions"].as_array().into_iter().flatten().any(|s| {
                    s["namespace"] == *namespace && s["state"] == *state && s["current_sync_id"] == *build
                })
            });
            if reached {
                return status;
            }
            assert!(Instant::now() < deadline, "never reached {expected:?}: {status}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    async fn sync(&self, body: Value) -> String {
        let (code, answer) = self
            .kayra(
                reqwest::Method::PUT,
                "/apis/catalog.example.com/v1/apiregistrations/compute.example.com/sync",
                Some(body),
            )
            .await;
        assert_eq!(code, 200, "{answer}");
        answer["sync_id"].as_str().unwrap().to_owned()
    }

    async fn subscription(&self, namespace: &str) -> Value {
        let path =
            format!("/apis/catalog.example.com/v1/namespaces/{namespace}/subscriptions/compute.example.com");
        self.kayra(reqwest::Method::GET, &path, None).await.1
    }

    async fn faults(&self, document: bool, sync: bool) {
        let url = format!("{}/apis/compute.example.com/-/faults", self.gateway);
        self.http.post(url).json(&json!({"document": document, "sync": sync})).send().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_team_api_behind_nginx_through_its_whole_life() {
    let dir = tempfile::tempdir().unwrap();
    let (gateway_port, app_port) = (free_port(), free_port());
    let gateway = format!("http://127.0.0.1:{gateway_port}");
    let step = Step {
        name: "notify".into(),
        url: "{{ .Gateway }}/apis/{{ .Subscription.Api }}/-/sync/{{ .Subscription.Namespace }}/{{ .SyncID }}"
            .into(),
        accept: vec![202],
        timeout: "5s".into(),
        ..Step::default()
    };
    let mut reconciler =
        ReconcilerConfig { gateway_url: Some(gateway.clone()), ..ReconcilerConfig::default() };
    reconciler.mode.insert("trigger".into(), Mode { steps: vec![step] });
    let server = TestServer::start_with(Store::Sled, |config| config.reconciler = reconciler).await;
    server.add_token("app-token", "compute-app", "");
    server.add_token("bob-token", "bob", "");
    let _app = Running(
        Command::new(env!("CARGO_BIN_EXE_compute-app"))
            .env("LISTEN", format!("127.0.0.1:{app_port}"))
            .env("KAYRA_URL", server.http_url())
            .env("KAYRA_TOKEN", "app-token")
            .env("COMPUTE_APP_TEST_HOOKS", "1")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("the app starts"),
    );
    wait_for_port(app_port);
    let Some(_nginx) = nginx(dir.path(), gateway_port, app_port) else { return };
    let world = World { server, http: reqwest::Client::new(), gateway };
    use reqwest::Method as M;

    for namespace in ["sre", "apps", "web"] {
        let body = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}});
        assert_eq!(world.kayra(M::POST, "/api/v1/namespaces", Some(body)).await.0, 201);
    }
    let registration = json!({"name": "compute.example.com", "short_name": "compute", "active": true, "owner": "sre-a", "mode": "trigger", "sync_id": "build-1"});
    assert_eq!(
        world.kayra(M::POST, "/apis/catalog.example.com/v1/apiregistrations", Some(registration)).await.0,
        201
    );
    for namespace in ["sre", "apps", "web"] {
        let path = format!("/apis/catalog.example.com/v1/namespaces/{namespace}/subscriptions");
        let (code, body) =
            world.kayra(M::POST, &path, Some(json!({"api": "compute.example.com", "active": true}))).await;
        assert_eq!(code, 201, "{body}");
    }

    // The first build reaches every subscriber; the document is stored and discovered.
    world
        .settle(&[
            ("sre", "success", "build-1"),
            ("apps", "success", "build-1"),
            ("web", "success", "build-1"),
        ])
        .await;
    let (code, document) = world
        .kayra(M::GET, "/apis/catalog.example.com/v1/apiregistrations/compute.example.com/openapi.json", None)
        .await;
    assert_eq!(code, 200);
    assert_eq!(document["info"]["title"], "compute.example.com");
    let (_, discovery) = world.kayra(M::GET, "/apis", None).await;
    assert!(discovery["groups"].as_array().unwrap().iter().any(|g| g["name"] == "compute.example.com"));

    // The app guards its own routes through Kayra's /check.
    let role = json!({"apiVersion": "authorization.example.com/v1", "kind": "Role", "metadata": {"name": "machine-operator"},
                      "rules": [{"apis": ["compute.example.com"], "resources": ["machines", "machines/reboot"], "verbs": ["get", "list", "create"]}]});
    assert_eq!(
        world.kayra(M::POST, "/apis/authorization.example.com/v1/namespaces/sre/roles", Some(role)).await.0,
        201
    );
    let binding = json!({"apiVersion": "authorization.example.com/v1", "kind": "RoleBinding", "metadata": {"name": "bob-operates"},
                         "subjects": [{"kind": "User", "name": "bob"}], "roleRef": {"kind": "Role", "name": "machine-operator"}});
    assert_eq!(
        world
            .kayra(M::POST, "/apis/authorization.example.com/v1/namespaces/sre/rolebindings", Some(binding))
            .await
            .0,
        201
    );
    let machines = "/apis/compute.example.com/v1/namespaces/sre/machines";
    let deadline = Instant::now() + Duration::from_secs(10);
    while world.through_gateway(M::POST, machines, "bob-token", Some(json!({"name": "m1"}))).await != 201 {
        assert!(Instant::now() < deadline, "bob's binding never took effect");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(world.through_gateway(M::GET, &format!("{machines}/m1"), "bob-token", None).await, 200);
    assert_eq!(
        world.through_gateway(M::POST, &format!("{machines}/m1/reboot"), "bob-token", None).await,
        202
    );
    assert_eq!(
        world.through_gateway(M::DELETE, &format!("{machines}/m1"), "bob-token", None).await,
        403,
        "no delete granted"
    );
    assert_eq!(
        world
            .through_gateway(
                M::GET,
                "/apis/compute.example.com/v1/namespaces/web/machines",
                "bob-token",
                None
            )
            .await,
        403
    );
    assert_eq!(world.through_gateway(M::GET, machines, "forged-token", None).await, 403);

    // A canary moves one namespace; the others visibly wait; the release moves them to the
    // same build.
    let canary = world.sync(json!({"canary_namespaces": ["sre"]})).await;
    world.settle(&[("sre", "success", &canary)]).await;
    assert_eq!(world.subscription("apps").await["current_sync_id"], "build-1", "outside the canary");
    assert_eq!(world.sync(json!({})).await, canary, "the release reuses the canary's build");
    world.settle(&[("apps", "success", &canary), ("web", "success", &canary)]).await;

    // A broken document moves nobody; each subscriber says why and keeps its build.
    world.faults(true, false).await;
    let broken = world.sync(json!({})).await;
    world.settle(&[("sre", "error", &canary), ("apps", "error", &canary), ("web", "error", &canary)]).await;
    assert!(world.subscription("web").await["message"].as_str().unwrap().contains("answered 500"));
    assert_eq!(world.subscription("web").await["expected_sync_id"], broken.as_str());

    // A failing step is named in the message; the build stays.
    world.faults(false, true).await;
    let failing = world.sync(json!({})).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    while !world.subscription("sre").await["message"].as_str().unwrap_or_default().starts_with("notify:") {
        assert!(
            Instant::now() < deadline,
            "the failing step was never reported: {}",
            world.subscription("sre").await
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(world.subscription("sre").await["current_sync_id"], canary.as_str());

    // A restart mid-rollout: the controller comes back and finishes from what is stored.
    world.faults(false, false).await;
    let mut world = world;
    world.server.restart().await;
    world
        .settle(&[("sre", "success", &failing), ("apps", "success", &failing), ("web", "success", &failing)])
        .await;
}
