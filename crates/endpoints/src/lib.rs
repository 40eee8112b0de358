//! The endpoints loop: keeps each Service's `status.endpoints` listing where its ready members
//! can be reached, as Kubernetes' endpoints controller keeps Endpoints for a selector.
//!
//! A Service has no selector: its members are the Applications in its namespace whose
//! `spec.serviceName` names it. A member is an endpoint when its `Ready` condition is `True`
//! and it is bound to a Node that reports an address (`InternalIP` preferred). Each Service port
//! resolves on each member to `targetPort`, else the member's declared port named `targetName`
//! (a member without one serves no such port), else `port`.
//!
//! Start at [`compute`] (pure, table-tested), then [`reconciler`] (the loop: one key per
//! namespace, and one for every namespace when Nodes change; writes only what changed). It acts
//! through `kayra_application::Client` as `system:kayra:endpoints` and knows no HTTP or store.

pub mod compute;
pub mod reconciler;
