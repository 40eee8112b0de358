//! Processes by identity: a pid names a process only together with its start time (field 22
//! of `/proc/<pid>/stat`, in clock ticks since boot), since pids are reused. The runtime checks
//! both before it reattaches to a supervisor or signals a workload it did not start in this
//! process's lifetime.

use std::path::Path;

/// A process as the kernel identifies it over time: its pid and its start time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct ProcessId {
    /// The process id.
    pub(crate) pid: u32,
    /// Clock ticks after boot when it started.
    pub(crate) start_time: u64,
}

impl ProcessId {
    /// The identity of the live process `pid`, if there is one.
    pub(crate) fn of(pid: u32) -> Option<ProcessId> {
        let stat = std::fs::read(Path::new("/proc").join(pid.to_string()).join("stat")).ok()?;
        Some(ProcessId { pid, start_time: start_time_from_stat(&stat)? })
    }

    /// Whether this very process still exists (a zombie counts as gone).
    pub(crate) fn is_alive(self) -> bool {
        let Ok(stat) = std::fs::read(Path::new("/proc").join(self.pid.to_string()).join("stat")) else {
            return false;
        };
        start_time_from_stat(&stat) == Some(self.start_time) && state_from_stat(&stat) != Some(b'Z')
    }

    /// Whether this very process is stopped by a signal (state `T`).
    pub(crate) fn is_stopped(self) -> bool {
        let Ok(stat) = std::fs::read(Path::new("/proc").join(self.pid.to_string()).join("stat")) else {
            return false;
        };
        start_time_from_stat(&stat) == Some(self.start_time) && state_from_stat(&stat) == Some(b'T')
    }
}

/// Field 22 of a `/proc/<pid>/stat` line. The command name (field 2) is in parentheses and may
/// hold spaces and parentheses itself, so fields are counted after its last `)`.
pub(crate) fn start_time_from_stat(stat: &[u8]) -> Option<u64> {
    let after = &stat[stat.iter().rposition(|b| *b == b')')? + 1..];
    let field = std::str::from_utf8(after).ok()?.split_ascii_whitespace().nth(19)?;
    field.parse().ok()
}

fn state_from_stat(stat: &[u8]) -> Option<u8> {
    let after = &stat[stat.iter().rposition(|b| *b == b')')? + 1..];
    after.iter().copied().find(|b| !b.is_ascii_whitespace())
}

#[cfg(test)]
mod tests;
