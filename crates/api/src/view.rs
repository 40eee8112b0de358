//! Read-only views: Kinds served in a builtin shape but stored as another Kind. Core `v1`
//! Pods are a view of Applications, one Pod per Application, so `kubectl get pods` (and later
//! `logs` and `top`) work.
//!
//! A Pod is one placement of its Application, as a rescheduled pod is a new pod in
//! Kubernetes: its `uid` is derived from the Application's and the node's, so an Application
//! moved to another node (or unbound, awaiting placement) is a new Pod, which is how `kubectl
//! drain` sees an evicted pod gone. Its controller (`ownerReferences`) is the Application, which
//! keeps it running wherever it is placed.

use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};

use crate::kinds::ConditionType;
use crate::kinds::application::{BACK_OFF, NODE_NAME_POINTER, bound_node};
use crate::scheme::{ATTACH, BINDING, EVICTION, EXEC, KindInfo, LOG, NameRule, PORTFORWARD, TOKEN, typed};
use crate::table::{Column, field_of_typed_entry, text_or_none};
use crate::verb::Verb;

/// The Pod an Application appears as.
pub fn pod_from_application(application: &Value) -> Value {
    let mut metadata = application.get("metadata").cloned().unwrap_or_else(|| json!({}));
    let node = application.as_object().and_then(bound_node);
    if let Some(map) = metadata.as_object_mut() {
        map.remove("managedFields");
        let uid = map.get("uid").and_then(Value::as_str).unwrap_or_default().to_owned();
        let name = map.get("name").cloned().unwrap_or(Value::Null);
        let api_version = application.get("apiVersion").cloned().unwrap_or(Value::Null);
        map.insert(
            "ownerReferences".into(),
            json!([{"apiVersion": api_version, "kind": "Application", "name": name, "uid": uid,
                    "controller": true, "blockOwnerDeletion": true}]),
        );
        if let Some(node) = node {
            map.insert("uid".into(), Value::String(placement_uid(&uid, node)));
        }
    }
    let status = application.get("status");
    let phase = status.and_then(|s| s.get("phase")).and_then(Value::as_str).unwrap_or("Pending");
    let condition = |field: &str| {
        field_of_typed_entry(application, "/status/conditions", ConditionType::Ready.as_str(), field)
    };
    let ready = condition("status") == Some("True");
    let backing_off = condition("reason") == Some(BACK_OFF);
    let restarts = status.and_then(|s| s.get("restarts")).and_then(Value::as_i64).unwrap_or(0);
    let mut command = application.pointer("/spec/command").cloned().unwrap_or_else(|| json!([]));
    if let (Some(command), Some(args)) =
        (command.as_array_mut(), application.pointer("/spec/args").and_then(Value::as_array))
    {
        command.extend(args.iter().cloned());
    }
    let mut container = json!({"name": "app", "command": command});
    if let Some(resources) = application.pointer("/spec/resources") {
        container["resources"] = resources.clone();
    }
    // What `kubectl port-forward` resolves a named port by, and what `kubectl attach -i` reads.
    if let Some(ports) = application.pointer("/spec/ports").and_then(Value::as_array) {
        let ports: Vec<Value> = ports
            .iter()
            .map(|port| {
                let mut declared = json!({"containerPort": port["port"], "protocol": port.get("protocol").cloned().unwrap_or_else(|| json!("TCP"))});
                if let Some(name) = port.get("name") {
                    declared["name"] = name.clone();
                }
                declared
            })
            .collect();
        container["ports"] = Value::Array(ports);
    }
    if application.pointer("/spec/stdin") == Some(&Value::Bool(true)) {
        container["stdin"] = Value::Bool(true);
    }
    let mut spec = json!({"containers": [container]});
    if let Some(node) = application.pointer(NODE_NAME_POINTER) {
        spec["nodeName"] = node.clone();
    }
    let mut pod_status = json!({
        "phase": if phase == "Terminating" { "Running" } else { phase },
        "conditions": [{"type": ConditionType::Ready.as_str(), "status": if ready { "True" } else { "False" }}],
    });
    // A Pod not yet placed has no container to report on, as no kubelet has seen it yet.
    if node.is_some() {
        let mut container = json!({
            "name": "app", "ready": ready, "restartCount": restarts, "image": "", "imageID": "",
            "state": container_state(phase, status, backing_off),
        });
        if backing_off && status.is_some_and(|s| s.get("finishedAt").is_some()) {
            container["lastState"] = terminated(status);
        }
        pod_status["containerStatuses"] = json!([container]);
    }
    if let Some(address) = status.and_then(|s| s.get("address")) {
        pod_status["podIP"] = address.clone();
    }
    if let Some(started) = status.and_then(|s| s.get("startedAt")) {
        pod_status["startTime"] = started.clone();
    }
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec, "status": pod_status})
}

/// A Pod's STATUS as `kubectl get pods` prints it (kubectl's pod printer): the reason a
/// container waits or ended with (`CrashLoopBackOff`, `Error`, `OOMKilled`, `Completed`), or
/// `ExitCode:<n>` when it ended without one, then `Terminating` once the Pod is being deleted;
/// else the pod's reason or phase.
pub fn printed_status(pod: &Value) -> String {
    let text = |value: &Value, pointer: &str| {
        value.pointer(pointer).and_then(Value::as_str).filter(|text| !text.is_empty()).map(str::to_owned)
    };
    let mut reason = text(pod, "/status/reason").or_else(|| text(pod, "/status/phase")).unwrap_or_default();
    let mut running = false;
    let containers = pod.pointer("/status/containerStatuses").and_then(Value::as_array);
    for container in containers.into_iter().flatten().rev() {
        if let Some(waiting) = text(container, "/state/waiting/reason") {
            reason = waiting;
        } else if let Some(terminated) = container.pointer("/state/terminated") {
            reason = match text(terminated, "/reason") {
                Some(ended) => ended,
                None => {
                    match terminated.get("signal").and_then(Value::as_i64).filter(|signal| *signal != 0) {
                        Some(signal) => format!("Signal:{signal}"),
                        None => format!(
                            "ExitCode:{}",
                            terminated.get("exitCode").and_then(Value::as_i64).unwrap_or(0)
                        ),
                    }
                }
            };
        } else if container.get("ready").and_then(Value::as_bool) == Some(true)
            && container.pointer("/state/running").is_some()
        {
            running = true;
        }
    }
    if reason == "Completed" && running {
        reason = "Running".to_owned();
    }
    if pod.pointer("/metadata/deletionTimestamp").is_some_and(|at| !at.is_null()) {
        reason = "Terminating".to_owned();
    }
    reason
}

/// The uid of an Application's Pod on `node`: a UUID-shaped digest of both (FNV-1a, two seeds),
/// stable across reads and different for every node.
pub fn placement_uid(application_uid: &str, node: &str) -> String {
    let digest = |seed: u64| {
        let mut hash = seed;
        for byte in application_uid.bytes().chain([0]).chain(node.bytes()) {
            hash ^= u64::from(byte);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
        hash
    };
    let (high, low) = (digest(0xcbf2_9ce4_8422_2325), digest(0x6c62_272e_07bb_0142));
    format!(
        "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
        high >> 32,
        (high >> 16) & 0xffff,
        high & 0xffff,
        low >> 48,
        low & 0xffff_ffff_ffff
    )
}

/// Pods as served: read-only, each the view of an Application, with the subresources kubectl
/// uses on pods (`logs`, `drain`'s eviction, a scheduler's binding, `exec`, `attach`, `port-forward`).
pub(crate) fn pod() -> KindInfo {
    KindInfo {
        short_names: &["po"],
        categories: &["all"],
        subresources: &[LOG, EVICTION, BINDING, TOKEN, EXEC, ATTACH, PORTFORWARD],
        field_labels: &["spec.nodeName", "status.phase", "status.podIP"],
        columns: &[
            Column {
                name: "Ready",
                type_: "string",
                format: "",
                description: "Ready containers",
                priority: 0,
                cell: |o, _| {
                    Value::String(
                        if o.pointer("/status/containerStatuses/0/ready").and_then(Value::as_bool)
                            == Some(true)
                        {
                            "1/1"
                        } else {
                            "0/1"
                        }
                        .into(),
                    )
                },
            },
            Column {
                name: "Status",
                type_: "string",
                format: "",
                description: "Why the pod's container waits or ended, or the pod's phase",
                priority: 0,
                cell: |o, _| Value::String(printed_status(o)),
            },
            Column {
                name: "Restarts",
                type_: "integer",
                format: "",
                description: "Container restarts",
                priority: 0,
                cell: |o, _| {
                    o.pointer("/status/containerStatuses/0/restartCount").cloned().unwrap_or(Value::from(0))
                },
            },
            Column {
                name: "IP",
                type_: "string",
                format: "",
                description: "The pod's address",
                priority: 1,
                cell: |o, _| text_or_none(o, "status.podIP"),
            },
            Column {
                name: "Node",
                type_: "string",
                format: "",
                description: "The node the pod runs on",
                priority: 1,
                cell: |o, _| text_or_none(o, "spec.nodeName"),
            },
        ],
        verbs: &[Verb::Get, Verb::List, Verb::Watch],
        builtin: true,
        view_of: Some(("applications", pod_from_application)),
        ..KindInfo::v1("", "Pod", "pods", "pod", true, NameRule::Subdomain, typed::<Pod>())
    }
}

/// The container state kubectl describes: running since, terminated how, or waiting why. A
/// process the node will run again once its restart back-off is over waits in
/// `CrashLoopBackOff`, as a crashing container does under kubelet.
fn container_state(phase: &str, status: Option<&Value>, backing_off: bool) -> Value {
    let field = |name: &str| status.and_then(|s| s.get(name)).cloned().unwrap_or(Value::Null);
    let waiting = |reason: &str| {
        let mut waiting = json!({"reason": reason});
        if let Some(message) = field("message").as_str() {
            waiting["message"] = json!(message);
        }
        json!({"waiting": waiting})
    };
    match phase {
        "Running" | "Terminating" if backing_off => waiting(BACK_OFF),
        "Running" | "Terminating" => json!({"running": {"startedAt": field("startedAt")}}),
        "Succeeded" | "Failed" => terminated(status),
        _ if backing_off || field("restarts").as_i64().unwrap_or(0) > 0 => waiting(BACK_OFF),
        _ => waiting("ContainerCreating"),
    }
}

/// The container state of the Application's last run, which ended.
fn terminated(status: Option<&Value>) -> Value {
    let field = |name: &str| status.and_then(|s| s.get(name)).cloned().unwrap_or(Value::Null);
    let exit_code = field("exitCode").as_i64().unwrap_or(0);
    let reason = match field("message").as_str() {
        Some(message) if message.contains("OOMKilled") => "OOMKilled",
        _ if exit_code == 0 => "Completed",
        _ => "Error",
    };
    json!({"terminated": {
        "exitCode": exit_code, "reason": reason,
        "startedAt": field("startedAt"), "finishedAt": field("finishedAt"),
    }})
}

#[cfg(test)]
mod tests;
