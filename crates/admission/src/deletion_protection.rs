//! Deletion protection: a Service or Secret that Applications still need is not deleted from
//! under them.
//!
//! - A Service cannot be deleted while Applications in its namespace join it
//!   (`spec.serviceName`): `409 Conflict`, naming up to three of them and how many more.
//! - A Secret cannot be deleted while an Application in its namespace needs it: an environment
//!   variable, or a `key: "*"` import, names it without `optional: true` (`409`, likewise).
//!
//! Every deleter is held to it, the control plane's loops too: the garbage collector deletes a
//! set's Applications before the Services they join. Deleting a namespace is not held up: the
//! namespace finalizer deletes what the namespace holds without admission.

use std::sync::Arc;

use kayra_registry::{Object, Operation, Refusal};
use serde_json::Value;

use crate::ports::Fleet;
use crate::{Validating, Write};

/// How many of the Applications that hold an object a refusal names.
const NAMED: usize = 3;

/// The deletion-protection rules for `fleet.<domain>` Services and Secrets, reading which
/// Applications name them from `fleet`.
pub struct DeletionProtection {
    group: String,
    fleet: Arc<dyn Fleet>,
}

impl DeletionProtection {
    /// The rules for the deployment's `domain`.
    pub fn new(domain: &str, fleet: Arc<dyn Fleet>) -> DeletionProtection {
        DeletionProtection { group: format!("fleet.{domain}"), fleet }
    }
}

/// The Service an Application joins, if any.
pub fn service_of(application: &Object) -> Option<&str> {
    application
        .get("spec")
        .and_then(|spec| spec.get("serviceName"))
        .and_then(Value::as_str)
        .filter(|name| !name.is_empty())
}

/// The Secrets an Application cannot start without: those its environment names (one key, or
/// every key with `key: "*"`) without `optional: true`. Sorted, each once.
pub fn required_secrets(application: &Object) -> Vec<String> {
    let env = application.get("spec").and_then(|spec| spec.get("env")).and_then(Value::as_array);
    let mut names: Vec<String> = env
        .into_iter()
        .flatten()
        .filter_map(|var| var.get("secretRef"))
        .filter(|reference| reference.get("optional").and_then(Value::as_bool) != Some(true))
        .filter_map(|reference| reference.get("name").and_then(Value::as_str))
        .filter(|name| !name.is_empty())
        .map(str::to_owned)
        .collect();
    names.sort();
    names.dedup();
    names
}

/// `"a", "b", "c" and 2 more`.
fn some_of(names: &[String]) -> String {
    let quoted: Vec<String> = names.iter().take(NAMED).map(|name| format!("\"{name}\"")).collect();
    match names.len().saturating_sub(NAMED) {
        0 => quoted.join(", "),
        more => format!("{} and {more} more", quoted.join(", ")),
    }
}

impl Validating for DeletionProtection {
    fn name(&self) -> &'static str {
        "DeletionProtection"
    }

    fn validate(&self, write: &Write<'_>) -> Result<(), Refusal> {
        if write.operation != Operation::Delete || write.api != self.group {
            return Ok(());
        }
        let namespace = write.namespace.unwrap_or_default();
        let (holders, what) = match write.resource {
            "services" => (self.fleet.members(namespace, write.name), "service"),
            "secrets" => (self.fleet.secret_users(namespace, write.name), "secret"),
            _ => return Ok(()),
        };
        let how = match (what, holders.len()) {
            (_, 0) => return Ok(()),
            ("service", 1) => "application {} joins it (spec.serviceName)",
            ("service", _) => "applications {} join it (spec.serviceName)",
            (_, 1) => "application {} needs it (an env secretRef without optional: true)",
            _ => "applications {} need it (env secretRefs without optional: true)",
        };
        Err(Refusal::Conflict(format!(
            "{what} \"{}\" is in use: in namespace \"{namespace}\", {}; delete them or stop them naming it first",
            write.name,
            how.replace("{}", &some_of(&holders))
        )))
    }
}

#[cfg(test)]
mod tests;
