//! Node restriction: a node identity (`system:node:<name>` in `system:nodes`) writes and deletes
//! only the Node of its own name, and never sets its spec or labels (what scheduling reads):
//! none on create, the stored ones on update. Of Applications it writes only the status of
//! those bound to it; of Leases only its own heartbeat (`lease.rs`). Other callers are not this
//! plugin's concern.

mod lease;

use kayra_api::kinds::application::bound_node;
use kayra_registry::{Operation, Part, Refusal};
use serde_json::{Map, Value};

use crate::{Validating, Write};

/// The node restriction, for core `nodes`, `fleet.<domain>` `applications` (and their
/// subresources) and `coordination.k8s.io` `leases`.
#[derive(Debug, Clone, Default)]
pub struct NodeRestriction {
    fleet: String,
}

impl NodeRestriction {
    /// The restriction for a deployment whose workloads live in `fleet.<domain>`.
    pub fn new(domain: &str) -> NodeRestriction {
        NodeRestriction { fleet: format!("fleet.{domain}") }
    }

    /// A node writes the status of the Applications bound to it, and nothing else of them.
    fn application(&self, own: &str, write: &Write<'_>) -> Result<(), Refusal> {
        let bound = |object: Option<&Map<String, Value>>| object.and_then(bound_node) == Some(own);
        let name = write.name;
        if write.operation != Operation::Update || write.part != Part::Status {
            return Err(Refusal::Forbidden(format!(
                "node \"{own}\" may only write the status of applications bound to it, not application \"{name}\" itself"
            )));
        }
        if !bound(write.old) || !bound(Some(write.object)) {
            return Err(Refusal::Forbidden(format!(
                "node \"{own}\" may not write the status of application \"{name}\", which is not bound to it"
            )));
        }
        Ok(())
    }
}

impl Validating for NodeRestriction {
    fn name(&self) -> &'static str {
        "NodeRestriction"
    }

    fn validate(&self, write: &Write<'_>) -> Result<(), Refusal> {
        let Some(own) = write.caller.node_name() else { return Ok(()) };
        if write.api == self.fleet && write.resource == "applications" {
            return self.application(own, write);
        }
        if lease::concerns(write) {
            return lease::validate(own, write);
        }
        if !write.api.is_empty() || write.resource != "nodes" {
            return Ok(());
        }
        if own != write.name {
            return Err(Refusal::Forbidden(format!(
                "node \"{own}\" may not write node \"{}\", only its own Node object",
                write.name
            )));
        }
        if write.operation == Operation::Delete {
            return Ok(());
        }
        for (path, what) in [(&["spec"][..], "spec"), (&["metadata", "labels"][..], "labels")] {
            if part(Some(write.object), path) != part(write.old, path) {
                return Err(Refusal::Forbidden(format!(
                    "node \"{own}\" may not set its own {what}; leave them as stored, an administrator sets them"
                )));
            }
        }
        Ok(())
    }
}

/// The value at `path` in `object`; absent, null and empty are all the empty object.
fn part(object: Option<&Map<String, Value>>, path: &[&str]) -> Value {
    let mut value = object.and_then(|object| object.get(path[0]));
    for key in &path[1..] {
        value = value.and_then(|value| value.get(key));
    }
    match value {
        None | Some(Value::Null) => Value::Object(Map::new()),
        Some(value) => value.clone(),
    }
}

#[cfg(test)]
mod tests;
