//! Freezing an Application with the real binary, a real agent and kubectl: a workload printing
//! a counter stops within a second of `freeze` (its cgroup frozen, or its process stopped) and
//! goes on from where it was on `thaw`, the same process, never restarted; a plain patch of
//! `spec.frozen` is refused naming the door, and an `edit` user may use neither door.

use std::process::Output;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::agents::{
    Agent, application, apply, get_json, is_supervisor, join_line, kill_all_with, kubectl_ok, processes_with,
    unique, wait_for,
};
use crate::{Controller, have_kubectl};

const APPS: &str = "/apis/fleet.example.com/v1/namespaces/default/applications";

struct Cleanup(String);

impl Drop for Cleanup {
    fn drop(&mut self) {
        kill_all_with(&self.0);
    }
}

/// `kubectl create --raw <path>` with an empty object, as `token`'s user or the admin.
fn door(controller: &Controller, token: Option<&str>, path: &str) -> Output {
    let file = controller.scratch().join(format!("{}.json", unique("door")));
    std::fs::write(&file, "{}").unwrap();
    let args = ["create", "--raw", path, "-f", file.to_str().unwrap()];
    match token {
        Some(token) => controller.kubectl_with_token(token, &args),
        None => controller.kubectl(&args),
    }
}

/// The last number the counter printed, from the agent's log of its first run.
fn last_count(agent: &Agent, uid: &str) -> u64 {
    let log = agent.data().join(format!("apps/{uid}/logs/1.log"));
    let text = std::fs::read_to_string(log).unwrap_or_default();
    text.lines().rev().find_map(|line| line.rsplit(' ').next()?.parse().ok()).unwrap_or(0)
}

/// Whether the process is held: its freezer cgroup (v1) or cgroup (v2) frozen, or its state `T`.
fn held(pid: u32) -> bool {
    let cgroups = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap_or_default();
    let frozen = cgroups.lines().any(|line| {
        let mut fields = line.splitn(3, ':');
        let (_, controllers, path) =
            (fields.next(), fields.next().unwrap_or_default(), fields.next().unwrap_or_default());
        match controllers {
            "freezer" => std::fs::read_to_string(format!("/sys/fs/cgroup/freezer{path}/freezer.state"))
                .is_ok_and(|state| state.trim() == "FROZEN"),
            "" => std::fs::read_to_string(format!("/sys/fs/cgroup{path}/cgroup.events"))
                .is_ok_and(|events| events.lines().any(|line| line == "frozen 1")),
            _ => false,
        }
    });
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    frozen || stat.rsplit(')').next().is_some_and(|rest| rest.trim_start().starts_with('T'))
}

fn condition(app: &Value, type_: &str) -> Option<(String, String)> {
    let found = app["status"]["conditions"].as_array()?.iter().find(|c| c["type"] == type_)?;
    Some((found["status"].as_str()?.to_owned(), found["reason"].as_str().unwrap_or_default().to_owned()))
}

#[test]
fn a_counter_stops_within_a_second_of_freeze_and_goes_on_without_a_restart_on_thaw() {
    if !have_kubectl() {
        return;
    }
    let controller = Controller::start(&["--store", "sled"]);
    let agent = Agent::join(&join_line(&controller), &unique("freezer"));
    wait_for("the node to register", Duration::from_secs(30), || {
        get_json(&controller, &["get", "node", &agent.name]).map(|_| ())
    });
    let marker = unique("counter");
    let _cleanup = Cleanup(marker.clone());
    let script = format!("i=0; while :; do i=$((i+1)); echo $i; sleep 0.05; done; : {marker}");
    apply(&controller, &application("counter", &agent.name, json!({"command": ["/bin/sh", "-c", script]})));
    kubectl_ok(&controller, &["wait", "--for=condition=Ready", "app/counter", "--timeout=60s"]);
    let uid = get_json(&controller, &["get", "app", "counter"]).unwrap()["metadata"]["uid"]
        .as_str()
        .unwrap()
        .to_owned();
    let pid = wait_for("the workload", Duration::from_secs(10), || {
        processes_with(&marker).into_iter().map(|(pid, _)| pid).find(|pid| !is_supervisor(*pid))
    });
    wait_for("the counter to count", Duration::from_secs(10), || {
        (last_count(&agent, &uid) > 3).then_some(())
    });

    // Not through a write of the object, whoever writes it.
    let patched =
        controller.kubectl(&["patch", "app", "counter", "--type=merge", "-p", r#"{"spec":{"frozen":true}}"#]);
    let said = String::from_utf8_lossy(&patched.stderr);
    assert!(
        !patched.status.success() && said.contains("is invalid") && said.contains("spec.frozen"),
        "{said}"
    );
    assert!(said.contains("/applications/<name>/freeze"), "the refusal names the door: {said}");
    // Not by `edit`.
    controller.add_token("editor-token", "editor");
    let binding = json!({"apiVersion": "authorization.example.com/v1", "kind": "RoleBinding",
        "metadata": {"name": "editor-edit", "namespace": "default"},
        "subjects": [{"kind": "User", "name": "editor"}], "roleRef": {"kind": "ClusterRole", "name": "edit"}});
    apply(&controller, &binding);
    wait_for("the editor's binding", Duration::from_secs(20), || {
        controller
            .kubectl_with_token("editor-token", &["get", "app", "counter"])
            .status
            .success()
            .then_some(())
    });
    for subresource in ["freeze", "thaw"] {
        let refused = door(&controller, Some("editor-token"), &format!("{APPS}/counter/{subresource}"));
        let said = String::from_utf8_lossy(&refused.stderr);
        assert!(
            !refused.status.success() && said.contains("Forbidden") && said.contains("applications/freeze"),
            "{said}"
        );
    }
    assert!(!held(pid));

    // Frozen by the admin: held within a second, and the counter stops.
    let asked = Instant::now();
    let frozen = door(&controller, None, &format!("{APPS}/counter/freeze"));
    assert!(frozen.status.success(), "{}", String::from_utf8_lossy(&frozen.stderr));
    let answered = asked.elapsed();
    let deadline = Instant::now() + Duration::from_secs(1);
    while !held(pid) {
        assert!(Instant::now() < deadline, "the process was not held within a second of the freeze's answer");
        std::thread::sleep(Duration::from_millis(10));
    }
    let took = asked.elapsed();
    eprintln!("freeze: answered in {answered:?}, process held {took:?} after it was asked");
    let count = last_count(&agent, &uid);
    kubectl_ok(&controller, &["wait", "--for=condition=Frozen", "app/counter", "--timeout=20s"]);
    let app = get_json(&controller, &["get", "app", "counter"]).unwrap();
    let (_, reason) = condition(&app, "Frozen").unwrap();
    assert!(["CgroupFreezer", "CgroupFreeze", "SIGSTOP"].contains(&reason.as_str()), "{reason}");
    assert_eq!(condition(&app, "Ready").map(|(status, _)| status), Some("False".to_owned()));
    // Two seconds held: a running counter prints forty times meanwhile.
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(last_count(&agent, &uid), count, "a frozen counter prints nothing");

    // Thawed: it goes on from where it was, in the same process.
    let thawed = door(&controller, None, &format!("{APPS}/counter/thaw"));
    assert!(thawed.status.success(), "{}", String::from_utf8_lossy(&thawed.stderr));
    wait_for("the counter to go on", Duration::from_secs(10), || {
        (last_count(&agent, &uid) > count).then_some(())
    });
    kubectl_ok(&controller, &["wait", "--for=condition=Ready", "app/counter", "--timeout=20s"]);
    let app = get_json(&controller, &["get", "app", "counter"]).unwrap();
    assert_eq!(condition(&app, "Frozen"), Some(("False".to_owned(), "Thawed".to_owned())), "{app}");
    assert_eq!(app["status"]["restarts"].as_i64().unwrap_or(0), 0, "{app}");
    assert_eq!(app["status"]["observedGeneration"], app["metadata"]["generation"]);
    assert!(
        processes_with(&marker).iter().any(|(found, _)| *found == pid),
        "the same process, never restarted"
    );
    assert!(!held(pid));
}
