//! A set's history, rollback and freezing as an operator runs them with `kayra-cli` and
//! `kubectl` against the real binary and real agents: ten template changes listed as ten
//! revisions, a rollback to the third rolled through the children within the budget and listed
//! as a new revision, the refusals (a Kind without history, a caller without the grant), and a
//! frozen set that holds its rollout and freezes its children until it is thawed.

use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::agents::{
    Agent, get_json, is_supervisor, kill_all_with, kubectl_ok, processes_with, two_nodes, unique, wait_for,
};
use crate::{Controller, have_kubectl};

const SET_LABEL: &str = "fleet.example.com/application-set";
const SETS: &str = "/apis/fleet.example.com/v1/namespaces/default/applicationsets";

/// The `kayra-cli` binary, built beside the controller.
fn cli_binary() -> PathBuf {
    let path = std::path::Path::new(env!("CARGO_BIN_EXE_kayra-controller")).with_file_name("kayra-cli");
    assert!(path.exists(), "{} is missing: build it with `cargo build -p kayra-cli`", path.display());
    path
}

/// `kayra-cli` with the controller's admin kubeconfig.
fn cli(controller: &Controller, args: &[&str]) -> Output {
    Command::new(cli_binary())
        .args(args)
        .env("KUBECONFIG", controller.kubeconfig())
        .output()
        .expect("kayra-cli runs")
}

fn cli_ok(controller: &Controller, args: &[&str]) -> String {
    let output = cli(controller, args);
    assert!(output.status.success(), "kayra-cli {args:?}: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8_lossy(&output.stdout).into_owned()
}

struct Cleanup(String);

impl Drop for Cleanup {
    fn drop(&mut self) {
        kill_all_with(&self.0);
    }
}

/// How many workloads (not their supervisors) carry `marker`. A workload's shell forks for
/// each `sleep`, and until the child execs it carries the shell's command line (for good, if
/// the workload is frozen in between): a process whose parent carries the marker is not a
/// workload of its own.
fn running(marker: &str) -> usize {
    let carrying: Vec<u32> =
        processes_with(marker).into_iter().map(|(pid, _)| pid).filter(|pid| !is_supervisor(*pid)).collect();
    carrying.iter().filter(|pid| parent(**pid).is_none_or(|parent| !carrying.contains(&parent))).count()
}

/// Process `pid`'s parent, from `/proc/<pid>/stat` (the field after the state).
fn parent(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?.1.split_whitespace().nth(1)?.parse().ok()
}

/// The set `shop` at template `revision`: four replicas of a loop tagged `<marker>-r<n>x`,
/// ready two seconds after each starts, one unavailable at a time.
fn shop(marker: &str, revision: u32) -> Value {
    let tag = format!("{marker}-r{revision}x");
    json!({"apiVersion": "fleet.example.com/v1", "kind": "ApplicationSet",
           "metadata": {"name": "shop", "namespace": "default",
                        "annotations": {"kubernetes.io/change-cause": format!("release r{revision}")}},
           "spec": {"applications": [{"name": "web", "scale": {"replicas": 4}, "spec": {
               "command": ["/bin/sh", "-c", format!("trap 'exit 0' TERM; while true; do sleep 0.2; done; : {tag}")],
               "lifecycle": {"terminationGracePeriodSeconds": 2},
               "probes": {"readiness": {"exec": {"command": ["/bin/true"]}, "initialDelaySeconds": 2, "periodSeconds": 1}}}}],
                    "rollout": {"maxUnavailable": 1}}})
}

fn apply(controller: &Controller, manifest: &Value) {
    let path = controller.scratch().join(format!("{}.json", unique("shop")));
    std::fs::write(&path, manifest.to_string()).unwrap();
    kubectl_ok(controller, &["apply", "-f", path.to_str().unwrap()]);
}

fn available(app: &Value) -> bool {
    let ready = app["status"]["conditions"]
        .as_array()
        .is_some_and(|c| c.iter().any(|c| c["type"] == "Ready" && c["status"] == "True"));
    ready && app["status"]["observedGeneration"] == app["metadata"]["generation"]
}

fn condition<'a>(object: &'a Value, type_: &str) -> Option<&'a Value> {
    object["status"]["conditions"].as_array()?.iter().find(|c| c["type"] == type_)
}

/// Samples the set and its children until it has converged on its current generation; answers
/// the most children seen unavailable at once.
fn roll(controller: &Controller) -> usize {
    let deadline = Instant::now() + Duration::from_secs(90);
    let mut worst = 0;
    loop {
        let everything = get_json(controller, &["get", "applicationsets,applications"]).unwrap();
        let items = everything["items"].as_array().cloned().unwrap_or_default();
        let set = items.iter().find(|item| item["kind"] == "ApplicationSet").cloned().unwrap();
        let apps: Vec<&Value> = items
            .iter()
            .filter(|item| item["kind"] == "Application" && item["metadata"]["labels"][SET_LABEL] == "shop")
            .collect();
        let down = apps.iter().filter(|app| !available(app)).count() + 4usize.saturating_sub(apps.len());
        worst = worst.max(down);
        let done = set["status"]["observedGeneration"] == set["metadata"]["generation"]
            && set["status"]["updated"] == 4
            && set["status"]["ready"] == 4
            && condition(&set, "Converged").is_some_and(|c| c["status"] == "True");
        if done {
            return worst;
        }
        assert!(Instant::now() < deadline, "the rollout did not finish: {set}");
    }
}

/// `kubectl create --raw <path>` with `body`, as `token`'s user.
fn raw_create(controller: &Controller, token: Option<&str>, path: &str, body: &Value) -> Output {
    let file = controller.scratch().join(format!("{}.json", unique("body")));
    std::fs::write(&file, body.to_string()).unwrap();
    let args = ["create", "--raw", path, "-f", file.to_str().unwrap()];
    match token {
        Some(token) => controller.kubectl_with_token(token, &args),
        None => controller.kubectl(&args),
    }
}

#[test]
fn ten_templates_are_ten_revisions_and_a_rollback_to_the_third_rolls_the_set_back_within_its_budget() {
    if !have_kubectl() {
        return;
    }
    let controller = Controller::start(&["--store", "sled"]);
    let (_a, _b): (Agent, Agent) = two_nodes(&controller);
    let marker = unique("history");
    let _cleanup = Cleanup(marker.clone());
    let tag = |revision: u32| format!("{marker}-r{revision}x");
    apply(&controller, &shop(&marker, 1));
    for revision in 2..=10 {
        apply(&controller, &shop(&marker, revision));
    }

    // Ten revisions, oldest first, each with its generation, writer and change cause.
    let history: Value =
        serde_json::from_str(&cli_ok(&controller, &["get", "fleet", "applicationsets", "shop/history"]))
            .unwrap();
    let items = history["items"].as_array().unwrap();
    let causes: Vec<&str> = items.iter().map(|item| item["changeCause"].as_str().unwrap()).collect();
    assert_eq!(causes, (1..=10).map(|r| format!("release r{r}")).collect::<Vec<_>>(), "{history}");
    let generations: Vec<i64> = items.iter().map(|item| item["generation"].as_i64().unwrap()).collect();
    assert_eq!(generations, (1..=10).collect::<Vec<i64>>());
    let user = items[0]["user"].as_str().unwrap().to_owned();
    assert!(items.iter().all(|item| item["user"] == user.as_str()), "{history}");
    let table = cli_ok(&controller, &["get", "fleet", "applicationsets", "shop/history", "-o", "table"]);
    let mut lines = table.lines();
    let header: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(header, ["REVISION", "GENERATION", "AGE", "USER", "CHANGE-CAUSE"], "{table}");
    assert_eq!(lines.count(), 10, "{table}");
    wait_for("the tenth template on every child", Duration::from_secs(90), || {
        (running(&tag(10)) == 4 && (1..10).all(|r| running(&tag(r)) == 0)).then_some(())
    });
    roll(&controller);

    // Back to the third: a new revision, rolled out one child at a time.
    let third = items[2]["revision"].as_str().unwrap().to_owned();
    let body = format!("{{\"toRevision\": \"{third}\"}}");
    let rolled: Value = serde_json::from_str(&cli_ok(
        &controller,
        &["create", "fleet", "applicationsets", "shop/rollback", "-d", &body],
    ))
    .unwrap();
    assert_eq!(rolled["metadata"]["generation"], 11, "{rolled}");
    let command = rolled["spec"]["applications"][0]["spec"]["command"][2].as_str().unwrap();
    assert!(command.contains(&tag(3)), "{command}");
    let worst = roll(&controller);
    assert!(worst <= 1, "{worst} children were down at once (budget 1)");
    wait_for("the third template on every child", Duration::from_secs(30), || {
        (running(&tag(3)) == 4 && running(&tag(10)) == 0).then_some(())
    });
    let history: Value =
        serde_json::from_str(&cli_ok(&controller, &["get", "fleet", "applicationsets", "shop/history"]))
            .unwrap();
    let items = history["items"].as_array().unwrap();
    assert_eq!(items.len(), 10, "bounded by historyLimit (10)");
    let last = items.last().unwrap();
    assert_eq!(
        (last["generation"].clone(), last["changeCause"].clone()),
        (json!(11), json!("release r3")),
        "{history}"
    );
    assert_eq!(last["revision"], rolled["metadata"]["resourceVersion"]);

    // A Kind that keeps no history: 404. A caller without the grant: 403.
    let secret = json!({"apiVersion": "fleet.example.com/v1", "kind": "Secret", "metadata": {"name": "db", "namespace": "default"}, "stringData": {"k": "v"}});
    let path = controller.scratch().join("secret.json");
    std::fs::write(&path, secret.to_string()).unwrap();
    kubectl_ok(&controller, &["apply", "-f", path.to_str().unwrap()]);
    let refused = cli(&controller, &["create", "fleet", "secrets", "db/rollback", "-d", "{}"]);
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("(404)"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
    controller.add_token("viewer-token", "viewer");
    let binding = json!({"apiVersion": "authorization.example.com/v1", "kind": "RoleBinding",
        "metadata": {"name": "viewer-view", "namespace": "default"},
        "subjects": [{"kind": "User", "name": "viewer"}], "roleRef": {"kind": "ClusterRole", "name": "view"}});
    let path = controller.scratch().join("binding.json");
    std::fs::write(&path, binding.to_string()).unwrap();
    kubectl_ok(&controller, &["apply", "-f", path.to_str().unwrap()]);
    wait_for("the viewer's binding", Duration::from_secs(20), || {
        controller
            .kubectl_with_token("viewer-token", &["get", "appset", "shop"])
            .status
            .success()
            .then_some(())
    });
    let history =
        controller.kubectl_with_token("viewer-token", &["get", "--raw", &format!("{SETS}/shop/history")]);
    assert!(history.status.success(), "view reads a history: {}", String::from_utf8_lossy(&history.stderr));
    let refused = raw_create(&controller, Some("viewer-token"), &format!("{SETS}/shop/rollback"), &json!({}));
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(
        !refused.status.success() && said.contains("Forbidden") && said.contains("applicationsets/rollback"),
        "{said}"
    );
}

#[test]
fn a_frozen_set_holds_its_rollout_and_its_childrens_processes_until_thawed() {
    if !have_kubectl() {
        return;
    }
    let controller = Controller::start(&["--store", "sled"]);
    let (_a, _b): (Agent, Agent) = two_nodes(&controller);
    let marker = unique("frozen-set");
    let _cleanup = Cleanup(marker.clone());
    let tag = |revision: u32| format!("{marker}-r{revision}x");
    apply(&controller, &shop(&marker, 1));
    roll(&controller);

    let frozen: Value = serde_json::from_str(&cli_ok(
        &controller,
        &["create", "fleet", "applicationsets", "shop/freeze", "-d", "{}"],
    ))
    .unwrap();
    assert_eq!(frozen["spec"]["frozen"], true, "{frozen}");
    // Every child frozen by its node, the rollout held.
    let children = wait_for("every child frozen", Duration::from_secs(30), || {
        let apps = get_json(&controller, &["get", "apps", "-l", &format!("{SET_LABEL}=shop")])?;
        let items = apps["items"].as_array()?.clone();
        let all = items.len() == 4
            && items.iter().all(|app| {
                app["spec"]["frozen"] == true
                    && condition(app, "Frozen").is_some_and(|c| c["status"] == "True")
            });
        all.then_some(items)
    });
    let reason = condition(&children[0], "Frozen").unwrap()["reason"].as_str().unwrap().to_owned();
    assert!(["CgroupFreezer", "CgroupFreeze", "SIGSTOP"].contains(&reason.as_str()), "{reason}");
    // A child's own door is the set's.
    let child = children[0]["metadata"]["name"].as_str().unwrap();
    let refused = raw_create(
        &controller,
        None,
        &format!("/apis/fleet.example.com/v1/namespaces/default/applications/{child}/thaw"),
        &json!({}),
    );
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success() && said.contains("applicationsets/shop/thaw"), "{said}");
    // A new template while frozen is seen and held.
    apply(&controller, &shop(&marker, 2));
    let set = wait_for("the held rollout", Duration::from_secs(30), || {
        let set = get_json(&controller, &["get", "appset", "shop"])?;
        let progressing = condition(&set, "Progressing")?;
        let held = set["status"]["observedGeneration"] == set["metadata"]["generation"]
            && progressing["status"] == "False"
            && progressing["reason"] == "Frozen";
        held.then_some(set)
    });
    assert_eq!(set["metadata"]["generation"], 3, "the freeze and the new template: {set}");
    assert_eq!((running(&tag(1)), running(&tag(2))), (4, 0), "nothing was replaced while frozen");

    // Thawed: the children go on (ready again once their probes pass), then roll to the new
    // template within the budget.
    cli_ok(&controller, &["create", "fleet", "applicationsets", "shop/thaw", "-d", "{}"]);
    wait_for("every child thawed and ready", Duration::from_secs(30), || {
        let apps = get_json(&controller, &["get", "apps", "-l", &format!("{SET_LABEL}=shop")])?;
        let items = apps["items"].as_array()?.clone();
        let thawed = items.iter().filter(|app| app["spec"].get("frozen").is_none() && available(app)).count();
        (thawed == 4 || running(&tag(2)) > 0).then_some(())
    });
    let worst = roll(&controller);
    assert!(worst <= 1, "{worst} children were down at once (budget 1)");
    wait_for("the second template on every child", Duration::from_secs(30), || {
        (running(&tag(2)) == 4 && running(&tag(1)) == 0).then_some(())
    });
    let apps = get_json(&controller, &["get", "apps", "-l", &format!("{SET_LABEL}=shop")]).unwrap();
    for app in apps["items"].as_array().unwrap() {
        assert!(app["spec"].get("frozen").is_none(), "{app}");
        assert_eq!(condition(app, "Frozen").map(|c| c["status"].clone()), Some(json!("False")), "{app}");
    }
}
