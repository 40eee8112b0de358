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

/// What a node offers or what Applications ask of it: CPU in cores, memory in bytes. A side
/// left out is not counted (a node that reports no memory is not limited by it).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Resources {
    /// CPU, in cores.
    pub cpu: Option<f64>,
    /// Memory, in bytes.
    pub memory: Option<f64>,
}

/// The fleet as admission sees it: which Nodes exist, what each offers, what the Applications
/// already bound to each ask for, and which Services and Secrets the Applications name.
pub trait Fleet: Send + Sync {
    /// The node's `status.allocatable` when the Node exists (both sides `None` when it reports
    /// none yet); `None` when there is no Node of that name.
    fn allocatable(&self, node: &str) -> Option<Resources>;

    /// What the unfinished Applications bound to `node` request in all, leaving out the
    /// Application `namespace`/`name` (the one being written).
    fn requested_on(&self, node: &str, namespace: &str, name: &str) -> Resources;

    /// The names of the Applications in `namespace` whose `spec.serviceName` is `service`,
    /// sorted.
    fn members(&self, namespace: &str, service: &str) -> Vec<String>;

    /// The names of the Applications in `namespace` that need Secret `secret`: an environment
    /// variable (or a `key: "*"` import) names it without `optional: true`. Sorted.
    fn secret_users(&self, namespace: &str, secret: &str) -> Vec<String>;
}

/// A fleet with no Nodes and no Applications: every pin names a Node that does not exist.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoNodes;

impl Fleet for NoNodes {
    fn allocatable(&self, _node: &str) -> Option<Resources> {
        None
    }

    fn requested_on(&self, _node: &str, _namespace: &str, _name: &str) -> Resources {
        Resources::default()
    }

    fn members(&self, _namespace: &str, _service: &str) -> Vec<String> {
        Vec::new()
    }

    fn secret_users(&self, _namespace: &str, _secret: &str) -> Vec<String> {
        Vec::new()
    }
}
