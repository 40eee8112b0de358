//! What the plugins read, in control-plane words: the RBAC state a write is decided against.
//! The compiled [`Rbac`] index is one; a server hands the chain its current snapshot.

use kayra_api::kinds::rbac::PolicyRule;
use kayra_authz::{Action, Caller, Rbac};

/// The permissions of the moment: what a caller may do and what the stored roles hold.
pub trait Permissions: Send + Sync {
    /// Whether `caller` may do `action`.
    fn allows(&self, caller: &Caller, action: &Action) -> bool;

    /// Every rule that applies to `caller` in `namespace` (cluster-wide when `None`).
    fn rules_for(&self, caller: &Caller, namespace: Option<&str>) -> Vec<PolicyRule>;

    /// The rules of a ClusterRole, when it exists.
    fn cluster_role(&self, name: &str) -> Option<&[PolicyRule]>;

    /// The rules of a Role, when it exists.
    fn role(&self, namespace: &str, name: &str) -> Option<&[PolicyRule]>;
}

impl Permissions for Rbac {
    fn allows(&self, caller: &Caller, action: &Action) -> bool {
        Rbac::allows(self, caller, action)
    }

    fn rules_for(&self, caller: &Caller, namespace: Option<&str>) -> Vec<PolicyRule> {
        Rbac::rules_for(self, caller, namespace)
    }

    fn cluster_role(&self, name: &str) -> Option<&[PolicyRule]> {
        Rbac::cluster_role(self, name)
    }

    fn role(&self, namespace: &str, name: &str) -> Option<&[PolicyRule]> {
        Rbac::role(self, namespace, name)
    }
}
