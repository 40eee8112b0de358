//! Whether held rules cover the rules a role would grant: the RBAC half of escalation
//! prevention. A rule is split into the single permissions it grants, and each is checked
//! against the held rules the way a request would be decided.

use kayra_api::kinds::rbac::PolicyRule;

use crate::{Action, has, rule_allows};

/// A rule as the single permissions it grants, each one verb on one group, resource and name
/// (or one URL), so that coverage is checked one permission at a time. The permissions have no
/// namespace: the scope is the caller's to choose.
pub fn permissions(rule: &PolicyRule) -> Vec<Action> {
    let mut permissions = Vec::new();
    for verb in &rule.verbs {
        for url in &rule.non_resource_urls {
            permissions.push(Action::NonResource { verb: verb.clone(), path: url.clone() });
        }
        for api in &rule.apis {
            for resource in &rule.resources {
                let names: Vec<Option<String>> = if rule.resource_names.is_empty() {
                    vec![None]
                } else {
                    rule.resource_names.iter().cloned().map(Some).collect()
                };
                for name in names {
                    permissions.push(Action::Resource {
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
    permissions
}

/// Whether a held rule covers one permission a role would grant: as a request would be
/// decided, except that a wildcard resource in the permission (`*`, `*/status`, `apps/*`) is
/// covered only by `*` or the same wildcard.
pub fn covers(held: &PolicyRule, permission: &Action) -> bool {
    match permission {
        Action::Resource { verb, api, resource, name, .. } if resource.contains('*') => {
            has(&held.verbs, verb)
                && has(&held.apis, api)
                && held.resources.iter().any(|held| held == "*" || held == resource)
                && (held.resource_names.is_empty()
                    || name.as_ref().is_some_and(|n| held.resource_names.contains(n)))
        }
        _ => rule_allows(held, permission),
    }
}

/// How many single permissions a rule grants (what [`permissions`] would list), without
/// listing them; saturates rather than overflows.
pub fn permission_count(rule: &PolicyRule) -> usize {
    let names = rule.resource_names.len().max(1);
    let per_verb = rule
        .apis
        .len()
        .saturating_mul(rule.resources.len())
        .saturating_mul(names)
        .saturating_add(rule.non_resource_urls.len());
    rule.verbs.len().saturating_mul(per_verb)
}

/// How many entries a rule has: what checking one permission against it costs.
pub fn rule_size(rule: &PolicyRule) -> usize {
    [&rule.verbs, &rule.apis, &rule.resources, &rule.resource_names, &rule.non_resource_urls]
        .iter()
        .map(|list| list.len())
        .sum::<usize>()
        .max(1)
}

/// One permission as Kubernetes prints a rule: `{APIGroups:["g"], Resources:["r"], Verbs:["v"]}`.
pub fn describe(permission: &Action) -> String {
    match permission {
        Action::Resource { verb, api, resource, name, .. } => {
            let name = name.as_deref().map(|n| format!(" ResourceNames:[{n}]")).unwrap_or_default();
            format!("{{APIGroups:[{api:?}], Resources:[{resource:?}],{name} Verbs:[{verb:?}]}}")
        }
        Action::NonResource { verb, path } => format!("{{NonResourceURLs:[{path:?}], Verbs:[{verb:?}]}}"),
    }
}
