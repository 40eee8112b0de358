//! Detection, the files each hierarchy's limits are written to (on a directory that stands in
//! for the cgroup filesystem), and one real cgroup of this machine created, limited, joined,
//! read and removed.

use std::path::Path;

use super::*;

fn limits() -> Limits {
    Limits { memory_bytes: Some(64 << 20), cpu_millis: Some(500), pids: Some(100) }
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|error| panic!("{}: {error}", path.display()))
}

#[test]
fn detection_prefers_v2_with_controllers_then_v1_then_rlimit() {
    let v2 = tempfile::tempdir().unwrap();
    std::fs::write(v2.path().join("cgroup.controllers"), "cpuset cpu io memory hugetlb pids rdma\n").unwrap();
    let v2_without = tempfile::tempdir().unwrap();
    std::fs::write(v2_without.path().join("cgroup.controllers"), "").unwrap();
    let v1 = tempfile::tempdir().unwrap();
    for controller in ["memory", "cpu", "cpuacct", "pids"] {
        std::fs::create_dir(v1.path().join(controller)).unwrap();
        std::fs::write(v1.path().join(controller).join("cgroup.procs"), "").unwrap();
    }
    let none = tempfile::tempdir().unwrap();
    for (mount, expect) in [
        (v2.path(), Enforcement::CgroupV2),
        (v2_without.path(), Enforcement::Rlimit),
        (v1.path(), Enforcement::CgroupV1),
        (none.path(), Enforcement::Rlimit),
    ] {
        assert_eq!(Cgroups::detect(mount, Path::new("kayra/n")).enforcement(), expect, "{}", mount.display());
    }
}

#[test]
fn v2_enables_controllers_down_the_path_and_writes_its_limits() {
    let mount = tempfile::tempdir().unwrap();
    v2::create(mount.path(), Path::new("kayra/node-a/app"), &limits()).unwrap();
    for level in ["kayra", "kayra/node-a"] {
        assert_eq!(read(&mount.path().join(level).join("cgroup.subtree_control")), "+memory +cpu +pids");
    }
    let app = mount.path().join("kayra/node-a/app");
    assert_eq!(read(&app.join("memory.max")), (64u64 << 20).to_string());
    assert_eq!(read(&app.join("cpu.max")), "50000 100000");
    assert_eq!(read(&app.join("pids.max")), "100");
    v2::create(mount.path(), Path::new("kayra/node-a/app"), &Limits::default()).unwrap();
    assert_eq!(read(&app.join("memory.max")), "max", "a limit taken away is lifted");
    assert_eq!(read(&app.join("cpu.max")), "max 100000");
}

#[test]
fn v1_writes_each_controller_its_own_limit() {
    let mount = tempfile::tempdir().unwrap();
    v1::create(mount.path(), Path::new("kayra/node-a/app"), &limits(), false).unwrap();
    let at = |controller: &str, file: &str| {
        read(&mount.path().join(controller).join("kayra/node-a/app").join(file))
    };
    assert_eq!(at("memory", "memory.limit_in_bytes"), (64u64 << 20).to_string());
    assert_eq!(at("cpu", "cpu.cfs_quota_us"), "50000");
    assert_eq!(at("cpu", "cpu.cfs_period_us"), "100000");
    assert_eq!(at("pids", "pids.max"), "100");
    assert!(mount.path().join("cpuacct/kayra/node-a/app").is_dir());
    assert!(!mount.path().join("freezer/kayra/node-a/app").exists(), "no freezer asked for");
    v1::create(mount.path(), Path::new("kayra/node-a/app"), &limits(), true).unwrap();
    assert!(mount.path().join("freezer/kayra/node-a/app").is_dir(), "a cgroup in the freezer too");
    v1::set_frozen(mount.path(), Path::new("kayra/node-a/app"), true).unwrap();
    assert_eq!(at("freezer", "freezer.state"), "FROZEN");
    v1::set_frozen(mount.path(), Path::new("kayra/node-a/app"), false).unwrap();
    assert_eq!(at("freezer", "freezer.state"), "THAWED");
}

#[test]
fn v1_joins_the_freezer_only_where_it_is_mounted_and_v2_freezes_through_cgroup_freeze() {
    let v1 = tempfile::tempdir().unwrap();
    for controller in ["memory", "cpu", "cpuacct", "pids"] {
        std::fs::create_dir(v1.path().join(controller)).unwrap();
        std::fs::write(v1.path().join(controller).join("cgroup.procs"), "").unwrap();
    }
    let procs = |cgroups: &Cgroups| cgroups.procs_files("app").len();
    assert_eq!(procs(&Cgroups::detect(v1.path(), Path::new("kayra/n"))), 4);
    std::fs::create_dir(v1.path().join("freezer")).unwrap();
    std::fs::write(v1.path().join("freezer/cgroup.procs"), "").unwrap();
    let with_freezer = Cgroups::detect(v1.path(), Path::new("kayra/n"));
    assert_eq!(procs(&with_freezer), 5, "the workload joins the freezer's cgroup too");
    assert!(with_freezer.procs_files("app").contains(&v1.path().join("freezer/kayra/n/app/cgroup.procs")));

    let v2 = tempfile::tempdir().unwrap();
    let dir = v2.path().join("kayra/n/app");
    std::fs::create_dir_all(&dir).unwrap();
    assert!(v2::set_frozen(&dir, true).is_err(), "a kernel without cgroup.freeze cannot");
    std::fs::write(dir.join("cgroup.freeze"), "0").unwrap();
    v2::set_frozen(&dir, true).unwrap();
    assert_eq!(read(&dir.join("cgroup.freeze")), "1");
    std::fs::write(dir.join("cgroup.events"), "populated 1\nfrozen 1\n").unwrap();
    assert!(v2::frozen(&dir));
}

/// This machine's own freezer (cgroup v1's here; v2's `cgroup.freeze` on most hosts): a real
/// process is held and let go again, and a frozen cgroup is still removed with its process.
#[test]
fn a_real_cgroup_freezes_and_thaws_its_process() {
    let parent = format!("kayra-test-freeze-{}/node", std::process::id());
    let cgroups = Cgroups::detect(Path::new("/sys/fs/cgroup"), Path::new(&parent));
    cgroups.create("app", &limits()).unwrap();
    let mut child = std::process::Command::new("sh")
        .args(["-c", "exec sleep 30", "kayra-test-cgroup-freeze"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    for procs in cgroups.procs_files("app") {
        std::fs::write(&procs, child.id().to_string()).unwrap();
    }
    let how = cgroups.freeze("app", child.id());
    let freezer = Path::new("/sys/fs/cgroup/freezer").join(&parent).join("app");
    match how {
        Some(Freezing::CgroupV1) => assert_eq!(read(&freezer.join("freezer.state")).trim(), "FROZEN"),
        Some(Freezing::CgroupV2) => {
            assert!(v2::frozen(&Path::new("/sys/fs/cgroup").join(&parent).join("app")))
        }
        other => panic!("this host's cgroups freeze (v1 freezer or v2 cgroup.freeze): {other:?}"),
    }
    // A process that is not in the cgroup is not said to be held by it.
    assert_eq!(cgroups.freeze("app", std::process::id()), None);
    cgroups.thaw("app", how.unwrap()).unwrap();
    if how == Some(Freezing::CgroupV1) {
        assert_eq!(read(&freezer.join("freezer.state")).trim(), "THAWED");
    }
    cgroups.freeze("app", child.id()).unwrap();
    cgroups.remove("app").unwrap();
    assert!(child.wait().unwrap().code().is_none(), "removal kills a frozen process too");
    let top = format!("kayra-test-freeze-{}", std::process::id());
    for root in [Path::new("/sys/fs/cgroup").to_owned()]
        .into_iter()
        .chain(["memory", "cpu", "cpuacct", "pids", "freezer"].map(|c| Path::new("/sys/fs/cgroup").join(c)))
    {
        let _ = std::fs::remove_dir(root.join(&parent));
        let _ = std::fs::remove_dir(root.join(&top));
    }
}

#[test]
fn flat_keyed_files_give_their_counters() {
    let oom_control = "oom_kill_disable 0\nunder_oom 0\noom_kill 3\n";
    let events = "low 0\nhigh 0\nmax 12\noom 2\noom_kill 2\noom_group_kill 0\n";
    assert_eq!(keyed_value(oom_control, "oom_kill"), 3);
    assert_eq!(keyed_value(events, "oom_kill"), 2);
    assert_eq!(keyed_value(events, "missing"), 0);
}

/// This machine's own cgroups (v1 here, v2 on most hosts): a real cgroup takes the limits, a
/// process joins it, its usage reads back and the cgroup goes away with the process in it.
#[test]
fn a_real_cgroup_is_created_joined_read_and_removed() {
    let parent = format!("kayra-test-{}/node", std::process::id());
    let cgroups = Cgroups::detect(Path::new("/sys/fs/cgroup"), Path::new(&parent));
    assert_ne!(cgroups.enforcement(), Enforcement::Rlimit, "these tests run as root on a host with cgroups");
    cgroups.create("app", &limits()).unwrap();
    // `exec`, so the process that joins is the one that sleeps (nothing forked before the move).
    let mut child = std::process::Command::new("sh")
        .args(["-c", "exec sleep 30", "kayra-test-cgroup-join"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    for procs in cgroups.procs_files("app") {
        std::fs::write(&procs, child.id().to_string()).unwrap();
        assert!(read(&procs).lines().any(|pid| pid == child.id().to_string()), "{}", procs.display());
    }
    let usage = cgroups.usage("app").unwrap();
    assert!(usage.pids >= 1, "{usage:?}");
    assert_eq!(cgroups.oom_counter("app").unwrap().read(), 0);
    cgroups.remove("app").unwrap();
    assert!(child.wait().unwrap().code().is_none(), "removal kills what is left in the cgroup");
    assert!(cgroups.procs_files("app").iter().all(|procs| !procs.exists()));
    let top = format!("kayra-test-{}", std::process::id());
    for root in [Path::new("/sys/fs/cgroup").to_owned()]
        .into_iter()
        .chain(["memory", "cpu", "cpuacct", "pids", "freezer"].map(|c| Path::new("/sys/fs/cgroup").join(c)))
    {
        let _ = std::fs::remove_dir(root.join(&parent));
        let _ = std::fs::remove_dir(root.join(&top));
    }
}

#[test]
fn usage_reads_cpu_throttling_memory_pids_and_oom_kills_from_either_hierarchy() {
    let write = |path: std::path::PathBuf, text: &str| {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    let v1 = tempfile::tempdir().unwrap();
    let relative = Path::new("kayra/node-a/app");
    let at = |controller: &str, file: &str| v1.path().join(controller).join(relative).join(file);
    write(at("cpuacct", "cpuacct.usage"), "5000000\n");
    write(at("cpu", "cpu.stat"), "nr_periods 10\nnr_throttled 2\nthrottled_time 3000000\n");
    write(at("memory", "memory.usage_in_bytes"), "100\n");
    write(at("memory", "memory.max_usage_in_bytes"), "200\n");
    write(at("memory", "memory.oom_control"), "oom_kill_disable 0\nunder_oom 0\noom_kill 1\n");
    write(at("pids", "pids.current"), "3\n");
    let v2 = tempfile::tempdir().unwrap();
    let dir = v2.path().join(relative);
    write(
        dir.join("cpu.stat"),
        "usage_usec 5000\nuser_usec 4000\nsystem_usec 1000\nnr_periods 10\nnr_throttled 2\nthrottled_usec 3000\n",
    );
    write(dir.join("memory.current"), "100\n");
    write(dir.join("memory.peak"), "200\n");
    write(dir.join("memory.events"), "low 0\nhigh 0\nmax 1\noom 1\noom_kill 1\n");
    write(dir.join("pids.current"), "3\n");
    for (hierarchy, usage) in [("v1", v1::usage(v1.path(), relative)), ("v2", v2::usage(&dir))] {
        let usage = usage.unwrap_or_else(|| panic!("{hierarchy} reads"));
        let read = (usage.cpu_usec, usage.cpu_throttled_usec, usage.memory_bytes, usage.memory_peak_bytes);
        assert_eq!(read, (5000, 3000, 100, 200), "{hierarchy}");
        assert_eq!((usage.pids, usage.oom_kills), (3, 1), "{hierarchy}");
    }
}
