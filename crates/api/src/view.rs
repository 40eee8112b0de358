//! Read-only views: Kinds served in a builtin shape but stored as another Kind. Core `v1`
//! Pods are a view of Applications, one Pod per Application, so `kubectl get pods` (and later
//! `logs` and `top`) work.

use serde_json::{Value, json};

use crate::table::field_of_typed_entry;

/// The Pod an Application appears as.
pub fn pod_from_application(application: &Value) -> Value {
    let mut metadata = application.get("metadata").cloned().unwrap_or_else(|| json!({}));
    if let Some(map) = metadata.as_object_mut() {
        map.remove("managedFields");
    }
    let status = application.get("status");
    let phase = status.and_then(|s| s.get("phase")).and_then(Value::as_str).unwrap_or("Pending");
    let ready = field_of_typed_entry(application, "/status/conditions", "Ready", "status") == Some("True");
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
        "containerStatuses": [{
            "name": "app", "ready": ready, "restartCount": restarts, "image": "", "imageID": "",
            "state": container_state(phase, status),
        }],
    });
    if let Some(address) = status.and_then(|s| s.get("address")) {
        pod_status["podIP"] = address.clone();
    }
    if let Some(started) = status.and_then(|s| s.get("startedAt")) {
        pod_status["startTime"] = started.clone();
    }
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec, "status": pod_status})
}

/// The container state kubectl describes: running since, terminated how, or waiting why.
fn container_state(phase: &str, status: Option<&Value>) -> Value {
    let field = |name: &str| status.and_then(|s| s.get(name)).cloned().unwrap_or(Value::Null);
    match phase {
        "Running" | "Terminating" => json!({"running": {"startedAt": field("startedAt")}}),
        "Succeeded" | "Failed" => {
            let exit_code = field("exitCode").as_i64().unwrap_or(0);
            let message = field("message");
            let reason = match message.as_str() {
                Some(message) if message.contains("OOMKilled") => "OOMKilled",
                _ if exit_code == 0 => "Completed",
                _ => "Error",
            };
            json!({"terminated": {
                "exitCode": exit_code, "reason": reason,
                "startedAt": field("startedAt"), "finishedAt": field("finishedAt"),
            }})
        }
        _ => {
            let message = field("message");
            let reason = if field("restarts").as_i64().unwrap_or(0) > 0 {
                "CrashLoopBackOff"
            } else {
                "ContainerCreating"
            };
            let mut waiting = json!({"reason": reason});
            if message.is_string() {
                waiting["message"] = message;
            }
            json!({"waiting": waiting})
        }
    }
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
            "spec": {"command": ["/bin/false"], "resources": {"limits": {"memory": "64Mi"}}},
            "status": {"phase": "Failed", "exitCode": 137, "message": "OOMKilled: the memory limit was exceeded"},
        }));
        assert_eq!(failed["spec"]["containers"][0]["resources"]["limits"]["memory"], "64Mi");
        assert_eq!(failed["status"]["containerStatuses"][0]["state"]["terminated"]["reason"], "OOMKilled");
        assert_eq!(failed["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"], 137);
        assert_eq!(pod_from_application(&json!({"metadata": {"name": "new"}}))["status"]["phase"], "Pending");
    }
}
