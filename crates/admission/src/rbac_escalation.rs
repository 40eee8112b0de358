//! RBAC escalation prevention: a Role or ClusterRole holds only rules its writer holds in that
//! scope (unless the writer may `escalate` it), and a binding grants only a role whose rules its
//! writer holds (unless the writer may `bind` that role). Checking is bounded: a grant of more
//! than [`MAX_GRANTED`] permissions, or a check costing more than [`MAX_CHECK_WORK`] comparisons,
//! is refused rather than checked.

use std::sync::Arc;

use kayra_api::kinds::rbac::{PolicyRule, RoleRef};
use kayra_api::validation::FieldError;
use kayra_authz::{Action, coverage};
use kayra_registry::{Operation, Refusal};
use serde_json::Value;

use crate::ports::Permissions;
use crate::{Validating, Write};

/// The most single permissions (verb × group × resource × name, or verb × URL) a role written
/// by someone who may not `escalate` may spell out; checking more would let one write cost
/// unbounded work.
pub const MAX_GRANTED: usize = 10_000;

/// The most comparisons (permissions to grant × entries of the rules the writer holds) one
/// escalation check may make; beyond it the write is refused rather than checked.
pub const MAX_CHECK_WORK: usize = 20_000_000;

/// How many missing permissions a refusal lists before it only counts the rest.
const SHOWN: usize = 10;

/// The escalation check, for the RBAC Kinds of `authorization.<domain>`.
pub struct RbacEscalation {
    group: String,
    permissions: Arc<dyn Permissions>,
}

impl RbacEscalation {
    /// The check for the deployment's `domain`, deciding against `permissions`.
    pub fn new(domain: &str, permissions: Arc<dyn Permissions>) -> RbacEscalation {
        RbacEscalation { group: format!("authorization.{domain}"), permissions }
    }
}

impl Validating for RbacEscalation {
    fn name(&self) -> &'static str {
        "RBACEscalation"
    }

    fn validate(&self, write: &Write<'_>) -> Result<(), Refusal> {
        if write.api != self.group || write.operation == Operation::Delete || !write.part.writes_object() {
            return Ok(());
        }
        match write.resource {
            "roles" | "clusterroles" => {
                let rules = decode::<Vec<PolicyRule>>(write, "rules")?;
                self.grant_rules(write, &rules)
            }
            "rolebindings" | "clusterrolebindings" => {
                let role_ref = decode::<RoleRef>(write, "roleRef")?;
                self.bind(write, &role_ref)
            }
            _ => Ok(()),
        }
    }
}

impl RbacEscalation {
    /// A Role or ClusterRole may hold only rules its writer holds in that scope, unless the
    /// writer may `escalate` it.
    fn grant_rules(&self, write: &Write<'_>, rules: &[PolicyRule]) -> Result<(), Refusal> {
        let escalate = Action::Resource {
            verb: "escalate".to_owned(),
            api: self.group.clone(),
            resource: write.resource.to_owned(),
            namespace: write.namespace.map(str::to_owned),
            name: Some(write.name.to_owned()),
        };
        if self.permissions.allows(write.caller, &escalate) {
            return Ok(());
        }
        let remedy = format!("grant only rules you hold, or get the escalate verb on {}", write.resource);
        self.covered(write, rules, &remedy)
    }

    /// A binding may grant only a role whose rules its writer holds in that scope, unless the
    /// writer may `bind` that role.
    fn bind(&self, write: &Write<'_>, role_ref: &RoleRef) -> Result<(), Refusal> {
        let (resource, rules) = match (role_ref.kind.as_str(), write.namespace) {
            ("ClusterRole", _) => ("clusterroles", self.permissions.cluster_role(&role_ref.name)),
            ("Role", Some(namespace)) => ("roles", self.permissions.role(namespace, &role_ref.name)),
            (other, _) => {
                let why = format!(
                    "roleRef.kind {other:?} cannot be bound here: a {} binds {}",
                    if write.namespace.is_some() { "RoleBinding" } else { "ClusterRoleBinding" },
                    if write.namespace.is_some() { "a Role or a ClusterRole" } else { "only a ClusterRole" },
                );
                return Err(Refusal::Invalid(vec![FieldError::invalid(
                    "roleRef.kind",
                    format!("{other:?}"),
                    &why,
                )]));
            }
        };
        let bind = Action::Resource {
            verb: "bind".to_owned(),
            api: self.group.clone(),
            resource: resource.to_owned(),
            namespace: write.namespace.map(str::to_owned),
            name: Some(role_ref.name.clone()),
        };
        if self.permissions.allows(write.caller, &bind) {
            return Ok(());
        }
        let Some(rules) = rules else {
            return Err(Refusal::Forbidden(format!(
                "user \"{}\" cannot bind {} \"{}\": it does not exist, and only a caller that may bind it may refer to it; create it first, or get the bind verb on it",
                write.caller.user, role_ref.kind, role_ref.name
            )));
        };
        let remedy = format!("bind only roles whose rules you hold, or get the bind verb on {resource}");
        self.covered(write, rules, &remedy)
    }

    /// `Ok` when every rule is one the writer holds in the write's namespace (cluster-wide when
    /// none); otherwise a refusal listing what is missing and saying `remedy`.
    fn covered(&self, write: &Write<'_>, rules: &[PolicyRule], remedy: &str) -> Result<(), Refusal> {
        let caller = write.caller;
        if caller.is_master() {
            return Ok(());
        }
        let granted: usize = rules.iter().map(coverage::permission_count).fold(0, usize::saturating_add);
        if granted > MAX_GRANTED {
            return Err(Refusal::Forbidden(format!(
                "user \"{}\" may not write a grant of {granted} permissions (more than {MAX_GRANTED}) without the escalate verb; split it into smaller grants",
                caller.user
            )));
        }
        let held = self.permissions.rules_for(caller, write.namespace);
        let held_size = held.iter().map(coverage::rule_size).fold(0, usize::saturating_add);
        if granted.saturating_mul(held_size) > MAX_CHECK_WORK {
            return Err(Refusal::Forbidden(format!(
                "user \"{}\" holds too many rules ({held_size} entries) to check a grant of {granted} permissions against; write it as someone who may escalate",
                caller.user
            )));
        }
        let missing: Vec<String> = rules
            .iter()
            .flat_map(coverage::permissions)
            .filter(|permission| !held.iter().any(|rule| coverage::covers(rule, permission)))
            .map(|permission| coverage::describe(&permission))
            .collect();
        if missing.is_empty() {
            return Ok(());
        }
        let mut listed = missing.iter().take(SHOWN).cloned().collect::<Vec<_>>().join("; ");
        if missing.len() > SHOWN {
            listed.push_str(&format!("; and {} more", missing.len() - SHOWN));
        }
        Err(Refusal::Forbidden(format!(
            "user \"{}\" (groups={:?}) is attempting to grant RBAC permissions not currently held ({remedy}): {listed}",
            caller.user, caller.groups,
        )))
    }
}

/// A field of the object as `T`; absent or null is the default. The Kind's validation has run,
/// so a field that does not decode is an invalid object all the same.
fn decode<T: serde::de::DeserializeOwned + Default>(write: &Write<'_>, field: &str) -> Result<T, Refusal> {
    match write.object.get(field) {
        None | Some(Value::Null) => Ok(T::default()),
        Some(value) => T::deserialize(value).map_err(|error| {
            Refusal::Invalid(vec![FieldError::invalid(
                field,
                "<value>",
                &format!("does not decode: {error}"),
            )])
        }),
    }
}

#[cfg(test)]
mod tests;
