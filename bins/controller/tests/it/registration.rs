//! How a node that joins with a bootstrap token is registered, with real `kayra-agent`
//! processes: at once schedulable, so the scheduler places work there without an uncordon;
//! cordoned or tainted when its agent joined asking so (kept with its data directory for every
//! later `kayra-agent run`); and cordoned when its Node comes back after `kubectl delete node`.

use std::time::Duration;

use serde_json::{Value, json};

use crate::agents::{
    Agent, app_status, apply, get_json, join_line, kill_all_with, kubectl_ok, unique, wait_for,
};
use crate::{Controller, have_kubectl};

/// Node `name` once it is registered and Ready.
fn registered(controller: &Controller, name: &str) -> Value {
    wait_for(&format!("node {name} to be Ready"), Duration::from_secs(30), || {
        let node = get_json(controller, &["get", "node", name])?;
        let ready = node["status"]["conditions"]
            .as_array()?
            .iter()
            .any(|c| c["type"] == "Ready" && c["status"] == "True");
        ready.then_some(node)
    })
}

/// Node `name` once it is registered again after the Node whose uid is `deleted` went.
fn registered_again(controller: &Controller, name: &str, deleted: &Value) -> Value {
    wait_for(&format!("node {name} to be registered again"), Duration::from_secs(40), || {
        get_json(controller, &["get", "node", name]).filter(|node| node["metadata"]["uid"] != *deleted)
    })
}

/// What node `name`'s `RegisteredNode` Events say.
fn registrations(controller: &Controller, name: &str) -> String {
    let selector = format!("involvedObject.name={name},reason=RegisteredNode");
    kubectl_ok(controller, &["get", "events", "-n", "default", "--field-selector", &selector])
}

/// The taints of a Node, as spelled on kubelet's command line.
fn taints(node: &Value) -> Vec<String> {
    let taints = node["spec"]["taints"].as_array().cloned().unwrap_or_default();
    taints
        .iter()
        .map(|t| match t["value"].as_str() {
            Some(value) => {
                format!("{}={value}:{}", t["key"].as_str().unwrap(), t["effect"].as_str().unwrap())
            }
            None => format!("{}:{}", t["key"].as_str().unwrap(), t["effect"].as_str().unwrap()),
        })
        .collect()
}

#[test]
fn a_joined_node_takes_work_at_once_and_comes_back_cordoned_after_kubectl_delete_node() {
    if !have_kubectl() {
        return;
    }
    let controller = Controller::start(&["--store", "sled"]);
    let agent = Agent::join(&join_line(&controller), &unique("joined"));
    let node = registered(&controller, &agent.name);
    assert_eq!(node["spec"]["unschedulable"], Value::Null, "{node}\n{}", agent.log());
    assert_eq!(node["spec"]["taints"], Value::Null, "{node}");

    // The scheduler places an Application there, with no uncordon.
    let marker = unique("placed");
    let app = json!({"apiVersion": "fleet.example.com/v1", "kind": "Application",
                     "metadata": {"name": "placed", "namespace": "default"},
                     "spec": {"command": ["/bin/sh", "-c", format!("sleep 600 # {marker}")]}});
    apply(&controller, &app);
    wait_for("the placed Application to run", Duration::from_secs(30), || {
        (app_status(&controller, "placed")["phase"] == "Running").then_some(())
    });
    let placed = get_json(&controller, &["get", "app", "placed"]).unwrap();
    assert_eq!(placed["spec"]["placement"]["nodeName"], json!(agent.name), "{placed}");

    // `kubectl delete node` is an operator's act: the node's next status brings its Node back
    // cordoned, and says so.
    kubectl_ok(&controller, &["delete", "node", &agent.name]);
    let again = registered_again(&controller, &agent.name, &node["metadata"]["uid"]);
    assert_eq!(again["spec"]["unschedulable"], true, "{again}");
    let events = registrations(&controller, &agent.name);
    assert!(events.contains("registered itself again after its Node was deleted"), "{events}");

    kubectl_ok(&controller, &["delete", "app", "placed"]);
    kill_all_with(&marker);
}

#[test]
fn cordon_and_registration_taints_shape_the_node_and_stay_with_its_data_directory() {
    if !have_kubectl() {
        return;
    }
    let controller = Controller::start(&["--store", "sled"]);
    let line = join_line(&controller);

    let cordoned = Agent::join_with(&line, &unique("cordoned"), &["--cordon"]);
    let node = registered(&controller, &cordoned.name);
    assert_eq!(node["spec"]["unschedulable"], true, "{node}\n{}", cordoned.log());
    assert!(registrations(&controller, &cordoned.name).contains("cordoned as it asked"));

    let asked = ["dedicated=gpu:NoSchedule", "spot:PreferNoSchedule"];
    let mut tainted =
        Agent::join_with(&line, &unique("tainted"), &["--register-with-taints", &asked.join(",")]);
    let node = registered(&controller, &tainted.name);
    assert_eq!(node["spec"]["unschedulable"], Value::Null, "{node}\n{}", tainted.log());
    assert_eq!(taints(&node), asked, "{node}");

    // `kayra-agent run` asks for the same taints: the Node deleted while the agent was down
    // comes back with them, cordoned.
    tainted.kill();
    kubectl_ok(&controller, &["delete", "node", &tainted.name]);
    tainted.run();
    let again = registered_again(&controller, &tainted.name, &node["metadata"]["uid"]);
    assert_eq!(
        (again["spec"]["unschedulable"].clone(), taints(&again)),
        (json!(true), asked.map(str::to_owned).to_vec()),
        "{again}"
    );

    // A taint kubelet would not take is refused before anything is sent.
    let mut refused =
        Agent::join_with(&line, &unique("refused"), &["--register-with-taints", "dedicated=gpu"]);
    assert!(!refused.exit_status().success(), "{}", refused.log());
    assert!(refused.log().contains("key=value:Effect"), "{}", refused.log());
}
