//! Workload references: every Secret (`secretRef.name`) and Service (`serviceName`) an
//! Application or ApplicationSet names, at any depth of its spec, must be one its writer may
//! `get` — otherwise writing a workload would be a way to read a Secret. A workload names at
//! most [`MAX_REFERENCES`] distinct ones.

use std::sync::Arc;

use kayra_api::validation::FieldError;
use kayra_authz::Action;
use kayra_registry::{Operation, Refusal};
use serde_json::Value;

use crate::ports::Permissions;
use crate::{Validating, Write};

/// The most distinct Secrets and Services one workload may name.
pub const MAX_REFERENCES: usize = 256;

/// The reference check, for the workloads of `fleet.<domain>`.
pub struct WorkloadReferences {
    group: String,
    permissions: Arc<dyn Permissions>,
}

impl WorkloadReferences {
    /// The check for the deployment's `domain`, deciding against `permissions`.
    pub fn new(domain: &str, permissions: Arc<dyn Permissions>) -> WorkloadReferences {
        WorkloadReferences { group: format!("fleet.{domain}"), permissions }
    }
}

impl Validating for WorkloadReferences {
    fn name(&self) -> &'static str {
        "WorkloadReferences"
    }

    /// Writes of the spec only: a status write or a delete names nothing new.
    fn validate(&self, write: &Write<'_>) -> Result<(), Refusal> {
        let workload = matches!(write.resource, "applications" | "applicationsets");
        if write.api != self.group
            || !workload
            || write.operation == Operation::Delete
            || !write.part.writes_object()
        {
            return Ok(());
        }
        let mut named = Vec::new();
        if let Some(spec) = write.object.get("spec") {
            collect_references(spec, &mut named);
        }
        named.sort_unstable();
        named.dedup();
        if named.len() > MAX_REFERENCES {
            return Err(Refusal::Invalid(vec![FieldError {
                field: "spec".to_owned(),
                message: format!(
                    "Too many: {}: a workload may name at most {MAX_REFERENCES} Secrets and Services; name fewer or split it",
                    named.len()
                ),
                reason: "FieldValueTooMany",
            }]));
        }
        for (resource, name) in named {
            let get = Action::Resource {
                verb: "get".to_owned(),
                api: self.group.clone(),
                resource: resource.to_owned(),
                namespace: write.namespace.map(str::to_owned),
                name: Some(name.clone()),
            };
            if !self.permissions.allows(write.caller, &get) {
                return Err(Refusal::Forbidden(format!(
                    "user \"{}\" cannot refer to {resource} \"{name}\": referring to it needs get on it; name one you may get, or ask for get on it",
                    write.caller.user
                )));
            }
        }
        Ok(())
    }
}

fn collect_references<'v>(value: &'v Value, found: &mut Vec<(&'static str, &'v String)>) {
    match value {
        Value::Object(map) => {
            for (key, value) in map {
                match (key.as_str(), value) {
                    ("secretRef", Value::Object(secret)) => {
                        if let Some(Value::String(name)) = secret.get("name") {
                            found.push(("secrets", name));
                        }
                    }
                    ("serviceName", Value::String(name)) => found.push(("services", name)),
                    _ => collect_references(value, found),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|item| collect_references(item, found)),
        _ => {}
    }
}

#[cfg(test)]
mod tests;
