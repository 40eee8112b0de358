//! Endpoints, table-driven: readiness, binding, node addresses and port resolution.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Node;
use kayra_api::kinds::application::Application;
use kayra_api::kinds::service::ServiceSpec;
use serde_json::{Value, json};

use super::{endpoints, node_address};

/// An Application `name` on `node` (or none), Ready or not, declaring `ports` (name, number).
fn member(name: &str, node: Option<&str>, ready: bool, ports: &[(&str, i64)]) -> Application {
    let ports: Vec<Value> = ports.iter().map(|(n, p)| json!({"name": n, "port": p})).collect();
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "a"},
        "spec": {"command": ["/bin/true"], "serviceName": "web", "ports": ports,
                 "placement": {"nodeName": node}},
        "status": {"conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]},
    }))
    .expect("a valid Application")
}

fn spec(ports: Value) -> ServiceSpec {
    serde_json::from_value(json!({"ports": ports})).expect("a valid ServiceSpec")
}

fn addresses() -> BTreeMap<String, String> {
    [("n1", "10.0.0.1"), ("n2", "10.0.0.2")].into_iter().map(|(n, a)| (n.to_owned(), a.to_owned())).collect()
}

/// `application@address` with each port as `name=port/protocol`.
fn summary(spec: &ServiceSpec, members: &[Application]) -> Vec<String> {
    let members: Vec<&Application> = members.iter().collect();
    endpoints(spec, &members, &addresses())
        .into_iter()
        .map(|endpoint| {
            let ports: Vec<String> = endpoint
                .ports
                .iter()
                .map(|p| format!("{}={}/{}", p.name.as_deref().unwrap_or("-"), p.port, p.protocol))
                .collect();
            format!("{}@{}:{} [{}]", endpoint.application, endpoint.node, endpoint.address, ports.join(" "))
        })
        .collect()
}

#[test]
fn only_ready_bound_members_on_nodes_with_addresses_are_endpoints() {
    let one_port = spec(json!([{"port": 80, "targetPort": 8080}]));
    let members = [
        member("web-2", Some("n2"), true, &[]),
        member("web-0", Some("n1"), true, &[]),
        member("web-1", Some("n1"), false, &[]),
        member("web-3", None, true, &[]),
        member("web-4", Some("gone"), true, &[]),
    ];
    assert_eq!(
        summary(&one_port, &members),
        ["web-0@n1:10.0.0.1 [-=8080/TCP]", "web-2@n2:10.0.0.2 [-=8080/TCP]"],
        "not ready, unbound and on an unknown node are left out; ordered by name"
    );
}

/// The Service's ports, the member's declared ports, the ports expected, and why.
type Row = (Value, &'static [(&'static str, i64)], &'static str, &'static str);

#[test]
fn ports_resolve_by_target_port_then_target_name_then_port() {
    let table: Vec<Row> = vec![
        (
            json!([{"port": 80, "targetPort": 8080}]),
            &[("http", 9000)],
            "[-=8080/TCP]",
            "an explicit targetPort",
        ),
        (json!([{"port": 80}]), &[], "[-=80/TCP]", "no target: the port itself"),
        (
            json!([{"port": 80, "targetName": "http"}]),
            &[("http", 9000)],
            "[-=9000/TCP]",
            "the member's named port",
        ),
        (
            json!([{"port": 80, "targetName": "http"}]),
            &[("admin", 9001)],
            "[]",
            "a member without the name serves no port",
        ),
        (
            json!([{"name": "web", "port": 80, "targetName": "http"}, {"name": "dns", "port": 53, "protocol": "UDP"}]),
            &[("http", 9000)],
            "[web=9000/TCP dns=53/UDP]",
            "several ports, in the Service's order",
        ),
        (
            json!([{"name": "web", "port": 80, "targetName": "http"}, {"name": "admin", "port": 81, "targetName": "admin"}]),
            &[("admin", 9001)],
            "[admin=9001/TCP]",
            "only the ports the member declares",
        ),
    ];
    for (ports, declared, expected, why) in table {
        let mut service = spec(ports);
        // As stored: defaults filled in.
        for port in &mut service.ports {
            port.protocol.get_or_insert_with(|| "TCP".to_owned());
            if port.target_name.is_none() {
                port.target_port.get_or_insert(port.port);
            }
        }
        let found = summary(&service, &[member("web-0", Some("n1"), true, declared)]);
        assert_eq!(found, [format!("web-0@n1:10.0.0.1 {expected}")], "{why}");
    }
}

#[test]
fn a_node_is_reached_at_its_internal_ip_else_its_first_address() {
    let node = |addresses: Value| -> Node {
        serde_json::from_value(json!({"metadata": {"name": "n"}, "status": {"addresses": addresses}}))
            .expect("a Node")
    };
    let both = node(
        json!([{"type": "Hostname", "address": "n1.local"}, {"type": "InternalIP", "address": "10.0.0.1"}]),
    );
    assert_eq!(node_address(&both).as_deref(), Some("10.0.0.1"));
    let hostname = node(json!([{"type": "Hostname", "address": "n1.local"}]));
    assert_eq!(node_address(&hostname).as_deref(), Some("n1.local"));
    assert_eq!(node_address(&node(json!([]))), None);
}
