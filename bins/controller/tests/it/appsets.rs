//! ApplicationSets with real agents: a set's replicas run as processes spread over the nodes,
//! `kubectl scale` adds more, a changed command rolls through them never taking more than the
//! budget down at once, a nodeSpread component follows nodes as they join, are relabelled and
//! leave, and an init step that exits 1 holds the set with the exit code in its status.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::agents::{
    Agent, get_json, is_supervisor, join_line, kill_all_with, kubectl_ok, processes_with, two_nodes, unique,
    wait_for,
};
use crate::{Controller, have_kubectl};

const SET_LABEL: &str = "fleet.example.com/application-set";

/// Stops what the test's Applications run (the agents' drop stops the rest).
struct Cleanup(String);

impl Drop for Cleanup {
    fn drop(&mut self) {
        kill_all_with(&self.0);
    }
}

/// A shell loop tagged with `marker`, stopped quickly.
fn looping(marker: &str) -> Value {
    json!({
        "command": ["/bin/sh", "-c", format!("trap 'exit 0' TERM; while true; do sleep 0.2; done; : {marker}")],
        "lifecycle": {"terminationGracePeriodSeconds": 2},
    })
}

fn apply_set(controller: &Controller, name: &str, spec: Value) {
    let manifest = json!({"apiVersion": "fleet.example.com/v1", "kind": "ApplicationSet",
                          "metadata": {"name": name, "namespace": "default"}, "spec": spec});
    let path = controller.scratch().join(format!("{}.json", unique("set")));
    std::fs::write(&path, manifest.to_string()).unwrap();
    kubectl_ok(controller, &["apply", "-f", path.to_str().unwrap()]);
}

/// The set's children as stored.
fn children(controller: &Controller, set: &str) -> Vec<Value> {
    get_json(controller, &["get", "apps", "-l", &format!("{SET_LABEL}={set}")])
        .and_then(|list| list["items"].as_array().cloned())
        .unwrap_or_default()
}

fn available(app: &Value) -> bool {
    let ready = app["status"]["conditions"]
        .as_array()
        .is_some_and(|c| c.iter().any(|c| c["type"] == "Ready" && c["status"] == "True"));
    ready && app["status"]["observedGeneration"] == app["metadata"]["generation"]
}

/// How many processes (not their supervisors) carry `marker`.
fn running(marker: &str) -> usize {
    processes_with(marker).into_iter().filter(|(pid, _)| !is_supervisor(*pid)).count()
}

/// Waits until the set reports Converged for its current generation with `ready` ready.
fn converged(controller: &Controller, set: &str, ready: i64) -> Value {
    wait_for(&format!("{set} to converge with {ready} ready"), Duration::from_secs(45), || {
        let set = get_json(controller, &["get", "appset", set])?;
        let status = &set["status"];
        let current = status["observedGeneration"] == set["metadata"]["generation"];
        let converged = status["conditions"]
            .as_array()?
            .iter()
            .any(|c| c["type"] == "Converged" && c["status"] == "True");
        (current && converged && status["ready"] == ready).then(|| set.clone())
    })
}

#[test]
fn a_set_runs_its_replicas_scales_and_rolls_within_its_budget() {
    if !have_kubectl() {
        return;
    }
    let controller = Controller::start(&["--store", "sled"]);
    let (a, b): (Agent, Agent) = two_nodes(&controller);
    let (v1, v2) = (unique("appset-v1"), unique("appset-v2"));
    let _cleanup = (Cleanup(v1.clone()), Cleanup(v2.clone()));
    // Ready two seconds after it starts, so that a rollout of six one at a time takes long
    // enough to watch even on a loaded machine.
    let spec = |marker: &str, replicas: i64| {
        let mut template = looping(marker);
        template["probes"] = json!({"readiness": {"exec": {"command": ["/bin/true"]}, "initialDelaySeconds": 2, "periodSeconds": 1}});
        template["ports"] = json!([{"name": "http", "port": 8080}]);
        json!({"applications": [{"name": "api", "spec": template, "scale": {"replicas": replicas}}],
               "rollout": {"maxUnavailable": 1}})
    };
    apply_set(&controller, "web", spec(&v1, 4));
    kubectl_ok(&controller, &["wait", "--for=condition=Converged", "appset/web", "--timeout=45s"]);
    converged(&controller, "web", 4);
    wait_for("four processes", Duration::from_secs(20), || (running(&v1) == 4).then_some(()));
    let nodes: std::collections::BTreeSet<String> = children(&controller, "web")
        .iter()
        .filter_map(|app| app["spec"]["placement"]["nodeName"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(nodes, [a.name.clone(), b.name.clone()].into(), "spread over both nodes");
    let table = kubectl_ok(&controller, &["get", "appset", "web"]);
    assert!(table.contains("READY") && table.contains("UP-TO-DATE") && table.contains("4/4"), "{table}");
    // The component's ports render a Service its children join.
    let service = get_json(&controller, &["get", "svc", "web-api"]).unwrap_or_else(|| {
        panic!(
            "no Service: {}\n{}\n{}",
            kubectl_ok(&controller, &["get", "svc,apps,appsets", "-A"]),
            kubectl_ok(&controller, &["get", "appset", "web", "-o", "yaml"]),
            controller
                .log()
                .lines()
                .filter(|l| l.contains("applicationset") || l.contains("WARN") || l.contains("ERROR"))
                .collect::<Vec<_>>()
                .join("\n")
        )
    });
    assert_eq!(service["spec"]["ports"][0]["port"], 8080);
    assert_eq!(service["metadata"]["ownerReferences"][0]["name"], "web");
    assert!(children(&controller, "web").iter().all(|app| app["spec"]["serviceName"] == "web-api"));

    // kubectl scale, through the scale subresource.
    let scaled = kubectl_ok(&controller, &["scale", "appset/web", "--replicas=6"]);
    assert!(scaled.contains("scaled"), "{scaled}");
    converged(&controller, "web", 6);
    wait_for("six processes", Duration::from_secs(20), || (running(&v1) == 6).then_some(()));
    let raw = kubectl_ok(
        &controller,
        &["get", "--raw", "/apis/fleet.example.com/v1/namespaces/default/applicationsets/web/scale"],
    );
    let scale: Value = serde_json::from_str(&raw).unwrap();
    assert_eq!(scale["kind"], "Scale");
    assert_eq!(scale["spec"]["replicas"], 6);
    assert_eq!(scale["status"]["replicas"], 6);
    assert_eq!(scale["status"]["selector"], format!("{SET_LABEL}=web,fleet.example.com/component=api"));

    // A changed command rolls the children, never more than one down at once.
    apply_set(&controller, "web", spec(&v2, 6));
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut worst = 0;
    let mut samples = 0;
    loop {
        // One read of the children and the set together, so that each sample is quick.
        let everything = get_json(&controller, &["get", "applicationsets,applications"]).unwrap();
        let items = everything["items"].as_array().cloned().unwrap_or_default();
        let set = items.iter().find(|item| item["kind"] == "ApplicationSet").cloned().unwrap();
        let apps: Vec<&Value> = items
            .iter()
            .filter(|item| item["kind"] == "Application" && item["metadata"]["labels"][SET_LABEL] == "web")
            .collect();
        let down = apps.iter().filter(|app| !available(app)).count() + 6usize.saturating_sub(apps.len());
        worst = worst.max(down);
        samples += 1;
        let done = set["status"]["observedGeneration"] == set["metadata"]["generation"]
            && set["status"]["updated"] == 6
            && set["status"]["ready"] == 6
            && set["status"]["conditions"]
                .as_array()
                .unwrap()
                .iter()
                .any(|c| c["type"] == "Converged" && c["status"] == "True");
        if done {
            break;
        }
        assert!(Instant::now() < deadline, "the rollout did not finish: {set}");
    }
    assert!(worst <= 1, "{worst} children were down at once (budget 1)");
    assert!(samples > 5, "the rollout was sampled {samples} times");
    wait_for("six new processes and no old one", Duration::from_secs(20), || {
        (running(&v2) == 6 && running(&v1) == 0).then_some(())
    });
    let table = kubectl_ok(&controller, &["get", "appset", "web"]);
    assert!(table.contains("6/6"), "{table}");
}

#[test]
fn a_node_spread_follows_the_nodes_and_a_failed_init_step_holds_its_set() {
    if !have_kubectl() {
        return;
    }
    let controller = Controller::start(&["--store", "sled"]);
    let line = join_line(&controller);
    let join = |name: &str| {
        let agent = Agent::join(&line, &unique(name));
        wait_for(&format!("node {} to register", agent.name), Duration::from_secs(30), || {
            get_json(&controller, &["get", "node", &agent.name]).map(|_| ())
        });
        kubectl_ok(&controller, &["uncordon", &agent.name]);
        kubectl_ok(&controller, &["label", "node", &agent.name, "role=edge"]);
        agent
    };
    let marker = unique("appset-spread");
    let _cleanup = Cleanup(marker.clone());
    let a = join("node-a");
    apply_set(
        &controller,
        "edge",
        json!({"applications": [{"name": "proxy", "spec": looping(&marker),
                                 "scale": {"nodeSpread": {"nodeSelector": {"role": "edge"}}}}]}),
    );
    let on_nodes = |want: &[&str]| {
        let mut want: Vec<String> = want.iter().map(|n| format!("edge-proxy-{n}")).collect();
        want.sort();
        wait_for(&format!("the children {want:?}"), Duration::from_secs(30), || {
            let apps = children(&controller, "edge");
            let mut names: Vec<String> =
                apps.iter().filter_map(|a| a["metadata"]["name"].as_str().map(str::to_owned)).collect();
            names.sort();
            (names == want && apps.iter().all(available)).then_some(())
        });
    };
    on_nodes(&[&a.name]);
    let mut b = join("node-b");
    on_nodes(&[&a.name, &b.name]);
    wait_for("a proxy on each node", Duration::from_secs(20), || (running(&marker) == 2).then_some(()));
    let pinned = get_json(&controller, &["get", "app", &format!("edge-proxy-{}", b.name)]).unwrap();
    assert_eq!(pinned["spec"]["placement"]["nodeName"], b.name.as_str());

    // Relabelled out of the selector, then back; then gone.
    kubectl_ok(&controller, &["label", "node", &a.name, "role-"]);
    on_nodes(&[&b.name]);
    kubectl_ok(&controller, &["label", "node", &a.name, "role=edge"]);
    on_nodes(&[&a.name, &b.name]);
    b.kill();
    kubectl_ok(&controller, &["delete", "node", &b.name]);
    on_nodes(&[&a.name]);
    converged(&controller, "edge", 1);

    // An init step that exits 1 holds the set: nothing after it runs.
    let failing = unique("appset-init");
    let _cleanup_init = Cleanup(failing.clone());
    apply_set(
        &controller,
        "boot",
        json!({"applications": [
            {"name": "migrate", "spec": {"command": ["/bin/sh", "-c", format!("exit 1; : {failing}")],
                                         "lifecycle": {"restartPolicy": "Never"}}},
            {"name": "api", "spec": looping(&failing), "scale": {"replicas": 2}},
        ]}),
    );
    kubectl_ok(&controller, &["wait", "--for=condition=Initialized=False", "appset/boot", "--timeout=30s"]);
    let set = wait_for("the init failure", Duration::from_secs(30), || {
        let set = get_json(&controller, &["get", "appset", "boot"])?;
        let condition =
            set["status"]["conditions"].as_array()?.iter().find(|c| c["type"] == "Initialized")?.clone();
        (condition["reason"] == "InitFailed").then_some((set, condition))
    });
    assert!(set.1["message"].as_str().unwrap().contains("failed with exit code 1"), "{}", set.1);
    assert_eq!(set.0["status"]["phase"], "InitFailed");
    let names: Vec<String> = children(&controller, "boot")
        .iter()
        .filter_map(|a| a["metadata"]["name"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(names, ["boot-migrate"], "the set is held at its init step");
    // Scaling a set without exactly one replicated component is refused.
    let refused = controller.kubectl(&["scale", "appset/edge", "--replicas=3"]);
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("no component scaled by replicas"), "{stderr}");
}
