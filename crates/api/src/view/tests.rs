//! How an Application appears as its Pod, and how kubectl prints the Pod.

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
