//! Two controller instances with different platforms and regions sharing one etcd: neither
//! sees the other's registrations, and a dependency across them is validated.

use std::process::Command;

use kayra_store_etcd::test_server::{EtcdServer, StartError, skip_test};
use serde_json::{Value, json};

use crate::Controller;

/// Sends a request with the controller's admin token through curl; answers the code and body.
fn curl(controller: &Controller, method: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
    let mut command = Command::new("curl");
    command
        .args([
            "-s",
            "-w",
            "\n%{http_code}",
            "-X",
            method,
            "-H",
            &format!("Authorization: Bearer {}", controller.token()),
        ])
        .arg(format!("{}{path}", controller.http_url()));
    if let Some(body) = body {
        command.args(["-H", "Content-Type: application/json", "-d", &body.to_string()]);
    }
    let output = command.output().expect("curl runs");
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", "0"));
    (code.trim().parse().unwrap_or(0), serde_json::from_str(body).unwrap_or(Value::Null))
}

/// A controller of `platform`/`region` over `etcd`, with the directory of its configuration.
fn scoped(etcd: &EtcdServer, platform: &str, region: &str) -> (Controller, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("kayra.yaml");
    std::fs::write(&config, format!("platform: {platform}\nregion: {region}\n")).unwrap();
    let config = config.display().to_string();
    (Controller::start(&["--store", "etcd", "--etcd-endpoints", etcd.endpoint(), "--config", &config]), dir)
}

const REGISTRATIONS: &str = "/apis/catalog.example.com/v1/apiregistrations";

#[test]
fn instances_sharing_etcd_keep_their_catalogs_apart() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let etcd = match runtime.block_on(EtcdServer::start()) {
        Ok(etcd) => etcd,
        Err(StartError::Missing) => return skip_test(StartError::Missing),
        Err(error) => panic!("{error}"),
    };
    let (sandbox, _sandbox_config) = scoped(&etcd, "sandbox", "eu-west-1");
    let (prod, _prod_config) = scoped(&etcd, "prod", "us-east-1");

    let compute =
        json!({"name": "compute.example.com", "short_name": "compute", "active": true, "owner": "sre-a"});
    let (code, created) = curl(&sandbox, "POST", REGISTRATIONS, Some(&compute));
    assert_eq!(code, 201, "{created}");
    assert_eq!(
        (created["platform"].as_str(), created["region"].as_str()),
        (Some("sandbox"), Some("eu-west-1"))
    );
    let (_, listed) = curl(&prod, "GET", REGISTRATIONS, None);
    assert_eq!(listed["items"], json!([]), "prod sees none of sandbox's registrations");
    assert_eq!(curl(&prod, "GET", &format!("{REGISTRATIONS}/compute.example.com"), None).0, 404);
    let (code, _) = curl(&prod, "POST", REGISTRATIONS, Some(&compute));
    assert_eq!(code, 201, "the same name and short name are free in another scope");

    let dependency = json!({"platform": "sandbox", "region": "eu-west-1", "name": "compute.example.com"});
    let app = json!({"name": "app.example.com", "depends_on": [dependency]});
    let (code, body) = curl(&prod, "POST", REGISTRATIONS, Some(&app));
    assert_eq!(code, 201, "a dependency may cross scopes: {body}");
    let missing = json!({"name": "broken.example.com", "depends_on": [{"platform": "sandbox", "region": "eu-west-1", "name": "vault.example.com"}]});
    let (code, body) = curl(&prod, "POST", REGISTRATIONS, Some(&missing));
    assert_eq!(code, 400, "{body}");

    let (code, body) = curl(&sandbox, "DELETE", &format!("{REGISTRATIONS}/compute.example.com"), None);
    assert_eq!(code, 409, "prod's app depends on it: {body}");
    assert!(body["message"].as_str().unwrap().contains("prod/us-east-1"), "{body}");
    assert_eq!(curl(&prod, "DELETE", &format!("{REGISTRATIONS}/app.example.com"), None).0, 200);
    assert_eq!(curl(&sandbox, "DELETE", &format!("{REGISTRATIONS}/compute.example.com"), None).0, 200);
    assert_eq!(
        curl(&prod, "GET", &format!("{REGISTRATIONS}/compute.example.com"), None).0,
        200,
        "prod's own is untouched"
    );
}
