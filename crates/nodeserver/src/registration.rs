//! A node's registration: the Node of a reporting node that has none, created by the node
//! server under its own identity (node restriction holds: a node never writes its Node's spec
//! or labels, it only asks, in every status, for what its Node should start with).
//!
//! A node's first registration after joining makes its Node as the node asks: schedulable
//! unless it asks to be cordoned (`kayra-agent join --cordon`), with the taints it asks for
//! (`--register-with-taints`). A Node that goes later, by an operator's `kubectl delete node`,
//! is re-created by the node's next status cordoned (with its taints), so that the delete is
//! not undone by a heartbeat.
//!
//! Telling the two apart takes a record that outlives the Node: for each node it has seen
//! registered, the controller keeps a Secret `kayra-system/node-registration-<node>` of type
//! `kayra.io/node-registration`, which no node may read or write. Creating it is the one
//! atomic test of a first registration: the status that creates it makes the Node as asked,
//! any other finds it there and re-creates the Node cordoned. It is written before the Node,
//! and, for a Node that exists without one (made before the node joined), on the node's first
//! status in each session (until it is written: a failure there holds up no heartbeat). So a
//! kill at any moment leaves at worst a record without a Node,
//! which the next status re-creates cordoned, the safe side; never a second schedulable first
//! registration. What the node asks comes with every status it sends (its agent keeps it with
//! its data directory), so no restart loses it.

use std::sync::atomic::Ordering;

use kayra_api::kinds::secret::BOOTSTRAP_TOKEN_NAMESPACE;
use kayra_api::session::{NodeTaint, Registration};
use kayra_application::events::Severity;
use kayra_registry::{Object, RegistryError, meta_str};
use serde_json::{Value, json};

use crate::session::Live;
use crate::{Inner, NodeServerError};

/// The `type` of the Secret recording that a node has registered.
pub(crate) const RECORD_TYPE: &str = "kayra.io/node-registration";

/// The name of the Secret recording node `node`'s registration: `node-registration-<node>`,
/// or, for a name too long to carry, the SHA-256 of the name in hex ([`bounded_name`]).
pub(crate) fn record_name(node: &str) -> String {
    bounded_name("node-registration-", node)
}

/// `prefix` and `node`, when that fits an object's name (253 characters); otherwise `prefix`
/// and the SHA-256 of `node` in hex, in two labels of 32 digits, since a label of a name holds
/// at most 63 characters.
pub(crate) fn bounded_name(prefix: &str, node: &str) -> String {
    let name = format!("{prefix}{node}");
    if name.len() <= 253 {
        return name;
    }
    let digest = ring::digest::digest(&ring::digest::SHA256, node.as_bytes());
    let hex: String = digest.as_ref().iter().map(|byte| format!("{byte:02x}")).collect();
    format!("{prefix}{}.{}", &hex[..32], &hex[32..])
}

/// Records, once per session, that the node of `live`, whose Node exists, has registered.
pub(crate) async fn ensure_recorded(inner: &Inner, live: &Live) -> Result<(), NodeServerError> {
    if live.recorded.load(Ordering::Acquire) {
        return Ok(());
    }
    let name = record_name(&live.node);
    match inner.reader.get(&inner.secrets, Some(BOOTSTRAP_TOKEN_NAMESPACE), &name).await {
        Ok(_) => {}
        Err(RegistryError::NotFound { .. }) => {
            create_record(inner, &live.node).await?;
        }
        Err(source) => {
            let what = format!("reading node {}'s registration record", live.node);
            return Err(NodeServerError::Registry { what, source });
        }
    }
    live.recorded.store(true, Ordering::Release);
    Ok(())
}

/// Creates the missing Node of the node of `live`, as `registration` asks on its first
/// registration, cordoned on any later one; answers the Node as stored.
pub(crate) async fn register(
    inner: &Inner,
    live: &Live,
    registration: &Registration,
    labels: Value,
) -> Result<Object, NodeServerError> {
    let node = live.node.as_str();
    let problems = registration.validate();
    if !problems.is_empty() {
        let problems: Vec<String> =
            problems.iter().map(|problem| format!("{}: {}", problem.field, problem.message)).collect();
        return Err(NodeServerError::BadRegistration {
            node: node.to_owned(),
            problems: problems.join("; "),
        });
    }
    let first = create_record(inner, node).await?;
    live.recorded.store(true, Ordering::Release);
    let cordoned = !first || registration.unschedulable;
    let mut spec = serde_json::Map::new();
    if cordoned {
        spec.insert("unschedulable".into(), json!(true));
    }
    if !registration.taints.is_empty() {
        spec.insert("taints".into(), registration.taints.iter().map(taint).collect());
    }
    let node_object = json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": node, "labels": labels},
        "spec": spec,
    });
    let created = match inner.reader.create(&inner.nodes, None, node_object).await {
        Ok(created) => created,
        Err(RegistryError::AlreadyExists { .. }) => {
            let what = format!("reading node {node}");
            return inner.reader.get(&inner.nodes, None, node).await.map_err(NodeServerError::registry(what));
        }
        Err(source) => {
            return Err(NodeServerError::Registry { what: format!("registering node {node}"), source });
        }
    };
    let message = registered(node, first, registration);
    tracing::info!(node, first, cordoned, "{message}");
    let involved = crate::node_involved(node, meta_str(&created, "uid"));
    if let Err(error) = inner.recorder.record(&involved, Severity::Normal, "RegisteredNode", &message).await {
        tracing::debug!(%error, node, "the registration event was not recorded");
    }
    Ok(created)
}

/// Creates the record of node `node`'s registration; `true` when this call made it, `false`
/// when it was there already.
async fn create_record(inner: &Inner, node: &str) -> Result<bool, NodeServerError> {
    let record = json!({
        "apiVersion": format!("{}/{}", inner.secrets.group, inner.secrets.version),
        "kind": "Secret",
        "metadata": {"name": record_name(node), "namespace": BOOTSTRAP_TOKEN_NAMESPACE},
        "type": RECORD_TYPE,
        "immutable": true,
        "stringData": {"node": node},
    });
    match inner.reader.create(&inner.secrets, Some(BOOTSTRAP_TOKEN_NAMESPACE), record).await {
        Ok(_) => Ok(true),
        Err(RegistryError::AlreadyExists { .. }) => Ok(false),
        Err(source) => {
            Err(NodeServerError::Registry { what: format!("recording node {node}'s registration"), source })
        }
    }
}

/// A taint as core v1 `Taint` is written.
fn taint(taint: &NodeTaint) -> Value {
    let mut written = json!({"key": taint.key, "effect": taint.effect});
    if !taint.value.is_empty() {
        written["value"] = json!(taint.value);
    }
    written
}

/// What the `RegisteredNode` Event says.
fn registered(node: &str, first: bool, registration: &Registration) -> String {
    let taints = if registration.taints.is_empty() {
        String::new()
    } else {
        let taints: Vec<String> = registration.taints.iter().map(NodeTaint::to_string).collect();
        format!(", with taints {}", taints.join(", "))
    };
    match (first, registration.unschedulable) {
        (true, false) => format!("Node {node} registered itself{taints}"),
        (true, true) => {
            format!(
                "Node {node} registered itself{taints}, cordoned as it asked: kubectl uncordon gives it work"
            )
        }
        (false, _) => format!(
            "Node {node} registered itself again after its Node was deleted{taints}, and is cordoned until an operator uncordons it"
        ),
    }
}

#[cfg(test)]
mod tests;
