//! What workloads and nodes consume: the port the layer reads the nodes' usage samples through,
//! and the one rule that turns two cumulative samples into a rate.
//!
//! The samples are not stored: each node's last two live in memory on the replica holding its
//! session (the node server implements [`UsageSource`]). The port is async and names what it
//! answers by node, so that a replica that does not hold a node's session can answer through one
//! that does.

use std::time::Duration;

use kayra_api::session::UsageSample;

/// Where the layer reads usage samples from.
#[async_trait::async_trait]
pub trait UsageSource: Send + Sync + 'static {
    /// The last samples of Application `namespace/name`, when its node reported any.
    async fn application(&self, namespace: &str, name: &str) -> Option<Samples>;

    /// The last samples of every Application in `namespace` (every namespace for `None`).
    async fn applications(&self, namespace: Option<&str>) -> Vec<Samples>;

    /// The last samples of node `node` as a whole, when it reported any.
    async fn node(&self, node: &str) -> Option<Samples>;

    /// The last samples of every node as a whole.
    async fn nodes(&self) -> Vec<Samples>;

    /// Every sample of the sessions this replica holds itself (nodes' and Applications'),
    /// never read through another replica: what a replica answers another with.
    async fn held(&self) -> Vec<Samples>;
}

/// The last two usage samples of one Application or node.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Samples {
    /// The node that reported them.
    pub node: String,
    /// The latest sample.
    pub latest: UsageSample,
    /// The one before it, of the same run: absent after the first sample, and after a sample
    /// whose counters went back (a new run, or a node that restarted).
    pub previous: Option<UsageSample>,
}

/// Consumption per unit of time, over the window between two samples.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rate {
    /// CPU in nanocores: a billion is one core, busy the whole window.
    pub nanocores: u64,
    /// Memory in use at the later sample, in bytes.
    pub memory_bytes: u64,
    /// The time between the two samples.
    pub window: Duration,
    /// When the later sample was taken.
    pub at: jiff::Timestamp,
}

impl Samples {
    /// Keeps `sample` as the latest, and the latest so far as the previous one when `sample`
    /// follows it: later, of the same uid, with counters that did not go back. Otherwise
    /// `sample` starts afresh and no rate can be had until the next one.
    pub fn follow(&mut self, sample: UsageSample) {
        let continues = self.latest.uid == sample.uid
            && self.latest.cpu_usage_usec <= sample.cpu_usage_usec
            && matches!(
                (timestamp(&self.latest), timestamp(&sample)),
                (Some(before), Some(after)) if before < after
            );
        let latest = std::mem::replace(&mut self.latest, sample);
        self.previous = continues.then_some(latest);
    }

    /// The rate over the last two samples; `None` until there are two.
    pub fn rate(&self) -> Option<Rate> {
        let previous = self.previous.as_ref()?;
        let (before, after) = (timestamp(previous)?, timestamp(&self.latest)?);
        let window = Duration::try_from(after.duration_since(before)).ok().filter(|w| !w.is_zero())?;
        let used = self.latest.cpu_usage_usec.checked_sub(previous.cpu_usage_usec)?;
        let nanocores = u128::from(used) * 1_000 * 1_000_000_000 / window.as_nanos();
        Some(Rate {
            nanocores: u64::try_from(nanocores).unwrap_or(u64::MAX),
            memory_bytes: self.latest.memory_bytes,
            window,
            at: after,
        })
    }
}

/// When a sample was taken, if its time reads.
pub fn timestamp(sample: &UsageSample) -> Option<jiff::Timestamp> {
    sample.timestamp.parse().ok()
}

/// A window as Go's `time.Duration` prints it, which is how `metav1.Duration` travels: `15s`,
/// `15.25s`, `1m0.5s`, `1h2m3s`.
pub fn go_duration(window: Duration) -> String {
    let (hours, minutes) = (window.as_secs() / 3600, window.as_secs() / 60 % 60);
    let nanos = u64::from(window.subsec_nanos());
    let mut seconds = (window.as_secs() % 60).to_string();
    if nanos != 0 {
        let fraction = format!("{nanos:09}");
        seconds = format!("{seconds}.{}", fraction.trim_end_matches('0'));
    }
    match (hours, minutes) {
        (0, 0) => format!("{seconds}s"),
        (0, _) => format!("{minutes}m{seconds}s"),
        _ => format!("{hours}h{minutes}m{seconds}s"),
    }
}

#[cfg(test)]
mod tests;
