//! Frozen Applications: held where they are (by this host's cgroup freezer, or by SIGSTOP where
//! there is none), probes suspended, nothing restarted, and going on where they were when
//! thawed; and a running process without probes that costs its task nothing.

use std::path::{Path, PathBuf};
use std::time::Duration;

use kayra_api::kinds::application::{Application, ApplicationStatus, ExecAction, Probe, Probes};
use kayra_runtime::runtime::{Desired, Runtime};

use crate::*;

fn desired(application: Application) -> Desired {
    Desired { applications: vec![application], ..Desired::default() }
}

/// Prints a counter 20 times a second and touches `beat` each time; its liveness probe fails
/// once `beat` is two seconds old, so a probe that ran while it is frozen would restart it.
fn counter(node: &Node, name: &str) -> Application {
    let mut app =
        application(name, node.shell("i=0; while :; do i=$((i+1)); echo $i; touch beat; sleep 0.05; done"));
    let stale = "test $(date +%s) -lt $(( $(stat -c %Y beat) + 2 ))";
    app.spec.probes = Some(Probes {
        liveness: Some(Probe {
            exec: Some(ExecAction { command: vec!["sh".into(), "-c".into(), stale.into()] }),
            initial_delay_seconds: Some(1),
            period_seconds: Some(1),
            timeout_seconds: Some(1),
            failure_threshold: Some(1),
            success_threshold: Some(1),
            ..Probe::default()
        }),
        readiness: None,
    });
    app
}

fn frozen(mut app: Application, generation: i64) -> Application {
    app.spec.frozen = true;
    app.metadata.generation = Some(generation);
    app
}

fn thawed(mut app: Application, generation: i64) -> Application {
    app.spec.frozen = false;
    app.metadata.generation = Some(generation);
    app
}

fn condition<'a>(status: &'a ApplicationStatus, type_: &str) -> Option<(&'a str, &'a str)> {
    let condition = status.conditions.iter().find(|c| c.type_ == type_)?;
    Some((condition.status.as_str(), condition.reason.as_deref().unwrap_or_default()))
}

/// The last number the counter printed in run `run`'s log.
fn last_count(node: &Node, app: &Application, run: u64) -> u64 {
    let uid = app.metadata.uid.as_deref().unwrap();
    let log = node.dir.path().join(format!("data/apps/{uid}/logs/{run}.log"));
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    text.lines().rev().find_map(|line| line.rsplit(' ').next()?.parse().ok()).unwrap_or(0)
}

/// Waits until the counter has gone past `count`.
async fn counts_past(node: &Node, app: &Application, run: u64, count: u64) -> u64 {
    tokio::time::timeout(PATIENCE, async {
        loop {
            let now = last_count(node, app, run);
            if now > count {
                return now;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("the counter never passed {count}"))
}

/// The state letter of `/proc/<pid>/stat`.
fn state(pid: u32) -> char {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    stat.rsplit(')').next().and_then(|rest| rest.trim_start().chars().next()).unwrap_or('?')
}

/// Whether the Application's cgroup says it is frozen, on whichever hierarchy this host has.
fn cgroup_frozen(node: &Node, app: &Application) -> bool {
    let relative = node.cgroup_parent.join(app.metadata.uid.as_deref().unwrap());
    let v1 = Path::new("/sys/fs/cgroup/freezer").join(&relative).join("freezer.state");
    let v2: PathBuf = Path::new("/sys/fs/cgroup").join(&relative).join("cgroup.events");
    std::fs::read_to_string(v1).is_ok_and(|state| state.trim() == "FROZEN")
        || std::fs::read_to_string(v2).is_ok_and(|events| events.lines().any(|line| line == "frozen 1"))
}

/// Freezes `app` (a new generation), holds it a while and checks nothing moves, then thaws it
/// and checks it goes on in the same process; answers the workload's pid.
async fn freeze_hold_and_thaw(node: &Node, runtime: &Runtime, app: Application, held: impl Fn(u32) -> bool) {
    let (_, mut reports) = runtime.subscribe();
    let mut events = runtime.events();
    let name = app.metadata.name.clone().unwrap();
    runtime.apply(desired(app.clone()));
    let pid = started_pid(&wait_event(&mut events, &name, "Started").await);
    counts_past(node, &app, 1, 5).await;

    let asked = std::time::Instant::now();
    runtime.apply(desired(frozen(app.clone(), 2)));
    let status = wait_status(&mut reports, &name, "Frozen=True", |s| {
        condition(s, "Frozen").is_some_and(|(status, _)| status == "True")
    })
    .await;
    let took = asked.elapsed();
    assert!(took < Duration::from_secs(1), "held within a second of the freeze: {took:?}");
    assert_eq!(status.observed_generation, Some(2), "a freeze is observed at once: {status:?}");
    assert_eq!(condition(&status, "Ready"), Some(("False", "Frozen")));
    assert!(held(pid), "the process is held (state {})", state(pid));
    let count = last_count(node, &app, 1);
    // Four seconds frozen: a running counter prints 80 times, and a liveness probe that kept
    // running would find its beat two seconds stale and restart it.
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(last_count(node, &app, 1), count, "a frozen counter prints nothing");

    runtime.apply(desired(thawed(app.clone(), 3)));
    let status = wait_status(&mut reports, &name, "Frozen=False", |s| {
        condition(s, "Frozen").is_some_and(|(status, _)| status == "False")
    })
    .await;
    assert_eq!(condition(&status, "Frozen"), Some(("False", "Thawed")));
    assert_eq!(condition(&status, "Ready"), Some(("True", "ProcessRunning")));
    let went_on = counts_past(node, &app, 1, count).await;
    assert!(went_on > count, "it goes on from where it was");
    assert!(alive_with_marker(pid, &node.marker), "the same process, never restarted");
    // Its liveness probe runs again and passes: still the same process a few periods on.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let status = current_status(runtime, &name, "running", |_| true).await;
    assert_eq!(status.restarts.unwrap_or(0), 0, "no restart counted: {status:?}");
    assert_eq!(status.observed_generation, Some(3));
    assert!(alive_with_marker(pid, &node.marker));
    assert!(
        !std::path::Path::new(
            &node.dir.path().join(format!("data/apps/{}/logs/2.log", app.metadata.uid.as_deref().unwrap()))
        )
        .exists(),
        "no second run"
    );

    runtime.apply(Desired::default());
    wait_gone(&mut reports, &name).await;
    wait_process_gone(pid, &node.marker).await;
}

#[tokio::test]
async fn a_frozen_process_is_held_by_its_cgroup_and_goes_on_when_thawed_without_a_restart() {
    let node = Node::new("freeze");
    let runtime = node.open().await;
    let app = counter(&node, "counter");
    let held = |_pid| cgroup_frozen(&node, &app);
    freeze_hold_and_thaw(&node, &runtime, app.clone(), held).await;
}

#[tokio::test]
async fn where_no_cgroup_freezes_the_process_group_is_stopped_and_continued() {
    let node = Node::new("freeze-signal");
    let mut config = node.config();
    let no_cgroups = node.dir.path().join("no-cgroups");
    std::fs::create_dir_all(&no_cgroups).unwrap();
    config.cgroup_mount = Some(no_cgroups);
    let runtime = Runtime::open(config).await.unwrap();
    let (_, mut reports) = runtime.subscribe();
    let app = counter(&node, "stopped");
    let held = |pid| state(pid) == 'T';
    let watch = tokio::spawn(async move {
        wait_status(&mut reports, "stopped", "Frozen by SIGSTOP", |s| {
            condition(s, "Frozen") == Some(("True", "SIGSTOP"))
        })
        .await
    });
    freeze_hold_and_thaw(&node, &runtime, app, held).await;
    let status = watch.await.unwrap();
    let message = status.conditions.iter().find(|c| c.type_ == "Frozen").and_then(|c| c.message.clone());
    assert!(message.unwrap_or_default().contains("SIGSTOP"), "the condition says how");
}

#[tokio::test]
async fn a_frozen_application_stays_frozen_across_the_agent_starts_nothing_and_still_stops() {
    let node = Node::new("freeze-reopen");
    let runtime = node.open().await;
    let (_, mut reports) = runtime.subscribe();
    let mut events = runtime.events();
    let app = counter(&node, "held");
    runtime.apply(desired(app.clone()));
    let pid = started_pid(&wait_event(&mut events, "held", "Started").await);
    runtime.apply(desired(frozen(app.clone(), 2)));
    wait_status(&mut reports, "held", "Frozen=True", |s| {
        condition(s, "Frozen") == Some(("True", "CgroupFreezer"))
            || condition(s, "Frozen") == Some(("True", "CgroupFreeze"))
    })
    .await;
    runtime.close().await;
    assert!(cgroup_frozen(&node, &app), "closing the agent lets nothing go");

    let runtime = node.open().await;
    let (_, mut reports) = runtime.subscribe();
    runtime.apply(desired(frozen(app.clone(), 2)));
    let status = current_status(&runtime, "held", "reattached", |_| true).await;
    assert_eq!(condition(&status, "Frozen").map(|(s, _)| s), Some("True"), "{status:?}");
    assert!(cgroup_frozen(&node, &app) && alive_with_marker(pid, &node.marker));
    // Deleted while frozen: let go, then stopped within its grace period.
    runtime.apply(Desired::default());
    wait_gone(&mut reports, "held").await;
    wait_process_gone(pid, &node.marker).await;

    // Created frozen: nothing starts until it is thawed.
    let mut events = runtime.events();
    let (_, mut reports) = runtime.subscribe();
    let late = counter(&node, "late");
    runtime.apply(desired(frozen(late.clone(), 1)));
    let status = wait_status(&mut reports, "late", "held", |s| condition(s, "Frozen").is_some()).await;
    assert_eq!(condition(&status, "Frozen"), Some(("True", "NotRunning")));
    runtime.apply(desired(thawed(late.clone(), 2)));
    let pid = started_pid(&wait_event(&mut events, "late", "Started").await);
    counts_past(&node, &late, 1, 3).await;
    runtime.apply(Desired::default());
    wait_process_gone(pid, &node.marker).await;
}

/// Regression: a run without probes closed its probe channel, and its task's loop woke on the
/// closed channel again and again, spinning a core for as long as the process ran.
#[tokio::test]
async fn a_running_process_without_probes_costs_its_task_no_cpu() {
    let node = Node::new("idle");
    let runtime = node.open().await;
    let (_, mut reports) = runtime.subscribe();
    runtime.apply(desired(application("quiet", node.shell("while :; do sleep 1; done"))));
    wait_status(&mut reports, "quiet", "Running", |s| s.phase.as_deref() == Some("Running")).await;
    let ticks = || -> u64 {
        let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
        let fields: Vec<&str> = stat.rsplit(')').next().unwrap().split_whitespace().collect();
        // utime and stime, fields 14 and 15: the 12th and 13th from the state letter (field 3).
        fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
    };
    let before = ticks();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let used = ticks() - before;
    // 100 ticks a second: a spinning task used 175 of the 200; an idle one uses none or one.
    assert!(used < 20, "this process used {used} clock ticks in 2 s with one quiet workload");
    runtime.apply(Desired::default());
    wait_gone(&mut reports, "quiet").await;
}
