//! Expansion: an ApplicationSet and the Nodes it may spread over, rendered into the
//! Applications and Services it should have. No IO.
//!
//! Each component renders `<set>-<component>-<i>` for `scale.replicas`, `<set>-<component>-<node>`
//! for each matching schedulable node under `scale.nodeSpread` (pinned there), or one
//! `<set>-<component>` with no scale. `common` is merged into every child (the child's own
//! values win; its env comes first), the reserved labels are stamped last, and each child
//! carries the set's controller owner reference and the hash of its rendered spec.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kayra_api::kinds::application::{Application, ApplicationSpec, Placement};
use kayra_api::kinds::applicationset::{
    ApplicationSet, OWNER_KIND, component_label, set_label, spec_hash_annotation,
};
use kayra_api::kinds::service::ServicePort;
use kayra_api::validation::{is_dns_label, is_dns_subdomain};

use crate::Error;

/// At most this many Applications per set.
pub const MAX_CHILDREN: usize = 500;

/// What the set's loop knows of a Node.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Node {
    /// Its name.
    pub name: String,
    /// Its labels.
    pub labels: BTreeMap<String, String>,
    /// Not cordoned.
    pub schedulable: bool,
    /// Its `Ready` condition is `True`.
    pub ready: bool,
}

/// One Application the set should have.
#[derive(Debug, Clone, PartialEq)]
pub struct Rendered {
    /// The component it comes from.
    pub component: String,
    /// The init step it belongs to (its component's place among the `restartPolicy: Never`
    /// components), if it is a job.
    pub init_step: Option<usize>,
    /// The Application: name, namespace, labels, annotations (the spec hash among them), owner
    /// reference and spec.
    pub application: Application,
    /// The hash of the rendered spec, as its annotation holds it.
    pub hash: String,
    /// Whether the set chose its node (`nodeSpread`); otherwise a node the scheduler chose is
    /// kept.
    pub pinned: bool,
}

impl Rendered {
    /// The Application's name.
    pub fn name(&self) -> &str {
        self.application.metadata.name.as_deref().unwrap_or_default()
    }

    /// The node its spec names, if any.
    pub fn node(&self) -> Option<&str> {
        self.application.bound_node()
    }
}

/// A Service the set renders for a component that declares ports.
#[derive(Debug, Clone, PartialEq)]
pub struct RenderedService {
    /// `<set>-<component>`.
    pub name: String,
    /// The component's ports.
    pub ports: Vec<ServicePort>,
}

/// Everything a set renders.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Rendering {
    /// The Applications, component by component, in name order within each.
    pub children: Vec<Rendered>,
    /// The Services, before the children that join them.
    pub services: Vec<RenderedService>,
}

/// The set's identity as its children name it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owner {
    /// The deployment's domain.
    pub domain: String,
    /// The set's namespace.
    pub namespace: String,
    /// The set's name.
    pub name: String,
    /// The set's uid.
    pub uid: String,
}

impl Owner {
    /// The set's controller owner reference.
    pub fn reference(&self) -> OwnerReference {
        OwnerReference {
            api_version: format!("fleet.{}/v1", self.domain),
            kind: OWNER_KIND.to_owned(),
            name: self.name.clone(),
            uid: self.uid.clone(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        }
    }
}

/// Renders `set` over `nodes`.
pub fn render(set: &ApplicationSet, owner: &Owner, nodes: &[Node]) -> Result<Rendering, Error> {
    let mut rendering = Rendering::default();
    let common = set.spec.common.clone().unwrap_or_default();
    let mut names = BTreeSet::new();
    let mut init_steps = 0;
    for component in &set.spec.applications {
        let job = component.spec.lifecycle.restart_policy.as_deref() == Some("Never");
        let init_step = job.then(|| {
            init_steps += 1;
            init_steps - 1
        });
        let base = format!("{}-{}", owner.name, component.name);
        let mut spec = component.spec.clone();
        let own: BTreeSet<String> =
            spec.env.iter().map(|e| e.name.clone()).filter(|n| !n.is_empty()).collect();
        spec.env.extend(common.env.iter().filter(|e| e.name.is_empty() || !own.contains(&e.name)).cloned());
        if !job && !spec.ports.is_empty() && spec.service_name.as_deref().is_none_or(str::is_empty) {
            let name = bounded(&base, 63);
            if !is_dns_label(&name) {
                return Err(Error::Render(format!("the Service name \"{name}\" is not a DNS label")));
            }
            let several = spec.ports.len() > 1;
            let ports = spec
                .ports
                .iter()
                .map(|port| ServicePort {
                    name: port.name.clone().or_else(|| several.then(|| format!("port-{}", port.port))),
                    port: port.port,
                    target_port: None,
                    target_name: None,
                    protocol: Some(port.protocol.clone()).filter(|p| !p.is_empty()),
                })
                .collect();
            spec.service_name = Some(name.clone());
            rendering.services.push(RenderedService { name, ports });
        }
        let mut labels = common.labels.clone();
        let mut annotations = common.annotations.clone();
        if let Some(metadata) = &component.metadata {
            labels.extend(metadata.labels.clone());
            annotations.extend(metadata.annotations.clone());
        }
        labels.insert(set_label(&owner.domain), owner.name.clone());
        labels.insert(component_label(&owner.domain), component.name.clone());
        let instances: Vec<(String, Option<String>)> = match &component.scale {
            Some(scale) if scale.node_spread.is_some() => {
                let selector =
                    &scale.node_spread.as_ref().map(|s| s.node_selector.clone()).unwrap_or_default();
                let mut matching: Vec<&Node> = nodes
                    .iter()
                    .filter(|n| n.schedulable && selector.iter().all(|(k, v)| n.labels.get(k) == Some(v)))
                    .collect();
                matching.sort_by(|a, b| a.name.cmp(&b.name));
                matching.into_iter().map(|n| (format!("{base}-{}", n.name), Some(n.name.clone()))).collect()
            }
            Some(scale) => {
                let replicas = usize::try_from(scale.replicas.unwrap_or(1)).unwrap_or(0);
                if replicas > MAX_CHILDREN {
                    return Err(too_many(replicas));
                }
                (0..replicas).map(|i| (format!("{base}-{i}"), None)).collect()
            }
            None => vec![(base.clone(), None)],
        };
        for (name, node) in instances {
            let name = child_name(&name);
            if !is_dns_subdomain(&name) {
                return Err(Error::Render(format!("the Application name \"{name}\" is not a DNS subdomain")));
            }
            if !names.insert(name.clone()) {
                return Err(Error::Render(format!("two children would be named \"{name}\"")));
            }
            if names.len() > MAX_CHILDREN {
                return Err(too_many(names.len()));
            }
            let mut spec = spec.clone();
            let pinned = node.is_some();
            if let Some(node) = node {
                spec.placement.get_or_insert_with(Placement::default).node_name = Some(node);
            }
            let hash = hash(&spec);
            let mut annotations = annotations.clone();
            annotations.insert(spec_hash_annotation(&owner.domain), hash.clone());
            let application = Application {
                api_version: Some(format!("fleet.{}/v1", owner.domain)),
                kind: Some("Application".to_owned()),
                metadata: ObjectMeta {
                    name: Some(name),
                    namespace: Some(owner.namespace.clone()),
                    labels: Some(labels.clone()),
                    annotations: Some(annotations),
                    owner_references: Some(vec![owner.reference()]),
                    ..ObjectMeta::default()
                },
                spec,
                status: None,
            };
            rendering.children.push(Rendered {
                component: component.name.clone(),
                init_step,
                application,
                hash,
                pinned,
            });
        }
    }
    Ok(rendering)
}

fn too_many(count: usize) -> Error {
    Error::Render(format!("the set renders {count} Applications; at most {MAX_CHILDREN} are allowed"))
}

/// The sha256 of a spec's JSON, in hex.
pub fn hash(spec: &ApplicationSpec) -> String {
    let bytes = serde_json::to_vec(spec).expect("a spec serialises");
    let digest = ring::digest::digest(&ring::digest::SHA256, &bytes);
    digest.as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

/// Lower case, and every character a DNS subdomain does not allow turned into `-`.
fn sanitize(name: &str) -> String {
    let lower: String = name
        .chars()
        .map(|c| c.to_ascii_lowercase())
        .map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '.' { c } else { '-' })
        .collect();
    lower.trim_matches(|c| c == '-' || c == '.').to_owned()
}

/// A child's name: `name` made a DNS subdomain; one still too long (in all, or in one of its
/// dot-separated labels) becomes a single label of its head and a hash of the whole.
fn child_name(name: &str) -> String {
    let name = sanitize(name);
    if is_dns_subdomain(&name) {
        return name;
    }
    bounded(&name.replace('.', "-"), 63)
}

/// `name`, or when longer than `max` its head and a hash of the whole, `max` long at most.
fn bounded(name: &str, max: usize) -> String {
    if name.len() <= max {
        return name.to_owned();
    }
    let digest = ring::digest::digest(&ring::digest::SHA256, name.as_bytes());
    let suffix: String = digest.as_ref().iter().take(5).map(|b| format!("{b:02x}")).collect();
    let head = name[..max - suffix.len() - 1].trim_end_matches(['-', '.']);
    format!("{head}-{suffix}")
}

#[cfg(test)]
mod tests;
