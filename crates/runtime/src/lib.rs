//! What runs on a node: the agent's process runtime. Each Application bound to the node runs
//! as a supervised process — one small supervisor process per run ([`supervisor`]) that owns
//! the workload, logs its output ([`logs`]) and records its exit, so the agent can be killed
//! (even by SIGKILL) and reopen the [`runtime::Runtime`] without stopping or duplicating
//! anything. Limits go through cgroups ([`cgroup`]) or rlimits ([`rlimit`]); health through
//! probes ([`probe`]); restarts follow the restart policy with kubelet's back-off
//! ([`lifecycle`], [`backoff`]).
//!
//! Start reading at [`runtime::Runtime`]: `open`, `apply` the node's desired state, `subscribe`
//! to statuses, `events`, `usage`, `logs`, `close`. The agent binary (and the controller's
//! in-process agent) expose [`supervise_main`] as a hidden `supervise` subcommand and pass
//! their own `[exe, "supervise"]` as [`runtime::RuntimeConfig::supervisor`].
//!
//! This crate knows nothing of gRPC, the session or the controller: it takes Applications and
//! Secrets in and gives statuses, events, usage and log bytes out. The pure rules (back-off,
//! restart decisions, probe verdicts, environment and identity) do no IO.

pub mod backoff;
pub mod cgroup;
mod enter;
pub mod facts;
mod identity;
mod launch;
mod lifecycle;
mod logs;
mod probe;
mod proc;
mod rlimit;
pub mod runtime;
mod supervisor;
mod workdirs;

/// The supervisor program's entry point: `args` are the arguments after the supervisor argv
/// prefix (`run <dir>`, `exec <dir>`, or `enter <dir> tty|pipes <argv...>`). Returns the exit code for `std::process::exit`.
pub fn supervise_main(args: Vec<String>) -> i32 {
    supervisor::main(&args)
}
