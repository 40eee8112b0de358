//! What a caller may do: Kubernetes RBAC over the stored Roles, ClusterRoles, RoleBindings and
//! ClusterRoleBindings, compiled into an index so that a decision is a pure function of the
//! caller and the request, with no store read.
//!
//! Start at [`Rbac`]: build it from the stored objects, then ask [`Rbac::allows`]. This crate
//! does no I/O and knows nothing of HTTP; keeping the index current is its caller's job. What a
//! writer may store (escalation prevention and the like) is `kayra-admission`'s; [`coverage`]
//! is the RBAC arithmetic it needs.

use std::collections::{HashMap, HashSet};

use kayra_api::kinds::rbac::{ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, Subject};

pub mod coverage;

/// The group whose members may do everything, bindings or not.
pub const MASTERS: &str = "system:masters";

/// The group of node identities (`system:node:<name>`).
pub const NODES: &str = "system:nodes";

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

impl Action {
    /// Why `user` may not do this, in Kubernetes' words: `applications.fleet.example.com "web"
    /// is forbidden: User "alice" cannot get resource "applications" in API group
    /// "fleet.example.com" in the namespace "demo"`, or `forbidden: User "alice" cannot get
    /// path "/metrics"`. Every refusal of an action says it this way.
    pub fn refusal(&self, user: &str) -> String {
        match self {
            Action::NonResource { verb, path } => {
                format!("forbidden: User \"{user}\" cannot {verb} path \"{path}\"")
            }
            Action::Resource { verb, api, resource, namespace, name } => {
                let plural = resource.split('/').next().unwrap_or(resource);
                let qualified = if api.is_empty() { plural.to_owned() } else { format!("{plural}.{api}") };
                let subject = match name {
                    Some(name) => format!("{qualified} \"{name}\" is forbidden"),
                    None => format!("{qualified} is forbidden"),
                };
                let scope = match namespace {
                    Some(namespace) => format!("in the namespace \"{namespace}\""),
                    None => "at the cluster scope".to_owned(),
                };
                format!(
                    "{subject}: User \"{user}\" cannot {verb} resource \"{resource}\" in API group \"{api}\" {scope}"
                )
            }
        }
    }
}

/// The compiled RBAC state: roles by name, bindings by scope and subject, and the namespaces
/// that exist. A decision looks up the caller's user and groups; it never scans bindings.
#[derive(Debug, Clone, Default)]
pub struct Rbac {
    cluster_roles: HashMap<String, Vec<PolicyRule>>,
    roles: HashMap<(String, String), Vec<PolicyRule>>,
    /// ClusterRole names by subject, from ClusterRoleBindings.
    cluster_bindings: BySubject<String>,
    /// By namespace: role names by subject, each a ClusterRole (`true`) or a Role there.
    bindings: HashMap<String, BySubject<(String, bool)>>,
    namespaces: HashSet<String>,
}

/// What bindings grant, by whom they name: users (service accounts are users named
/// `system:serviceaccount:<namespace>:<name>`) and groups.
#[derive(Debug, Clone)]
struct BySubject<T> {
    users: HashMap<String, Vec<T>>,
    groups: HashMap<String, Vec<T>>,
}

impl<T> Default for BySubject<T> {
    fn default() -> Self {
        BySubject { users: HashMap::new(), groups: HashMap::new() }
    }
}

impl<T> BySubject<T> {
    /// Records `grant` for a binding's subject; a ServiceAccount without a namespace means
    /// the binding's.
    fn add(&mut self, subject: &Subject, binding_namespace: Option<&str>, grant: T) {
        let (map, name) = match subject.kind.as_str() {
            "User" => (&mut self.users, subject.name.clone()),
            "Group" => (&mut self.groups, subject.name.clone()),
            "ServiceAccount" => {
                let namespace = subject.namespace.as_deref().or(binding_namespace).unwrap_or_default();
                (&mut self.users, format!("system:serviceaccount:{namespace}:{}", subject.name))
            }
            _ => return,
        };
        map.entry(name).or_default().push(grant);
    }

    /// Everything granted to the caller's user or any of its groups.
    fn of<'a>(&'a self, caller: &'a Caller) -> impl Iterator<Item = &'a T> {
        let user = self.users.get(&caller.user).into_iter().flatten();
        user.chain(caller.groups.iter().filter_map(|group| self.groups.get(group)).flatten())
    }

    /// Whether anything is granted to the caller.
    fn names(&self, caller: &Caller) -> bool {
        self.of(caller).next().is_some()
    }
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
        if binding.role_ref.kind != "ClusterRole" {
            return;
        }
        for subject in &binding.subjects {
            self.cluster_bindings.add(subject, None, binding.role_ref.name.clone());
        }
    }

    /// Adds a RoleBinding.
    pub fn add_binding(&mut self, binding: RoleBinding) {
        let namespace = binding.metadata.namespace.unwrap_or_default();
        let cluster_role = binding.role_ref.kind == "ClusterRole";
        if !cluster_role && binding.role_ref.kind != "Role" {
            return;
        }
        let by_subject = self.bindings.entry(namespace.clone()).or_default();
        for subject in &binding.subjects {
            by_subject.add(subject, Some(&namespace), (binding.role_ref.name.clone(), cluster_role));
        }
    }

    /// Records that a namespace exists: a RoleBinding in a namespace that does not grants
    /// nothing.
    pub fn add_namespace(&mut self, name: &str) {
        self.namespaces.insert(name.to_owned());
    }

    /// Whether `caller` may do `action`.
    pub fn allows(&self, caller: &Caller, action: &Action) -> bool {
        if caller.is_master() {
            return true;
        }
        // A node reaches its own Node and nothing of another's: not even a read. Without a
        // name (a list or watch that names none through `metadata.name`), it would see them all.
        if let Action::Resource { verb, api, resource, name, .. } = action
            && api.is_empty()
            && (resource == "nodes" || resource == "nodes/status")
            && let Some(own) = caller.node_name()
        {
            let elsewhere = match name {
                Some(name) => name != own,
                None => matches!(verb.as_str(), "list" | "watch" | "deletecollection"),
            };
            if elsewhere {
                return false;
            }
        }
        let namespace = match action {
            Action::Resource { namespace, .. } => namespace.as_deref(),
            Action::NonResource { .. } => None,
        };
        self.granted(caller, namespace).any(|rule| rule_allows(rule, action))
    }

    /// Every rule that applies to `caller` in `namespace`: those of its cluster bindings, and
    /// with a namespace (that exists) those of its bindings there. For `system:masters`, one
    /// rule granting everything.
    pub fn rules_for(&self, caller: &Caller, namespace: Option<&str>) -> Vec<PolicyRule> {
        if caller.is_master() {
            return vec![
                PolicyRule {
                    apis: vec!["*".to_owned()],
                    resources: vec!["*".to_owned()],
                    verbs: vec!["*".to_owned()],
                    ..PolicyRule::default()
                },
                PolicyRule {
                    non_resource_urls: vec!["*".to_owned()],
                    verbs: vec!["*".to_owned()],
                    ..PolicyRule::default()
                },
            ];
        }
        self.granted(caller, namespace).cloned().collect()
    }

    /// The existing namespaces in which a RoleBinding names `caller`.
    pub fn bound_namespaces(&self, caller: &Caller) -> HashSet<String> {
        self.bindings
            .iter()
            .filter(|(namespace, _)| self.namespaces.contains(*namespace))
            .filter(|(_, by_subject)| by_subject.names(caller))
            .map(|(namespace, _)| namespace.clone())
            .collect()
    }

    /// The rules of a ClusterRole.
    pub fn cluster_role(&self, name: &str) -> Option<&[PolicyRule]> {
        self.cluster_roles.get(name).map(Vec::as_slice)
    }

    /// The rules of a Role.
    pub fn role(&self, namespace: &str, name: &str) -> Option<&[PolicyRule]> {
        self.roles.get(&(namespace.to_owned(), name.to_owned())).map(Vec::as_slice)
    }

    /// The rules granted to `caller` through cluster bindings, then, for an existing
    /// namespace, through the bindings in it.
    fn granted<'a>(
        &'a self,
        caller: &'a Caller,
        namespace: Option<&'a str>,
    ) -> impl Iterator<Item = &'a PolicyRule> {
        let cluster =
            self.cluster_bindings.of(caller).filter_map(|role| self.cluster_roles.get(role)).flatten();
        let local = namespace
            .filter(|namespace| self.namespaces.contains(*namespace))
            .and_then(|namespace| self.bindings.get(namespace).map(|by_subject| (namespace, by_subject)))
            .into_iter()
            .flat_map(move |(namespace, by_subject)| {
                by_subject
                    .of(caller)
                    .filter_map(move |(role, cluster_role)| {
                        if *cluster_role {
                            self.cluster_roles.get(role)
                        } else {
                            self.roles.get(&(namespace.to_owned(), role.clone()))
                        }
                    })
                    .flatten()
                    .filter(|rule| rule.non_resource_urls.is_empty() || !rule.resources.is_empty())
            });
        cluster.chain(local)
    }
}

impl Caller {
    /// Whether the caller is in `system:masters`, which bypasses RBAC.
    pub fn is_master(&self) -> bool {
        self.groups.iter().any(|g| g == MASTERS)
    }

    /// The node a node identity (`system:node:<name>` in `system:nodes`) speaks for.
    pub fn node_name(&self) -> Option<&str> {
        self.user.strip_prefix("system:node:").filter(|_| self.groups.iter().any(|g| g == NODES))
    }
}

pub(crate) fn has(list: &[String], value: &str) -> bool {
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
