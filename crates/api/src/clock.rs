//! Where the control plane's time comes from: one port every crate that stamps or compares
//! times holds, so that tests can fix or move it.

use std::time::SystemTime;

/// Where time comes from: the system's clock in a server, a fixed or moving one in tests.
pub trait Clock: Send + Sync {
    /// The current time.
    fn now(&self) -> SystemTime;
}

/// The system's clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> SystemTime {
        SystemTime::now()
    }
}

/// `at` as Kubernetes' `MicroTime` (Leases' `renewTime`, Events' `series.lastObservedTime`):
/// RFC 3339 in UTC, to the microsecond.
pub fn micro_time(at: jiff::Timestamp) -> String {
    at.strftime("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()
}
