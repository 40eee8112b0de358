//! The `binding` subresource of an Application (and `pods/binding`, a Pod being a view of an
//! Application): a Kubernetes `Binding` that places it on a Node, what a scheduler writes.
//!
//! One write sets `spec.placement.nodeName` to the Binding's target, copies the Binding's
//! annotations onto the Application (the scheduler's `scheduled-by` mark) and sets the
//! condition `Scheduled=True`, as kube-apiserver's `pods/binding` sets `nodeName` and
//! `PodScheduled` together: no status write after the binding can lose the condition, and a
//! placement costs one write. The write is admitted as a write of the object, so placement
//! admission decides the node (it exists, it has room) and who may set the mark.
//!
//! As in Kubernetes: an Application already bound, or being deleted, is not bound again
//! (`409`); a `metadata.uid` or `metadata.resourceVersion` in the Binding must be the
//! Application's (`409`); the target is a Node (`kind` empty or `Node`) with a name.
//!
//! Unbinding (an eviction, a lost node, a taint) is the same decision undone, and the same
//! kind of write: the node and the scheduler's mark go together. Neither moves
//! `metadata.generation`: placement is the control plane's, not a new desired state from the
//! Application's author.

use kayra_api::kinds::ConditionType;
use kayra_api::kinds::application::{bound_node, scheduled_by_annotation};
use kayra_api::validation::FieldError;
use kayra_authn::Identity;
use kayra_registry::{Object, Part, RegistryError, Resource, meta_str};
use serde_json::{Map, Value, json};

use crate::ApplicationLayer;

/// The reason of the `Scheduled=True` condition a binding sets.
pub const SCHEDULED: &str = "Scheduled";

/// Binds the Application `namespace`/`name` as `binding` says, as `identity` (the caller has
/// been authorized for `create` on `applications/binding` or `pods/binding`); answers the
/// bound Application. A dry run writes nothing.
pub async fn bind(
    control: &ApplicationLayer,
    identity: &Identity,
    namespace: &str,
    name: &str,
    binding: &Value,
    dry_run: bool,
) -> Result<Object, RegistryError> {
    let applications = applications(control)?;
    let target = target(name, binding)?;
    let annotations = binding.pointer("/metadata/annotations").and_then(Value::as_object).cloned();
    let uid = binding.pointer("/metadata/uid").and_then(Value::as_str).filter(|uid| !uid.is_empty());
    let version = binding.pointer("/metadata/resourceVersion").and_then(Value::as_str);
    let options = control.write_options(identity, &applications, Part::Binding, None, dry_run).await;
    let conflict = |message: String| RegistryError::Conflict {
        resource: applications.qualified(),
        name: name.to_owned(),
        message,
    };
    let now = jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string();
    let build = |current: &Object| -> Result<Object, RegistryError> {
        if !meta_str(current, "deletionTimestamp").is_empty() {
            return Err(conflict(format!(
                "Application {namespace}/{name} is being deleted, cannot be assigned to a node"
            )));
        }
        if let Some(uid) = uid
            && uid != meta_str(current, "uid")
        {
            return Err(conflict(format!(
                "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                meta_str(current, "uid")
            )));
        }
        if let Some(node) = bound_node(current) {
            return Err(conflict(format!("Application {name} is already assigned to node \"{node}\"")));
        }
        let mut object = current.clone();
        let spec = object.entry("spec").or_insert_with(|| json!({}));
        let placement = spec.as_object_mut().map(|spec| spec.entry("placement").or_insert_with(|| json!({})));
        match placement.and_then(Value::as_object_mut) {
            Some(placement) => placement.insert("nodeName".into(), json!(target)),
            None => {
                return Err(RegistryError::BadRequest("the Application's spec is not an object".to_owned()));
            }
        };
        if let Some(annotations) = &annotations {
            let metadata = object.entry("metadata").or_insert_with(|| json!({}));
            if let Some(metadata) = metadata.as_object_mut() {
                let stored = metadata.entry("annotations").or_insert_with(|| json!({}));
                if !stored.is_object() {
                    *stored = json!({});
                }
                if let Some(stored) = stored.as_object_mut() {
                    stored.extend(annotations.iter().map(|(k, v)| (k.clone(), v.clone())));
                }
            }
        }
        let message = format!("Successfully assigned {namespace}/{name} to {target}");
        set_scheduled(&mut object, &message, &now);
        Ok(object)
    };
    control.registry().update_with(&applications, Some(namespace), name, version, options, build).await
}

/// Undoes the binding of the Application `namespace`/`name`, at `resource_version`, as
/// `identity` (the caller has been authorized): clears `spec.placement.nodeName` and the
/// scheduler's `scheduled-by` mark in one write of the binding, admitted as a write of the
/// object. Its status keeps only what still holds once nothing runs it, as on any write that
/// moves it off its node. Answers the unbound Application.
pub async fn unbind(
    control: &ApplicationLayer,
    identity: &Identity,
    namespace: &str,
    name: &str,
    resource_version: &str,
) -> Result<Object, RegistryError> {
    let applications = applications(control)?;
    let annotation = scheduled_by_annotation(control.scheme().domain());
    // Placement admission waits for the fleet index only for a write that names a node; this
    // one names none, so it goes straight on.
    let options = control.admitted(identity, Part::Binding, false);
    let build = |current: &Object| -> Result<Object, RegistryError> {
        let mut object = current.clone();
        let placement = object.get_mut("spec").and_then(|spec| spec.get_mut("placement"));
        if let Some(placement) = placement.and_then(Value::as_object_mut) {
            placement.remove("nodeName");
        }
        let annotations = object.get_mut("metadata").and_then(|metadata| metadata.get_mut("annotations"));
        if let Some(annotations) = annotations.and_then(Value::as_object_mut) {
            annotations.remove(&annotation);
        }
        applications.strategy.carried_status(current, &mut object);
        Ok(object)
    };
    let version = Some(resource_version);
    control.registry().update_with(&applications, Some(namespace), name, version, options, build).await
}

/// The node a Binding targets, checked as Kubernetes checks it.
fn target<'b>(name: &str, binding: &'b Value) -> Result<&'b str, RegistryError> {
    if let Some(named) = binding.pointer("/metadata/name").and_then(Value::as_str)
        && !named.is_empty()
        && named != name
    {
        return Err(RegistryError::BadRequest(format!(
            "name in URL does not match name in Binding object: \"{name}\" and \"{named}\""
        )));
    }
    let invalid = |cause: FieldError| RegistryError::Invalid {
        kind: "Binding".to_owned(),
        name: name.to_owned(),
        causes: vec![cause],
    };
    match binding.pointer("/target/kind").and_then(Value::as_str) {
        None | Some("" | "Node") => {}
        Some(kind) => {
            return Err(invalid(FieldError::invalid(
                "target.kind",
                format!("\"{kind}\""),
                "must be empty or 'Node'",
            )));
        }
    }
    binding
        .pointer("/target/name")
        .and_then(Value::as_str)
        .filter(|node| !node.is_empty())
        .ok_or_else(|| invalid(FieldError::required("target.name")))
}

/// Sets condition `Scheduled=True` (and phase `Pending` on an Application with none, whose
/// message of why it could not be placed no longer holds).
fn set_scheduled(application: &mut Object, message: &str, now: &str) {
    let status = application.entry("status").or_insert_with(|| json!({}));
    if !status.is_object() {
        *status = json!({});
    }
    let Some(status) = status.as_object_mut() else { return };
    let conditions = match status.remove("conditions") {
        Some(Value::Array(conditions)) => conditions,
        _ => Vec::new(),
    };
    let mut since = json!(now);
    let mut kept = Vec::with_capacity(conditions.len() + 1);
    for condition in conditions {
        if condition.get("type").and_then(Value::as_str) == Some(ConditionType::Scheduled.as_str()) {
            if condition.get("status").and_then(Value::as_str) == Some("True")
                && let Some(at) = condition.get("lastTransitionTime")
            {
                since = at.clone();
            }
        } else {
            kept.push(condition);
        }
    }
    let scheduled = json!({"type": ConditionType::Scheduled.as_str(), "status": "True", "reason": SCHEDULED, "message": message, "lastTransitionTime": since});
    kept.insert(0, scheduled);
    status.insert("conditions".into(), Value::Array(kept));
    let phase = status.entry("phase").or_insert_with(|| json!("Pending"));
    if phase == "Pending" {
        status.remove("message");
    }
}

fn applications(control: &ApplicationLayer) -> Result<Resource, RegistryError> {
    control
        .resource_named(&format!("fleet.{}", control.scheme().domain()), "applications")
        .cloned()
        .ok_or_else(|| RegistryError::BadRequest("the server does not serve applications".to_owned()))
}

/// A Binding of an Application to `node` carrying `annotations`, at `resource_version` when
/// given: what a scheduler sends.
pub fn binding_to(
    name: &str,
    node: &str,
    resource_version: Option<&str>,
    annotations: Map<String, Value>,
) -> Value {
    let mut metadata = json!({"name": name, "annotations": annotations});
    if let Some(version) = resource_version {
        metadata["resourceVersion"] = json!(version);
    }
    json!({"apiVersion": "v1", "kind": "Binding", "metadata": metadata, "target": {"kind": "Node", "name": node}})
}

#[cfg(test)]
mod tests;
