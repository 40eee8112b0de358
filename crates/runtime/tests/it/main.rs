//! The runtime with real processes, real supervisors and this host's real cgroups (these tests
//! run as root): each workload's argv carries a marker naming its test, and each test works
//! in its own data directory and cgroup parent, removed at the end.
//!
//! The supervisor program is this crate's `kayra-runtime-supervisor` binary, which cargo builds
//! for integration tests (`CARGO_BIN_EXE_…`). A test that needs an agent process to SIGKILL
//! starts this test binary again, running only [`helper_process_hosting_a_runtime`].

mod frozen;
mod harness;
mod identity;
mod lifecycle;
mod logs;
mod reattach;
mod starting;
mod streams;

pub(crate) use harness::*;

/// Not a test of its own: the process the SIGKILL tests start and kill. It does nothing
/// unless `KAYRA_IT_HOST` names a data directory.
#[tokio::test]
async fn helper_process_hosting_a_runtime() {
    reattach::host_when_asked().await;
}
