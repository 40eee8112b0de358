//! cgroup v1: one hierarchy per controller, each mounted at `<mount>/<controller>`. The
//! Application's cgroup is the same relative path in the `memory`, `cpu`, `cpuacct` and `pids`
//! hierarchies (where `cpu` and `cpuacct` are one mount, it is one directory).

use std::io;
use std::path::{Path, PathBuf};

use super::{CPU_PERIOD_US, Limits, Usage, keyed_value, read_u64, write};

const CONTROLLERS: [&str; 4] = ["memory", "cpu", "cpuacct", "pids"];

/// Whether `mount` has the v1 controllers Kayra needs, writable by this process.
pub(crate) fn usable(mount: &Path) -> bool {
    CONTROLLERS.iter().all(|controller| {
        let dir = mount.join(controller);
        dir.join("cgroup.procs").exists() && rustix::fs::access(&dir, rustix::fs::Access::WRITE_OK).is_ok()
    })
}

/// The directories of the cgroup at `relative`, one per controller.
pub(crate) fn dirs<'a>(mount: &'a Path, relative: &'a Path) -> impl Iterator<Item = PathBuf> + 'a {
    CONTROLLERS.iter().map(move |controller| mount.join(controller).join(relative))
}

/// Creates the cgroup at `relative` in every controller and writes `limits`.
pub(crate) fn create(mount: &Path, relative: &Path, limits: &Limits) -> io::Result<()> {
    for dir in dirs(mount, relative) {
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
