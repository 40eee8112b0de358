//! Node placement: what an Application's `spec.placement.nodeName` may say.
//!
//! - A binding names a Node that exists (`422`, field `spec.placement.nodeName`). Only a change
//!   of the binding is checked, so an Application whose Node was since deleted can still be
//!   written (its finalizers removed, its status set).
//! - A binding does not overcommit its Node: what the Node's unfinished Applications request,
//!   with this one, stays within the Node's `status.allocatable` cpu and memory (`403`, saying
//!   by how much). Checked whenever the binding or the requests change.
//! - The annotation `fleet.<domain>/scheduled-by` marks an Application the scheduler placed
//!   (written with the binding, in one write). Only the control plane's own loops
//!   (`system:kayra:<component>` in `system:masters`) set, change or remove it — Kubernetes
//!   likewise reserves binding to a privileged subresource. A client may only clear the
//!   binding of a scheduler-placed Application, which asks for a new placement: the annotation
//!   goes with the binding (a write that clears `nodeName` alone has it removed, as
//!   `kubectl patch … '{"spec":{"placement":{"nodeName":null}}}'` expects). Moving it to another
//!   node is the scheduler's call, and pinning it where it is would claim a choice its author
//!   did not make.
//! - The annotation never stands without a binding (`422`).
//!
//! Finished Applications (`Succeeded`, `Failed`) request nothing of their Node.

use std::sync::Arc;

use kayra_api::kinds::application::{NODE_NAME_FIELD, bound_node, scheduled_by_annotation};
use kayra_api::quantity::Quantity;
use kayra_api::validation::FieldError;
use kayra_registry::{Object, Operation, Refusal};
use serde_json::Value;

use crate::ports::{Fleet, Resources};
use crate::{Mutating, Validating, Write};

/// The user names of the control plane's own loops begin so.
const CONTROLLER_PREFIX: &str = "system:kayra:";

/// The placement rules, for the Applications of `fleet.<domain>`, deciding against `fleet`.
pub struct NodePlacement {
    group: String,
    annotation: String,
    fleet: Arc<dyn Fleet>,
}

impl NodePlacement {
    /// The rules for the deployment's `domain`.
    pub fn new(domain: &str, fleet: Arc<dyn Fleet>) -> NodePlacement {
        NodePlacement { group: format!("fleet.{domain}"), annotation: scheduled_by_annotation(domain), fleet }
    }
}

/// What an Application asks of its node: nothing once it finished.
pub fn requests(application: &Object) -> Resources {
    let phase = application.get("status").and_then(|status| status.get("phase")).and_then(Value::as_str);
    if matches!(phase, Some("Succeeded" | "Failed")) {
        return Resources::default();
    }
    let requests = application.get("spec").and_then(|spec| spec.pointer("/resources/requests"));
    resources(requests)
}

/// A `{cpu, memory}` list of quantities (requests, allocatable) as numbers.
pub fn resources(list: Option<&Value>) -> Resources {
    let side = |key: &str| {
        list.and_then(|list| list.get(key))
            .and_then(Value::as_str)
            .and_then(Quantity::parse)
            .map(Quantity::value)
    };
    Resources { cpu: side("cpu"), memory: side("memory") }
}

impl NodePlacement {
    fn scheduled_by<'o>(&self, object: Option<&'o Object>) -> Option<&'o Value> {
        object?.get("metadata")?.get("annotations")?.get(&self.annotation)
    }

    fn overcommit(&self, write: &Write<'_>, node: &str, allocatable: Resources) -> Result<(), Refusal> {
        let wanted = requests(write.object);
        let others = self.fleet.requested_on(node, write.namespace.unwrap_or_default(), write.name);
        let sides = [
            ("cpu", allocatable.cpu, others.cpu, wanted.cpu),
            ("memory", allocatable.memory, others.memory, wanted.memory),
        ];
        for (side, offered, taken, asked) in sides {
            let (Some(offered), Some(asked)) = (offered, asked) else { continue };
            let excess = taken.unwrap_or(0.0) + asked - offered;
            if excess > 0.0 {
                return Err(Refusal::Forbidden(format!(
                    "application \"{}\" requests {} {side}, which would exceed node \"{node}\"'s allocatable {side} by {}; \
                     request less, free capacity on the node, or leave spec.placement.nodeName empty so the scheduler places it",
                    write.name,
                    format_quantity(side, asked),
                    format_quantity(side, excess),
                )));
            }
        }
        Ok(())
    }
}

impl NodePlacement {
    fn applies(&self, write: &Write<'_>) -> bool {
        write.api == self.group
            && write.resource == "applications"
            && write.operation != Operation::Delete
            && write.part.writes_object()
    }
}

impl Mutating for NodePlacement {
    fn name(&self) -> &'static str {
        "NodePlacement"
    }

    /// A write that clears the binding of a scheduler-placed Application and leaves its
    /// annotation as it was drops the annotation too.
    fn mutate(&self, write: &Write<'_>) -> Result<Option<Object>, Refusal> {
        let cleared = self.applies(write)
            && write.operation == Operation::Update
            && bound_node(write.object).is_none()
            && write.old.and_then(bound_node).is_some();
        let kept = self.scheduled_by(write.old).is_some()
            && self.scheduled_by(Some(write.object)) == self.scheduled_by(write.old);
        if !cleared || !kept {
            return Ok(None);
        }
        let mut object = write.object.clone();
        let annotations = object
            .get_mut("metadata")
            .and_then(|metadata| metadata.get_mut("annotations"))
            .and_then(Value::as_object_mut);
        if let Some(annotations) = annotations {
            annotations.remove(&self.annotation);
        }
        Ok(Some(object))
    }
}

impl Validating for NodePlacement {
    fn name(&self) -> &'static str {
        "NodePlacement"
    }

    fn validate(&self, write: &Write<'_>) -> Result<(), Refusal> {
        if !self.applies(write) {
            return Ok(());
        }
        let node = bound_node(write.object);
        let old_node = write.old.and_then(bound_node);
        let marked = self.scheduled_by(Some(write.object));
        let was_marked = self.scheduled_by(write.old);
        let controller = write.caller.user.starts_with(CONTROLLER_PREFIX)
            && write.caller.groups.iter().any(|g| g == kayra_authz::MASTERS);

        if marked.is_some() && node.is_none() {
            return Err(Refusal::Invalid(vec![FieldError::forbidden(
                format!("metadata.annotations[{}]", self.annotation),
                "marks an Application the scheduler bound, and this one is bound to no node; remove it with the binding",
            )]));
        }
        let unbound_with_its_mark = node.is_none() && marked.is_none();
        if marked != was_marked && !controller && !unbound_with_its_mark {
            return Err(Refusal::Forbidden(format!(
                "user \"{}\" may not set or change annotation {} of application \"{}\": only the scheduler marks what it placed; \
                 clear spec.placement.nodeName together with the annotation to ask for a new placement",
                write.caller.user, self.annotation, write.name
            )));
        }
        if was_marked.is_some() && node != old_node && node.is_some() && !controller {
            return Err(Refusal::Forbidden(format!(
                "user \"{}\" may not move application \"{}\", which the scheduler placed on node \"{}\": \
                 clear spec.placement.nodeName (and annotation {}) to have it placed again",
                write.caller.user,
                write.name,
                old_node.unwrap_or_default(),
                self.annotation
            )));
        }
        let Some(node) = node else { return Ok(()) };
        let rebound = old_node != Some(node);
        let asks_more = write.old.map(requests) != Some(requests(write.object));
        if !rebound && !asks_more {
            return Ok(());
        }
        let Some(allocatable) = self.fleet.allocatable(node) else {
            if !rebound {
                // The node is gone; a binding that does not change is the node-loss loop's
                // concern, not this write's.
                return Ok(());
            }
            return Err(Refusal::Invalid(vec![FieldError {
                field: NODE_NAME_FIELD.to_owned(),
                message: format!(
                    "Not found: \"{node}\": there is no Node of that name; name one `kubectl get nodes` lists, or leave it empty so the scheduler places the application"
                ),
                reason: "FieldValueNotFound",
            }]));
        };
        self.overcommit(write, node, allocatable)
    }
}

/// An amount of `side` as Kubernetes writes one: millicores or cores; Mi, Ki or bytes.
fn format_quantity(side: &str, amount: f64) -> String {
    if side == "cpu" {
        let millis = (amount * 1000.0).ceil();
        return if millis % 1000.0 == 0.0 { format!("{}", millis / 1000.0) } else { format!("{millis}m") };
    }
    let bytes = amount.ceil();
    const MI: f64 = 1024.0 * 1024.0;
    if bytes % MI == 0.0 {
        format!("{}Mi", bytes / MI)
    } else if bytes % 1024.0 == 0.0 {
        format!("{}Ki", bytes / 1024.0)
    } else {
        format!("{bytes}")
    }
}

#[cfg(test)]
mod tests;
