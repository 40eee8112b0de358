//! The garbage collector: what happens to an ApplicationSet's dependents — its Applications and
//! the Services it renders, each naming it in a controller owner reference — when the set goes,
//! as Kubernetes' garbage collector does for owner references.
//!
//! - A dependent whose controlling set is gone, or whose reference names another `uid` (the set
//!   was deleted and made again), is deleted (background deletion).
//! - A set being deleted with the `foregroundDeletion` finalizer (`kubectl delete
//!   --cascade=foreground`) stays until its dependents are deleted; then the finalizer goes, and
//!   the set with it.
//! - A set being deleted with the `orphan` finalizer (`--cascade=orphan`) has its dependents
//!   released — owner reference, reserved labels and spec-hash annotation removed — and then
//!   the finalizer goes.
//!
//! Applications are deleted before the Services they join, since a Service is not deleted while
//! Applications join it.
//!
//! A node's Lease in `kube-node-lease` names its Node as owner (a cluster-scoped owner of a
//! namespaced dependent); [`node_leases`] deletes the Lease once that Node is gone or has been
//! made again with another uid.
//!
//! Start at [`decision`] (what to do for one set: pure, table-tested), then [`reconciler`] (the
//! loop, one key per set, fed by sets, Applications and Services), and [`node_leases`] (one key
//! per Lease). They act through `kayra_application::Client` under the controller's identity and
//! know no HTTP or store.

pub mod decision;
pub mod node_leases;
pub mod reconciler;
