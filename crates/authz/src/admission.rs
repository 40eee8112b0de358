//! What a writer may store, beyond whether it may write at all: RBAC objects grant only what
//! their writer already holds (escalation prevention), workloads reference only the Secrets and
//! Services their writer may read, and a node writes only its own Node.

use kayra_api::kinds::rbac::{PolicyRule, RoleRef};
use serde_json::{Map, Value};

use crate::{Action, Caller, Rbac, has, rule_allows};

/// The group of node identities (`system:node:<name>`).
pub const NODES: &str = "system:nodes";

/// The most single permissions (verb × group × resource × name, or verb × URL) a role written
/// by someone who may not `escalate` may spell out; checking more would let one write cost
/// unbounded work.
pub const MAX_GRANTED: usize = 10_000;

/// The most comparisons (permissions to grant × entries of the rules the writer holds) one
/// escalation check may make; beyond it the write is refused rather than checked.
pub const MAX_CHECK_WORK: usize = 20_000_000;

/// The most distinct Secrets and Services one workload may name.
pub const MAX_REFERENCES: usize = 256;

/// A write the admission decides on: the resource written, and the object as it would be
/// stored.
#[derive(Debug, Clone, Copy)]
pub struct Write<'a> {
    /// The API group; empty for core.
    pub api: &'a str,
    /// The resource's plural.
    pub resource: &'a str,
    /// The namespace, for namespaced resources.
    pub namespace: Option<&'a str>,
    /// The object's name.
    pub name: &'a str,
    /// The object.
    pub object: &'a Map<String, Value>,
    /// What it replaces, on update.
    pub old: Option<&'a Map<String, Value>>,
}

/// Decides writes for one caller over one RBAC snapshot. `domain` is the deployment's domain:
/// RBAC Kinds live in `authorization.<domain>`, workloads in `fleet.<domain>`.
#[derive(Debug, Clone, Copy)]
pub struct Admission<'a> {
    /// The RBAC state.
    pub rbac: &'a Rbac,
    /// The writer.
    pub caller: &'a Caller,
    /// The deployment's domain.
    pub domain: &'a str,
}

impl Admission<'_> {
    /// `Err` with a Kubernetes-style message when the write would let the caller exceed its
    /// own rights.
    pub fn admit(&self, write: &Write<'_>) -> Result<(), String> {
        let authorization = format!("authorization.{}", self.domain);
        let fleet = format!("fleet.{}", self.domain);
        match (write.api, write.resource) {
            (api, "roles" | "clusterroles") if api == authorization => {
                let rules = decode::<Vec<PolicyRule>>(write.object.get("rules"))?;
                self.grant_rules(write, &authorization, &rules)
            }
            (api, "rolebindings" | "clusterrolebindings") if api == authorization => {
                let role_ref = decode::<RoleRef>(write.object.get("roleRef"))?;
                self.bind(write, &authorization, &role_ref)
            }
            (api, "applications" | "applicationsets") if api == fleet => self.references(write, &fleet),
            ("", "nodes") => self.own_node(write),
            _ => Ok(()),
        }
    }

    /// A Role or ClusterRole may hold only rules its writer holds in that scope, unless the
    /// writer may `escalate` it.
    fn grant_rules(&self, write: &Write<'_>, group: &str, rules: &[PolicyRule]) -> Result<(), String> {
        let escalate = Action::Resource {
            verb: "escalate".to_owned(),
            api: group.to_owned(),
            resource: write.resource.to_owned(),
            namespace: write.namespace.map(str::to_owned),
            name: Some(write.name.to_owned()),
        };
        if self.rbac.allows(self.caller, &escalate) {
            return Ok(());
        }
        self.covered(write.namespace, rules)
    }

    /// A binding may grant only a role whose rules its writer holds in that scope, unless the
    /// writer may `bind` that role.
    fn bind(&self, write: &Write<'_>, group: &str, role_ref: &RoleRef) -> Result<(), String> {
        let (resource, rules) = match role_ref.kind.as_str() {
            "ClusterRole" => ("clusterroles", self.rbac.cluster_role(&role_ref.name)),
            "Role" if write.namespace.is_some() => {
                ("roles", self.rbac.role(write.namespace.unwrap_or_default(), &role_ref.name))
            }
            other => return Err(format!("roleRef.kind {other:?} cannot be bound here")),
        };
        let bind = Action::Resource {
            verb: "bind".to_owned(),
            api: group.to_owned(),
            resource: resource.to_owned(),
            namespace: write.namespace.map(str::to_owned),
            name: Some(role_ref.name.clone()),
        };
        if self.rbac.allows(self.caller, &bind) {
            return Ok(());
        }
        let rules = rules.ok_or_else(|| {
            format!(
                "user \"{}\" cannot bind {} \"{}\": it does not exist, and only a caller that may bind it may refer to it",
                self.caller.user, role_ref.kind, role_ref.name
            )
        })?;
        self.covered(write.namespace, rules)
    }

    /// `Ok` when every rule is one the caller holds in `namespace` (cluster-wide when `None`).
    fn covered(&self, namespace: Option<&str>, rules: &[PolicyRule]) -> Result<(), String> {
        if self.caller.is_master() {
            return Ok(());
        }
        let granted: usize = rules.iter().map(count).fold(0, usize::saturating_add);
        if granted > MAX_GRANTED {
            return Err(format!(
                "user \"{}\" may not write a grant of {granted} permissions (more than {MAX_GRANTED}) without the escalate verb",
                self.caller.user
            ));
        }
        let held = self.rbac.rules_for(self.caller, namespace);
        let held_size = held.iter().map(size).fold(0, usize::saturating_add);
        if granted.saturating_mul(held_size) > MAX_CHECK_WORK {
            return Err(format!(
                "user \"{}\" holds too many rules ({held_size} entries) to check a grant of {granted} permissions against; write it as someone who may escalate",
                self.caller.user
            ));
        }
        let missing: Vec<String> = rules
            .iter()
            .flat_map(atoms)
            .filter(|atom| !held.iter().any(|rule| covers(rule, atom)))
            .map(|atom| describe(&atom))
            .collect();
        if missing.is_empty() {
            return Ok(());
        }
        const SHOWN: usize = 10;
        let mut listed = missing.iter().take(SHOWN).cloned().collect::<Vec<_>>().join("; ");
        if missing.len() > SHOWN {
            listed.push_str(&format!("; and {} more", missing.len() - SHOWN));
        }
        Err(format!(
            "user \"{}\" (groups={:?}) is attempting to grant RBAC permissions not currently held: {listed}",
            self.caller.user, self.caller.groups,
        ))
    }

    /// Every Secret (`secretRef.name`) and Service (`serviceName`) a workload names, at any
    /// depth of its spec, must be one the caller may `get`.
    fn references(&self, write: &Write<'_>, fleet: &str) -> Result<(), String> {
        let mut named = Vec::new();
        if let Some(spec) = write.object.get("spec") {
            collect_references(spec, &mut named);
        }
        named.sort_unstable();
        named.dedup();
        if named.len() > MAX_REFERENCES {
            return Err(format!("a workload may name at most {MAX_REFERENCES} Secrets and Services"));
        }
        for (resource, name) in named {
            let get = Action::Resource {
                verb: "get".to_owned(),
                api: fleet.to_owned(),
                resource: resource.to_owned(),
                namespace: write.namespace.map(str::to_owned),
                name: Some(name.clone()),
            };
            if !self.rbac.allows(self.caller, &get) {
                return Err(format!(
                    "user \"{}\" cannot refer to {resource} \"{name}\": referring to it needs get on it",
                    self.caller.user
                ));
            }
        }
        Ok(())
    }

    /// A node identity writes only the Node of its own name, and never its spec or labels
    /// (what scheduling reads): none on create, the stored ones on update.
    fn own_node(&self, write: &Write<'_>) -> Result<(), String> {
        let Some(own) = self.caller.node_name() else { return Ok(()) };
        if own != write.name {
            return Err(format!(
                "node \"{own}\" may not write node \"{}\", only its own Node object",
                write.name
            ));
        }
        for (path, what) in [(&["spec"][..], "spec"), (&["metadata", "labels"][..], "labels")] {
            if part(Some(write.object), path) != part(write.old, path) {
                return Err(format!("node \"{own}\" may not set its own {what}"));
            }
        }
        Ok(())
    }
}

/// The value at `path` in `object`; absent, null and empty are all the empty object.
fn part(object: Option<&Map<String, Value>>, path: &[&str]) -> Value {
    let mut value = object.and_then(|object| object.get(path[0]));
    for key in &path[1..] {
        value = value.and_then(|value| value.get(key));
    }
    match value {
        None | Some(Value::Null) => Value::Object(Map::new()),
        Some(value) => value.clone(),
    }
}

fn decode<T: serde::de::DeserializeOwned + Default>(value: Option<&Value>) -> Result<T, String> {
    match value {
        None | Some(Value::Null) => Ok(T::default()),
        Some(value) => T::deserialize(value).map_err(|error| format!("the object does not decode: {error}")),
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

/// A rule as the single permissions it grants, each one rule with one verb, group, resource
/// and name (or URL), so that coverage is checked one permission at a time.
fn atoms(rule: &PolicyRule) -> Vec<Action> {
    let mut atoms = Vec::new();
    for verb in &rule.verbs {
        for url in &rule.non_resource_urls {
            atoms.push(Action::NonResource { verb: verb.clone(), path: url.clone() });
        }
        for api in &rule.apis {
            for resource in &rule.resources {
                let names: Vec<Option<String>> = if rule.resource_names.is_empty() {
                    vec![None]
                } else {
                    rule.resource_names.iter().cloned().map(Some).collect()
                };
                for name in names {
                    atoms.push(Action::Resource {
                        verb: verb.clone(),
                        api: api.clone(),
                        resource: resource.clone(),
                        namespace: None,
                        name,
                    });
                }
            }
        }
    }
    atoms
}

/// Whether a held rule covers one permission a role would grant: as a request would be
/// decided, except that a wildcard resource in the permission (`*`, `*/status`, `apps/*`) is
/// covered only by `*` or the same wildcard.
fn covers(rule: &PolicyRule, atom: &Action) -> bool {
    match atom {
        Action::Resource { verb, api, resource, name, .. } if resource.contains('*') => {
            has(&rule.verbs, verb)
                && has(&rule.apis, api)
                && rule.resources.iter().any(|held| held == "*" || held == resource)
                && (rule.resource_names.is_empty()
                    || name.as_ref().is_some_and(|n| rule.resource_names.contains(n)))
        }
        _ => rule_allows(rule, atom),
    }
}

/// How many entries a rule has: what checking a permission against it costs.
fn size(rule: &PolicyRule) -> usize {
    [&rule.verbs, &rule.apis, &rule.resources, &rule.resource_names, &rule.non_resource_urls]
        .iter()
        .map(|list| list.len())
        .sum::<usize>()
        .max(1)
}

/// How many single permissions a rule grants (what [`atoms`] would list).
fn count(rule: &PolicyRule) -> usize {
    let names = rule.resource_names.len().max(1);
    let per_verb = rule
        .apis
        .len()
        .saturating_mul(rule.resources.len())
        .saturating_mul(names)
        .saturating_add(rule.non_resource_urls.len());
    rule.verbs.len().saturating_mul(per_verb)
}

fn describe(atom: &Action) -> String {
    match atom {
        Action::Resource { verb, api, resource, name, .. } => {
            let name = name.as_deref().map(|n| format!(" ResourceNames:[{n}]")).unwrap_or_default();
            format!("{{APIGroups:[{api:?}], Resources:[{resource:?}],{name} Verbs:[{verb:?}]}}")
        }
        Action::NonResource { verb, path } => format!("{{NonResourceURLs:[{path:?}], Verbs:[{verb:?}]}}"),
    }
}
