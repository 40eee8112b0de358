//! Freezing and thawing a run as `spec.frozen` says: its processes held by their cgroup, else
//! by SIGSTOP to their process group, its probes suspended meanwhile, and let go where they
//! were (ready again if they were) when thawed.

use serde::{Deserialize, Serialize};

use super::{Run, State, Task, set_condition};
use crate::cgroup::Freezing;
use crate::proc::ProcessId;
use crate::runtime::EventType;

/// How a frozen run is held, and whether it was ready when it was frozen (as it is again once
/// thawed: it goes on where it was).
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub(super) struct Held {
    how: Freezing,
    ready: bool,
}

impl Task {
    /// Frozen while no process runs: none starts until the Application is thawed.
    pub(super) fn held(&mut self) -> State {
        self.set_frozen_condition(
            true,
            "NotRunning",
            "frozen while no process runs: none is started until the Application is thawed",
        );
        self.publish();
        State::Held
    }

    /// Brings a run to what `spec.frozen` asks: its processes held (by their cgroup, else by
    /// SIGSTOP to the process group) with its probes suspended, or let go with its probes
    /// started afresh. A frozen run is never restarted: it cannot end by itself, and no
    /// liveness probe runs.
    pub(super) async fn hold(&mut self, run: &mut Run) {
        let pid = run.state.workload.pid;
        match (self.record.application.spec.frozen, self.record.frozen) {
            (true, None) => {
                run.probes.clear();
                let (cgroups, uid, workload) =
                    (self.shared.cgroups.clone(), self.names.uid.clone(), run.state.workload);
                let freeze = move || cgroups.freeze(&uid, pid).unwrap_or_else(|| stop(workload));
                let how = tokio::task::spawn_blocking(freeze).await.unwrap_or(Freezing::Signal);
                self.record.frozen = Some(Held { how, ready: self.ready() });
                self.set_frozen_condition(true, how.reason(), how.describe());
                self.set_ready(false, "Frozen");
                let event = format!("Process {pid} {}", how.describe());
                self.shared.emit(&self.names, EventType::Normal, "Frozen", event);
                self.publish();
            }
            (false, Some(held)) => {
                self.release(run.state.workload);
                self.set_frozen_condition(false, "Thawed", "thawed: the process goes on where it was");
                // Ready again if it was when frozen: its readiness probe, started afresh, keeps
                // it so until it fails.
                let reason = match (self.probe_spec(false).is_some(), held.ready) {
                    (false, _) => "ProcessRunning",
                    (true, true) => "ReadinessProbePassed",
                    (true, false) => "ReadinessProbePending",
                };
                self.set_ready(held.ready || self.probe_spec(false).is_none(), reason);
                run.probes = self.start_probes(run);
                self.shared.emit(&self.names, EventType::Normal, "Thawed", format!("Process {pid} thawed"));
                self.publish();
            }
            _ => {}
        }
    }

    /// Lets go of a run's held processes (before it is stopped, after it ended, on thaw).
    pub(super) fn release(&mut self, workload: ProcessId) {
        let Some(Held { how, .. }) = self.record.frozen.take() else { return };
        match how {
            // Never a group its pid names after the workload is gone.
            Freezing::Signal if workload.is_alive() => {
                signal_group(workload.pid, rustix::process::Signal::CONT)
            }
            Freezing::Signal => {}
            how => {
                if let Err(error) = self.shared.cgroups.thaw(&self.names.uid, how) {
                    tracing::warn!(uid = %self.names.uid, %error, "thawing the cgroup");
                }
            }
        }
    }

    pub(super) fn set_frozen_condition(&mut self, frozen: bool, reason: &str, message: &str) {
        set_condition(&mut self.record.status, "Frozen", frozen, reason, Some(message));
    }
}

/// Stops the workload's process group with SIGSTOP, and waits (up to a second) until the
/// kernel has stopped the workload.
fn stop(workload: ProcessId) -> Freezing {
    signal_group(workload.pid, rustix::process::Signal::STOP);
    for _ in 0..100 {
        if workload.is_stopped() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    Freezing::Signal
}

/// Sends `signal` to the process group of the workload `pid` leads.
fn signal_group(pid: u32, signal: rustix::process::Signal) {
    if let Some(pid) = rustix::process::Pid::from_raw(pid as i32) {
        let _ = rustix::process::kill_process_group(pid, signal);
    }
}
