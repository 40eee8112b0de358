//! cgroup v2: one unified hierarchy. A controller works in a cgroup only when every ancestor
//! lists it in `cgroup.subtree_control`, so creating the Application's cgroup enables `memory`,
//! `cpu` and `pids` down the path first. Its `cgroup.freeze` freezes it.

use std::io;
use std::path::Path;

use super::{CPU_PERIOD_US, Limits, Usage, keyed_value, read_u64, write};

const CONTROLLERS: [&str; 3] = ["memory", "cpu", "pids"];

/// Whether `mount` is a unified hierarchy offering the controllers Kayra needs, writable by
/// this process.
pub(crate) fn usable(mount: &Path) -> bool {
    let Ok(available) = std::fs::read_to_string(mount.join("cgroup.controllers")) else { return false };
    let available: Vec<&str> = available.split_whitespace().collect();
    CONTROLLERS.iter().all(|controller| available.contains(controller))
        && rustix::fs::access(mount, rustix::fs::Access::WRITE_OK).is_ok()
}

/// Creates the cgroup at `relative`, enabling the controllers on the way, and writes `limits`.
pub(crate) fn create(mount: &Path, relative: &Path, limits: &Limits) -> io::Result<()> {
    let enable = CONTROLLERS.map(|controller| format!("+{controller}")).join(" ");
    let mut dir = mount.to_owned();
    // The root may refuse (a container's root cgroup, or controllers already on): only the
    // levels Kayra creates must take it.
    let _ = write(&dir, "cgroup.subtree_control", &enable);
    let depth = relative.components().count();
    for (at, component) in relative.components().enumerate() {
        dir.push(component);
        match std::fs::create_dir(&dir) {
            Err(error) if error.kind() != io::ErrorKind::AlreadyExists => return Err(error),
            _ => {}
        }
        if at + 1 < depth {
            write(&dir, "cgroup.subtree_control", &enable)?;
        }
    }
    write(&dir, "memory.max", &limits.memory_bytes.map_or("max".to_owned(), |b| b.to_string()))?;
    let quota = limits.cpu_millis.map_or("max".to_owned(), |m| (m * 100).to_string());
    write(&dir, "cpu.max", &format!("{quota} {CPU_PERIOD_US}"))?;
    write(&dir, "pids.max", &limits.pids.map_or("max".to_owned(), |p| p.to_string()))
}

/// Freezes (`1`) or thaws (`0`) the cgroup at `dir` (`cgroup.freeze`, Linux 5.2 and later);
/// `Unsupported` where the kernel has no such file.
pub(crate) fn set_frozen(dir: &Path, frozen: bool) -> io::Result<()> {
    if !dir.join("cgroup.freeze").exists() {
        return Err(io::Error::new(io::ErrorKind::Unsupported, "no cgroup.freeze: the kernel predates 5.2"));
    }
    write(dir, "cgroup.freeze", if frozen { "1" } else { "0" })
}

/// Whether the cgroup at `dir` is wholly frozen (`frozen 1` in `cgroup.events`).
pub(crate) fn frozen(dir: &Path) -> bool {
    std::fs::read_to_string(dir.join("cgroup.events")).is_ok_and(|events| keyed_value(&events, "frozen") == 1)
}

/// The totals of the cgroup at `dir`.
pub(crate) fn usage(dir: &Path) -> Option<Usage> {
    let cpu = std::fs::read_to_string(dir.join("cpu.stat")).ok()?;
    Some(Usage {
        cpu_usec: keyed_value(&cpu, "usage_usec"),
        cpu_throttled_usec: keyed_value(&cpu, "throttled_usec"),
        memory_bytes: read_u64(&dir.join("memory.current")).unwrap_or(0),
        memory_peak_bytes: read_u64(&dir.join("memory.peak")).unwrap_or(0),
        pids: read_u64(&dir.join("pids.current")).unwrap_or(0),
        oom_kills: std::fs::read_to_string(dir.join("memory.events"))
            .map(|text| keyed_value(&text, "oom_kill"))
            .unwrap_or(0),
    })
}
