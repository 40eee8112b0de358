//! A run's probes: one task per probe, aborted with the run (or when it is frozen), telling the
//! Application's task each failure and each change of verdict.

use kayra_api::kinds::application::Probe;
use tokio::sync::mpsc;

use super::{Run, Task};
use crate::probe::{self, Counter, ExecContext, Timing};

/// What a probe task tells the Application's task.
pub(super) enum ProbeSignal {
    Failed { liveness: bool, message: String },
    Verdict { liveness: bool, passing: bool },
}

pub(super) struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl Task {
    /// The run's probes, started afresh.
    pub(super) fn start_probes(&self, run: &Run) -> Vec<AbortOnDrop> {
        let Some(context) = &run.context else { return Vec::new() };
        [false, true]
            .into_iter()
            .filter_map(|liveness| {
                let probe = self.probe_spec(liveness)?.clone();
                let (context, sender) = (context.clone(), run.sender.clone());
                Some(AbortOnDrop(tokio::spawn(run_probe(probe, liveness, self.ready(), context, sender))))
            })
            .collect()
    }

    pub(super) fn probe_spec(&self, liveness: bool) -> Option<&Probe> {
        let probes = self.record.application.spec.probes.as_ref()?;
        if liveness { probes.liveness.as_ref() } else { probes.readiness.as_ref() }
    }
}

/// Runs one probe until aborted, sending each failure and each change of verdict.
async fn run_probe(
    probe: Probe,
    liveness: bool,
    ready_now: bool,
    context: ExecContext,
    signals: mpsc::Sender<ProbeSignal>,
) {
    let timing = Timing::of(&probe);
    let mut counter = if liveness { Counter::liveness(&probe) } else { Counter::readiness(&probe) };
    if !liveness && ready_now {
        // Reattached to a process already found ready: it stays ready until the probe fails.
        counter = Counter::liveness(&probe);
    }
    tokio::time::sleep(timing.initial_delay).await;
    loop {
        let result = probe::check(&probe, timing.timeout, &context).await;
        if let Err(message) = &result {
            let _ = signals.send(ProbeSignal::Failed { liveness, message: message.clone() }).await;
        }
        if let Some(passing) = counter.record(result.is_ok()) {
            let _ = signals.send(ProbeSignal::Verdict { liveness, passing }).await;
        }
        tokio::time::sleep(timing.period).await;
    }
}
