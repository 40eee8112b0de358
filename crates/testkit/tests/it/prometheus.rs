//! A real Prometheus scrapes `/metrics` over TLS with a bearer token file, as an operator's
//! would: the scrape is up, the API's request counter is there with its labels, and so is the
//! CPU counter of a workload a real agent runs, labelled by namespace, application and node.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use kayra_testkit::fleet::{Marked, unique};
use kayra_testkit::{Store, TestServer};
use reqwest::StatusCode;
use serde_json::{Value, json};

/// A Prometheus server of its own: a private data directory and a free loopback port; killed by
/// its PID when dropped.
struct Prometheus {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn prometheus_binary() -> Option<&'static str> {
    ["/usr/bin/prometheus", "/usr/local/bin/prometheus"]
        .into_iter()
        .find(|path| std::path::Path::new(path).exists())
}

impl Prometheus {
    /// Scrapes `server` every second as job `kayra`, with `token` read from a file.
    fn scraping(binary: &str, server: &TestServer, token: &str) -> Prometheus {
        let dir = tempfile::tempdir().unwrap();
        let token_file = dir.path().join("token");
        std::fs::write(&token_file, token).unwrap();
        let ca_file = dir.path().join("ca.crt");
        std::fs::write(&ca_file, server.pki_file("ca.crt")).unwrap();
        let target = server.url().trim_start_matches("https://").to_owned();
        let config = format!(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n\
             scrape_configs:\n  - job_name: kayra\n    scheme: https\n    metrics_path: /metrics\n\
             \x20   bearer_token_file: {}\n    tls_config:\n      ca_file: {}\n\
             \x20   static_configs:\n      - targets: ['{target}']\n",
            token_file.display(),
            ca_file.display(),
        );
        let config_file = dir.path().join("prometheus.yml");
        std::fs::write(&config_file, config).unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let child = Command::new(binary)
            .arg(format!("--config.file={}", config_file.display()))
            .arg(format!("--storage.tsdb.path={}", dir.path().join("data").display()))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.path().join("prometheus.log")).unwrap())
            .spawn()
            .expect("prometheus starts");
        Prometheus { child, port, _dir: dir }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self._dir.path().join("prometheus.log")).unwrap_or_default()
    }

    /// The result vector of an instant query, once Prometheus answers.
    async fn query(&self, query: &str) -> Vec<Value> {
        let encoded: String = query
            .bytes()
            .map(|byte| match byte {
                b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                    (byte as char).to_string()
                }
                _ => format!("%{byte:02X}"),
            })
            .collect();
        let url = format!("http://127.0.0.1:{}/api/v1/query?query={encoded}", self.port);
        let Ok(response) = reqwest::Client::new().get(url).send().await else {
            return Vec::new();
        };
        if response.status() != StatusCode::OK {
            return Vec::new();
        }
        let body: Value = response.json().await.unwrap_or(Value::Null);
        body["data"]["result"].as_array().cloned().unwrap_or_default()
    }

    /// Waits for `query` to answer something `accept` takes.
    async fn until(&self, query: &str, accept: impl Fn(&[Value]) -> bool) -> Vec<Value> {
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            let result = self.query(query).await;
            if accept(&result) {
                return result;
            }
            assert!(
                Instant::now() < deadline,
                "{query} never answered as expected: {result:?}\n{}",
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
}

#[tokio::test]
async fn a_real_prometheus_scrapes_the_api_and_the_workloads() {
    let Some(binary) = prometheus_binary() else {
        assert!(std::env::var_os("CI").is_none(), "prometheus is missing: .ci/run installs Debian's package");
        eprintln!("skipped: prometheus is not installed (apt-get install prometheus)");
        return;
    };
    let server = TestServer::start(Store::Memory).await;
    server.add_token("prometheus-token", "prometheus", "system:monitoring");
    let agent = server.join_agent("scraped").await;
    let marker = Marked(unique("scraped-workload"));
    let spinner = json!({"apiVersion": "fleet.example.com/v1", "kind": "Application", "metadata": {"name": "spinner"},
        "spec": {"command": ["/usr/bin/python3", "-c", "while True: pass", &marker.0], "placement": {"nodeName": agent.name()}}});
    let path = format!("{}/apis/fleet.example.com/v1/namespaces/default/applications", server.url());
    let response = server.admin().post(path).json(&spinner).send().await.unwrap();
    assert_eq!(response.status(), StatusCode::CREATED);
    let prometheus = Prometheus::scraping(binary, &server, "prometheus-token");

    let up = prometheus
        .until("up{job=\"kayra\"}", |result| !result.is_empty() && result[0]["value"][1] == "1")
        .await;
    assert_eq!(up.len(), 1, "{up:?}");
    let created = prometheus
        .until("apiserver_request_total{job=\"kayra\",verb=\"POST\",resource=\"applications\"}", |result| {
            !result.is_empty()
        })
        .await;
    let labels = &created[0]["metric"];
    assert_eq!(
        (
            labels["group"].as_str(),
            labels["scope"].as_str(),
            labels["code"].as_str(),
            labels["subresource"].as_str()
        ),
        // Prometheus keeps no empty label: no subresource is no `subresource` label.
        (Some("fleet.example.com"), Some("namespace"), Some("201"), None),
        "{created:?}"
    );
    let cpu = prometheus
        .until("kayra_workload_cpu_seconds_total{job=\"kayra\",application=\"spinner\"}", |result| {
            !result.is_empty()
        })
        .await;
    let labels = &cpu[0]["metric"];
    assert_eq!(
        (labels["namespace"].as_str(), labels["node"].as_str()),
        (Some("default"), Some(agent.name())),
        "{cpu:?}"
    );
    let spent: f64 = cpu[0]["value"][1].as_str().unwrap().parse().unwrap();
    assert!(spent > 0.0, "the spinner has used CPU: {cpu:?}");
    drop(prometheus);
    drop(agent);
}
