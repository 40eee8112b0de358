//! Certificate requests (`certificates.k8s.io` `certificatesigningrequests`), as Kubernetes
//! admits them: who asked is stamped from the writer on create (`spec.username`, `spec.groups`;
//! whatever the client sent is overwritten, and `uid` and `extra`, which the writer's identity
//! does not carry here, are cleared), the `approval` subresource decides (Approved or Denied)
//! and nothing else, the `status` subresource (the signer's) reports (the certificate, Failed)
//! and decides nothing, and each changed condition gets its times.

use kayra_registry::{Object, Operation, Part, Refusal};
use serde_json::{Map, Value, json};

use crate::{Mutating, Validating, Write};

/// The group of certificate requests.
const GROUP: &str = "certificates.k8s.io";

/// The conditions only the `approval` subresource writes.
const DECISIONS: &[&str] = &["Approved", "Denied"];

/// Certificate requests' admission: both a mutating and a validating plugin.
#[derive(Debug, Clone, Copy, Default)]
pub struct CertificateRequests;

fn concerns(write: &Write<'_>) -> bool {
    write.api == GROUP && write.resource == "certificatesigningrequests"
}

impl Mutating for CertificateRequests {
    fn name(&self) -> &'static str {
        "CertificateSigningRequest"
    }

    fn mutate(&self, write: &Write<'_>) -> Result<Option<Object>, Refusal> {
        if !concerns(write) {
            return Ok(None);
        }
        let mut object = write.object.clone();
        match write.operation {
            Operation::Create => {
                let spec = object.entry("spec").or_insert_with(|| Value::Object(Map::new()));
                if let Some(spec) = spec.as_object_mut() {
                    spec.insert("username".into(), json!(write.caller.user));
                    spec.insert("groups".into(), json!(write.caller.groups));
                    spec.remove("uid");
                    spec.remove("extra");
                }
            }
            Operation::Update => {
                stamp_condition_times(&mut object, write.old, &jiff::Timestamp::now().to_string())
            }
            Operation::Delete => return Ok(None),
        }
        Ok((&object != write.object).then_some(object))
    }
}

impl Validating for CertificateRequests {
    fn name(&self) -> &'static str {
        "CertificateSigningRequest"
    }

    fn validate(&self, write: &Write<'_>) -> Result<(), Refusal> {
        if !concerns(write) || write.operation != Operation::Update {
            return Ok(());
        }
        let (new, old) = (conditions(Some(write.object)), conditions(write.old));
        let decisions = |conditions: &[(String, String)]| -> Vec<(String, String)> {
            conditions.iter().filter(|(type_, _)| DECISIONS.contains(&type_.as_str())).cloned().collect()
        };
        let reports = |conditions: &[(String, String)]| -> Vec<(String, String)> {
            conditions.iter().filter(|(type_, _)| !DECISIONS.contains(&type_.as_str())).cloned().collect()
        };
        match write.part {
            Part::Approval if reports(&new) != reports(&old) => Err(Refusal::Forbidden(
                "the approval subresource writes only the Approved and Denied conditions; other conditions are the signer's, through status".to_owned(),
            )),
            Part::Status if decisions(&new) != decisions(&old) => Err(Refusal::Forbidden(
                "the status subresource may not approve or deny a request; use the approval subresource (kubectl certificate approve|deny)".to_owned(),
            )),
            _ => Ok(()),
        }
    }
}

/// Each condition's `type` and `status`, in order.
fn conditions(object: Option<&Object>) -> Vec<(String, String)> {
    let listed =
        object.and_then(|o| o.get("status")).and_then(|s| s.get("conditions")).and_then(Value::as_array);
    let field = |condition: &Value, name: &str| {
        condition.get(name).and_then(Value::as_str).unwrap_or_default().to_owned()
    };
    listed.into_iter().flatten().map(|c| (field(c, "type"), field(c, "status"))).collect()
}

/// Gives each condition that lacks them its times: `lastUpdateTime` now, and
/// `lastTransitionTime` the stored condition's while its status is unchanged, else now.
fn stamp_condition_times(object: &mut Object, old: Option<&Object>, now: &str) {
    let before: Vec<Value> = old
        .and_then(|o| o.get("status"))
        .and_then(|s| s.get("conditions"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let Some(conditions) =
        object.get_mut("status").and_then(|s| s.get_mut("conditions")).and_then(Value::as_array_mut)
    else {
        return;
    };
    for condition in conditions.iter_mut().filter_map(Value::as_object_mut) {
        let stored = before.iter().find(|b| b.get("type") == condition.get("type"));
        let unset = |name: &str, condition: &Map<String, Value>| {
            condition.get(name).and_then(Value::as_str).is_none_or(str::is_empty)
        };
        if unset("lastUpdateTime", condition) {
            condition.insert("lastUpdateTime".into(), json!(now));
        }
        if unset("lastTransitionTime", condition) {
            let kept = stored
                .filter(|stored| stored.get("status") == condition.get("status"))
                .and_then(|stored| stored.get("lastTransitionTime"))
                .cloned();
            condition.insert("lastTransitionTime".into(), kept.unwrap_or_else(|| json!(now)));
        }
    }
}

#[cfg(test)]
mod tests;
