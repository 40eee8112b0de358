//! The scheduler with real agents: unpinned Applications spread over the nodes (or pack onto
//! one under `scheduler.policy: binpack`), a cordoned node gets none, `kubectl taint ...
//! NoExecute` moves what the scheduler placed, and an Application that fits nowhere says why
//! in kube-scheduler's words in `kubectl describe`, with one `FailedScheduling` Event per
//! distinct explanation. One waiting is placed within seconds of a node being uncordoned or
//! capacity being freed; one placed stays put when labels or its own selector change later.

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
    // The explanation is not rewritten when a change that may let it fit (a node's labels)
    // leaves it as it was. too-big is the only Application that fits nowhere, so the next
    // unschedulable attempt after the label is its decision on the relabelled node; a rewrite
    // would follow that decision and come before the next one's, which the change below
    // causes: by the time that one's Event is there, a rewrite would have counted on the
    // first Event.
    let attempts = || controller.metric_sum("scheduler_schedule_attempts_total{result=\"unschedulable\"");
    let before = attempts();
    kubectl_ok(&controller, &["label", "nodes", &a.name, "relabelled=yes"]);
    wait_for("too-big to be tried on the relabelled node", Duration::from_secs(30), || {
        (attempts() > before).then_some(())
    });
    // A change that changes it: the condition says so, and a second event.
    kubectl_ok(&controller, &["taint", "nodes", &b.name, "maintenance-"]);
    let changed = "0/2 nodes are available: 2 Insufficient memory.";
    wait_for("too-big to be explained again", Duration::from_secs(15), || {
        let status = app_status(&controller, "too-big");
        let condition = status["conditions"].as_array()?.iter().find(|c| c["type"] == "Scheduled")?.clone();
        (condition["message"] == changed).then_some(())
    });
    wait_for("the second FailedScheduling event", Duration::from_secs(15), || {
        (events_about(&controller, "FailedScheduling", "too-big") == [expected, changed]).then_some(())
    });
    assert_eq!(
        event_counts(&controller, "FailedScheduling", "too-big"),
        [1, 1],
        "each explanation was written once: the relabelling rewrote none"
    );

    // Waiting for a schedulable node: placed within seconds of one being uncordoned.
    kubectl_ok(&controller, &["cordon", &a.name]);
    kubectl_ok(&controller, &["cordon", &b.name]);
    apply(&controller, &unpinned("waits-for-a-node", &marker, json!({})));
    explained(&controller, "waits-for-a-node", "0/2 nodes are available: 2 node(s) were unschedulable.");
    kubectl_ok(&controller, &["uncordon", &b.name]);
    let placed = placed_within(&controller, "waits-for-a-node", Duration::from_secs(5));
    assert_eq!(placed, b.name);
    kubectl_ok(&controller, &["uncordon", &a.name]);

    // Waiting for memory: placed within seconds of an Application on a node going. Each node
    // keeps less than half of what `waits-for-memory` asks free.
    let allocatable = |node: &str| {
        let node = get_json(&controller, &["get", "node", node]).unwrap_or_default();
        let memory = node["status"]["allocatable"]["memory"].as_str().unwrap_or_default().to_owned();
        kayra_api::quantity::Quantity::parse(&memory).map_or(0, |q| q.value() as u64)
    };
    let (on_a, on_b) = (allocatable(&a.name), allocatable(&b.name));
    let wanted = on_a.min(on_b) / 2;
    assert!(wanted > 0, "the agents report their memory: {on_a} {on_b}");
    for (hog, node, offered) in [("hog-a", &a.name, on_a), ("hog-b", &b.name, on_b)] {
        let placement = json!({"nodeName": node});
        let requests = json!({"memory": (offered - wanted / 2).to_string()});
        let extra = json!({"placement": placement, "resources": {"requests": requests}});
        apply(&controller, &unpinned(hog, &marker, extra));
    }
    let requests = json!({"requests": {"memory": wanted.to_string()}});
    apply(&controller, &unpinned("waits-for-memory", &marker, json!({"resources": requests})));
    explained(&controller, "waits-for-memory", "0/2 nodes are available: 2 Insufficient memory.");
    kubectl_ok(&controller, &["delete", "app", "hog-a"]);
    let placed = placed_within(&controller, "waits-for-memory", Duration::from_secs(5));
    assert_eq!(placed, a.name);
}

/// The messages of the Events of `reason` about Application `name`, oldest first.
fn events_about(controller: &Controller, reason: &str, name: &str) -> Vec<String> {
    events_with_counts(controller, reason, name).into_iter().map(|(message, _)| message).collect()
}

/// How many times each Event of `reason` about `name` was recorded, oldest first: a repeat
/// counts up on the Event written before instead of writing another.
fn event_counts(controller: &Controller, reason: &str, name: &str) -> Vec<u64> {
    events_with_counts(controller, reason, name).into_iter().map(|(_, count)| count).collect()
}

fn events_with_counts(controller: &Controller, reason: &str, name: &str) -> Vec<(String, u64)> {
    let reason = format!("reason={reason}");
    let events = get_json(controller, &["get", "events", "--field-selector", &reason]).unwrap_or_default();
    let mut about: Vec<(String, String, u64)> = events["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|event| event["involvedObject"]["name"] == name)
        .map(|event| {
            let at = event["metadata"]["creationTimestamp"].as_str().unwrap_or_default().to_owned();
            let resource_version = event["metadata"]["resourceVersion"].as_str().unwrap_or_default();
            (
                format!("{at} {resource_version:0>20}"),
                event["message"].as_str().unwrap_or_default().to_owned(),
                event["count"].as_u64().unwrap_or(1),
            )
        })
        .collect();
    about.sort();
    about.into_iter().map(|(_, message, count)| (message, count)).collect()
}

/// Waits for `name` to be Pending with `Scheduled=False` saying `message`.
fn explained(controller: &Controller, name: &str, message: &str) {
    wait_for(&format!("{name} to be explained"), Duration::from_secs(30), || {
        let status = app_status(controller, name);
        let condition = status["conditions"].as_array()?.iter().find(|c| c["type"] == "Scheduled")?.clone();
        (condition["status"] == "False" && condition["message"] == message).then_some(())
    });
}

/// The node `name` is bound to, once it is, within `within`.
fn placed_within(controller: &Controller, name: &str, within: Duration) -> String {
    wait_for(&format!("{name} to be placed"), within, || {
        let app = get_json(controller, &["get", "app", name])?;
        app["spec"]["placement"]["nodeName"].as_str().map(str::to_owned)
    })
}

#[test]
fn placement_is_ignored_during_execution() {
    if !have_kubectl() {
        return;
    }
    let controller = Controller::start(&["--store", "memory"]);
    let (a, _b) = two_nodes(&controller);
    let marker = unique("ignored");
    let _cleanup = Cleanup(marker.clone());
    kubectl_ok(&controller, &["label", "nodes", &a.name, "tier=gold"]);
    let selecting =
        |tier: &str| unpinned("selected", &marker, json!({"placement": {"nodeSelector": {"tier": tier}}}));
    apply(&controller, &selecting("gold"));
    assert_eq!(placed_within(&controller, "selected", Duration::from_secs(30)), a.name);
    wait_for("selected to run, with its Scheduled event", Duration::from_secs(30), || {
        let running = app_status(&controller, "selected")["phase"] == "Running";
        (running && events_about(&controller, "Scheduled", "selected").len() == 1).then_some(())
    });

    // The node no longer carries the label, and the Application selects another: it stays.
    kubectl_ok(&controller, &["label", "nodes", &a.name, "tier=silver", "--overwrite"]);
    apply(&controller, &selecting("bronze"));
    let edited = get_json(&controller, &["get", "app", "selected"]).unwrap_or_default();
    assert_eq!(edited["spec"]["placement"]["nodeSelector"]["tier"], "bronze", "{edited}");
    assert_eq!(edited["spec"]["placement"]["nodeName"], a.name.as_str(), "{edited}");
    // The scheduler follows the Applications in revision order and decides one pass after
    // another: one created after the edit is placed after the edit was seen, so a new
    // placement of `selected` would have been decided by the time the later one's Event is.
    apply(&controller, &unpinned("after-the-edit", &marker, json!({})));
    wait_for("after-the-edit to be placed, with its Scheduled event", Duration::from_secs(30), || {
        (events_about(&controller, "Scheduled", "after-the-edit").len() == 1).then_some(())
    });
    let app = get_json(&controller, &["get", "app", "selected"]).unwrap_or_default();
    assert_eq!(app["spec"]["placement"]["nodeName"], a.name.as_str(), "{app}");
    assert_eq!(event_counts(&controller, "Scheduled", "selected"), [1], "placed once");
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
