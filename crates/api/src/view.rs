//! Read-only views: Kinds served in a builtin shape but stored as another Kind. Core `v1`
//! Pods are a view of Applications, one Pod per Application, so `kubectl get pods` (and later
//! `logs` and `top`) work.
//!
//! A Pod is one placement of its Application, as a rescheduled pod is a new pod in
//! Kubernetes: its `uid` is derived from the Application's and the node's, so an Application
//! moved to another node (or unbound, awaiting placement) is a new Pod, which is how `kubectl
//! drain` sees an evicted pod gone. Its controller (`ownerReferences`) is the Application, which
//! keeps it running wherever it is placed.

use serde_json::{Value, json};

use crate::table::field_of_typed_entry;

/// The Pod an Application appears as.
pub fn pod_from_application(application: &Value) -> Value {
    let mut metadata = application.get("metadata").cloned().unwrap_or_else(|| json!({}));
    let node =
        application.pointer("/spec/placement/nodeName").and_then(Value::as_str).filter(|n| !n.is_empty());
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
    let ready = field_of_typed_entry(application, "/status/conditions", "Ready", "status") == Some("True");
    let backing_off = field_of_typed_entry(application, "/status/conditions", "Ready", "reason")
        == Some(crate::kinds::application::BACK_OFF);
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
    let mut spec = json!({"containers": [container]});
    if let Some(node) = application.pointer("/spec/placement/nodeName") {
        spec["nodeName"] = node.clone();
    }
    let mut pod_status = json!({
        "phase": if phase == "Terminating" { "Running" } else { phase },
        "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}],
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
        "Running" | "Terminating" if backing_off => waiting(crate::kinds::application::BACK_OFF),
        "Running" | "Terminating" => json!({"running": {"startedAt": field("startedAt")}}),
        "Succeeded" | "Failed" => terminated(status),
        _ if backing_off || field("restarts").as_i64().unwrap_or(0) > 0 => {
            waiting(crate::kinds::application::BACK_OFF)
        }
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
mod tests {
    use super::*;

    #[test]
    fn an_application_appears_as_its_pod() {
        let application = json!({
            "apiVersion": "fleet.example.com/v1", "kind": "Application",
            "metadata": {"name": "web", "namespace": "default", "labels": {"tier": "web"}},
            "spec": {"command": ["/bin/web"], "args": ["--port", "80"], "placement": {"nodeName": "n1"}},
            "status": {"phase": "Running", "restarts": 2, "address": "10.0.0.5", "conditions": [{"type": "Ready", "status": "True"}]},
        });
        let pod = pod_from_application(&application);
        assert_eq!(pod["metadata"]["labels"]["tier"], "web");
        assert_eq!(pod["spec"]["nodeName"], "n1");
        assert_eq!(pod["spec"]["containers"][0]["command"], json!(["/bin/web", "--port", "80"]));
        assert_eq!(
            (pod["status"]["phase"].as_str(), pod["status"]["podIP"].as_str()),
            (Some("Running"), Some("10.0.0.5"))
        );
        assert_eq!(pod["status"]["containerStatuses"][0]["restartCount"], 2);
        assert!(pod["status"]["containerStatuses"][0]["state"]["running"].is_object());
        let failed = pod_from_application(&json!({
            "metadata": {"name": "job"},
            "spec": {"command": ["/bin/false"], "resources": {"limits": {"memory": "64Mi"}}, "placement": {"nodeName": "n1"}},
            "status": {"phase": "Failed", "exitCode": 137, "message": "OOMKilled: the memory limit was exceeded"},
        }));
        assert_eq!(failed["spec"]["containers"][0]["resources"]["limits"]["memory"], "64Mi");
        assert_eq!(failed["status"]["containerStatuses"][0]["state"]["terminated"]["reason"], "OOMKilled");
        assert_eq!(failed["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"], 137);
        assert_eq!(pod_from_application(&json!({"metadata": {"name": "new"}}))["status"]["phase"], "Pending");
    }

    #[test]
    fn an_application_waiting_out_a_restart_back_off_is_a_crash_looping_pod() {
        let application = |ready_reason: &str| {
            json!({
                "metadata": {"name": "flaky"},
                "spec": {"command": ["/bin/flaky"], "placement": {"nodeName": "n1"}},
                "status": {"phase": "Running", "restarts": 1, "exitCode": 3,
                           "startedAt": "2026-01-01T00:00:00Z", "finishedAt": "2026-01-01T00:00:01Z",
                           "message": "Error: exit code 3; back-off 10s restarting the process",
                           "conditions": [{"type": "Ready", "status": "False", "reason": ready_reason}]},
            })
        };
        let container = |pod: &Value| pod["status"]["containerStatuses"][0].clone();
        let waiting = container(&pod_from_application(&application("CrashLoopBackOff")));
        assert_eq!(waiting["state"]["waiting"]["reason"], "CrashLoopBackOff", "{waiting}");
        assert_eq!(
            waiting["state"]["waiting"]["message"],
            "Error: exit code 3; back-off 10s restarting the process"
        );
        assert_eq!(waiting["lastState"]["terminated"]["reason"], "Error", "{waiting}");
        assert_eq!(waiting["lastState"]["terminated"]["exitCode"], 3);
        // Running again (its readiness not yet known): running, whatever the message says.
        let running = container(&pod_from_application(&application("ReadinessProbePending")));
        assert!(running["state"]["running"].is_object(), "{running}");
        assert!(running.get("lastState").is_none(), "{running}");
        // A process that never started waits in back-off too, or is being created.
        let never_started = pod_from_application(&json!({
            "metadata": {"name": "missing"}, "spec": {"placement": {"nodeName": "n1"}},
            "status": {"phase": "Pending", "restarts": 0, "message": "/bin/nope: not found",
                       "conditions": [{"type": "Ready", "status": "False", "reason": "CrashLoopBackOff"}]},
        }));
        assert_eq!(container(&never_started)["state"]["waiting"]["reason"], "CrashLoopBackOff");
        let new = pod_from_application(
            &json!({"metadata": {"name": "new"}, "spec": {"placement": {"nodeName": "n1"}}}),
        );
        assert_eq!(container(&new)["state"]["waiting"]["reason"], "ContainerCreating");
        let unplaced = pod_from_application(&json!({"metadata": {"name": "new"}}));
        assert!(unplaced["status"].get("containerStatuses").is_none(), "{unplaced}");
    }

    #[test]
    fn the_status_column_reads_as_kubectls_pod_printer_prints_it() {
        let check = |application: Value, expected: &str| {
            let pod = pod_from_application(&application);
            assert_eq!(printed_status(&pod), expected, "{pod}");
        };
        let ready = |reason: &str, value: &str| json!([{"type": "Ready", "status": value, "reason": reason}]);
        let on_n1 = json!({"placement": {"nodeName": "n1"}});
        check(json!({"metadata": {"name": "unplaced"}}), "Pending");
        check(json!({"metadata": {"name": "new"}, "spec": on_n1}), "ContainerCreating");
        check(
            json!({"metadata": {"name": "web"}, "spec": on_n1, "status": {"phase": "Running", "conditions": ready("ProcessRunning", "True")}}),
            "Running",
        );
        check(
            json!({"metadata": {"name": "flaky"}, "spec": on_n1, "status": {"phase": "Running", "restarts": 2,
                   "conditions": ready("CrashLoopBackOff", "False")}}),
            "CrashLoopBackOff",
        );
        check(
            json!({"metadata": {"name": "job"}, "spec": on_n1, "status": {"phase": "Failed", "exitCode": 7}}),
            "Error",
        );
        check(
            json!({"metadata": {"name": "hog"}, "spec": on_n1, "status": {"phase": "Failed", "exitCode": 137,
                   "message": "OOMKilled: exit code 137"}}),
            "OOMKilled",
        );
        check(
            json!({"metadata": {"name": "done"}, "spec": on_n1, "status": {"phase": "Succeeded", "exitCode": 0}}),
            "Completed",
        );
        check(
            json!({"metadata": {"name": "going", "deletionTimestamp": "2026-01-01T00:00:00Z"}, "spec": on_n1,
                   "status": {"phase": "Running", "conditions": ready("ProcessRunning", "True")}}),
            "Terminating",
        );
        // A Pod from elsewhere, by kubectl's rules: an end without a reason prints its code.
        let pod = json!({"status": {"phase": "Failed", "containerStatuses": [{"state": {"terminated": {"exitCode": 2}}}]}});
        assert_eq!(printed_status(&pod), "ExitCode:2");
        assert_eq!(printed_status(&json!({"status": {"phase": "Pending", "reason": "Evicted"}})), "Evicted");
    }

    #[test]
    fn a_pod_is_one_placement_controlled_by_its_application() {
        let on = |node: Option<&str>| {
            pod_from_application(&json!({
                "apiVersion": "fleet.example.com/v1", "kind": "Application",
                "metadata": {"name": "web", "namespace": "default", "uid": "0b5e6c8e-1111-4222-8333-944455556666"},
                "spec": {"command": ["/bin/web"], "placement": {"nodeName": node}},
            }))
        };
        let (n1, n1_again, n2, unbound) = (on(Some("n1")), on(Some("n1")), on(Some("n2")), on(None));
        let uid = |pod: &Value| pod["metadata"]["uid"].as_str().unwrap_or_default().to_owned();
        assert_eq!(uid(&n1), uid(&n1_again), "the same placement is the same Pod");
        assert_ne!(uid(&n1), uid(&n2), "a moved Application is a new Pod");
        assert_ne!(uid(&n1), uid(&unbound), "an unbound Application is no longer the Pod on n1");
        assert_eq!(uid(&unbound), "0b5e6c8e-1111-4222-8333-944455556666");
        assert_eq!(uid(&n1).len(), 36, "shaped as a UUID: {}", uid(&n1));
        assert_eq!(
            n1["metadata"]["ownerReferences"],
            json!([{"apiVersion": "fleet.example.com/v1", "kind": "Application", "name": "web",
                    "uid": "0b5e6c8e-1111-4222-8333-944455556666", "controller": true, "blockOwnerDeletion": true}])
        );
    }
}
