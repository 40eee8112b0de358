//! Child ownership: what clients may do to the children of an ApplicationSet.
//!
//! A set's children — its Applications, and the Services it renders — carry a controller owner
//! reference to the set, the reserved labels `fleet.<domain>/application-set` and
//! `fleet.<domain>/component`, and (Applications) the spec-hash annotation
//! `fleet.<domain>/appset-spec-hash`. Only the control plane's own loops
//! (`system:kayra:<component>` in `system:masters`) set or change them; for every other writer:
//!
//! - a create that claims a set — an ApplicationSet controller owner reference, a reserved label
//!   or the spec-hash annotation — is refused (`403`, naming the set);
//! - an update or patch keeps the marks as stored: what the writer sent for them is replaced by
//!   the stored values (so `kubectl apply` of a manifest without them changes nothing);
//! - any change to the spec of a set-owned Application is refused (`403`): the set renders it,
//!   so the change belongs in the set. Its status (written by its node) and its other labels and
//!   annotations stay writable, and a child may be deleted (the set renders it again).

use kayra_api::kinds::applicationset::{OWNER_KIND, component_label, set_label, spec_hash_annotation};
use kayra_registry::{Object, Operation, Part, Refusal};
use serde_json::{Map, Value};

use crate::{Mutating, Validating, Write, control_plane};

/// The child-ownership rules for `fleet.<domain>` Applications and Services.
pub struct ChildOwnership {
    group: String,
    labels: [String; 2],
    annotation: String,
}

impl ChildOwnership {
    /// The rules for the deployment's `domain`.
    pub fn new(domain: &str) -> ChildOwnership {
        ChildOwnership {
            group: format!("fleet.{domain}"),
            labels: [set_label(domain), component_label(domain)],
            annotation: spec_hash_annotation(domain),
        }
    }

    /// Whether the rules decide this write: a client's write of an Application or Service.
    fn applies(&self, write: &Write<'_>) -> bool {
        write.api == self.group
            && matches!(write.resource, "applications" | "services")
            && write.part.writes_object()
            && !control_plane(write.caller)
    }

    /// The set an object claims through a reserved mark other than its owner reference.
    fn marked_set<'o>(&self, object: &'o Object) -> Option<&'o str> {
        let labels = metadata_map(object, "labels");
        let set = labels.and_then(|labels| labels.get(&self.labels[0])).and_then(Value::as_str);
        let other_mark = self.labels[1..].iter().any(|label| labels.is_some_and(|l| l.contains_key(label)))
            || metadata_map(object, "annotations").is_some_and(|a| a.contains_key(&self.annotation));
        set.or(other_mark.then_some(""))
    }
}

/// The ApplicationSet that controls an object: the name in its controller owner reference of
/// Kind ApplicationSet.
pub fn controlling_set(object: &Object) -> Option<&str> {
    set_references(object)
        .find(|reference| reference.get("controller").and_then(Value::as_bool) == Some(true))
        .and_then(|reference| reference.get("name"))
        .and_then(Value::as_str)
}

/// The object's owner references to ApplicationSets.
fn set_references(object: &Object) -> impl Iterator<Item = &Value> {
    object
        .get("metadata")
        .and_then(|metadata| metadata.get("ownerReferences"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|reference| reference.get("kind").and_then(Value::as_str) == Some(OWNER_KIND))
}

fn metadata_map<'o>(object: &'o Object, field: &str) -> Option<&'o Map<String, Value>> {
    object.get("metadata")?.get(field)?.as_object()
}

/// Sets `metadata.<field>[key]` to `value`, or removes it (and an emptied map).
fn carry(object: &mut Object, field: &str, key: &str, value: Option<&Value>) {
    let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) else { return };
    match value {
        Some(value) => {
            let map = metadata.entry(field).or_insert_with(|| Value::Object(Map::new()));
            if let Some(map) = map.as_object_mut() {
                map.insert(key.to_owned(), value.clone());
            }
        }
        None => {
            if let Some(map) = metadata.get_mut(field).and_then(Value::as_object_mut) {
                map.remove(key);
                if map.is_empty() {
                    metadata.remove(field);
                }
            }
        }
    }
}

impl Mutating for ChildOwnership {
    fn name(&self) -> &'static str {
        "ChildOwnership"
    }

    fn mutate(&self, write: &Write<'_>) -> Result<Option<Object>, Refusal> {
        let Some(old) = write.old.filter(|_| write.operation == Operation::Update && self.applies(write))
        else {
            return Ok(None);
        };
        let mut object = write.object.clone();
        for label in &self.labels {
            carry(&mut object, "labels", label, metadata_map(old, "labels").and_then(|l| l.get(label)));
        }
        let hash = metadata_map(old, "annotations").and_then(|a| a.get(&self.annotation));
        carry(&mut object, "annotations", &self.annotation, hash);
        let mut references: Vec<Value> = object
            .get("metadata")
            .and_then(|metadata| metadata.get("ownerReferences"))
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|reference| reference.get("kind").and_then(Value::as_str) != Some(OWNER_KIND))
            .cloned()
            .collect();
        references.extend(set_references(old).cloned());
        if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
            if references.is_empty() {
                metadata.remove("ownerReferences");
            } else {
                metadata.insert("ownerReferences".into(), Value::Array(references));
            }
        }
        Ok((object != *write.object).then_some(object))
    }
}

impl Validating for ChildOwnership {
    fn name(&self) -> &'static str {
        "ChildOwnership"
    }

    fn validate(&self, write: &Write<'_>) -> Result<(), Refusal> {
        if !self.applies(write) {
            return Ok(());
        }
        let kind = if write.resource == "services" { "service" } else { "application" };
        match write.operation {
            Operation::Create => {
                let Some(set) = controlling_set(write.object).or_else(|| self.marked_set(write.object))
                else {
                    return Ok(());
                };
                let named = if set.is_empty() {
                    "an ApplicationSet".to_owned()
                } else {
                    format!("ApplicationSet \"{set}\"")
                };
                Err(Refusal::Forbidden(format!(
                    "user \"{}\" may not create {kind} \"{}\" as a child of {named}: only the set creates its children \
                     (remove the ApplicationSet owner reference, labels {} and {} and annotation {}, or change the set instead)",
                    write.caller.user, write.name, self.labels[0], self.labels[1], self.annotation
                )))
            }
            Operation::Update => {
                let Some(old) = write.old else { return Ok(()) };
                let Some(set) = controlling_set(old).filter(|_| write.resource == "applications") else {
                    return Ok(());
                };
                if write.object.get("spec") == old.get("spec") {
                    return Ok(());
                }
                if let Part::Door(door) = write.part {
                    return Err(Refusal::Forbidden(format!(
                        "application \"{}\" is managed by ApplicationSet \"{set}\"; its Applications are frozen and \
                         thawed with it: POST .../applicationsets/{set}/{door} instead (user \"{}\" may not {door} a set's child)",
                        write.name, write.caller.user
                    )));
                }
                Err(Refusal::Forbidden(format!(
                    "application \"{}\" is managed by ApplicationSet \"{set}\"; change the set instead \
                     (user \"{}\" may not change the spec of a set's child)",
                    write.name, write.caller.user
                )))
            }
            Operation::Delete => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests;
