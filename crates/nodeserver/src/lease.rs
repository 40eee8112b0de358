//! A node's Lease: `coordination.k8s.io/v1` `kube-node-lease/<node>`, renewed by the node's
//! reports under the node's own identity (so RBAC and node restriction apply: a node renews
//! only its own), as kubelet renews its own. It carries the heartbeat, so the node's status
//! is written only when it changes (and otherwise every `status_report`), and it is what the
//! liveness loop judges a node by.

use std::time::Instant;

use kayra_api::clock::micro_time;
use kayra_api::kinds::lease::NODE_LEASE_NAMESPACE;
use kayra_registry::{Object, RegistryError, meta_str};
use serde_json::{Value, json};

use crate::session::Live;
use crate::{Inner, NodeServerError};

/// The Lease last written in a session, and when: renewed from it with no read first.
#[derive(Debug, Clone)]
pub(crate) struct Renewed {
    lease: Object,
    at: Instant,
}

/// How many times a renewal is tried again after a concurrent writer moved the Lease.
const CONFLICT_RETRIES: usize = 3;

/// The Lease node `node` holds, renewed at `now`: what a first renewal creates.
fn fresh(node: &str, duration_seconds: i64, now: &str, owner: Option<&Object>) -> Value {
    let mut lease = json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": node, "namespace": NODE_LEASE_NAMESPACE},
        "spec": {"holderIdentity": node, "leaseDurationSeconds": duration_seconds, "renewTime": now},
    });
    if let Some(metadata) = lease.get_mut("metadata").and_then(Value::as_object_mut) {
        owned_by(metadata, node, owner);
    }
    lease
}

/// Names the Node `owner` (as stored, when read) as the Lease's owner, as kubelet's Lease is
/// owned by its Node: a Node deleted and made again is the owner of the renewed Lease.
fn owned_by(metadata: &mut Object, node: &str, owner: Option<&Object>) {
    if let Some(owner) = owner.filter(|object| !meta_str(object, "uid").is_empty()) {
        metadata.insert(
            "ownerReferences".into(),
            json!([{"apiVersion": "v1", "kind": "Node", "name": node, "uid": meta_str(owner, "uid")}]),
        );
    }
}

/// The stored Lease renewed by `node` at `now`: the holder and duration set again (an operator
/// may have edited them), the owner too when the Node was read, the rest kept.
fn renewed(
    mut lease: Object,
    node: &str,
    duration_seconds: i64,
    now: &str,
    owner: Option<&Object>,
) -> Object {
    if let Some(metadata) = lease.get_mut("metadata").and_then(Value::as_object_mut) {
        owned_by(metadata, node, owner);
    }
    let spec = lease.entry("spec").or_insert_with(|| json!({}));
    if let Some(spec) = spec.as_object_mut() {
        spec.insert("holderIdentity".into(), json!(node));
        spec.insert("leaseDurationSeconds".into(), json!(duration_seconds));
        spec.insert("renewTime".into(), json!(now));
    }
    lease
}

/// Renews the Lease of `live`'s node unless this session renewed it within `heartbeat_write`;
/// creates it when missing. `node` is the Node as stored, when it was read.
pub(crate) async fn renew(inner: &Inner, live: &Live, node: Option<&Object>) -> Result<(), NodeServerError> {
    let last = live.lease.lock().expect("the lease record's lock is never held across a panic").clone();
    if let Some(last) = last.as_ref()
        && last.at.elapsed() < inner.config.heartbeat_write
    {
        return Ok(());
    }
    let client = inner.client_for(live.identity.clone());
    let name = live.node.as_str();
    let duration = i64::try_from(inner.config.ready_timeout.as_secs()).unwrap_or(i64::MAX).max(1);
    let mut stored = last.map(|last| last.lease);
    let mut attempt = 0;
    let written = loop {
        let now = micro_time(jiff::Timestamp::now());
        let result = match stored.take() {
            Some(lease) => {
                let lease = renewed(lease, name, duration, &now, node);
                client.update(&inner.leases, Some(NODE_LEASE_NAMESPACE), name, &lease).await
            }
            None => match client.get(&inner.leases, Some(NODE_LEASE_NAMESPACE), name).await {
                Ok(lease) => {
                    let lease = renewed(lease, name, duration, &now, node);
                    client.update(&inner.leases, Some(NODE_LEASE_NAMESPACE), name, &lease).await
                }
                Err(RegistryError::NotFound { .. }) => {
                    // A new Lease names its Node as owner from the start, so that it goes with
                    // the Node even if no status write renews it first.
                    let read = match node {
                        Some(_) => None,
                        None => inner.reader.get(&inner.nodes, None, name).await.ok(),
                    };
                    let lease = fresh(name, duration, &now, node.or(read.as_ref()));
                    client.create(&inner.leases, Some(NODE_LEASE_NAMESPACE), &lease).await
                }
                Err(error) => Err(error),
            },
        };
        match result {
            Ok(lease) => break lease,
            // Moved or gone meanwhile (an operator, its Node's deletion): read it again.
            Err(
                RegistryError::Conflict { .. }
                | RegistryError::NotFound { .. }
                | RegistryError::AlreadyExists { .. },
            ) if attempt < CONFLICT_RETRIES => {
                attempt += 1;
            }
            Err(source) => {
                return Err(NodeServerError::Registry {
                    what: format!("renewing node {name}'s lease"),
                    source,
                });
            }
        }
    };
    *live.lease.lock().expect("the lease record's lock is never held across a panic") =
        Some(Renewed { lease: written, at: Instant::now() });
    // The record of which replica holds the session is renewed with the node's Lease.
    crate::holder::renew(inner, live).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_renewal_sets_the_holder_duration_and_time_and_keeps_the_rest() {
        let stored = json!({"metadata": {"name": "n1", "namespace": "kube-node-lease", "resourceVersion": "7"},
                            "spec": {"holderIdentity": "someone", "leaseDurationSeconds": 5, "renewTime": "2026-01-01T00:00:00.000000Z", "leaseTransitions": 2}});
        let Value::Object(stored) = stored else { unreachable!("an object literal") };
        let lease = renewed(stored.clone(), "n1", 40, "2026-01-01T00:00:10.000000Z", None);
        assert_eq!(lease["metadata"]["resourceVersion"], "7", "renewed on the version read");
        assert!(lease["metadata"].get("ownerReferences").is_none(), "no owner named without the Node");
        let Value::Object(node) = json!({"metadata": {"name": "n1", "uid": "u-2"}}) else {
            unreachable!("an object")
        };
        let owned = renewed(stored, "n1", 40, "2026-01-01T00:00:10.000000Z", Some(&node));
        assert_eq!(owned["metadata"]["ownerReferences"][0]["uid"], "u-2", "the Node as it is now");
        assert_eq!(
            lease["spec"],
            json!({"holderIdentity": "n1", "leaseDurationSeconds": 40, "renewTime": "2026-01-01T00:00:10.000000Z", "leaseTransitions": 2})
        );
    }

    #[test]
    fn a_first_lease_is_held_by_its_node_and_owned_by_its_node_object() {
        let Value::Object(node) = json!({"metadata": {"name": "n1", "uid": "u-1"}}) else {
            unreachable!("an object")
        };
        let lease = fresh("n1", 40, "2026-01-01T00:00:10.000000Z", Some(&node));
        assert_eq!(lease["metadata"]["namespace"], NODE_LEASE_NAMESPACE);
        assert_eq!(lease["spec"]["holderIdentity"], "n1");
        assert_eq!(lease["metadata"]["ownerReferences"][0]["uid"], "u-1");
        assert!(fresh("n1", 40, "t", None)["metadata"].get("ownerReferences").is_none());
    }

    #[test]
    fn a_lease_time_has_microseconds() {
        let at: jiff::Timestamp = "2026-01-01T00:00:10.5Z".parse().expect("a time");
        assert_eq!(micro_time(at), "2026-01-01T00:00:10.500000Z");
    }
}
