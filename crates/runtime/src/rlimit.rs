//! The last resort where no cgroup can hold a process: `setrlimit` in the workload before it
//! execs. The address space stands in for memory (a process that maps more than it uses is
//! refused early), `RLIMIT_NPROC` for the process count (counted per user, so best effort);
//! CPU has no rate limit among rlimits (`RLIMIT_CPU` is total seconds), so it is left alone.

use serde::{Deserialize, Serialize};

use crate::cgroup::Limits;

/// One resource limit to set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum Rlimit {
    /// `RLIMIT_AS`, bytes of address space.
    AddressSpace(u64),
    /// `RLIMIT_NPROC`, processes of the user.
    Processes(u64),
}

/// The rlimits standing in for `limits`.
pub(crate) fn for_limits(limits: &Limits) -> Vec<Rlimit> {
    let memory = limits.memory_bytes.map(Rlimit::AddressSpace);
    memory.into_iter().chain(limits.pids.map(Rlimit::Processes)).collect()
}

/// Sets `limit` on this process (soft and hard), for what it execs next.
pub(crate) fn apply(limit: Rlimit) -> std::io::Result<()> {
    use rustix::process::{Resource, setrlimit};
    let (resource, value) = match limit {
        Rlimit::AddressSpace(bytes) => (Resource::As, bytes),
        Rlimit::Processes(count) => (Resource::Nproc, count),
    };
    setrlimit(resource, rustix::process::Rlimit { current: Some(value), maximum: Some(value) })?;
    Ok(())
}

#[cfg(test)]
mod tests;
