//! Which members of a Service are endpoints, and on which ports: pure.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Node;
use kayra_api::kinds::ConditionType;
use kayra_api::kinds::application::Application;
use kayra_api::kinds::service::{EndpointPort, ServiceEndpoint, ServiceSpec};

/// The address a Node is reached at: its `InternalIP`, else the first address it reports.
pub fn node_address(node: &Node) -> Option<String> {
    let addresses = node.status.as_ref()?.addresses.as_ref()?;
    let internal = addresses.iter().find(|address| address.type_ == "InternalIP");
    internal.or(addresses.first()).map(|address| address.address.clone()).filter(|a| !a.is_empty())
}

/// Whether an Application's `Ready` condition is `True`.
pub fn ready(application: &Application) -> bool {
    application.status.as_ref().is_some_and(|status| {
        let ready = ConditionType::Ready.as_str();
        status.conditions.iter().any(|condition| condition.type_ == ready && condition.status == "True")
    })
}

/// The endpoints of a Service with `spec`, among `members` (the Applications joining it), with
/// `addresses` the address of each Node by name. Ordered by application name.
pub fn endpoints(
    spec: &ServiceSpec,
    members: &[&Application],
    addresses: &BTreeMap<String, String>,
) -> Vec<ServiceEndpoint> {
    let mut endpoints: Vec<ServiceEndpoint> = members
        .iter()
        .filter(|member| ready(member))
        .filter_map(|member| {
            let node = member.bound_node()?;
            let address = addresses.get(node)?;
            Some(ServiceEndpoint {
                application: member.metadata.name.clone().unwrap_or_default(),
                node: node.to_owned(),
                address: address.clone(),
                ports: ports(spec, member),
            })
        })
        .collect();
    endpoints.sort_by(|a, b| a.application.cmp(&b.application));
    endpoints
}

/// The Service's ports as `member` serves them, in the order of `spec.ports`; a port whose
/// `targetName` the member does not declare is left out.
pub fn ports(spec: &ServiceSpec, member: &Application) -> Vec<EndpointPort> {
    spec.ports
        .iter()
        .filter_map(|port| {
            let number = match (port.target_port, port.target_name.as_deref().filter(|n| !n.is_empty())) {
                (Some(target), None) => target,
                (_, Some(name)) => {
                    member.spec.ports.iter().find(|declared| declared.name.as_deref() == Some(name))?.port
                }
                (None, None) => port.port,
            };
            Some(EndpointPort {
                name: port.name.clone().filter(|name| !name.is_empty()),
                port: number,
                protocol: port.protocol.clone().unwrap_or_else(|| "TCP".to_owned()),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests;
