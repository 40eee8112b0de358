//! Bootstrap tokens from `kayra-controller token create`, against the real binary: they
//! authenticate as `system:bootstrap:<id>`, are stored only as a digest, and stop working when
//! they expire, when the store deletes them; the join command names the address the
//! controller serves on.

use std::process::{Command, Output};
use std::time::{Duration, Instant};

use crate::agents::{Agent, unique, wait_for};
use crate::{Controller, have_kubectl};

fn token_create(controller: &Controller, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kayra-controller"))
        .arg("--data-dir")
        .arg(controller.scratch().join("data"))
        .args(["--listen", controller.url().trim_start_matches("https://")])
        .args(["token", "create"])
        .args(args)
        .output()
        .expect("the controller binary runs")
}

fn whoami(controller: &Controller, token: &str) -> (u16, String) {
    let output = Command::new("curl")
        .args(["-s", "-w", "\n%{http_code}", "--cacert"])
        .arg(controller.scratch().join("data/pki/ca.crt"))
        .args([
            "-H",
            &format!("Authorization: Bearer {token}"),
            "-H",
            "Content-Type: application/json",
            "-X",
            "POST",
        ])
        .args(["-d", r#"{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}"#])
        .arg(format!("{}/apis/authentication.k8s.io/v1/selfsubjectreviews", controller.url()))
        .output()
        .expect("curl runs");
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", "0"));
    (code.trim().parse().unwrap_or(0), body.to_owned())
}

#[test]
fn bootstrap_tokens_authenticate_until_they_expire() {
    // kubectl reads what the store keeps of the token.
    if !have_kubectl() {
        return;
    }
    let controller = Controller::start(&["--store", "sled"]);
    let created = token_create(&controller, &["--ttl", "4s", "--description", "node n1 joins"]);
    assert!(created.status.success(), "{}", String::from_utf8_lossy(&created.stderr));
    let token = String::from_utf8_lossy(&created.stdout).trim().to_owned();
    let (id, secret) = token.split_once('.').expect("a token is <id>.<secret>");
    assert_eq!((id.len(), secret.len()), (6, 16), "{token}");

    let (code, body) = whoami(&controller, &token);
    assert_eq!(code, 201, "{body}");
    let review: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(review["status"]["userInfo"]["username"], format!("system:bootstrap:{id}"));
    assert!(
        review["status"]["userInfo"]["groups"].as_array().unwrap().contains(&"system:bootstrappers".into())
    );
    assert_eq!(whoami(&controller, &format!("{id}.{}", "0".repeat(16))).0, 401, "another secret half");

    let stored =
        controller.kubectl(&["get", "secrets.fleet.example.com", "-n", "kayra-system", "-o", "json"]);
    let stored = String::from_utf8_lossy(&stored.stdout).into_owned();
    assert!(stored.contains(&format!("bootstrap-token-{id}")), "{stored}");
    use base64::Engine;
    let encoded = base64::engine::general_purpose::STANDARD.encode(secret);
    assert!(!stored.contains(secret) && !stored.contains(&encoded), "only the digest is stored");

    let deadline = Instant::now() + Duration::from_secs(20);
    while whoami(&controller, &token).0 != 401 {
        assert!(Instant::now() < deadline, "the token still authenticates long after it expired");
        std::thread::sleep(Duration::from_millis(250));
    }
    let gone = controller.kubectl(&[
        "get",
        "secrets.fleet.example.com",
        "-n",
        "kayra-system",
        &format!("bootstrap-token-{id}"),
    ]);
    assert!(!gone.status.success(), "the store deleted the expired token's Secret");

    let too_long = token_create(&controller, &["--ttl", "200h"]);
    assert!(!too_long.status.success());
    assert!(String::from_utf8_lossy(&too_long.stderr).contains("at most 7 days"));
}

/// `token create` with the data directory alone, as an operator runs it beside the service.
fn token_create_from_data_dir(controller: &Controller, args: &[&str]) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_kayra-controller"))
        .arg("--data-dir")
        .arg(controller.scratch().join("data"))
        .args(["token", "create", "--print-join-command"])
        .args(args)
        .output()
        .expect("the controller binary runs");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8_lossy(&output.stdout).trim().to_owned()
}

/// The join command names the address the controller serves on (here a port other than the
/// configuration's default 6443), which its serving certificate covers: the printed line
/// joins. An explicit `--server` still wins.
#[test]
fn the_join_command_names_the_address_the_controller_serves_on() {
    let controller = Controller::start(&["--store", "memory"]);
    let line = token_create_from_data_dir(&controller, &[]);
    assert!(line.contains(&format!("--server {} ", controller.url())), "{line}");
    let elsewhere = token_create_from_data_dir(&controller, &["--server", "kayra.example.com:443"]);
    assert!(elsewhere.contains("--server https://kayra.example.com:443 "), "{elsewhere}");
    let agent = Agent::join(&line, &unique("served"));
    wait_for("the agent joined through the printed line", Duration::from_secs(30), || {
        agent.log().contains("the node session is open").then_some(())
    });
}
