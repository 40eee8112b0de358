//! The scheduler with real agents: unpinned Applications spread over the nodes (or pack onto
//! one under `scheduler.policy: binpack`), a cordoned node gets none, `kubectl taint ...
//! NoExecute` moves what the scheduler placed, and an Application that fits nowhere says why
//! in kube-scheduler's words in `kubectl describe`.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{Value, json};

use crate::agents::{
    Agent, app_status, apply, get_json, kill_all_with, kubectl_ok, two_nodes, unique, wait_for,
};
use crate::{Controller, have_kubectl};

/// An unpinned Application running a shell loop tagged with `marker`.
fn unpinned(name: &str, marker: &str, extra: Value) -> Value {
    let script = format!("while true; do sleep 1; done; : {marker}");
    let mut spec =
        json!({"command": ["/bin/sh", "-c", script], "lifecycle": {"terminationGracePeriodSeconds": 2}});
    if let (Some(spec), Some(extra)) = (spec.as_object_mut(), extra.as_object()) {
        spec.extend(extra.clone());
    }
    json!({"apiVersion": "fleet.example.com/v1", "kind": "Application",
           "metadata": {"name": name, "namespace": "default"}, "spec": spec})
}

/// Where each of `names` is bound, once all are.
fn bound(controller: &Controller, names: &[String]) -> BTreeMap<String, String> {
    wait_for(&format!("{names:?} to be bound"), Duration::from_secs(30), || {
        let mut nodes = BTreeMap::new();
        for name in names {
            let app = get_json(controller, &["get", "app", name])?;
            let node = app["spec"]["placement"]["nodeName"].as_str()?.to_owned();
            nodes.insert(name.clone(), node);
        }
        Some(nodes)
    })
}

fn count_on(nodes: &BTreeMap<String, String>, node: &str) -> usize {
    nodes.values().filter(|n| *n == node).count()
}

/// Stops what the test's Applications run (the agents' drop stops the rest).
struct Cleanup(String);

impl Drop for Cleanup {
    fn drop(&mut self) {
        kill_all_with(&self.0);
    }
}

#[test]
fn the_scheduler_spreads_avoids_cordoned_nodes_obeys_no_execute_and_explains() {
    if !have_kubectl() {
        return;
    }
    let controller = Controller::start(&["--store", "sled"]);
    let (a, b): (Agent, Agent) = two_nodes(&controller);
    let marker = unique("sched");
    let _cleanup = Cleanup(marker.clone());

    // Six unpinned Applications spread three and three, each bound by the scheduler (the
    // annotation) and running.
    let six: Vec<String> = (0..6).map(|i| format!("spread-{i}")).collect();
    for name in &six {
        apply(&controller, &unpinned(name, &marker, json!({})));
    }
    let placed = bound(&controller, &six);
    assert_eq!((count_on(&placed, &a.name), count_on(&placed, &b.name)), (3, 3), "{placed:?}");
    let first = get_json(&controller, &["get", "app", "spread-0"]).unwrap();
    assert_eq!(
        first["metadata"]["annotations"]["fleet.example.com/scheduled-by"], "kayra-scheduler",
        "{first}"
    );
    for name in &six {
        wait_for(&format!("{name} to run"), Duration::from_secs(30), || {
            let status = app_status(&controller, name);
            let scheduled = status["conditions"]
                .as_array()
                .is_some_and(|c| c.iter().any(|c| c["type"] == "Scheduled" && c["status"] == "True"));
            (status["phase"] == "Running" && scheduled).then_some(())
        });
    }
    let events = kubectl_ok(&controller, &["get", "events", "--field-selector", "reason=Scheduled"]);
    assert!(events.contains("Successfully assigned default/spread-0 to"), "{events}");

    // A cordoned node gets none.
    kubectl_ok(&controller, &["cordon", &a.name]);
    let two: Vec<String> = (0..2).map(|i| format!("cordoned-{i}")).collect();
    for name in &two {
        apply(&controller, &unpinned(name, &marker, json!({})));
    }
    let placed = bound(&controller, &two);
    assert_eq!(count_on(&placed, &b.name), 2, "{placed:?}");
    kubectl_ok(&controller, &["uncordon", &a.name]);

    // NoExecute on b moves everything the scheduler put there to a.
    kubectl_ok(&controller, &["taint", "nodes", &b.name, "maintenance=now:NoExecute"]);
    let all: Vec<String> = six.iter().chain(&two).cloned().collect();
    wait_for("every Application to leave the tainted node", Duration::from_secs(30), || {
        let placed = bound(&controller, &all);
        (count_on(&placed, &a.name) == all.len()).then_some(())
    });
    let evictions =
        kubectl_ok(&controller, &["get", "events", "--field-selector", "reason=TaintManagerEviction"]);
    assert!(evictions.contains("maintenance"), "{evictions}");

    // Fitting nowhere: Pending, Scheduled=False, and kube-scheduler's message in describe.
    apply(
        &controller,
        &unpinned("too-big", &marker, json!({"resources": {"requests": {"memory": "1000Ti"}}})),
    );
    let expected =
        "0/2 nodes are available: 1 Insufficient memory, 1 node(s) had untolerated taint {maintenance: now}.";
    wait_for("too-big to be explained", Duration::from_secs(30), || {
        let status = app_status(&controller, "too-big");
        let condition = status["conditions"].as_array()?.iter().find(|c| c["type"] == "Scheduled")?.clone();
        (status["phase"] == "Pending" && condition["status"] == "False" && condition["message"] == expected)
            .then_some(())
    });
    let described = wait_for("the FailedScheduling event", Duration::from_secs(15), || {
        let described = kubectl_ok(&controller, &["describe", "app", "too-big"]);
        described.contains("FailedScheduling").then_some(described)
    });
    assert!(described.contains(expected), "{described}");
    // The explanation is not rewritten while nothing changes: one event.
    std::thread::sleep(Duration::from_secs(3));
    let failures = kubectl_ok(
        &controller,
        &["get", "events", "--field-selector", "reason=FailedScheduling", "-o", "name"],
    );
    assert_eq!(failures.lines().count(), 1, "{failures}");
    assert!(app_status(&controller, "too-big")["conditions"].is_array());
}

#[test]
fn binpack_puts_unpinned_applications_on_one_node() {
    if !have_kubectl() {
        return;
    }
    let config = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(config.path(), "scheduler:\n  policy: binpack\n").unwrap();
    let controller = Controller::start(&["--store", "sled", "--config", config.path().to_str().unwrap()]);
    let (a, b) = two_nodes(&controller);
    let marker = unique("binpack");
    let _cleanup = Cleanup(marker.clone());
    let six: Vec<String> = (0..6).map(|i| format!("packed-{i}")).collect();
    for name in &six {
        apply(&controller, &unpinned(name, &marker, json!({})));
    }
    let placed = bound(&controller, &six);
    let counts = (count_on(&placed, &a.name), count_on(&placed, &b.name));
    assert!(counts == (6, 0) || counts == (0, 6), "{placed:?}");
}
