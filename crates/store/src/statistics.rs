//! What an engine counts of its own work, for whoever reports on the store: how many writes
//! each group commit made durable together, how many writes were background writes (which
//! ride others' flushes, [`crate::priority`]), and the history compactions the engine ran by
//! itself (those asked through the port are the asker's to count).
//!
//! Counted with atomics where the work happens and read whenever asked, so reading costs the
//! engine nothing and the engine never learns who reads.

use std::sync::atomic::{AtomicU64, Ordering};

/// The upper bounds, in writes, of the group-commit sizes counted apart; a larger commit falls
/// in one more, unbounded, bucket.
pub const COMMIT_BATCH_BOUNDS: [u64; 11] = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024];

/// An engine's counts since it opened.
#[derive(Debug, Default)]
pub struct EngineStatistics {
    /// Group commits by size: one bucket per bound of [`COMMIT_BATCH_BOUNDS`], then the rest.
    commits: [AtomicU64; COMMIT_BATCH_BOUNDS.len() + 1],
    /// Writes made durable by every group commit together.
    committed_writes: AtomicU64,
    background_writes: AtomicU64,
    automatic_compactions: AtomicU64,
}

/// The sizes of the group commits so far, as read at one moment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitBatches {
    /// Each bucket's upper bound in writes (`None` for the last, unbounded one) and how many
    /// commits fell in it, not counting those of the buckets before.
    pub buckets: Vec<(Option<u64>, u64)>,
    /// Group commits, every bucket's together.
    pub commits: u64,
    /// The writes those commits made durable.
    pub writes: u64,
}

impl EngineStatistics {
    /// Counts one group commit that made `writes` writes durable together.
    pub(crate) fn group_committed(&self, writes: u64) {
        let bucket = COMMIT_BATCH_BOUNDS.partition_point(|bound| *bound < writes);
        self.commits[bucket].fetch_add(1, Ordering::Relaxed);
        self.committed_writes.fetch_add(writes, Ordering::Relaxed);
    }

    /// Counts one write that waited for a flush it did not lead, as a background write.
    pub(crate) fn wrote_in_background(&self) {
        self.background_writes.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts one compaction the engine ran by itself, to keep its history bounded.
    pub(crate) fn compacted_automatically(&self) {
        self.automatic_compactions.fetch_add(1, Ordering::Relaxed);
    }

    /// The group commits so far, by size.
    pub fn commit_batches(&self) -> CommitBatches {
        let bounds = COMMIT_BATCH_BOUNDS.iter().copied().map(Some).chain([None]);
        let buckets: Vec<(Option<u64>, u64)> =
            bounds.zip(&self.commits).map(|(bound, count)| (bound, count.load(Ordering::Relaxed))).collect();
        let commits = buckets.iter().map(|(_, count)| count).sum();
        CommitBatches { buckets, commits, writes: self.committed_writes.load(Ordering::Relaxed) }
    }

    /// The background writes so far.
    pub fn background_writes(&self) -> u64 {
        self.background_writes.load(Ordering::Relaxed)
    }

    /// The compactions the engine ran by itself so far.
    pub fn automatic_compactions(&self) -> u64 {
        self.automatic_compactions.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_commit_falls_in_the_first_bucket_whose_bound_it_does_not_pass() {
        let statistics = EngineStatistics::default();
        for writes in [1, 2, 3, 1024, 1025] {
            statistics.group_committed(writes);
        }
        let batches = statistics.commit_batches();
        let counted: Vec<(Option<u64>, u64)> =
            batches.buckets.iter().copied().filter(|(_, count)| *count > 0).collect();
        assert_eq!(counted, [(Some(1), 1), (Some(2), 1), (Some(4), 1), (Some(1024), 1), (None, 1)]);
        assert_eq!((batches.commits, batches.writes), (5, 1 + 2 + 3 + 1024 + 1025));
    }
}
