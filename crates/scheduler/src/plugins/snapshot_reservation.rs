//! `SnapshotReservation`: counts a decided Application on its node in the scheduler's snapshot
//! until the bind lands (kube-scheduler's assumed pod), so the next decisions see the node's
//! capacity and rules taken; a failed bind gives the node back.

use crate::SchedulerError;
use crate::framework::Reserve;
use crate::model::App;
use crate::snapshot::Snapshot;

/// Reserves the chosen node in the snapshot.
#[derive(Debug, Clone, Copy)]
pub struct SnapshotReservation;

impl Reserve for SnapshotReservation {
    fn name(&self) -> &'static str {
        "SnapshotReservation"
    }

    fn reserve(&self, app: &App, node: &str, snapshot: &mut Snapshot) -> Result<(), SchedulerError> {
        snapshot.reserve(app, node);
        Ok(())
    }

    fn unreserve(&self, app: &App, node: &str, snapshot: &mut Snapshot) {
        snapshot.unreserve(app, node);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::model::Resources;
    use crate::plugins::testing::{app, node, snapshot};

    fn asking(name: &str, cpu: i64) -> App {
        let mut a = app(name, &[]);
        a.requests = Resources { cpu, memory: 0 };
        Arc::new(a)
    }

    #[test]
    fn a_reservation_counts_until_undone_and_survives_an_unbound_version() {
        let mut fleet = snapshot(vec![node("n1", &[])], vec![]);
        let x = asking("x", 1000);
        SnapshotReservation.reserve(&x, "n1", &mut fleet).expect("reserved");
        assert_eq!(fleet.usage("n1").map(|u| u.requested.cpu), Some(1000));
        assert!(fleet.is_reserved("demo/x"));
        SnapshotReservation.unreserve(&x, "n1", &mut fleet);
        assert!(fleet.usage("n1").is_none(), "the node is given back");
        assert!(!fleet.is_reserved("demo/x"));
    }

    #[test]
    fn undoing_a_reservation_keeps_a_newer_placement_seen_meanwhile() {
        let mut fleet = snapshot(vec![node("n1", &[]), node("n2", &[])], vec![]);
        let x = asking("x", 1000);
        SnapshotReservation.reserve(&x, "n1", &mut fleet).expect("reserved");
        let mut pinned = (*asking("x", 1000)).clone();
        pinned.node = Some("n2".to_owned());
        pinned.resource_version = "7".to_owned();
        fleet.put_app(&Arc::new(pinned));
        SnapshotReservation.unreserve(&x, "n1", &mut fleet);
        assert_eq!(fleet.placed("demo/x").map(|(at, _)| at.as_str()), Some("n2"));
        assert_eq!(fleet.usage("n2").map(|u| u.requested.cpu), Some(1000));
    }
}
