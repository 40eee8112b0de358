//! `kayra-cli` against a running controller, with the catalog documentation's commands as
//! written.

use kayra_testkit::{Store, TestServer};
use serde_json::Value;

struct Cli {
    kubeconfig: tempfile::NamedTempFile,
}

impl Cli {
    /// A kubeconfig naming the server, its CA and the admin's bearer token.
    fn for_server(server: &TestServer) -> Cli {
        use std::io::Write;
        let ca =
            base64::Engine::encode(&base64::engine::general_purpose::STANDARD, server.pki_file("ca.crt"));
        let mut kubeconfig = tempfile::NamedTempFile::new().unwrap();
        write!(
            kubeconfig,
            "apiVersion: v1\nkind: Config\nclusters:\n- name: kayra\n  cluster:\n    server: {}\n    certificate-authority-data: {ca}\nusers:\n- name: admin\n  user:\n    token: {}\ncontexts:\n- name: kayra\n  context:\n    cluster: kayra\n    user: admin\ncurrent-context: kayra\n",
            server.url(),
            server.admin_token()
        )
        .unwrap();
        Cli { kubeconfig }
    }

    /// Runs the CLI; answers whether it succeeded, its stdout and its stderr.
    async fn run(&self, args: &[&str]) -> (bool, String, String) {
        let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_kayra-cli"))
            .args(args)
            .env("KUBECONFIG", self.kubeconfig.path())
            .output()
            .await
            .unwrap();
        let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
        (output.status.success(), text(&output.stdout), text(&output.stderr))
    }

    async fn json(&self, args: &[&str]) -> Value {
        let (ok, out, err) = self.run(args).await;
        assert!(ok, "kayra-cli {args:?} failed: {err}");
        serde_json::from_str(&out)
            .unwrap_or_else(|e| panic!("kayra-cli {args:?} printed no JSON ({e}): {out}"))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_documented_commands_work_as_written() {
    let server = TestServer::start(Store::Memory).await;
    let cli = Cli::for_server(&server);

    let created = cli
        .json(&[
            "create",
            "catalog",
            "apiregistrations",
            "-d",
            r#"{
    "name": "compute.example.com",
    "short_name": "compute",
    "active": true,
    "owner": "sre-a"
  }"#,
        ])
        .await;
    assert_eq!(
        (created["name"].as_str(), created["owner"].as_str()),
        (Some("compute.example.com"), Some("sre-a"))
    );
    let got = cli.json(&["get", "catalog", "apiregistrations", "compute.example.com"]).await;
    assert_eq!(got["short_name"], "compute");
    let updated = cli
        .json(&[
            "update",
            "catalog",
            "apiregistrations",
            "compute.example.com",
            "-d",
            r#"{"name": "compute.example.com", "owner": "sre-b"}"#,
        ])
        .await;
    assert_eq!(updated["owner"], "sre-b");
    let synced =
        cli.json(&["update", "catalog", "apiregistrations", "compute.example.com/sync", "-d", "{}"]).await;
    assert_ne!(synced["sync_id"], created["sync_id"]);
    let (ok, _, err) = cli
        .run(&[
            "update",
            "catalog",
            "apiregistrations",
            "compute.example.com/sync",
            "-d",
            r#"{"canary_namespaces": ["sre"]}"#,
        ])
        .await;
    assert!(!ok && err.contains("sre") && err.contains("404"), "a canary needs a subscription: {err}");
    let status = cli.json(&["get", "catalog", "apiregistrations", "compute.example.com/status"]).await;
    assert_eq!(status["name"], "compute.example.com");
    assert_eq!(status["sync_id"], synced["sync_id"]);

    let (ok, table, _) = cli.run(&["get", "catalog", "apiregistrations", "-o", "table"]).await;
    assert!(
        ok && table.starts_with("NAME") && table.contains("SHORT") && table.contains("compute.example.com"),
        "{table}"
    );
    let (ok, apis, _) = cli.run(&["apis"]).await;
    assert!(
        ok && apis.lines().any(|l| l.starts_with("catalog.example.com") && l.contains("apiregistrations")),
        "{apis}"
    );

    let deleted = cli.json(&["delete", "catalog", "apiregistrations", "compute.example.com"]).await;
    assert_eq!(deleted["name"], "compute.example.com");
    let (ok, _, err) = cli.run(&["get", "catalog", "apiregistrations", "compute.example.com"]).await;
    assert!(!ok && err.contains("not found"), "{err}");
    let (ok, _, err) = cli.run(&["create", "catalog", "apiregistrations"]).await;
    assert!(!ok && err.contains("-d"), "{err}");
}

/// A gateway answering every request with `document`, as the team app behind it would serve
/// its OpenAPI document: one HTTP/1.1 response per connection.
async fn gateway(document: Value) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let body = document.to_string();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let body = body.clone();
            tokio::spawn(async move {
                let mut request = Vec::new();
                let mut buffer = [0u8; 1024];
                while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                    match stream.read(&mut buffer).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => request.extend_from_slice(&buffer[..n]),
                    }
                }
                let response = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = stream.write_all(response.as_bytes()).await;
            });
        }
    });
    url
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apis_lists_actions_as_part_of_the_resource_name() {
    let document = serde_json::json!({"openapi": "3.1.0", "info": {"title": "compute", "version": "1"}, "paths": {
        "/apis/compute.example.com/v1/namespaces/{namespace}/instances": {"get": {}, "post": {}},
        "/apis/compute.example.com/v1/namespaces/{namespace}/instances/{name}": {"get": {}},
        "/apis/compute.example.com/v1/namespaces/{namespace}/instances/{name}/restart": {"post": {}},
    }});
    let gateway_url = gateway(document).await;
    let server = kayra_testkit::TestServer::start_with(Store::Memory, |config| {
        config.reconciler.gateway_url = Some(gateway_url)
    })
    .await;
    let cli = Cli::for_server(&server);
    cli.json(&[
        "create",
        "catalog",
        "apiregistrations",
        "-d",
        r#"{"name": "compute.example.com", "active": true, "owner": "sre-a", "sync_id": "build-1"}"#,
    ])
    .await;
    cli.json(&[
        "create",
        "catalog",
        "subscriptions",
        "-n",
        "default",
        "-d",
        r#"{"api": "compute.example.com", "active": true}"#,
    ])
    .await;

    // The reconciler fetches the document in the background: the group shows at once, with a
    // `-` row, and its resources once the document is in. Wait for the resources.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let apis = loop {
        let (ok, apis, err) = cli.run(&["apis"]).await;
        assert!(ok, "{err}");
        let listed = |line: &str| {
            let mut columns = line.split_whitespace();
            columns.next() == Some("compute.example.com") && columns.next() != Some("-")
        };
        if apis.lines().any(listed) {
            break apis;
        }
        assert!(std::time::Instant::now() < deadline, "the registered API never shows: {apis}");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    };
    let row = |resource: &str| {
        apis.lines()
            .map(|line| line.split_whitespace().collect::<Vec<_>>())
            .find(|columns| columns[0] == "compute.example.com" && columns[1] == resource)
            .unwrap_or_else(|| panic!("no {resource} row in\n{apis}"))
    };
    assert_eq!(row("instances")[2..], ["true", "get,list,create"]);
    assert_eq!(row("instances/restart")[2..], ["true", "create"]);
    assert!(
        apis.lines().any(|l| l.starts_with("catalog.example.com")
            && l.split_whitespace().nth(1) == Some("apiregistrations/sync")),
        "Kayra's own subresources are named the same way: {apis}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apis_lists_the_check_apps_ask_for_decisions() {
    let server = TestServer::start(Store::Memory).await;
    let cli = Cli::for_server(&server);
    let (ok, apis, err) = cli.run(&["apis"]).await;
    assert!(ok, "{err}");
    let check = apis
        .lines()
        .map(|line| line.split_whitespace().collect::<Vec<_>>())
        .find(|columns| columns[0] == "authorization.example.com" && columns[1] == "check")
        .unwrap_or_else(|| panic!("no check row in\n{apis}"));
    assert_eq!(check[2..], ["false", "create"], "{apis}");
}
