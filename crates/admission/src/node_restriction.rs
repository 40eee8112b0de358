//! Node restriction: a node identity (`system:node:<name>` in `system:nodes`) writes and deletes
//! only the Node of its own name, and never sets its spec or labels (what scheduling reads):
//! none on create, the stored ones on update. Other callers are not this plugin's concern.

use kayra_registry::{Operation, Refusal};
use serde_json::{Map, Value};

use crate::{Validating, Write};

/// The node restriction, for core `nodes` (and their subresources).
#[derive(Debug, Clone, Copy, Default)]
pub struct NodeRestriction;

impl Validating for NodeRestriction {
    fn name(&self) -> &'static str {
        "NodeRestriction"
    }

    fn validate(&self, write: &Write<'_>) -> Result<(), Refusal> {
        if !write.api.is_empty() || write.resource != "nodes" {
            return Ok(());
        }
        let Some(own) = write.caller.node_name() else { return Ok(()) };
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
