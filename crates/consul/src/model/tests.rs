//! The projection's model: every part takes the revision it last changed at, and nothing
//! served changing moves no index.

use serde_json::json;

use super::*;

fn service(name: &str, tags: &[&str]) -> Service {
    serde_json::from_value(json!({"metadata": {"name": name, "namespace": "default"},
        "spec": {"ports": [{"port": 80, "targetPort": 8080}], "tags": tags}}))
    .unwrap()
}

fn member(name: &str, ready: &str) -> Application {
    serde_json::from_value(json!({"metadata": {"name": name, "namespace": "default"},
        "spec": {"command": ["x"], "serviceName": "web", "placement": {"nodeName": "a"}},
        "status": {"conditions": [{"type": "Ready", "status": ready}]}}))
    .unwrap()
}

fn nodes() -> BTreeMap<String, ConsulNode> {
    let node = ConsulNode {
        id: "uid-a".into(),
        name: "a".into(),
        address: "10.0.0.1".into(),
        health: Health::Passing,
    };
    BTreeMap::from([("a".to_owned(), node)])
}

#[test]
fn each_part_takes_the_revision_it_last_changed_at() {
    let start = NamespaceView { catalog_index: 1, health_index: 1, ..NamespaceView::default() };
    let services = [service("web", &["traefik.enable=true"])];
    let first = start.next(&services, &[member("web-1", "True"), member("web-2", "False")], &nodes(), 10);
    assert_eq!((first.catalog_index, first.health_index, first.services["web"].index), (10, 10, 10));
    let web = &first.services["web"];
    assert_eq!(
        web.instances.iter().map(|i| (i.id.as_str(), i.port, i.health)).collect::<Vec<_>>(),
        [("web-1", 8080, Health::Passing), ("web-2", 8080, Health::Critical)]
    );
    // Nothing served changed: no index moves.
    let same = first.next(&services, &[member("web-1", "True"), member("web-2", "False")], &nodes(), 11);
    assert_eq!((same.catalog_index, same.health_index, same.services["web"].index), (10, 10, 10));
    // A member's readiness: its Service and the checks move, the catalog of names and tags not.
    let ready = same.next(&services, &[member("web-1", "True"), member("web-2", "True")], &nodes(), 12);
    assert_eq!((ready.catalog_index, ready.health_index, ready.services["web"].index), (10, 12, 12));
    assert_eq!(ready.services["web"].create_index, 10);
    // A tag: the catalog moves too.
    let retagged = ready.next(&[service("web", &["v2"])], &[member("web-1", "True")], &nodes(), 13);
    assert_eq!((retagged.catalog_index, retagged.health_index), (13, 13));
    // Gone: the catalog moves, and a Service never seen reads its namespace's catalog index.
    let gone = retagged.next(&[], &[], &nodes(), 14);
    assert_eq!((gone.catalog_index, gone.health_index), (14, 14));
    let snapshot = Snapshot {
        namespaces: BTreeMap::from([("default".into(), gone)]),
        base_index: 1,
        ..Snapshot::default()
    };
    assert_eq!(snapshot.service_index("default", "web"), 14);
    assert_eq!(snapshot.service_index("elsewhere", "web"), 1);
}

#[test]
fn a_member_on_no_node_with_an_address_is_no_instance() {
    let start = NamespaceView::default();
    let mut unbound = member("web-3", "True");
    unbound.spec.placement = None;
    let view = start.next(&[service("web", &[])], &[unbound], &nodes(), 5);
    assert!(view.services["web"].instances.is_empty());
    assert!(view.catalog().is_empty(), "a Service with no instance is no Consul service");
    assert_eq!(view.catalog_index, 0, "nothing the catalog lists changed");
    assert_eq!(Health::of_ready(None), Health::Warning, "not reported yet");
    assert_eq!(Health::of_ready(Some("Unknown")), Health::Warning);
}

#[test]
fn one_service_updated_alone_moves_what_it_covers() {
    let mut view = NamespaceView { catalog_index: 1, health_index: 1, ..NamespaceView::default() };
    let web = service("web", &["t"]);
    let (ready, unready) = (member("web-1", "True"), member("web-2", "False"));
    assert!(view.update("web", Some(&web), &[&ready], &nodes(), 5));
    assert_eq!((view.catalog_index, view.health_index), (5, 5), "listed once it has an instance");
    assert!(!view.update("web", Some(&web), &[&ready], &nodes(), 6), "nothing served changed");
    assert_eq!((view.catalog_index, view.health_index), (5, 5));
    assert!(view.update("web", Some(&web), &[&ready, &unready], &nodes(), 7));
    assert_eq!((view.catalog_index, view.health_index, view.services["web"].index), (5, 7, 7));
    assert!(view.update("web", None, &[], &nodes(), 8), "gone");
    assert_eq!((view.catalog_index, view.health_index), (8, 8));
    assert!(!view.update("never", None, &[], &nodes(), 9));
}
