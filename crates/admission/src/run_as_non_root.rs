//! Run as non-root: no workload asks to run as root. An Application (or a component of an
//! ApplicationSet) whose `spec.securityContext.runAsUser` is 0 is refused with 403, as
//! Kubernetes' restricted Pod Security level refuses `runAsUser: 0`; the node agent, when it
//! runs as root, would otherwise start the process as root.

use kayra_registry::{Operation, Refusal};
use serde_json::Value;

use crate::{Validating, Write};

/// The refusal of root workloads, for the workloads of `fleet.<domain>`.
#[derive(Debug, Clone)]
pub struct RunAsNonRoot {
    group: String,
}

impl RunAsNonRoot {
    /// The check for the deployment's `domain`.
    pub fn new(domain: &str) -> RunAsNonRoot {
        RunAsNonRoot { group: format!("fleet.{domain}") }
    }
}

impl Validating for RunAsNonRoot {
    fn name(&self) -> &'static str {
        "RunAsNonRoot"
    }

    /// Writes of the spec only: a status write or a delete asks for no user.
    fn validate(&self, write: &Write<'_>) -> Result<(), Refusal> {
        if write.api != self.group || write.operation == Operation::Delete || !write.part.writes_object() {
            return Ok(());
        }
        let specs: Vec<(String, &Value)> = match write.resource {
            "applications" => {
                write.object.get("spec").map(|spec| ("spec".to_owned(), spec)).into_iter().collect()
            }
            "applicationsets" => write
                .object
                .get("spec")
                .and_then(|spec| spec.get("applications"))
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .enumerate()
                .filter_map(|(at, component)| {
                    Some((format!("spec.applications[{at}].spec"), component.get("spec")?))
                })
                .collect(),
            _ => return Ok(()),
        };
        for (field, spec) in specs {
            let user = spec.get("securityContext").and_then(|context| context.get("runAsUser"));
            if user.and_then(Value::as_i64) == Some(0) {
                return Err(Refusal::Forbidden(format!(
                    "{field}.securityContext.runAsUser: running as root (0) is not allowed; use a non-zero user, or leave it unset to run as 65532"
                )));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
