//! Restart back-off as kubelet's CrashLoopBackOff: the first restart waits `initial`, each next
//! one twice as long up to `max`, and a run that lasted `reset_after` starts the count again.

use std::time::Duration;

/// The back-off schedule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// The wait before the first restart: 10 s in kubelet.
    pub initial: Duration,
    /// The longest wait: 5 min in kubelet.
    pub max: Duration,
    /// A run this long forgets earlier crashes: 10 min in kubelet.
    pub reset_after: Duration,
}

impl Default for Backoff {
    fn default() -> Backoff {
        Backoff {
            initial: Duration::from_secs(10),
            max: Duration::from_secs(300),
            reset_after: Duration::from_secs(600),
        }
    }
}

impl Backoff {
    /// The wait before the restart that follows `streak` earlier back-to-back restarts.
    pub fn delay(&self, streak: u32) -> Duration {
        let factor = 1u32.checked_shl(streak.min(31)).unwrap_or(u32::MAX);
        self.initial.saturating_mul(factor).min(self.max)
    }

    /// The streak after a run that lasted `ran_for`, following `streak` earlier restarts.
    pub fn streak_after(&self, streak: u32, ran_for: Duration) -> u32 {
        if ran_for >= self.reset_after { 0 } else { streak }
    }
}

#[cfg(test)]
mod tests;
