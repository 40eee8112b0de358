//! A node's Lease: a node identity writes and deletes only the `coordination.k8s.io` Lease
//! named after it in `kube-node-lease` (its heartbeat), as Kubernetes' NodeRestriction confines
//! a kubelet; any other Lease is refused, so one node cannot keep another looking alive.

use kayra_api::kinds::lease::{GROUP, NODE_LEASE_NAMESPACE};
use kayra_registry::Refusal;

use crate::Write;

/// Whether `write` is of a Lease: only those are this check's concern.
pub(super) fn concerns(write: &Write<'_>) -> bool {
    write.api == GROUP && write.resource == "leases"
}

/// Node `own` may write the Lease of its own name in `kube-node-lease`, and no other.
pub(super) fn validate(own: &str, write: &Write<'_>) -> Result<(), Refusal> {
    let namespace = write.namespace.unwrap_or_default();
    if namespace == NODE_LEASE_NAMESPACE && write.name == own {
        return Ok(());
    }
    Err(Refusal::Forbidden(format!(
        "node \"{own}\" may not write lease \"{namespace}/{}\", only its own lease \"{NODE_LEASE_NAMESPACE}/{own}\"",
        write.name
    )))
}
