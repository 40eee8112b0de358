//! What the projection serves, computed from Services, their member Applications and Nodes:
//! pure. Each part carries the index at which it last changed, so a blocking query wakes only
//! when what it reads changed.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Node;
use kayra_api::kinds::ConditionType;
use kayra_api::kinds::application::Application;
use kayra_api::kinds::service::Service;
use kayra_endpoints::compute::{node_address, ports};

/// A check's status, as Consul spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Health {
    /// `Ready` is `True`.
    Passing,
    /// `Ready` is `Unknown`, or not reported yet.
    Warning,
    /// `Ready` is `False`.
    Critical,
}

impl Health {
    /// The word Consul sends.
    pub fn as_str(self) -> &'static str {
        match self {
            Health::Passing => "passing",
            Health::Warning => "warning",
            Health::Critical => "critical",
        }
    }

    /// From a `Ready` condition's status.
    fn of_ready(status: Option<&str>) -> Health {
        match status {
            Some("True") => Health::Passing,
            Some("False") => Health::Critical,
            _ => Health::Warning,
        }
    }
}

/// A Node, as a Consul node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsulNode {
    /// Its uid: Consul's node `ID`.
    pub id: String,
    /// Its name.
    pub name: String,
    /// Its address (`InternalIP`, else its first).
    pub address: String,
    /// Its readiness, as the node check's status.
    pub health: Health,
}

/// One member of a Service, as a Consul service instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Instance {
    /// The member Application's name: the instance's `ID`.
    pub id: String,
    /// The node it is bound to.
    pub node: ConsulNode,
    /// The first of the Service's ports as the member serves it; 0 when it has none.
    pub port: i64,
    /// The member's readiness, as its service check's status.
    pub health: Health,
}

/// A Service and its members.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ServiceView {
    /// `spec.tags`.
    pub tags: Vec<String>,
    /// `spec.meta`.
    pub meta: BTreeMap<String, String>,
    /// Its members bound to a node that has an address, by name.
    pub instances: Vec<Instance>,
    /// When it first appeared.
    pub create_index: u64,
    /// When it last changed.
    pub index: u64,
}

impl ServiceView {
    fn same_as(&self, other: &ServiceView) -> bool {
        self.tags == other.tags && self.meta == other.meta && self.instances == other.instances
    }
}

/// One namespace's Services.
#[derive(Debug, Clone, Default)]
pub struct NamespaceView {
    /// Its Services by name.
    pub services: BTreeMap<String, ServiceView>,
    /// When its Service names or their tags last changed (`/v1/catalog/services`).
    pub catalog_index: u64,
    /// When any of its Services, members or checks last changed (`/v1/health/state/*`).
    pub health_index: u64,
}

impl NamespaceView {
    /// Each Service's name and tags: what `/v1/catalog/services` answers. As in Consul, where a
    /// service exists through its instances, a Service with no member on a node is not listed.
    pub fn catalog(&self) -> BTreeMap<&str, &[String]> {
        self.services
            .iter()
            .filter(|(_, view)| !view.instances.is_empty())
            .map(|(name, view)| (name.as_str(), view.tags.as_slice()))
            .collect()
    }

    /// Service `name` computed again from `service` (none when it is gone) and its `members`
    /// at `revision`, with `nodes` by name; the namespace's indexes move when what they cover
    /// changed. Answers whether anything served changed.
    pub fn update(
        &mut self,
        name: &str,
        service: Option<&Service>,
        members: &[&Application],
        nodes: &BTreeMap<String, ConsulNode>,
        revision: u64,
    ) -> bool {
        let listed =
            |view: Option<&ServiceView>| view.filter(|v| !v.instances.is_empty()).map(|v| v.tags.clone());
        let old = self.services.get(name);
        let was_listed = listed(old);
        let view = service.map(|service| {
            let mut view = ServiceView {
                tags: service.spec.tags.clone(),
                meta: service.spec.meta.clone(),
                instances: instances(service, members, nodes),
                create_index: revision,
                index: revision,
            };
            if let Some(old) = old {
                view.create_index = old.create_index;
                if old.same_as(&view) {
                    view.index = old.index;
                }
            }
            view
        });
        let changed = match (old, &view) {
            (None, None) => false,
            (Some(old), Some(view)) => old.index != view.index,
            _ => true,
        };
        if listed(view.as_ref()) != was_listed {
            self.catalog_index = revision;
        }
        if changed {
            self.health_index = revision;
        }
        match view {
            Some(view) => self.services.insert(name.to_owned(), view),
            None => self.services.remove(name),
        };
        changed
    }

    /// This namespace computed again from its `services` and `applications` at `revision`,
    /// with `nodes` by name: every part that changed takes `revision` as its index.
    pub fn next(
        &self,
        services: &[Service],
        applications: &[Application],
        nodes: &BTreeMap<String, ConsulNode>,
        revision: u64,
    ) -> NamespaceView {
        let mut members: BTreeMap<&str, Vec<&Application>> = BTreeMap::new();
        for application in applications {
            if let Some(service) = application.spec.service_name.as_deref() {
                members.entry(service).or_default().push(application);
            }
        }
        let mut next = NamespaceView {
            catalog_index: self.catalog_index,
            health_index: self.health_index,
            ..Default::default()
        };
        for service in services {
            let Some(name) = service.metadata.name.clone() else { continue };
            let joined = members.get(name.as_str()).map(Vec::as_slice).unwrap_or_default();
            let mut view = ServiceView {
                tags: service.spec.tags.clone(),
                meta: service.spec.meta.clone(),
                instances: instances(service, joined, nodes),
                create_index: revision,
                index: revision,
            };
            if let Some(old) = self.services.get(&name) {
                view.create_index = old.create_index;
                if old.same_as(&view) {
                    view.index = old.index;
                }
            }
            next.services.insert(name, view);
        }
        if next.catalog() != self.catalog() {
            next.catalog_index = revision;
        }
        let changed = next.services.len() != self.services.len()
            || next
                .services
                .iter()
                .any(|(name, view)| self.services.get(name).is_none_or(|old| old.index != view.index));
        if changed {
            next.health_index = revision;
        }
        next
    }
}

/// The members of `service` bound to a node that has an address, as instances.
fn instances(
    service: &Service,
    members: &[&Application],
    nodes: &BTreeMap<String, ConsulNode>,
) -> Vec<Instance> {
    let mut instances: Vec<Instance> = members
        .iter()
        .filter_map(|member| {
            let node = nodes.get(member.bound_node()?)?;
            let ready = ConditionType::Ready.as_str();
            let status = member.status.as_ref().and_then(|status| {
                status.conditions.iter().find(|condition| condition.type_ == ready).map(|c| c.status.as_str())
            });
            Some(Instance {
                id: member.metadata.name.clone()?,
                node: node.clone(),
                port: ports(&service.spec, member).first().map_or(0, |port| port.port),
                health: Health::of_ready(status),
            })
        })
        .collect();
    instances.sort_by(|a, b| a.id.cmp(&b.id));
    instances
}

/// The Nodes that have an address, as Consul nodes, by name.
pub fn consul_nodes<'a>(nodes: impl IntoIterator<Item = &'a Node>) -> BTreeMap<String, ConsulNode> {
    nodes
        .into_iter()
        .filter_map(|node| {
            let name = node.metadata.name.clone()?;
            let ready = node.status.as_ref().and_then(|status| {
                status.conditions.as_ref()?.iter().find(|c| c.type_ == "Ready").map(|c| c.status.as_str())
            });
            let consul = ConsulNode {
                id: node.metadata.uid.clone().unwrap_or_else(|| name.clone()),
                address: node_address(node)?,
                health: Health::of_ready(ready),
                name: name.clone(),
            };
            Some((name, consul))
        })
        .collect()
}

/// Everything the projection serves.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    /// The namespaces that have (or had) Services.
    pub namespaces: BTreeMap<String, NamespaceView>,
    /// The Nodes, by name.
    pub nodes: BTreeMap<String, ConsulNode>,
    /// When the Nodes last changed.
    pub nodes_index: u64,
    /// The index of what was never there: the revision the projection first read at.
    pub base_index: u64,
}

impl Snapshot {
    /// The index of a namespace's part, or of the snapshot's start for one never seen.
    pub fn namespace_index(&self, namespace: &str, part: impl Fn(&NamespaceView) -> u64) -> u64 {
        self.namespaces.get(namespace).map_or(self.base_index, part).max(1)
    }

    /// The index of one Service's members and checks.
    pub fn service_index(&self, namespace: &str, service: &str) -> u64 {
        let namespace_view = self.namespaces.get(namespace);
        let service_view = namespace_view.and_then(|view| view.services.get(service));
        // A Service that went away changed its namespace's catalog when it did.
        service_view
            .map(|view| view.index)
            .or(namespace_view.map(|view| view.catalog_index))
            .unwrap_or(self.base_index)
            .max(1)
    }
}

#[cfg(test)]
mod tests;
