//! Tests of the published schemas' markers.

use serde_json::{Value, json};

use super::kind_schema;
use crate::scheme::Scheme;

fn property<'a>(schema: &'a super::KindSchema, definition: &str, property: &str) -> &'a Value {
    &schema.definitions[definition]["properties"][property]
}

fn markers(value: &Value) -> (Option<&str>, Option<&Value>) {
    (value.get("x-kubernetes-list-type").and_then(Value::as_str), value.get("x-kubernetes-list-map-keys"))
}

#[test]
fn every_list_says_how_it_merges() {
    let scheme = Scheme::new("example.com");
    let kind = |plural: &str| scheme.kinds().iter().find(|kind| kind.plural == plural).unwrap().clone();
    let applications = kind_schema(&kind("applications"));
    let keys = json!(["name"]);
    assert_eq!(markers(property(&applications, "ApplicationSpec", "env")), (Some("map"), Some(&keys)));
    let port_keys = json!(["port", "protocol"]);
    assert_eq!(markers(property(&applications, "ApplicationSpec", "ports")), (Some("map"), Some(&port_keys)));
    assert_eq!(markers(property(&applications, "ApplicationSpec", "command")).0, Some("atomic"));
    assert_eq!(markers(property(&applications, "Placement", "tolerations")).0, Some("set"));
    assert_eq!(markers(property(&applications, "ApplicationStatus", "conditions")).1, Some(&json!(["type"])));
    let meta = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";
    assert_eq!(markers(property(&applications, meta, "finalizers")).0, Some("set"));
    assert_eq!(markers(property(&applications, meta, "ownerReferences")).1, Some(&json!(["uid"])));
    assert_eq!(property(&applications, "Port", "protocol")["default"], "TCP", "a key's default is declared");

    let sets = kind_schema(&kind("applicationsets"));
    assert_eq!(markers(property(&sets, "ApplicationSetSpec", "applications")).1, Some(&keys));
    let services = kind_schema(&kind("services"));
    assert_eq!(property(&services, "ServicePort", "protocol")["default"], "TCP");
    assert_eq!(markers(property(&services, "ServiceSpec", "tags")).0, Some("set"));
    let nodes = kind_schema(&kind("nodes"));
    assert_eq!(
        markers(property(&nodes, "io.k8s.api.core.v1.NodeStatus", "conditions")).1,
        Some(&json!(["type"]))
    );
    assert_eq!(markers(property(&nodes, "io.k8s.api.core.v1.NodeStatus", "addresses")).0, Some("map"));
}
