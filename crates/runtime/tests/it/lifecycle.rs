//! Runs from start to end: stopping within the grace period, restarts on a new generation,
//! restart policies and back-off, jobs, memory limits, probes, identity and environment.

use std::time::{Duration, Instant};

use kayra_api::kinds::application::{
    ApplicationStatus, EnvVar, ExecAction, Probe, Probes, ResourceList, Resources, SecretKeyRef,
};
use kayra_runtime::runtime::Desired;

use crate::*;

fn desired(applications: Vec<kayra_api::kinds::application::Application>) -> Desired {
    Desired { applications, ..Desired::default() }
}

#[tokio::test]
async fn a_process_that_ignores_sigterm_is_killed_after_its_grace_period() {
    let node = Node::new("grace");
    let runtime = node.open().await;
    let (_, mut reports) = runtime.subscribe();
    let mut events = runtime.events();
    let app = application("stubborn", node.shell("trap '' TERM; echo up; while :; do sleep 0.05; done"))
        .with_grace(2);
    runtime.apply(desired(vec![app]));
    let pid = started_pid(&wait_event(&mut events, "stubborn", "Started").await);
    let status =
        wait_status(&mut reports, "stubborn", "phase Running", |s| s.phase.as_deref() == Some("Running"))
            .await;
    assert_eq!(status.observed_generation, Some(1));
    assert!(status.conditions.iter().any(|c| c.type_ == "Ready" && c.status == "True"), "{status:?}");
    assert!(alive_with_marker(pid, &node.marker));
    // Running is the shell started, not its trap set: it says "up" once SIGTERM is ignored.
    crate::logs::follow_until(&runtime, "stubborn", "up", 1).await;

    let asked = Instant::now();
    runtime.apply(desired(vec![]));
    wait_event(&mut events, "stubborn", "Killing").await;
    wait_gone(&mut reports, "stubborn").await;
    wait_process_gone(pid, &node.marker).await;
    let took = asked.elapsed();
    assert!(
        took >= Duration::from_secs(2),
        "SIGTERM is ignored, so only SIGKILL after 2 s ends it ({took:?})"
    );
    // A quiet machine kills it under 0.1 s after the grace; 10 s is a busy machine's margin,
    // and 12 s in all is still far short of the 30 s default grace a lost setting would give.
    assert!(
        took < Duration::from_secs(2 + 10),
        "SIGKILL within 10 s of the 2 s grace's end (a quiet machine needs under 0.1 s): {took:?}"
    );
    let apps = std::fs::read_dir(node.dir.path().join("data/apps")).unwrap().count();
    assert_eq!(apps, 0, "a forgotten application leaves no directory");
    let cgroup = std::path::Path::new("/sys/fs/cgroup/pids").join(&node.cgroup_parent);
    assert_eq!(
        std::fs::read_dir(&cgroup)
            .map(|dir| dir.filter(|e| e.as_ref().is_ok_and(|e| e.path().is_dir())).count())
            .unwrap_or(0),
        0,
        "nor a cgroup"
    );
}

#[tokio::test]
async fn a_process_that_honours_sigterm_stops_at_once() {
    let node = Node::new("term");
    let runtime = node.open().await;
    let (_, mut reports) = runtime.subscribe();
    let mut events = runtime.events();
    runtime.apply(desired(vec![application("polite", node.shell("sleep 1000")).with_grace(30)]));
    let pid = started_pid(&wait_event(&mut events, "polite", "Started").await);
    let asked = Instant::now();
    runtime.apply(desired(vec![]));
    wait_gone(&mut reports, "polite").await;
    assert!(!alive_with_marker(pid, &node.marker));
    // At once is under 0.1 s on a quiet machine; half the grace leaves a busy one its margin
    // and still tells stopping at once from waiting the grace out.
    let took = asked.elapsed();
    assert!(
        took < Duration::from_secs(15),
        "no wait for the 30 s grace: stopped within 15 s (a quiet machine needs under 0.1 s): {took:?}"
    );
}

#[tokio::test]
async fn a_new_generation_restarts_the_process_with_the_new_spec() {
    let node = Node::new("generation");
    let runtime = node.open().await;
    let (_, mut reports) = runtime.subscribe();
    let mut events = runtime.events();
    let first = application("gen", node.shell("echo one; sleep 1000"));
    runtime.apply(desired(vec![first.clone()]));
    let old = started_pid(&wait_event(&mut events, "gen", "Started").await);

    runtime.apply(desired(vec![first.clone()]));
    let mut second = first;
    second.metadata.generation = Some(2);
    second.spec.command = node.shell("echo two; sleep 1000");
    runtime.apply(desired(vec![second]));
    let new = started_pid(&wait_event(&mut events, "gen", "Started").await);
    assert_ne!(old, new);
    assert!(!alive_with_marker(old, &node.marker), "the old process was stopped first");
    let status = wait_status(&mut reports, "gen", "observedGeneration 2", |s| {
        s.observed_generation == Some(2) && s.phase.as_deref() == Some("Running")
    })
    .await;
    assert_eq!(status.restarts, Some(0), "a new spec is a new start, not a crash");
    runtime.apply(desired(vec![]));
    wait_gone(&mut reports, "gen").await;
}

/// The node is the authority on what runs on it. An Application pushed again at the same
/// generation whose stored status says otherwise (an unbinding left it `Pending`, and a binding
/// to the same node undid it before the node heard of either) is reported again, as it runs;
/// the run goes on, since nothing the node runs changed.
#[tokio::test]
async fn a_stored_status_that_says_otherwise_than_the_node_is_reported_again() {
    let node = Node::new("restated");
    let runtime = node.open().await;
    let (_, mut reports) = runtime.subscribe();
    let mut events = runtime.events();
    let app = application("placed", node.shell("sleep 1000"));
    runtime.apply(desired(vec![app.clone()]));
    let pid = started_pid(&wait_event(&mut events, "placed", "Started").await);
    wait_status(&mut reports, "placed", "phase Running", |s| s.phase.as_deref() == Some("Running")).await;

    let mut unbound = app;
    unbound.status = Some(ApplicationStatus {
        phase: Some("Pending".into()),
        observed_generation: Some(1),
        ..ApplicationStatus::default()
    });
    while reports.try_recv().is_ok() {}
    runtime.apply(desired(vec![unbound]));
    let restated =
        wait_status(&mut reports, "placed", "phase Running again", |s| s.phase.as_deref() == Some("Running"))
            .await;
    assert!(restated.conditions.iter().any(|c| c.type_ == "Ready" && c.status == "True"), "{restated:?}");
    assert!(alive_with_marker(pid, &node.marker), "the same run goes on");
    runtime.apply(desired(vec![]));
    wait_gone(&mut reports, "placed").await;
}

#[tokio::test]
async fn on_failure_restarts_with_growing_back_off() {
    let node = Node::new("onfailure");
    let runtime = node.open().await;
    let (_, mut reports) = runtime.subscribe();
    let mut events = runtime.events();
    let start = Instant::now();
    runtime.apply(desired(vec![application("crashy", node.shell("exit 3")).with_policy("OnFailure")]));
    let status = wait_status(&mut reports, "crashy", "3 restarts", |s| s.restarts >= Some(3)).await;
    // The third restart is decided after waits of 200 ms and 400 ms.
    assert!(start.elapsed() >= Duration::from_millis(600), "{:?}", start.elapsed());
    assert_eq!(status.exit_code, Some(3));
    assert_eq!(
        status.phase.as_deref(),
        Some("Running"),
        "restarting is still running, as kubelet reports it"
    );
    assert!(status.message.as_deref().unwrap_or_default().contains("back-off"), "{status:?}");
    let ready = status.conditions.iter().find(|c| c.type_ == "Ready").expect("a Ready condition");
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_deref()),
        ("False", Some("CrashLoopBackOff")),
        "waiting out its back-off, it says so: {status:?}"
    );
    assert!(status.attempts >= Some(3));
    let backoff = wait_event(&mut events, "crashy", "BackOff").await;
    assert!(backoff.message.contains("exit code 3"), "{backoff:?}");
    runtime.apply(desired(vec![]));
    wait_gone(&mut reports, "crashy").await;
}

#[tokio::test]
async fn jobs_end_failed_with_their_exit_code_or_succeeded() {
    let node = Node::new("jobs");
    let runtime = node.open().await;
    let (_, mut reports) = runtime.subscribe();
    let mut limited = application("limited", node.shell("exit 4")).with_policy("OnFailure");
    limited.spec.lifecycle.backoff_limit = Some(1);
    runtime.apply(desired(vec![
        application("fails", node.shell("exit 7")).with_policy("Never"),
        application("succeeds", node.shell("echo done")).with_policy("Never"),
        limited,
    ]));
    let failed =
        current_status(&runtime, "fails", "phase Failed", |s| s.phase.as_deref() == Some("Failed")).await;
    assert_eq!((failed.exit_code, failed.restarts, failed.attempts), (Some(7), Some(0), Some(1)));
    let succeeded =
        current_status(&runtime, "succeeds", "phase Succeeded", |s| s.phase.as_deref() == Some("Succeeded"))
            .await;
    assert_eq!(succeeded.exit_code, Some(0));
    assert!(succeeded.finished_at.is_some() && succeeded.started_at.is_some());
    let limited =
        current_status(&runtime, "limited", "phase Failed", |s| s.phase.as_deref() == Some("Failed")).await;
    assert_eq!((limited.exit_code, limited.attempts), (Some(4), Some(2)));
    assert!(limited.message.unwrap_or_default().starts_with("BackoffLimitExceeded"));
    runtime.apply(desired(vec![]));
    for name in ["fails", "succeeds", "limited"] {
        wait_gone(&mut reports, name).await;
    }
}

#[tokio::test]
async fn a_job_past_its_active_deadline_is_stopped_and_failed() {
    let node = Node::new("deadline");
    let runtime = node.open().await;
    let (_, mut reports) = runtime.subscribe();
    let mut events = runtime.events();
    let mut job = application("slow", node.shell("sleep 1000")).with_policy("Never");
    job.spec.lifecycle.active_deadline_seconds = Some(1);
    runtime.apply(desired(vec![job]));
    let pid = started_pid(&wait_event(&mut events, "slow", "Started").await);
    let status =
        wait_status(&mut reports, "slow", "phase Failed", |s| s.phase.as_deref() == Some("Failed")).await;
    assert!(status.message.unwrap_or_default().starts_with("DeadlineExceeded"));
    assert!(!alive_with_marker(pid, &node.marker));
    runtime.apply(desired(vec![]));
    wait_gone(&mut reports, "slow").await;
}

#[tokio::test]
async fn a_missing_command_fails_with_its_name() {
    let node = Node::new("notfound");
    let runtime = node.open().await;
    let (_, mut reports) = runtime.subscribe();
    let mut events = runtime.events();
    let command = format!("{}-no-such-command", node.marker);
    runtime.apply(desired(vec![application("missing", vec![command.clone()]).with_policy("Never")]));
    let event = wait_event(&mut events, "missing", "Failed").await;
    assert!(event.message.contains(&command) && event.message.contains("not found"), "{event:?}");
    let status =
        wait_status(&mut reports, "missing", "phase Failed", |s| s.phase.as_deref() == Some("Failed")).await;
    assert!(status.message.unwrap_or_default().contains(&command));

    runtime.apply(desired(vec![application("missing-always", vec![command.clone()])]));
    let status = wait_status(&mut reports, "missing-always", "a back-off", |s| s.restarts >= Some(1)).await;
    assert_eq!(status.phase.as_deref(), Some("Pending"), "never started, so still pending");
    wait_event(&mut events, "missing-always", "BackOff").await;
}

#[tokio::test]
async fn a_process_over_its_memory_limit_is_oom_killed() {
    let node = Node::new("oom");
    let runtime = node.open().await;
    let (_, mut reports) = runtime.subscribe();
    let mut events = runtime.events();
    let mut app =
        application("hungry", node.shell("x=$(head -c 200000000 /dev/zero | tr '\\0' a); echo survived"))
            .with_policy("Never");
    app.spec.resources = Some(Resources {
        limits: Some(ResourceList { memory: Some("32Mi".into()), cpu: Some("500m".into()) }),
        requests: None,
    });
    runtime.apply(desired(vec![app]));
    let running = wait_status(&mut reports, "hungry", "limits enforced", |s| {
        s.conditions.iter().any(|c| c.type_ == "LimitsEnforced")
    })
    .await;
    let condition = running.conditions.iter().find(|c| c.type_ == "LimitsEnforced").unwrap();
    assert_eq!(condition.reason.as_deref(), Some(runtime.enforcement().reason()));
    assert_ne!(runtime.enforcement(), kayra_runtime::cgroup::Enforcement::Rlimit, "this host has cgroups");
    let status =
        wait_status(&mut reports, "hungry", "phase Failed", |s| s.phase.as_deref() == Some("Failed")).await;
    assert_eq!(status.exit_code, Some(137));
    assert!(
        status.message.unwrap_or_default().starts_with("OOMKilled"),
        "reason OOMKilled, as Kubernetes reports it"
    );
    wait_event(&mut events, "hungry", "OOMKilled").await;
    runtime.apply(desired(vec![]));
    wait_gone(&mut reports, "hungry").await;
}

/// The kernel may choose any process of the cgroup: here the shell's child dies and the shell
/// itself exits 137. The cgroup's own OOM-kill counter is what tells.
#[tokio::test]
async fn an_oom_kill_of_a_shells_child_is_reported_as_one() {
    let node = Node::new("oom-child");
    let runtime = node.open().await;
    let (_, mut reports) = runtime.subscribe();
    let mut events = runtime.events();
    let script = "python3 -c 'a = bytearray(400 * 1024 * 1024)'; exit $?";
    let mut app = application("hungry-child", node.shell(script)).with_policy("Never");
    app.spec.resources = Some(Resources {
        limits: Some(ResourceList { memory: Some("64Mi".into()), cpu: None }),
        requests: None,
    });
    runtime.apply(desired(vec![app]));
    let status =
        wait_status(&mut reports, "hungry-child", "phase Failed", |s| s.phase.as_deref() == Some("Failed"))
            .await;
    assert_eq!(status.exit_code, Some(137), "the shell passes on its child's death by SIGKILL");
    let message = status.message.unwrap_or_default();
    assert!(message.starts_with("OOMKilled"), "reason OOMKilled, not {message:?}");
    wait_event(&mut events, "hungry-child", "OOMKilled").await;
    runtime.apply(desired(vec![]));
    wait_gone(&mut reports, "hungry-child").await;
}

#[tokio::test]
async fn a_failing_liveness_probe_restarts_the_process() {
    let node = Node::new("liveness");
    let runtime = node.open().await;
    let (_, mut reports) = runtime.subscribe();
    let mut events = runtime.events();
    let mut app = application("sick", node.shell("sleep 1000"));
    let probe = Probe {
        exec: Some(ExecAction { command: vec!["false".into()] }),
        period_seconds: Some(1),
        failure_threshold: Some(2),
        ..Probe::default()
    };
    app.spec.probes = Some(Probes { liveness: Some(probe), readiness: None });
    runtime.apply(desired(vec![app]));
    let first = started_pid(&wait_event(&mut events, "sick", "Started").await);
    let unhealthy = wait_event(&mut events, "sick", "Unhealthy").await;
    assert!(unhealthy.message.starts_with("Liveness probe failed"), "{unhealthy:?}");
    let killing = wait_event(&mut events, "sick", "Killing").await;
    assert!(killing.message.contains("liveness"), "{killing:?}");
    let second = started_pid(&wait_event(&mut events, "sick", "Started").await);
    assert_ne!(first, second);
    assert!(!alive_with_marker(first, &node.marker));
    let status = wait_status(&mut reports, "sick", "a restart", |s| s.restarts >= Some(1)).await;
    assert_eq!(status.exit_code, Some(143), "stopped by SIGTERM");
    runtime.apply(desired(vec![]));
    wait_gone(&mut reports, "sick").await;
}

#[tokio::test]
async fn a_readiness_probe_drives_the_ready_condition() {
    let node = Node::new("readiness");
    let flag = std::env::temp_dir().join(format!("{}-ready", node.marker));
    let runtime = node.open().await;
    let (_, mut reports) = runtime.subscribe();
    let mut app = application("gate", node.shell("sleep 1000"));
    let probe = Probe {
        exec: Some(ExecAction { command: vec!["test".into(), "-e".into(), flag.display().to_string()] }),
        period_seconds: Some(1),
        failure_threshold: Some(1),
        ..Probe::default()
    };
    app.spec.probes = Some(Probes { readiness: Some(probe), liveness: None });
    runtime.apply(desired(vec![app]));
    let ready = |want: &'static str| {
        move |s: &kayra_api::kinds::application::ApplicationStatus| {
            s.phase.as_deref() == Some("Running")
                && s.conditions.iter().any(|c| c.type_ == "Ready" && c.status == want)
        }
    };
    wait_status(&mut reports, "gate", "Ready False", ready("False")).await;
    std::fs::write(&flag, "").unwrap();
    wait_status(&mut reports, "gate", "Ready True", ready("True")).await;
    std::fs::remove_file(&flag).unwrap();
    wait_status(&mut reports, "gate", "Ready False again", ready("False")).await;
    runtime.apply(desired(vec![]));
    wait_gone(&mut reports, "gate").await;
}

#[tokio::test]
async fn processes_run_as_their_user_with_secrets_in_their_environment() {
    let node = Node::new("identity");
    let runtime = node.open().await;
    let (_, mut reports) = runtime.subscribe();
    let mut events = runtime.events();
    let mut app = application("who", node.shell("echo \"$DB_user:$PASSWORD:$PLAIN:$HOME\"; sleep 1000"));
    app.spec.env = vec![
        EnvVar { name: "PLAIN".into(), value: Some("literal".into()), ..EnvVar::default() },
        EnvVar {
            secret_ref: Some(SecretKeyRef { name: "db".into(), key: "*".into(), optional: None }),
            prefix: Some("DB_".into()),
            ..EnvVar::default()
        },
        EnvVar {
            name: "PASSWORD".into(),
            secret_ref: Some(SecretKeyRef { name: "db".into(), key: "password".into(), optional: None }),
            ..EnvVar::default()
        },
    ];
    let mut lacking = application("lacking", node.shell("sleep 1000")).with_policy("Never");
    lacking.spec.env = vec![EnvVar {
        name: "X".into(),
        secret_ref: Some(SecretKeyRef { name: "absent".into(), key: "k".into(), optional: None }),
        ..EnvVar::default()
    }];
    runtime.apply(Desired {
        applications: vec![app, lacking],
        secrets: vec![secret("db", &[("user", "app"), ("password", "s3cret")])],
        tokens: vec![],
    });

    let pid = started_pid(&wait_event(&mut events, "who", "Started").await);
    let proc_status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = |key: &str| {
        proc_status
            .lines()
            .find(|l| l.starts_with(key))
            .unwrap_or_default()
            .split_whitespace()
            .skip(1)
            .collect::<Vec<_>>()
            .join(" ")
    };
    assert_eq!(line("Uid:"), "65532 65532 65532 65532", "runs as the default user");
    assert_eq!(line("Gid:"), "65532 65532 65532 65532");
    assert_eq!(line("Groups:"), "", "no supplementary groups");

    let failed =
        wait_status(&mut reports, "lacking", "phase Failed", |s| s.phase.as_deref() == Some("Failed")).await;
    assert_eq!(failed.message.as_deref(), Some("secret \"absent\" not found"));

    let text = crate::logs::follow_until(&runtime, "who", "app:s3cret:literal:", 1).await;
    assert!(text.contains("/work\n"), "HOME is the working directory: {text}");
    runtime.apply(desired(vec![]));
    wait_gone(&mut reports, "who").await;
}

#[tokio::test]
async fn without_cgroups_limits_fall_back_to_rlimits() {
    let node = Node::new("rlimit");
    let mut config = node.config();
    config.cgroup_mount = Some(node.dir.path().join("no-cgroup-filesystem-here"));
    let runtime = kayra_runtime::runtime::Runtime::open(config).await.unwrap();
    assert_eq!(runtime.enforcement(), kayra_runtime::cgroup::Enforcement::Rlimit);
    let (_, mut reports) = runtime.subscribe();
    let mut app = application("capped", node.shell("ulimit -v; ulimit -p")).with_policy("Never");
    app.spec.resources = Some(Resources {
        limits: Some(ResourceList { memory: Some("64Mi".into()), cpu: None }),
        requests: None,
    });
    runtime.apply(desired(vec![app]));
    let done =
        wait_status(&mut reports, "capped", "phase Succeeded", |s| s.phase.as_deref() == Some("Succeeded"))
            .await;
    let condition = done.conditions.iter().find(|c| c.type_ == "LimitsEnforced").unwrap();
    assert_eq!(condition.reason.as_deref(), Some("Rlimit"));
    let text = crate::logs::follow_until(&runtime, "capped", "\n", 2).await;
    assert_eq!(text, "65536\n4096\n", "address space in KiB, then the process cap");
    assert!(runtime.usage().is_empty(), "no cgroup, no usage samples");
}

#[tokio::test]
async fn usage_comes_from_the_cgroup() {
    let node = Node::new("usage");
    let runtime = node.open().await;
    let (_, mut reports) = runtime.subscribe();
    let mut events = runtime.events();
    runtime.apply(desired(vec![application("busy", node.shell("sleep 1000"))]));
    wait_event(&mut events, "busy", "Started").await;
    // Started once sh runs; its sleep joins the cgroup when sh has forked it.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let sample = loop {
        let samples = runtime.usage();
        let sample = samples.into_iter().find(|s| s.name == "busy").expect("a sample");
        if sample.pids >= 2 || tokio::time::Instant::now() > deadline {
            break sample;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(sample.pids >= 2, "sh and its sleep within 10 s: {sample:?}");
    assert_eq!(sample.oom_kills, 0);
    runtime.apply(desired(vec![]));
    wait_gone(&mut reports, "busy").await;
}
