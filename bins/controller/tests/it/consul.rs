//! The fleet in Consul's shape, end to end: the real controller serving `--consul-listen`, real
//! agents running the members (readiness probes that pass and fail for real), and py-consul
//! running the Consul contract's acceptance script against it.

use std::process::Command;
use std::time::Duration;

use serde_json::json;

use crate::agents::{apply, get_json, kill_all_with, two_nodes, unique, wait_for};
use crate::{Controller, have_kubectl};

/// Whether py-consul can be imported; a test that needs it is recorded as skipped without it.
fn have_py_consul() -> bool {
    let present =
        Command::new("python3").args(["-c", "import consul"]).output().is_ok_and(|o| o.status.success());
    if !present {
        kayra_store_etcd::test_server::skip_test("py-consul is not installed (pip install py-consul==1.8.0)");
    }
    present
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

#[test]
fn py_consul_finds_the_fleet_as_the_consul_contract_says() {
    if !have_kubectl() || !have_py_consul() {
        return;
    }
    let port = free_port();
    let controller = Controller::start(&["--store", "sled", "--consul-listen", &format!("127.0.0.1:{port}")]);
    let (a, b) = two_nodes(&controller);
    let marker = unique("consul");
    let ready_file = controller.scratch().join(format!("{marker}.ready"));
    let member = |name: &str, namespace: &str, node: &str, service: &str, probe: Vec<String>| {
        json!({"apiVersion": "fleet.example.com/v1", "kind": "Application",
               "metadata": {"name": name, "namespace": namespace},
               "spec": {"command": ["/bin/sh", "-c", format!("while true; do sleep 1; done; : {marker}")],
                        "lifecycle": {"terminationGracePeriodSeconds": 2},
                        "placement": {"nodeName": node}, "serviceName": service,
                        "ports": [{"name": "http", "port": 8080}],
                        "probes": {"readiness": {"exec": {"command": probe}, "periodSeconds": 1}}}})
    };
    let service = |name: &str, namespace: &str, tags: Vec<&str>| {
        json!({"apiVersion": "fleet.example.com/v1", "kind": "Service",
               "metadata": {"name": name, "namespace": namespace},
               "spec": {"ports": [{"name": "http", "port": 80, "targetName": "http"}],
                        "tags": tags, "meta": {"version": "1"}}})
    };
    apply(&controller, &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}}));
    apply(
        &controller,
        &service(
            "web",
            "default",
            vec!["traefik.enable=true", "traefik.http.routers.web.rule=Host(`web.example.com`)"],
        ),
    );
    apply(&controller, &service("api", "team-a", vec![]));
    let always = vec!["/bin/true".to_owned()];
    let once_the_file_exists =
        vec!["/usr/bin/test".to_owned(), "-f".to_owned(), ready_file.display().to_string()];
    apply(&controller, &member("web-1", "default", &a.name, "web", always.clone()));
    apply(&controller, &member("web-2", "default", &b.name, "web", once_the_file_exists));
    apply(&controller, &member("api-1", "team-a", &a.name, "api", always));
    wait_for("web-1 and api-1 ready, web-2 running unready", Duration::from_secs(60), || {
        let ready = |namespace: &str, name: &str, status: &str| {
            let app = get_json(&controller, &["-n", namespace, "get", "app", name]).unwrap_or_default();
            let conditions = app["status"]["conditions"].as_array().cloned().unwrap_or_default();
            conditions.iter().any(|c| c["type"] == "Ready" && c["status"] == status)
        };
        (ready("default", "web-1", "True")
            && ready("team-a", "api-1", "True")
            && ready("default", "web-2", "False"))
        .then_some(())
    });
    controller.add_token("limited-token", "limited");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/it/consul/acceptance.py");
    let output = Command::new("python3")
        .arg(script)
        .env("CPORT", port.to_string())
        .env("CTOKEN", controller.token())
        .env("LIMITED", "limited-token")
        .env("READY_FILE", &ready_file)
        .env("NODE", &a.name)
        .output()
        .expect("python3 runs");
    kill_all_with(&marker);
    assert!(
        output.status.success(),
        "the acceptance script failed:\n{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    drop((a, b));
}

#[test]
fn the_first_local_run_goes_on_without_consul_when_its_port_is_taken() {
    if !have_kubectl() {
        return;
    }
    // Held here for the whole test. Other tests' controllers take Consul's port for a while
    // when they find it free, and may let it go at any moment: wait for it. A holder that
    // outlasts two minutes is none of them, and keeps the port taken just the same.
    let waiting = std::time::Instant::now() + Duration::from_secs(120);
    let _held = loop {
        match std::net::TcpListener::bind("127.0.0.1:8500") {
            Ok(held) => break Some(held),
            Err(_) if std::time::Instant::now() < waiting => std::thread::sleep(Duration::from_millis(100)),
            Err(_) => break None,
        }
    };
    let controller = Controller::start(&["--store", "sled"]);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !controller.log().contains("not served in Consul's shape") {
        assert!(
            std::time::Instant::now() < deadline,
            "no warning about the taken port:\n{}",
            controller.log()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let output = controller.kubectl(&["get", "namespaces"]);
    assert!(output.status.success(), "the controller serves: {}", String::from_utf8_lossy(&output.stderr));
}
