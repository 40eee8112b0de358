//! cgroup v1: one hierarchy per controller, each mounted at `<mount>/<controller>`. The
//! Application's cgroup is the same relative path in the `memory`, `cpu`, `cpuacct` and `pids`
//! hierarchies (where `cpu` and `cpuacct` are one mount, it is one directory), and in the
//! `freezer` hierarchy where that is mounted and writable, which freezes it.

use std::io;
use std::path::{Path, PathBuf};

use super::{CPU_PERIOD_US, Limits, Usage, keyed_value, read_u64, write};

const CONTROLLERS: [&str; 4] = ["memory", "cpu", "cpuacct", "pids"];

/// The controllers with the freezer, where it is usable.
const WITH_FREEZER: [&str; 5] = ["memory", "cpu", "cpuacct", "pids", FREEZER];

/// The freezer controller's hierarchy.
pub(crate) const FREEZER: &str = "freezer";

/// Whether `mount` has the v1 controllers Kayra needs, writable by this process.
pub(crate) fn usable(mount: &Path) -> bool {
    CONTROLLERS.iter().all(|controller| writable(mount, controller))
}

/// Whether `mount` has the freezer hierarchy, writable by this process.
pub(crate) fn freezer_usable(mount: &Path) -> bool {
    writable(mount, FREEZER)
}

fn writable(mount: &Path, controller: &str) -> bool {
    let dir = mount.join(controller);
    dir.join("cgroup.procs").exists() && rustix::fs::access(&dir, rustix::fs::Access::WRITE_OK).is_ok()
}

/// The directories of the cgroup at `relative`, one per controller (the freezer's too when
/// `freezer`).
pub(crate) fn dirs<'a>(
    mount: &'a Path,
    relative: &'a Path,
    freezer: bool,
) -> impl Iterator<Item = PathBuf> + 'a {
    let controllers: &[&str] = if freezer { &WITH_FREEZER } else { &CONTROLLERS };
    controllers.iter().map(move |controller| mount.join(controller).join(relative))
}

/// Freezes (`FROZEN`) or thaws (`THAWED`) the cgroup at `relative` in the freezer hierarchy.
pub(crate) fn set_frozen(mount: &Path, relative: &Path, frozen: bool) -> io::Result<()> {
    write(&mount.join(FREEZER).join(relative), "freezer.state", if frozen { "FROZEN" } else { "THAWED" })
}

/// Whether the freezer says the cgroup at `relative` is wholly frozen (not still `FREEZING`).
pub(crate) fn frozen(mount: &Path, relative: &Path) -> bool {
    std::fs::read_to_string(mount.join(FREEZER).join(relative).join("freezer.state"))
        .is_ok_and(|state| state.trim() == "FROZEN")
}

/// Creates the cgroup at `relative` in every controller (and the freezer when `freezer`) and
/// writes `limits`.
pub(crate) fn create(mount: &Path, relative: &Path, limits: &Limits, freezer: bool) -> io::Result<()> {
    for dir in dirs(mount, relative, freezer) {
        std::fs::create_dir_all(&dir)?;
    }
    let memory = mount.join("memory").join(relative);
    write(&memory, "memory.limit_in_bytes", &limits.memory_bytes.map_or("-1".to_owned(), |b| b.to_string()))?;
    let cpu = mount.join("cpu").join(relative);
    write(&cpu, "cpu.cfs_period_us", &CPU_PERIOD_US.to_string())?;
    write(&cpu, "cpu.cfs_quota_us", &limits.cpu_millis.map_or("-1".to_owned(), |m| (m * 100).to_string()))?;
    let pids = mount.join("pids").join(relative);
    write(&pids, "pids.max", &limits.pids.map_or("max".to_owned(), |p| p.to_string()))
}

/// The totals of the cgroup at `relative`.
pub(crate) fn usage(mount: &Path, relative: &Path) -> Option<Usage> {
    let memory = mount.join("memory").join(relative);
    Some(Usage {
        cpu_usec: read_u64(&mount.join("cpuacct").join(relative).join("cpuacct.usage")).unwrap_or(0) / 1000,
        cpu_throttled_usec: std::fs::read_to_string(mount.join("cpu").join(relative).join("cpu.stat"))
            .map(|text| keyed_value(&text, "throttled_time") / 1000)
            .unwrap_or(0),
        memory_bytes: read_u64(&memory.join("memory.usage_in_bytes"))?,
        memory_peak_bytes: read_u64(&memory.join("memory.max_usage_in_bytes")).unwrap_or(0),
        pids: read_u64(&mount.join("pids").join(relative).join("pids.current")).unwrap_or(0),
        oom_kills: std::fs::read_to_string(memory.join("memory.oom_control"))
            .map(|text| keyed_value(&text, "oom_kill"))
            .unwrap_or(0),
    })
}
