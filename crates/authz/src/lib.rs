//! What a caller may do: Kubernetes RBAC over the stored Roles, ClusterRoles, RoleBindings and
//! ClusterRoleBindings, compiled into an index so that a decision is a pure function of the
//! caller and the request, with no store read.
//!
//! Start at [`Rbac`]: build it from the stored objects, then ask [`Rbac::allows`]. This crate
//! does no I/O and knows nothing of HTTP; keeping the index current is its caller's job.

use std::collections::{HashMap, HashSet};

use kayra_api::kinds::rbac::{ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, Subject};

/// The group whose members may do everything, bindings or not.
pub const MASTERS: &str = "system:masters";

/// Who is asking.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    /// The user name.
    pub user: String,
    /// The groups.
    pub groups: Vec<String>,
}

/// What is asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// A verb on a resource.
    Resource {
        /// The verb (`get`, `list`, `watch`, `create`, `update`, `patch`, `delete`,
        /// `deletecollection`, or a custom one).
        verb: String,
        /// The API group; empty for core.
        api: String,
        /// The resource, with `/subresource` when one is addressed.
        resource: String,
        /// The namespace, for namespaced requests.
        namespace: Option<String>,
        /// The object's name, when one is addressed.
        name: Option<String>,
    },
    /// A verb (`get`, `post`...) on a path that is not a resource.
    NonResource {
        /// The verb.
        verb: String,
        /// The path.
        path: String,
    },
}

/// The compiled RBAC state: roles by name, bindings by scope, and the namespaces that exist.
#[derive(Debug, Clone, Default)]
pub struct Rbac {
    cluster_roles: HashMap<String, Vec<PolicyRule>>,
    roles: HashMap<(String, String), Vec<PolicyRule>>,
    cluster_bindings: Vec<(Vec<Subject>, String)>,
    bindings: HashMap<String, Vec<(Vec<Subject>, String, bool)>>,
    namespaces: HashSet<String>,
}

impl Rbac {
    /// Adds a ClusterRole.
    pub fn add_cluster_role(&mut self, role: ClusterRole) {
        let name = role.metadata.name.unwrap_or_default();
        self.cluster_roles.insert(name, role.rules);
    }

    /// Adds a Role.
    pub fn add_role(&mut self, role: Role) {
        let key = (role.metadata.namespace.unwrap_or_default(), role.metadata.name.unwrap_or_default());
        self.roles.insert(key, role.rules);
    }

    /// Adds a ClusterRoleBinding; one to anything but a ClusterRole grants nothing.
    pub fn add_cluster_binding(&mut self, binding: ClusterRoleBinding) {
        if binding.role_ref.kind == "ClusterRole" {
            self.cluster_bindings.push((binding.subjects, binding.role_ref.name));
        }
    }

    /// Adds a RoleBinding.
    pub fn add_binding(&mut self, binding: RoleBinding) {
        let namespace = binding.metadata.namespace.unwrap_or_default();
        let cluster_role = binding.role_ref.kind == "ClusterRole";
        if cluster_role || binding.role_ref.kind == "Role" {
            self.bindings.entry(namespace).or_default().push((
                binding.subjects,
                binding.role_ref.name,
                cluster_role,
            ));
        }
    }

    /// Records that a namespace exists: a RoleBinding in a namespace that does not grants
    /// nothing.
    pub fn add_namespace(&mut self, name: &str) {
        self.namespaces.insert(name.to_owned());
    }

    /// Whether `caller` may do `action`.
    pub fn allows(&self, caller: &Caller, action: &Action) -> bool {
        if caller.groups.iter().any(|g| g == MASTERS) {
            return true;
        }
        let cluster = self
            .cluster_bindings
            .iter()
            .filter(|(subjects, _)| binds(subjects, caller, None))
            .filter_map(|(_, role)| self.cluster_roles.get(role))
            .any(|rules| rules.iter().any(|rule| rule_allows(rule, action)));
        if cluster {
            return true;
        }
        let Action::Resource { namespace: Some(namespace), .. } = action else { return false };
        if !self.namespaces.contains(namespace) {
            return false;
        }
        self.bindings
            .get(namespace)
            .into_iter()
            .flatten()
            .filter(|(subjects, _, _)| binds(subjects, caller, Some(namespace)))
            .any(|(_, role, cluster_role)| {
                let rules = if *cluster_role {
                    self.cluster_roles.get(role)
                } else {
                    self.roles.get(&(namespace.clone(), role.clone()))
                };
                rules
                    .into_iter()
                    .flatten()
                    .any(|rule| matches!(action, Action::Resource { .. }) && rule_allows(rule, action))
            })
    }
}

/// Whether a binding's subjects include the caller. A ServiceAccount subject without a
/// namespace, in a RoleBinding, means the binding's namespace.
fn binds(subjects: &[Subject], caller: &Caller, binding_namespace: Option<&str>) -> bool {
    subjects.iter().any(|subject| match subject.kind.as_str() {
        "User" => subject.name == caller.user,
        "Group" => caller.groups.contains(&subject.name),
        "ServiceAccount" => {
            let namespace = subject.namespace.as_deref().or(binding_namespace).unwrap_or_default();
            caller.user == format!("system:serviceaccount:{namespace}:{}", subject.name)
        }
        _ => false,
    })
}

fn has(list: &[String], value: &str) -> bool {
    list.iter().any(|item| item == "*" || item == value)
}

fn rule_allows(rule: &PolicyRule, action: &Action) -> bool {
    match action {
        Action::Resource { verb, api, resource, name, .. } => {
            has(&rule.verbs, verb)
                && has(&rule.apis, api)
                && resource_matches(&rule.resources, resource)
                && (rule.resource_names.is_empty()
                    || name.as_ref().is_some_and(|n| rule.resource_names.contains(n)))
        }
        Action::NonResource { verb, path } => {
            has(&rule.verbs, verb)
                && rule.non_resource_urls.iter().any(|url| {
                    url == "*"
                        || url == path
                        || url.strip_suffix('*').is_some_and(|prefix| path.starts_with(prefix))
                })
        }
    }
}

/// `*`, the exact resource, `resource/*` for any of its subresources, `*/sub` for a
/// subresource of any resource.
fn resource_matches(rules: &[String], resource: &str) -> bool {
    let (base, sub) = match resource.split_once('/') {
        Some((base, sub)) => (base, Some(sub)),
        None => (resource, None),
    };
    rules.iter().any(|rule| {
        rule == "*"
            || rule == resource
            || (sub.is_some() && rule.strip_suffix("/*") == Some(base))
            || sub.is_some_and(|sub| rule.strip_prefix("*/") == Some(sub))
    })
}

#[cfg(test)]
mod tests;
