//! `/metrics`: the loops' metrics in the Prometheus text format, for callers granted the
//! non-resource URL (the bootstrap `cluster-admin` and `system:monitoring`), no one else.

use reqwest::StatusCode;
use serde_json::json;

use kayra_testkit::{Store, TestServer};

#[tokio::test]
async fn metrics_are_served_to_monitoring_and_refused_to_everyone_else() {
    let server = TestServer::start(Store::Memory).await;
    server.add_token("viewer-token", "viewer", "");
    server.add_token("prometheus-token", "prometheus", "system:monitoring");
    let (admin, url, http) = (server.admin(), server.url(), server.http_url());
    let view = json!({"apiVersion": "authorization.example.com/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "viewer"},
                      "subjects": [{"kind": "User", "name": "viewer"}], "roleRef": {"kind": "ClusterRole", "name": "view"}});
    let bindings = format!("{url}/apis/authorization.example.com/v1/clusterrolebindings");
    assert_eq!(admin.post(&bindings).json(&view).send().await.unwrap().status(), StatusCode::CREATED);
    let anonymous = server.anonymous();
    let scrape = |token: Option<&str>| {
        let request = anonymous.get(format!("{http}/metrics"));
        match token {
            Some(token) => request.bearer_auth(token),
            None => request,
        }
    };
    // The loops have reconciled once each by the time the admin's first scrape sees them.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let text = loop {
        let response = scrape(Some(&server.admin_token())).send().await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        let content_type = response.headers()["content-type"].to_str().unwrap().to_owned();
        assert!(content_type.starts_with("application/openmetrics-text"), "{content_type}");
        let text = response.text().await.unwrap();
        let reconciled = |name: &str| {
            text.lines().any(|line| {
                line.starts_with(&format!(
                    "kayra_loop_reconciles_total{{controller=\"{name}\",result=\"success\"}}"
                )) && !line.ends_with(" 0")
            })
        };
        if reconciled("rbac-index") && reconciled("bootstrap-roles") {
            break text;
        }
        assert!(std::time::Instant::now() < deadline, "the loops never reported:\n{text}");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    };
    for series in [
        "kayra_loop_reconcile_duration_seconds_bucket{",
        "kayra_loop_queue_depth{controller=\"namespace-finalizer\"}",
        "kayra_loop_requeues_total{controller=\"catalog-reconciler\"}",
    ] {
        assert!(text.contains(series), "{series} missing from:\n{text}");
    }
    assert_eq!(scrape(Some("prometheus-token")).send().await.unwrap().status(), StatusCode::OK);
    assert_eq!(scrape(None).send().await.unwrap().status(), StatusCode::UNAUTHORIZED);
    // The refusal counts only once the viewer's grant is in effect.
    let apps = format!("{http}/apis/fleet.example.com/v1/applications");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while anonymous.get(&apps).bearer_auth("viewer-token").send().await.unwrap().status() != StatusCode::OK {
        assert!(std::time::Instant::now() < deadline, "the viewer's binding never took effect");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(scrape(Some("viewer-token")).send().await.unwrap().status(), StatusCode::FORBIDDEN);
}

/// The loops write in the background: the scheduler's explanation of an Application no node
/// can take (its condition and Event) rides the flushes of the API's writes, and the embedded
/// store counts it so. A user's own writes are not counted.
#[tokio::test]
async fn the_loops_writes_are_background_writes_of_the_store() {
    let server = TestServer::start(Store::Sled).await;
    let (admin, url, http) = (server.admin(), server.url(), server.http_url());
    let scrape = || async {
        let response =
            admin.get(format!("{http}/metrics")).bearer_auth(server.admin_token()).send().await.unwrap();
        let text = response.text().await.unwrap();
        let line = text.lines().find(|line| line.starts_with("kayra_store_background_writes_total "));
        let line = line.unwrap_or_else(|| panic!("no background writes counted in\n{text}"));
        line.rsplit(' ').next().unwrap().parse::<u64>().unwrap()
    };
    let application = json!({"apiVersion": "fleet.example.com/v1", "kind": "Application",
        "metadata": {"name": "nowhere-to-go"},
        "spec": {"command": ["/bin/sleep", "3600", "kayra-test-background-writes"]}});
    let applications = format!("{url}/apis/fleet.example.com/v1/namespaces/default/applications");
    let created = admin.post(&applications).json(&application).send().await.unwrap();
    assert_eq!(created.status(), StatusCode::CREATED);
    // No node exists: the scheduler explains, with Scheduled=False.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let current: serde_json::Value =
            admin.get(format!("{applications}/nowhere-to-go")).send().await.unwrap().json().await.unwrap();
        let conditions = current["status"]["conditions"].as_array().cloned().unwrap_or_default();
        if conditions
            .iter()
            .any(|condition| condition["type"] == "Scheduled" && condition["status"] == "False")
        {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the scheduler never explained:\n{current}");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let counted = scrape().await;
    assert!(counted >= 1, "the scheduler's condition was not a background write ({counted})");
    // A hundred writes of a user's add none.
    let before = scrape().await;
    for i in 0..100 {
        let secret = json!({"apiVersion": "fleet.example.com/v1", "kind": "Secret",
            "metadata": {"name": format!("user-{i}")}, "stringData": {"k": "v"}});
        let secrets = format!("{url}/apis/fleet.example.com/v1/namespaces/default/secrets");
        assert_eq!(admin.post(&secrets).json(&secret).send().await.unwrap().status(), StatusCode::CREATED);
    }
    let after = scrape().await;
    assert!(after - before < 100, "a user's writes were counted as background writes ({before} -> {after})");
}
