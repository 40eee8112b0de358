//! Draining and losing a node, with real agents and the real kubectl: `kubectl drain` moves
//! what the scheduler placed and reports what its author pinned; a node whose agent is gone for
//! longer than `nodeLostTimeoutSeconds` has its scheduler-placed Applications moved, and when it
//! returns its agent stops the processes no longer bound to it.
//!
//! Each test has the scheduler place an Application on node a while b is cordoned (so that it
//! lands on a), then uncordons b, so that draining or losing a leaves b as the place to go.

use std::time::Duration;

use serde_json::{Value, json};

use crate::agents::{
    Agent, alive, app_status, apply, get_json, kill_all_with, kubectl_ok, processes_with, the_process,
    two_nodes, unique, wait_for,
};
use crate::{Controller, have_kubectl};

/// An Application running a shell loop tagged with `marker`, pinned to `node` when given (else
/// placed by the scheduler), stopped within three seconds.
fn looping(name: &str, marker: &str, node: Option<&str>) -> Value {
    let script = format!("while true; do sleep 1; done; : {marker}");
    let mut spec =
        json!({"command": ["/bin/sh", "-c", script], "lifecycle": {"terminationGracePeriodSeconds": 3}});
    if let Some(node) = node {
        spec["placement"] = json!({"nodeName": node});
    }
    json!({"apiVersion": "fleet.example.com/v1", "kind": "Application", "metadata": {"name": name, "namespace": "default"}, "spec": spec})
}

fn bound_node(controller: &Controller, name: &str) -> Option<String> {
    let app = get_json(controller, &["get", "app", name])?;
    app["spec"]["placement"]["nodeName"].as_str().map(str::to_owned)
}

/// The workload processes (not their supervisors) tagged with `marker`.
fn workloads(marker: &str) -> Vec<u32> {
    processes_with(marker)
        .into_iter()
        .map(|(pid, _)| pid)
        .filter(|pid| !crate::agents::is_supervisor(*pid))
        .collect()
}

/// `roamer` placed by the scheduler on `a` and `anchor` pinned there, both running; answers
/// their processes. `b` is left schedulable.
fn placed_on_a(controller: &Controller, a: &Agent, b: &Agent, roamer: &str, anchor: &str) -> (u32, u32) {
    kubectl_ok(controller, &["cordon", &b.name]);
    apply(controller, &looping("roamer", roamer, None));
    apply(controller, &looping("anchor", anchor, Some(&a.name)));
    for name in ["roamer", "anchor"] {
        wait_for(&format!("{name} to run on {}", a.name), Duration::from_secs(30), || {
            let running = app_status(controller, name)["phase"] == "Running";
            (running && bound_node(controller, name).as_deref() == Some(&a.name)).then_some(())
        });
    }
    let app = get_json(controller, &["get", "app", "roamer"]).unwrap_or_default();
    assert_eq!(
        app["metadata"]["annotations"]["fleet.example.com/scheduled-by"], "kayra-scheduler",
        "the scheduler marks what it places: {app}"
    );
    let pids = (the_process(roamer).0, the_process(anchor).0);
    kubectl_ok(controller, &["uncordon", &b.name]);
    pids
}

/// `roamer` runs on `b` in a process of its own, the one on `a` stopped.
fn moved_to_b(controller: &Controller, b: &Agent, roamer: &str, old: u32) {
    wait_for("roamer to run on b", Duration::from_secs(60), || {
        let running = app_status(controller, "roamer")["phase"] == "Running";
        (running && bound_node(controller, "roamer").as_deref() == Some(&b.name)).then_some(())
    });
    wait_for("roamer's new process", Duration::from_secs(30), || {
        workloads(roamer).into_iter().any(|pid| pid != old).then_some(())
    });
}

/// `kubectl drain` of `node` as an operator runs it: whether it succeeded, and what it said.
fn drain(controller: &Controller, node: &str) -> (std::process::Output, String) {
    let drained = controller.kubectl(&[
        "drain",
        node,
        "--ignore-daemonsets",
        "--delete-emptydir-data",
        "--timeout=20s",
    ]);
    let said =
        format!("{}{}", String::from_utf8_lossy(&drained.stdout), String::from_utf8_lossy(&drained.stderr));
    (drained, said)
}

#[test]
fn kubectl_drain_moves_what_the_scheduler_placed_and_reports_what_is_pinned() {
    if !have_kubectl() {
        return;
    }
    let controller = Controller::start(&["--store", "memory"]);
    let (a, b) = two_nodes(&controller);
    let (roamer, anchor) = (unique("roamer"), unique("anchor"));
    let (roamer_pid, anchor_pid) = placed_on_a(&controller, &a, &b, &roamer, &anchor);

    let (drained, said) = drain(&controller, &a.name);
    assert!(!drained.status.success(), "a pinned pod keeps the node from draining: {said}");
    assert!(said.contains("cordoned"), "{said}");
    assert!(said.contains("pod/roamer evicted"), "{said}");
    assert!(
        said.contains("\"anchor\"")
            && said.contains("Cannot evict pod as it would violate the pod's disruption budget."),
        "drain reports the pinned pod: {said}"
    );
    let node = get_json(&controller, &["get", "node", &a.name]).unwrap_or_default();
    assert_eq!(node["spec"]["unschedulable"], true, "drain cordons the node");

    moved_to_b(&controller, &b, &roamer, roamer_pid);
    wait_for("roamer's old process to stop", Duration::from_secs(15), || (!alive(roamer_pid)).then_some(()));
    assert!(alive(anchor_pid), "the pinned Application stays where its author put it");
    assert_eq!(bound_node(&controller, "anchor").as_deref(), Some(a.name.as_str()));
    let events =
        kubectl_ok(&controller, &["get", "events", "--field-selector", "involvedObject.name=roamer"]);
    assert!(events.contains("Evicted"), "{events}");

    // Without the pin, a drain empties the node.
    kubectl_ok(&controller, &["delete", "app", "anchor"]);
    let (drained, said) = drain(&controller, &a.name);
    assert!(drained.status.success(), "nothing pinned is left: {said}");
    assert!(said.contains("drained"), "{said}");
    let apps = get_json(&controller, &["get", "apps"]).unwrap_or_default();
    let on_a: Vec<&Value> = apps["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|app| app["spec"]["placement"]["nodeName"] == a.name.as_str())
        .collect();
    assert!(on_a.is_empty(), "nothing is bound to the drained node: {on_a:?}");
    wait_for("anchor's process to stop", Duration::from_secs(15), || (!alive(anchor_pid)).then_some(()));
    assert_eq!(bound_node(&controller, "roamer").as_deref(), Some(b.name.as_str()));
    drop((a, b));
    kill_all_with(&roamer);
    kill_all_with(&anchor);
}

#[test]
fn a_lost_node_s_applications_move_and_its_old_processes_stop_when_it_returns() {
    if !have_kubectl() {
        return;
    }
    let settings = tempfile::tempdir().unwrap();
    let config = settings.path().join("kayra.yaml");
    // The agent's heartbeat comes every 10 s: 12 s of silence makes it Ready=Unknown.
    std::fs::write(&config, "nodeReadyTimeoutSeconds: 12\nnodeLostTimeoutSeconds: 5\n").unwrap();
    let controller = Controller::start(&["--store", "memory", "--config", config.to_str().unwrap()]);
    let (mut a, b) = two_nodes(&controller);
    let (roamer, anchor) = (unique("roamer"), unique("anchor"));
    let (roamer_pid, anchor_pid) = placed_on_a(&controller, &a, &b, &roamer, &anchor);

    // The agent dies; its supervisors keep the processes running on a node nobody hears from.
    a.kill();
    moved_to_b(&controller, &b, &roamer, roamer_pid);
    assert!(alive(roamer_pid), "nothing stopped the old process while its node was away");
    let lost = wait_for("anchor to say its node is lost", Duration::from_secs(30), || {
        let conditions = app_status(&controller, "anchor")["conditions"].as_array()?.clone();
        conditions.into_iter().find(|c| c["type"] == "NodeLost" && c["status"] == "True")
    });
    assert!(lost["message"].as_str().unwrap_or_default().contains(&a.name), "{lost}");
    assert_eq!(bound_node(&controller, "anchor").as_deref(), Some(a.name.as_str()), "a pin is never moved");
    let events =
        kubectl_ok(&controller, &["get", "events", "--field-selector", "involvedObject.name=roamer"]);
    assert!(events.contains("NodeLost"), "{events}");

    // Back, the agent finds roamer no longer bound to it and stops it; anchor runs on.
    a.run();
    wait_for("the old roamer process to stop", Duration::from_secs(40), || {
        (!alive(roamer_pid)).then_some(())
    });
    assert!(alive(anchor_pid), "the pinned Application's process runs on");
    assert_eq!(workloads(&roamer).len(), 1, "only the process on b is left");
    wait_for("anchor's NodeLost condition to go", Duration::from_secs(30), || {
        let conditions =
            app_status(&controller, "anchor")["conditions"].as_array().cloned().unwrap_or_default();
        (!conditions.iter().any(|c| c["type"] == "NodeLost")).then_some(())
    });
    drop((a, b));
    kill_all_with(&roamer);
    kill_all_with(&anchor);
}
