//! How often a registration's document is asked for while fetching it fails: a capped
//! exponential back-off per registration and build, started over by any change to the
//! registration or to its subscriptions. However often passes run (on every change to the
//! catalog, on every resync), a failing gateway is asked no more often than this.

use std::collections::HashMap;
use std::time::{Duration, SystemTime};

use kayra_loop::queue::Backoff;
use kayra_store::Revision;

/// The wait after the first failed fetch of a build, doubling with each failure after it, up
/// to [`MAX`].
pub(crate) const FIRST: Duration = Duration::from_secs(5);

/// The longest wait between two fetches of a build that keep failing.
pub(crate) const MAX: Duration = Duration::from_secs(300);

/// What a fetch is made for: the registration's build, and what its subscribers made of their
/// subscriptions. A change to any of it starts the back-off over.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Occasion {
    /// The build the document is fetched for.
    pub(super) sync_id: String,
    /// The registration's revision: every write to a registration is its owner's.
    pub(super) revision: Revision,
    /// Each subscription's namespace, uid and whether it is active: what its subscriber
    /// writes (the rest of a subscription is the reconciler's own record).
    pub(super) subscriptions: Vec<(String, String, bool)>,
}

/// A registration whose document could not be fetched.
#[derive(Debug)]
struct Failing {
    occasion: Occasion,
    failures: u32,
    next: SystemTime,
}

/// The registrations whose document could not be fetched, by name: held in memory, as losing
/// it costs one fetch at once after a restart.
#[derive(Debug, Default)]
pub(crate) struct FetchBackoff {
    failing: HashMap<String, Failing>,
}

impl FetchBackoff {
    /// Until when a fetch of `name`'s document for `occasion` waits, if it must: after a failed
    /// fetch for the same occasion, while its back-off lasts.
    pub(super) fn wait_until(&self, name: &str, occasion: &Occasion, now: SystemTime) -> Option<SystemTime> {
        let failing = self.failing.get(name).filter(|failing| failing.occasion == *occasion)?;
        (now < failing.next).then_some(failing.next)
    }

    /// Notes that fetching `name`'s document for `occasion` failed at `now`; answers when the
    /// next fetch may be made.
    pub(super) fn failed(&mut self, name: &str, occasion: Occasion, now: SystemTime) -> SystemTime {
        let failures = match self.failing.get(name) {
            Some(failing) if failing.occasion == occasion => failing.failures.saturating_add(1),
            _ => 1,
        };
        let next = now + delay(failures);
        self.failing.insert(name.to_owned(), Failing { occasion, failures, next });
        next
    }

    /// Forgets `name`'s failures: its document is stored.
    pub(super) fn succeeded(&mut self, name: &str) {
        self.failing.remove(name);
    }

    /// Forgets every registration but those `kept` answers true for.
    pub(super) fn retain(&mut self, kept: impl Fn(&str) -> bool) {
        self.failing.retain(|name, _| kept(name));
    }
}

/// The wait after `failures` failed fetches in a row (the first is 1).
pub(super) fn delay(failures: u32) -> Duration {
    Backoff { first: FIRST, max: MAX }.delay(failures)
}

#[cfg(test)]
mod tests;
