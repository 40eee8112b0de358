//! Services, their endpoints and what protects them, and ApplicationSet deletion through the
//! garbage collector, with real agents: a Service lists exactly its ready members (readiness
//! probes that pass and fail for real), `kubectl get svc -o wide` counts them, a Service or
//! Secret in use is not deleted, a set's children cannot be edited or forged by clients, and
//! `kubectl delete appset` cascades as `--cascade` says (background, foreground, orphan).
//!
//! The children here are made the way the set's loop makes them (its owner reference, labels
//! and spec hash, the names and spec it renders), applied by a control-plane identity through
//! impersonation, so the garbage collector is tested on its own; where the set's loop renders
//! them too, both write the same objects.

use std::time::Duration;

use serde_json::{Value, json};

use crate::agents::{
    Agent, app_status, apply, get_json, kill_all_with, kubectl_ok, processes_with, two_nodes, unique,
    wait_for,
};
use crate::{Controller, have_kubectl};

/// Stops what the test's Applications run (the agents' drop stops the rest).
struct Cleanup(String);

impl Drop for Cleanup {
    fn drop(&mut self) {
        kill_all_with(&self.0);
    }
}

/// A long-running Application on `node` joining Service `service`, tagged with `marker`,
/// declaring port `http` 8080, whose readiness probe runs `probe`.
fn member(name: &str, node: &str, service: &str, marker: &str, probe: &str) -> Value {
    json!({"apiVersion": "fleet.example.com/v1", "kind": "Application",
           "metadata": {"name": name, "namespace": "default"},
           "spec": {"command": ["/bin/sh", "-c", format!("while true; do sleep 1; done; : {marker}")],
                    "lifecycle": {"terminationGracePeriodSeconds": 2},
                    "placement": {"nodeName": node},
                    "serviceName": service,
                    "ports": [{"name": "http", "port": 8080}],
                    "probes": {"readiness": {"exec": {"command": [probe]}, "periodSeconds": 1}}}})
}

fn failed(output: &std::process::Output) -> String {
    assert!(!output.status.success(), "expected a refusal: {}", String::from_utf8_lossy(&output.stdout));
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn a_service_lists_its_ready_members_and_is_not_deleted_while_joined() {
    if !have_kubectl() {
        return;
    }
    let controller = Controller::start(&["--store", "sled"]);
    let (a, b): (Agent, Agent) = two_nodes(&controller);
    let marker = unique("endpoints");
    let _cleanup = Cleanup(marker.clone());
    apply(
        &controller,
        &json!({"apiVersion": "fleet.example.com/v1", "kind": "Service",
                "metadata": {"name": "web", "namespace": "default"},
                "spec": {"ports": [{"name": "http", "port": 80, "targetName": "http"},
                                   {"name": "admin", "port": 81, "targetPort": 9001}]}}),
    );
    apply(
        &controller,
        &json!({"apiVersion": "fleet.example.com/v1", "kind": "Secret",
                               "metadata": {"name": "token", "namespace": "default"},
                               "stringData": {"value": "s3cret"}}),
    );
    let mut ready_a = member("ready-a", &a.name, "web", &marker, "/bin/true");
    ready_a["spec"]["env"] = json!([{"name": "TOKEN", "secretRef": {"name": "token", "key": "value"}}]);
    apply(&controller, &ready_a);
    apply(&controller, &member("ready-b", &b.name, "web", &marker, "/bin/true"));
    apply(&controller, &member("unready", &a.name, "web", &marker, "/bin/false"));

    // Exactly the two ready members, on their nodes' addresses, with the ports resolved.
    let address = |node: &str| {
        let node = get_json(&controller, &["get", "node", node]).unwrap();
        let addresses = node["status"]["addresses"].as_array().cloned().unwrap_or_default();
        let internal = addresses.iter().find(|a| a["type"] == "InternalIP").or(addresses.first()).cloned();
        internal.map(|a| a["address"].clone()).unwrap_or(Value::Null)
    };
    let ports = json!([{"name": "http", "port": 8080, "protocol": "TCP"},
                       {"name": "admin", "port": 9001, "protocol": "TCP"}]);
    let expected = json!([
        {"application": "ready-a", "node": a.name, "address": address(&a.name), "ports": ports},
        {"application": "ready-b", "node": b.name, "address": address(&b.name), "ports": ports},
    ]);
    wait_for("the two ready members to be the endpoints", Duration::from_secs(45), || {
        let service = get_json(&controller, &["get", "svc", "web"])?;
        (service["status"]["endpoints"] == expected).then_some(())
    });
    assert_ne!(app_status(&controller, "unready")["phase"], Value::Null, "the unready member runs too");
    let wide = kubectl_ok(&controller, &["get", "svc", "web", "-o", "wide"]);
    let mut lines = wide.lines();
    let header: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    let row: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    let column = header.iter().position(|h| *h == "ENDPOINTS").expect("an ENDPOINTS column");
    assert_eq!(row[column], "2", "{wide}");
    let narrow = kubectl_ok(&controller, &["get", "svc", "web"]);
    assert!(!narrow.contains("ENDPOINTS"), "a wide column only: {narrow}");
    // A client cannot write the status: it is the loop's.
    let patched = controller.kubectl(&[
        "patch",
        "svc",
        "web",
        "--type",
        "merge",
        "-p",
        r#"{"status":{"endpoints":[]}}"#,
    ]);
    assert!(patched.status.success(), "{}", String::from_utf8_lossy(&patched.stderr));
    assert_eq!(get_json(&controller, &["get", "svc", "web"]).unwrap()["status"]["endpoints"], expected);

    // In use: neither the Service nor the Secret goes.
    let refused = failed(&controller.kubectl(&["delete", "svc", "web"]));
    assert!(refused.contains("(Conflict)"), "{refused}");
    assert!(
        refused.contains(r#"applications "ready-a", "ready-b", "unready" join it"#),
        "names who holds it: {refused}"
    );
    let refused = failed(&controller.kubectl(&["delete", "secret", "token"]));
    assert!(
        refused.contains("(Conflict)") && refused.contains(r#"application "ready-a" needs it"#),
        "{refused}"
    );

    // A member that stops being ready leaves the endpoints.
    kubectl_ok(&controller, &["delete", "app", "ready-b"]);
    wait_for("ready-b to leave the endpoints", Duration::from_secs(30), || {
        let service = get_json(&controller, &["get", "svc", "web"])?;
        let names: Vec<Value> =
            service["status"]["endpoints"].as_array()?.iter().map(|e| e["application"].clone()).collect();
        (names == [json!("ready-a")]).then_some(())
    });
    kubectl_ok(&controller, &["delete", "app", "ready-a", "unready"]);
    kubectl_ok(&controller, &["delete", "svc", "web"]);
    kubectl_ok(&controller, &["delete", "secret", "token"]);

    // Protection never holds up a namespace's deletion: everything in it goes.
    kubectl_ok(&controller, &["create", "namespace", "doomed"]);
    for manifest in [
        json!({"apiVersion": "fleet.example.com/v1", "kind": "Service", "metadata": {"name": "web", "namespace": "doomed"},
               "spec": {"ports": [{"port": 80}]}}),
        json!({"apiVersion": "fleet.example.com/v1", "kind": "Secret", "metadata": {"name": "token", "namespace": "doomed"},
               "stringData": {"value": "s3cret"}}),
    ] {
        apply(&controller, &manifest);
    }
    let mut joined = member("joined", &a.name, "web", &marker, "/bin/true");
    joined["metadata"]["namespace"] = json!("doomed");
    joined["spec"]["env"] = json!([{"name": "TOKEN", "secretRef": {"name": "token", "key": "value"}}]);
    apply(&controller, &joined);
    let refused = failed(&controller.kubectl(&["-n", "doomed", "delete", "svc", "web"]));
    assert!(refused.contains("(Conflict)"), "{refused}");
    kubectl_ok(&controller, &["delete", "namespace", "doomed", "--timeout=60s"]);
    let left = controller.kubectl(&["get", "namespace", "doomed"]);
    assert!(!left.status.success(), "the namespace is gone: {}", String::from_utf8_lossy(&left.stdout));
}

/// What the component `server` of every set here renders: a process tagged `marker` on `node`,
/// serving port `http`.
fn component_spec(node: &str, marker: &str) -> Value {
    json!({"command": ["/bin/sh", "-c", format!("while true; do sleep 1; done; : {marker}")],
           "lifecycle": {"terminationGracePeriodSeconds": 2}, "placement": {"nodeName": node},
           "ports": [{"name": "http", "port": 8080}]})
}

/// An ApplicationSet `name` with one component, `server`.
fn set(name: &str, node: &str, marker: &str) -> Value {
    json!({"apiVersion": "fleet.example.com/v1", "kind": "ApplicationSet",
           "metadata": {"name": name, "namespace": "default"},
           "spec": {"applications": [{"name": "server", "spec": component_spec(node, marker)}]}})
}

/// The marks the set's loop gives `<set>-server` and its rendered Service.
fn child_metadata(set: &str, uid: &str, extra: Value) -> Value {
    let mut metadata = json!({
        "name": format!("{set}-server"), "namespace": "default",
        "labels": {"fleet.example.com/application-set": set, "fleet.example.com/component": "server"},
        "ownerReferences": [{"apiVersion": "fleet.example.com/v1", "kind": "ApplicationSet", "name": set,
                             "uid": uid, "controller": true, "blockOwnerDeletion": true}],
    });
    if let (Some(metadata), Some(extra)) = (metadata.as_object_mut(), extra.as_object()) {
        metadata.extend(extra.clone());
    }
    metadata
}

/// Applies `manifest` as the control plane (the set loop's identity, impersonated by the admin):
/// created, or brought to the manifest where the set's loop made it already.
fn apply_as_control_plane(controller: &Controller, manifest: &Value) {
    let path = controller.scratch().join(format!("{}.json", unique("child")));
    std::fs::write(&path, manifest.to_string()).unwrap();
    kubectl_ok(
        controller,
        &[
            "apply",
            "-f",
            path.to_str().unwrap(),
            "--as",
            "system:kayra:appset",
            "--as-group",
            "system:masters",
        ],
    );
}

/// Makes set `name` with its child Application (on `node`, its argv tagged `marker`) and
/// rendered Service, as the set's loop would; answers the set's uid once the child runs.
fn set_with_children(controller: &Controller, name: &str, node: &str, marker: &str, extra: Value) -> String {
    apply(controller, &set(name, node, marker));
    let uid = get_json(controller, &["get", "appset", name]).unwrap()["metadata"]["uid"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut spec = component_spec(node, marker);
    spec["serviceName"] = json!(format!("{name}-server"));
    let mut app_metadata = child_metadata(name, &uid, extra);
    app_metadata["annotations"] = json!({"fleet.example.com/appset-spec-hash": "h1"});
    apply_as_control_plane(
        controller,
        &json!({"apiVersion": "fleet.example.com/v1", "kind": "Service",
        "metadata": child_metadata(name, &uid, json!({})), "spec": {"ports": [{"name": "http", "port": 8080}]}}),
    );
    apply_as_control_plane(
        controller,
        &json!({"apiVersion": "fleet.example.com/v1", "kind": "Application",
        "metadata": app_metadata, "spec": spec}),
    );
    let child = format!("{name}-server");
    wait_for(&format!("{child} to run"), Duration::from_secs(30), || {
        (app_status(controller, &child)["phase"] == "Running").then_some(())
    });
    uid
}

fn gone(controller: &Controller, kind: &str, name: &str) -> bool {
    let output = controller.kubectl(&["get", kind, name, "-o", "name"]);
    !output.status.success() && String::from_utf8_lossy(&output.stderr).contains("NotFound")
}

#[test]
fn deleting_a_set_cascades_as_kubectl_asks_and_clients_cannot_forge_or_edit_its_children() {
    if !have_kubectl() {
        return;
    }
    let controller = Controller::start(&["--store", "sled"]);
    let (a, _b) = two_nodes(&controller);

    // Orphan: the set goes, its children stay (running), released from it.
    let orphan_marker = unique("orphan");
    let _orphan_cleanup = Cleanup(orphan_marker.clone());
    let uid = set_with_children(&controller, "kept", &a.name, &orphan_marker, json!({}));

    // Clients cannot change a child's spec, nor forge one, nor strip its marks.
    let refused = failed(&controller.kubectl(&[
        "patch",
        "app",
        "kept-server",
        "--type",
        "merge",
        "-p",
        r#"{"spec":{"args":["x"]}}"#,
    ]));
    assert!(
        refused.contains(
            r#"application "kept-server" is managed by ApplicationSet "kept"; change the set instead"#
        ),
        "{refused}"
    );
    kubectl_ok(
        &controller,
        &["label", "app", "kept-server", "fleet.example.com/application-set-", "team=web"],
    );
    let child = get_json(&controller, &["get", "app", "kept-server"]).unwrap();
    assert_eq!(
        child["metadata"]["labels"]["fleet.example.com/application-set"], "kept",
        "a reserved label stays"
    );
    assert_eq!(child["metadata"]["labels"]["team"], "web", "other labels are the user's");
    let mut forged = json!({"apiVersion": "fleet.example.com/v1", "kind": "Application",
        "metadata": child_metadata("kept", &uid, json!({"name": "forged"})),
        "spec": {"command": ["/bin/true"]}});
    forged["metadata"]["name"] = json!("forged");
    let path = controller.scratch().join("forged.json");
    std::fs::write(&path, forged.to_string()).unwrap();
    let refused = failed(&controller.kubectl(&["create", "-f", path.to_str().unwrap()]));
    assert!(
        refused.contains("(Forbidden)") && refused.contains(r#"as a child of ApplicationSet "kept""#),
        "{refused}"
    );

    kubectl_ok(&controller, &["delete", "appset", "kept", "--cascade=orphan"]);
    wait_for("the orphaning set to go", Duration::from_secs(30), || {
        gone(&controller, "appset", "kept").then_some(())
    });
    for kind in ["app", "svc"] {
        let released = get_json(&controller, &["get", kind, "kept-server"]).expect("the child stays");
        let metadata = &released["metadata"];
        assert!(metadata["ownerReferences"].is_null(), "{kind}: {released}");
        assert!(metadata["labels"]["fleet.example.com/application-set"].is_null(), "{kind}: {released}");
        assert!(metadata["labels"]["fleet.example.com/component"].is_null(), "{kind}: {released}");
        assert!(
            metadata["annotations"]["fleet.example.com/appset-spec-hash"].is_null(),
            "{kind}: {released}"
        );
    }
    assert_eq!(app_status(&controller, "kept-server")["phase"], "Running");
    assert!(!processes_with(&orphan_marker).is_empty(), "the orphan's process still runs");
    // Released, it is the user's to change.
    kubectl_ok(
        &controller,
        &["patch", "app", "kept-server", "--type", "merge", "-p", r#"{"spec":{"args":["x"]}}"#],
    );

    // Background (kubectl's default): the set goes at once, the collector takes the children.
    let background_marker = unique("background");
    let _background_cleanup = Cleanup(background_marker.clone());
    set_with_children(&controller, "swept", &a.name, &background_marker, json!({}));
    kubectl_ok(&controller, &["delete", "appset", "swept"]);
    assert!(gone(&controller, "appset", "swept"), "background deletion does not wait");
    wait_for("the children to be collected", Duration::from_secs(30), || {
        (gone(&controller, "app", "swept-server") && gone(&controller, "svc", "swept-server")).then_some(())
    });
    wait_for("the child's process to stop", Duration::from_secs(30), || {
        processes_with(&background_marker).is_empty().then_some(())
    });

    // Foreground: the set stays, marked, until its children are gone. A finalizer of the
    // child's own holds it for as long as the test needs to look.
    let foreground_marker = unique("foreground");
    let _foreground_cleanup = Cleanup(foreground_marker.clone());
    set_with_children(
        &controller,
        "waits",
        &a.name,
        &foreground_marker,
        json!({"finalizers": ["example.com/hold"]}),
    );
    kubectl_ok(&controller, &["delete", "appset", "waits", "--cascade=foreground", "--wait=false"]);
    let child = wait_for("the child to be deleted", Duration::from_secs(30), || {
        let child = get_json(&controller, &["get", "app", "waits-server"])?;
        child["metadata"]["deletionTimestamp"].is_string().then_some(child)
    });
    assert!(child["metadata"]["deletionTimestamp"].is_string());
    let waiting = get_json(&controller, &["get", "appset", "waits"]).expect("the set waits for its children");
    assert!(waiting["metadata"]["deletionTimestamp"].is_string(), "{waiting}");
    assert_eq!(waiting["metadata"]["finalizers"], json!(["foregroundDeletion"]), "{waiting}");
    assert!(!gone(&controller, "svc", "waits-server"), "the Service waits for the Application joining it");
    kubectl_ok(
        &controller,
        &["patch", "app", "waits-server", "--type", "merge", "-p", r#"{"metadata":{"finalizers":null}}"#],
    );
    wait_for("the set and its Service to go", Duration::from_secs(30), || {
        (gone(&controller, "appset", "waits") && gone(&controller, "svc", "waits-server")).then_some(())
    });
}
