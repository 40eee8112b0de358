//! Resource limits through the kernel's control groups: one cgroup per Application under a
//! per-node parent (`<parent>/<uid>`, the parent by default `kayra/<node>`, so several agents on
//! one host never share one), created before each run with the Application's limits written
//! into it, joined by the workload before it execs, read for usage and for out-of-memory kills,
//! and removed when the Application is gone.
//!
//! [`v2`] is used where `/sys/fs/cgroup` is the unified hierarchy with the `memory`, `cpu` and
//! `pids` controllers; [`v1`] where those controllers are mounted one per directory (the hybrid
//! layout of these machines); otherwise limits fall back to `setrlimit` ([`crate::rlimit`]).
//!
//! A frozen Application ([`Freezing`]) is held by its cgroup: v2's `cgroup.freeze`, or v1's
//! `freezer.state` where the `freezer` hierarchy is mounted and writable (its cgroup is then
//! created there too); where neither can be written, the runtime stops its process group with
//! `SIGSTOP` instead.

pub(crate) mod v1;
pub(crate) mod v2;

use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// What a node uses to hold a process to its limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Enforcement {
    /// The unified cgroup v2 hierarchy: `memory.max`, `cpu.max`, `pids.max`.
    CgroupV2,
    /// cgroup v1 controllers: `memory.limit_in_bytes`, `cpu.cfs_quota_us`, `pids.max`.
    CgroupV1,
    /// No usable cgroups: `setrlimit` on the address space and the process count, best effort;
    /// CPU is not limited.
    Rlimit,
}

impl Enforcement {
    /// The CamelCase word a status condition's reason carries.
    pub fn reason(self) -> &'static str {
        match self {
            Enforcement::CgroupV2 => "CgroupV2",
            Enforcement::CgroupV1 => "CgroupV1",
            Enforcement::Rlimit => "Rlimit",
        }
    }

    /// What the enforcement holds, for people.
    pub fn describe(self) -> &'static str {
        match self {
            Enforcement::CgroupV2 => "limits enforced by cgroup v2 (memory.max, cpu.max, pids.max)",
            Enforcement::CgroupV1 => {
                "limits enforced by cgroup v1 (memory.limit_in_bytes, cpu.cfs_quota_us, pids.max)"
            }
            Enforcement::Rlimit => {
                "no usable cgroups: memory and process count limited by setrlimit (RLIMIT_AS, RLIMIT_NPROC), CPU not limited"
            }
        }
    }
}

/// How a node holds a frozen Application's processes where they are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Freezing {
    /// cgroup v2: `cgroup.freeze` of the Application's cgroup.
    CgroupV2,
    /// cgroup v1: `freezer.state` of the Application's cgroup in the `freezer` hierarchy.
    CgroupV1,
    /// No writable freezer: `SIGSTOP` to the process group, `SIGCONT` to thaw it.
    Signal,
}

impl Freezing {
    /// The CamelCase word the `Frozen` condition's reason carries.
    pub fn reason(self) -> &'static str {
        match self {
            Freezing::CgroupV2 => "CgroupFreeze",
            Freezing::CgroupV1 => "CgroupFreezer",
            Freezing::Signal => "SIGSTOP",
        }
    }

    /// How the processes are held, for people.
    pub fn describe(self) -> &'static str {
        match self {
            Freezing::CgroupV2 => {
                "frozen by its cgroup (cgroup v2 cgroup.freeze): every process in it is held"
            }
            Freezing::CgroupV1 => {
                "frozen by its cgroup (cgroup v1 freezer.state FROZEN): every process in it is held"
            }
            Freezing::Signal => {
                "no writable cgroup freezer on this node: its process group is stopped with SIGSTOP \
                 (a process that left the group is not held)"
            }
        }
    }
}

/// The limits of one Application, in kernel units.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Limits {
    /// Bytes of memory.
    pub(crate) memory_bytes: Option<u64>,
    /// Thousandths of a core.
    pub(crate) cpu_millis: Option<u64>,
    /// Processes and threads.
    pub(crate) pids: Option<u64>,
}

/// The microseconds of a CPU quota period; a quota of `millis` cores gets `millis × 100` µs of
/// it, as the kubelet writes.
pub(crate) const CPU_PERIOD_US: u64 = 100_000;

/// A cgroup's running totals.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Usage {
    /// CPU time used, in microseconds.
    pub(crate) cpu_usec: u64,
    /// Time the CPU limit held the cgroup back, in microseconds.
    pub(crate) cpu_throttled_usec: u64,
    /// Memory in use, in bytes.
    pub(crate) memory_bytes: u64,
    /// The most memory ever in use, in bytes.
    pub(crate) memory_peak_bytes: u64,
    /// Processes and threads in the cgroup.
    pub(crate) pids: u64,
    /// How many times the kernel killed a process of the cgroup for memory.
    pub(crate) oom_kills: u64,
}

/// Where an out-of-memory kill counter is read: the file and its format.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct OomCounter {
    /// `memory.oom_control` (v1) or `memory.events` (v2); both have an `oom_kill <n>` line.
    pub(crate) path: PathBuf,
}

impl OomCounter {
    /// The kill count now; 0 when it cannot be read.
    pub(crate) fn read(&self) -> u64 {
        std::fs::read_to_string(&self.path).map(|text| keyed_value(&text, "oom_kill")).unwrap_or(0)
    }
}

/// The value of the `key <n>` line of a flat-keyed cgroup file; 0 when absent.
pub(crate) fn keyed_value(text: &str, key: &str) -> u64 {
    text.lines()
        .filter_map(|line| line.split_once(' '))
        .find(|(name, _)| *name == key)
        .and_then(|(_, value)| value.trim().parse().ok())
        .unwrap_or(0)
}

/// The cgroups of one node's Applications.
#[derive(Debug, Clone)]
pub(crate) struct Cgroups {
    hierarchy: Hierarchy,
    parent: PathBuf,
}

#[derive(Debug, Clone)]
enum Hierarchy {
    V2(PathBuf),
    /// The mount, and whether its `freezer` hierarchy is usable.
    V1(PathBuf, bool),
    None,
}

impl Cgroups {
    /// Finds the hierarchy mounted at `mount` (normally `/sys/fs/cgroup`) that this process
    /// may write, for cgroups under `parent` (relative, such as `kayra/<node>`).
    pub(crate) fn detect(mount: &Path, parent: &Path) -> Cgroups {
        let hierarchy = if v2::usable(mount) {
            Hierarchy::V2(mount.to_owned())
        } else if v1::usable(mount) {
            Hierarchy::V1(mount.to_owned(), v1::freezer_usable(mount))
        } else {
            Hierarchy::None
        };
        Cgroups { hierarchy, parent: parent.to_owned() }
    }

    /// What holds processes to their limits here.
    pub(crate) fn enforcement(&self) -> Enforcement {
        match self.hierarchy {
            Hierarchy::V2(_) => Enforcement::CgroupV2,
            Hierarchy::V1(..) => Enforcement::CgroupV1,
            Hierarchy::None => Enforcement::Rlimit,
        }
    }

    /// Creates (or keeps) the cgroup of `app` and writes `limits` into it, unset ones lifted.
    pub(crate) fn create(&self, app: &str, limits: &Limits) -> io::Result<()> {
        let relative = self.parent.join(app);
        match &self.hierarchy {
            Hierarchy::V2(mount) => v2::create(mount, &relative, limits),
            Hierarchy::V1(mount, freezer) => v1::create(mount, &relative, limits, *freezer),
            Hierarchy::None => Ok(()),
        }
    }

    /// The `cgroup.procs` files a process writes its pid into to join `app`'s cgroup.
    pub(crate) fn procs_files(&self, app: &str) -> Vec<PathBuf> {
        let relative = self.parent.join(app);
        match &self.hierarchy {
            Hierarchy::V2(mount) => vec![mount.join(&relative).join("cgroup.procs")],
            Hierarchy::V1(mount, freezer) => {
                v1::dirs(mount, &relative, *freezer).map(|dir| dir.join("cgroup.procs")).collect()
            }
            Hierarchy::None => Vec::new(),
        }
    }

    /// Where `app`'s out-of-memory kills are counted.
    pub(crate) fn oom_counter(&self, app: &str) -> Option<OomCounter> {
        let relative = self.parent.join(app);
        match &self.hierarchy {
            Hierarchy::V2(mount) => Some(OomCounter { path: mount.join(&relative).join("memory.events") }),
            Hierarchy::V1(mount, _) => {
                Some(OomCounter { path: mount.join("memory").join(&relative).join("memory.oom_control") })
            }
            Hierarchy::None => None,
        }
    }

    /// `app`'s running totals, when it has a cgroup.
    pub(crate) fn usage(&self, app: &str) -> Option<Usage> {
        let relative = self.parent.join(app);
        match &self.hierarchy {
            Hierarchy::V2(mount) => v2::usage(&mount.join(relative)),
            Hierarchy::V1(mount, _) => v1::usage(mount, &relative),
            Hierarchy::None => None,
        }
    }

    /// Freezes `app`'s cgroup, in which `pid` runs, and waits (up to a second) until the
    /// kernel says every process in it is held; answers how. `None` when this node's cgroups
    /// cannot freeze it (no writable freezer, or a workload started outside the freezer's
    /// cgroup): the caller stops the process group instead.
    pub(crate) fn freeze(&self, app: &str, pid: u32) -> Option<Freezing> {
        let relative = self.parent.join(app);
        let (how, held): (Freezing, Box<dyn Fn() -> bool>) = match &self.hierarchy {
            Hierarchy::V2(mount) => {
                let dir = mount.join(&relative);
                if !holds(&dir, pid) || v2::set_frozen(&dir, true).is_err() {
                    return None;
                }
                (Freezing::CgroupV2, Box::new(move || v2::frozen(&dir)))
            }
            Hierarchy::V1(mount, true) => {
                if !holds(&mount.join(v1::FREEZER).join(&relative), pid)
                    || v1::set_frozen(mount, &relative, true).is_err()
                {
                    return None;
                }
                let mount = mount.clone();
                (Freezing::CgroupV1, Box::new(move || v1::frozen(&mount, &relative)))
            }
            Hierarchy::V1(_, false) | Hierarchy::None => return None,
        };
        for _ in 0..100 {
            if held() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        Some(how)
    }

    /// Thaws `app`'s cgroup, frozen as `how` said.
    pub(crate) fn thaw(&self, app: &str, how: Freezing) -> io::Result<()> {
        let relative = self.parent.join(app);
        match (&self.hierarchy, how) {
            (Hierarchy::V2(mount), Freezing::CgroupV2) => v2::set_frozen(&mount.join(&relative), false),
            (Hierarchy::V1(mount, _), Freezing::CgroupV1) => v1::set_frozen(mount, &relative, false),
            _ => Ok(()),
        }
    }

    /// Kills whatever is left in `app`'s cgroup and removes it (thawed first: a frozen
    /// process does not die until it is thawed).
    pub(crate) fn remove(&self, app: &str) -> io::Result<()> {
        let relative = self.parent.join(app);
        let dirs: Vec<PathBuf> = match &self.hierarchy {
            Hierarchy::V2(mount) => {
                let _ = v2::set_frozen(&mount.join(&relative), false);
                vec![mount.join(&relative)]
            }
            Hierarchy::V1(mount, freezer) => {
                if *freezer {
                    let _ = v1::set_frozen(mount, &relative, false);
                }
                v1::dirs(mount, &relative, *freezer).collect()
            }
            Hierarchy::None => return Ok(()),
        };
        remove_dirs(&dirs)
    }
}

/// Whether the cgroup at `dir` holds the process `pid`.
fn holds(dir: &Path, pid: u32) -> bool {
    std::fs::read_to_string(dir.join("cgroup.procs"))
        .is_ok_and(|procs| procs.lines().any(|line| line.trim() == pid.to_string()))
}

/// Removes cgroup directories, killing their remaining processes first; a directory only goes
/// once the kernel has seen its last process exit, so removal is retried for a moment.
fn remove_dirs(dirs: &[PathBuf]) -> io::Result<()> {
    let mut last = Ok(());
    for dir in dirs {
        if !dir.exists() {
            continue;
        }
        for attempt in 0..50 {
            for pid in std::fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default().lines() {
                if let Some(pid) = pid.trim().parse().ok().and_then(rustix::process::Pid::from_raw) {
                    let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
                }
            }
            match std::fs::remove_dir(dir) {
                Ok(()) => break,
                Err(error) if error.kind() == io::ErrorKind::NotFound => break,
                Err(error) if attempt == 49 => last = Err(error),
                Err(_) => std::thread::sleep(std::time::Duration::from_millis(20)),
            }
        }
    }
    last
}

/// Writes `value` to the control file `file` of `dir`.
fn write(dir: &Path, file: &str, value: &str) -> io::Result<()> {
    std::fs::write(dir.join(file), value).map_err(|error| {
        io::Error::new(error.kind(), format!("writing {}: {error}", dir.join(file).display()))
    })
}

fn read_u64(path: &Path) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

#[cfg(test)]
mod tests;
