//! The JSON Consul answers, field for field as its clients decode it (PascalCase keys, `[]`
//! and `{}` rather than null), built from the projection's model.

use serde_json::{Value, json};

use crate::model::{ConsulNode, Health, Instance, ServiceView};

/// Where a row belongs: its datacenter and namespace.
#[derive(Debug, Clone, Copy)]
pub struct Place<'a> {
    /// The one datacenter.
    pub datacenter: &'a str,
    /// The namespace read.
    pub namespace: &'a str,
}

fn tagged(address: &str) -> Value {
    json!({"lan": address, "lan_ipv4": address, "wan": address, "wan_ipv4": address})
}

/// A node, as `/v1/catalog/nodes` lists it and `/v1/health/service` nests it.
pub fn node(node: &ConsulNode, place: Place<'_>, index: u64) -> Value {
    json!({
        "ID": node.id, "Node": node.name, "Address": node.address, "Datacenter": place.datacenter,
        "TaggedAddresses": tagged(&node.address), "Meta": {"consul-network-segment": ""},
        "CreateIndex": index, "ModifyIndex": index,
    })
}

fn service_addresses(instance: &Instance) -> Value {
    let address = json!({"Address": instance.node.address, "Port": instance.port});
    json!({"lan_ipv4": address, "wan_ipv4": address})
}

/// An instance as an agent service (`Service` of `/v1/health/service`, `Services` of
/// `/v1/catalog/node`).
pub fn agent_service(name: &str, view: &ServiceView, instance: &Instance, place: Place<'_>) -> Value {
    json!({
        "Kind": "", "ID": instance.id, "Service": name, "Tags": view.tags, "Meta": view.meta,
        "Port": instance.port, "Address": instance.node.address,
        "TaggedAddresses": service_addresses(instance),
        "Weights": {"Passing": 1, "Warning": 1}, "EnableTagOverride": false,
        "Proxy": {"Mode": "", "MeshGateway": {}, "Expose": {}}, "Connect": {}, "PeerName": "",
        "Namespace": place.namespace, "Partition": "default", "Datacenter": place.datacenter,
        "CreateIndex": view.create_index, "ModifyIndex": view.index,
    })
}

/// An instance as `/v1/catalog/service/<name>` lists it.
pub fn catalog_row(name: &str, view: &ServiceView, instance: &Instance, place: Place<'_>) -> Value {
    let node = &instance.node;
    json!({
        "ID": node.id, "Node": node.name, "Address": node.address, "Datacenter": place.datacenter,
        "TaggedAddresses": tagged(&node.address), "NodeMeta": {"consul-network-segment": ""},
        "ServiceKind": "", "ServiceID": instance.id, "ServiceName": name, "ServiceTags": view.tags,
        "ServiceAddress": node.address, "ServiceTaggedAddresses": service_addresses(instance),
        "ServiceWeights": {"Passing": 1, "Warning": 1}, "ServiceMeta": view.meta,
        "ServicePort": instance.port, "ServiceSocketPath": "", "ServiceEnableTagOverride": false,
        "ServiceProxy": {"Mode": "", "MeshGateway": {}, "Expose": {}}, "ServiceConnect": {},
        "ServicePeerName": "", "CreateIndex": view.create_index, "ModifyIndex": view.index,
        "Namespace": place.namespace, "Partition": "default",
    })
}

/// The node check of the node an instance runs on: it follows the Node's `Ready` condition.
pub fn node_check(node: &ConsulNode, index: u64) -> Value {
    check(&node.name, "serfHealth", "Serf Health Status", node.health, None, "default", index)
}

/// An instance's service check: it follows the member's `Ready` condition.
pub fn service_check(name: &str, view: &ServiceView, instance: &Instance, place: Place<'_>) -> Value {
    let check_id = format!("service:{}", instance.id);
    let title = format!("Service '{name}' check");
    let owner = Some((instance.id.as_str(), name, view.tags.as_slice()));
    check(&instance.node.name, &check_id, &title, instance.health, owner, place.namespace, view.index)
}

fn check(
    node: &str,
    id: &str,
    name: &str,
    health: Health,
    service: Option<(&str, &str, &[String])>,
    namespace: &str,
    index: u64,
) -> Value {
    let (service_id, service_name, tags) = service.unwrap_or(("", "", &[]));
    let output = match (service.is_some(), health) {
        (true, Health::Passing) => "the Application is Ready",
        (true, Health::Critical) => "the Application is not Ready",
        (true, Health::Warning) => "the Application's readiness is unknown",
        (false, Health::Passing) => "the Node is Ready",
        (false, Health::Critical) => "the Node is not Ready",
        (false, Health::Warning) => "the Node's readiness is unknown",
    };
    json!({
        "Node": node, "CheckID": id, "Name": name, "Status": health.as_str(), "Notes": "",
        "Output": output, "ServiceID": service_id, "ServiceName": service_name, "ServiceTags": tags,
        "Type": if service.is_some() { "ready" } else { "" }, "Interval": "", "Timeout": "",
        "ExposedPort": 0, "Definition": {}, "Namespace": namespace,
        "CreateIndex": index, "ModifyIndex": index,
    })
}

/// An instance with its node and checks, as `/v1/health/service/<name>` lists it.
pub fn health_entry(
    name: &str,
    view: &ServiceView,
    instance: &Instance,
    place: Place<'_>,
    nodes_index: u64,
) -> Value {
    json!({
        "Node": node(&instance.node, place, nodes_index),
        "Service": agent_service(name, view, instance, place),
        "Checks": [node_check(&instance.node, nodes_index), service_check(name, view, instance, place)],
    })
}

/// Whether every check of an instance passes: its node's and its own.
pub fn passing(instance: &Instance) -> bool {
    instance.health == Health::Passing && instance.node.health == Health::Passing
}
