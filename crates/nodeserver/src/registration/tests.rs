//! Registration over an in-memory application layer: a first registration is as the node asks,
//! any later one (the Node deleted, or a kill between the record and the Node) is cordoned.

use std::sync::Arc;

use kayra_api::clock::SystemClock;
use kayra_api::scheme::Scheme;
use kayra_api::session::{NodeInfo, NodeMessage, NodeReport, NodeTaint, Registration};
use kayra_application::ApplicationLayer;
use kayra_application::client::Client;
use kayra_application::loops::bootstrap::BootstrapReconciler;
use kayra_application::loops::rbac::IndexReconciler;
use kayra_application::options::DeleteRequest;
use kayra_authn::Identity;
use kayra_registry::{Registry, RegistryError, Resource};
use kayra_store::mvcc::{MvccStore, Options};
use serde_json::{Value, json};

use super::*;
use crate::{Config, NodeServer};

/// A node server, an administrator, and the resources they touch.
struct Fleet {
    server: NodeServer,
    admin: Client,
    nodes: Resource,
    secrets: Resource,
}

async fn fleet() -> Fleet {
    let store = Arc::new(MvccStore::in_memory(Options::default()).expect("a memory store"));
    let registry = Registry::new(store, Arc::new(SystemClock), "/registry/");
    let control = Arc::new(ApplicationLayer::new(Arc::new(Scheme::new("example.com")), registry));
    let server = NodeServer::new(control.clone(), Config::default()).expect("a node server");
    let admin = control.client(Identity::new("admin", "", vec!["system:masters".into()]));
    let namespaces = admin.resource("", "namespaces").expect("namespaces");
    for name in [BOOTSTRAP_TOKEN_NAMESPACE, kayra_api::kinds::lease::NODE_LEASE_NAMESPACE] {
        let system = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}});
        admin.create(&namespaces, None, system).await.expect("the system namespaces");
    }
    BootstrapReconciler::new(admin.clone()).ensure_all().await.expect("the bootstrap roles");
    control.set_rbac(IndexReconciler::new(admin.clone()).expect("an index").rebuild().await.expect("RBAC"));
    let nodes = admin.resource("", "nodes").expect("nodes");
    let secrets = admin.resource("fleet.example.com", "secrets").expect("secrets");
    Fleet { server, admin, nodes, secrets }
}

fn identity(node: &str) -> Identity {
    Identity::new(format!("system:node:{node}"), "", vec!["system:nodes".into()])
}

fn report(registration: &Registration) -> NodeMessage {
    NodeMessage::Status(NodeReport {
        info: NodeInfo {
            operating_system: "linux".into(),
            architecture: "amd64".into(),
            ..NodeInfo::default()
        },
        registration: registration.clone(),
        ..NodeReport::default()
    })
}

fn asking(unschedulable: bool, taints: &str) -> Registration {
    let taints = if taints.is_empty() { Vec::new() } else { NodeTaint::parse_list(taints).expect("taints") };
    Registration { unschedulable, taints }
}

impl Fleet {
    /// Node `node` opens a session and reports asking `registration`: its Node as stored after.
    async fn reports(&self, node: &str, registration: &Registration) -> Value {
        let session = self.server.open(&identity(node)).expect("a session");
        session.receive(report(registration)).await.expect("the status is taken");
        self.node(node).await.unwrap_or_else(|| panic!("node {node} is registered"))
    }

    async fn node(&self, node: &str) -> Option<Value> {
        match self.admin.get(&self.nodes, None, node).await {
            Ok(object) => Some(Value::Object(object)),
            Err(RegistryError::NotFound { .. }) => None,
            Err(error) => panic!("{error}"),
        }
    }

    async fn record(&self, node: &str) -> Option<Value> {
        match self.admin.get(&self.secrets, Some(BOOTSTRAP_TOKEN_NAMESPACE), &record_name(node)).await {
            Ok(object) => Some(Value::Object(object)),
            Err(RegistryError::NotFound { .. }) => None,
            Err(error) => panic!("{error}"),
        }
    }

    async fn delete_node(&self, node: &str) {
        self.admin.delete(&self.nodes, None, node, &DeleteRequest::default()).await.expect("deleted");
    }

    /// What a kill between the record's write and the Node's leaves.
    async fn record_only(&self, node: &str) {
        let record = json!({"apiVersion": "fleet.example.com/v1", "kind": "Secret", "type": RECORD_TYPE,
            "metadata": {"name": record_name(node), "namespace": BOOTSTRAP_TOKEN_NAMESPACE},
            "immutable": true, "stringData": {"node": node}});
        self.admin.create(&self.secrets, Some(BOOTSTRAP_TOKEN_NAMESPACE), record).await.expect("a record");
    }

    /// A Node made by an operator before its node joined.
    async fn made_by_an_operator(&self, node: &str) {
        let made = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": node}});
        self.admin.create(&self.nodes, None, made).await.expect("a Node");
    }
}

/// What a stored Node's spec says: cordoned, and its taints as spelled.
fn shape(node: &Value) -> (bool, Vec<String>) {
    let spec = &node["spec"];
    let taints = spec["taints"].as_array().cloned().unwrap_or_default();
    let taints = taints
        .iter()
        .map(|t| {
            let value = t["value"].as_str().unwrap_or_default();
            let key = t["key"].as_str().unwrap_or_default();
            let effect = t["effect"].as_str().unwrap_or_default();
            if value.is_empty() { format!("{key}:{effect}") } else { format!("{key}={value}:{effect}") }
        })
        .collect();
    (spec["unschedulable"].as_bool().unwrap_or(false), taints)
}

#[tokio::test]
async fn a_first_registration_is_as_the_node_asks_and_a_later_one_cordoned() {
    /// What was there before the node reported.
    #[derive(Clone, Copy)]
    enum Before {
        Nothing,
        RecordOnly,
        OperatorsNode,
    }
    /// A case, what was there, what the node asks, and the Node's shape: cordoned, taints.
    type Case = (&'static str, Before, Registration, (bool, Vec<&'static str>));
    let cases: Vec<Case> = vec![
        ("joined, asking nothing", Before::Nothing, asking(false, ""), (false, vec![])),
        ("joined with --cordon", Before::Nothing, asking(true, ""), (true, vec![])),
        (
            "joined with --register-with-taints",
            Before::Nothing,
            asking(false, "dedicated=gpu:NoSchedule,spot:PreferNoSchedule"),
            (false, vec!["dedicated=gpu:NoSchedule", "spot:PreferNoSchedule"]),
        ),
        ("killed after the record, before the Node", Before::RecordOnly, asking(false, ""), (true, vec![])),
        (
            "killed after the record, asking taints",
            Before::RecordOnly,
            asking(false, "dedicated=gpu:NoSchedule"),
            (true, vec!["dedicated=gpu:NoSchedule"]),
        ),
        (
            "an operator's Node, left as made",
            Before::OperatorsNode,
            asking(true, "a:NoExecute"),
            (false, vec![]),
        ),
    ];
    for (at, (case, before, registration, expect)) in cases.into_iter().enumerate() {
        let fleet = fleet().await;
        let name = format!("n{at}");
        match before {
            Before::Nothing => {}
            Before::RecordOnly => fleet.record_only(&name).await,
            Before::OperatorsNode => fleet.made_by_an_operator(&name).await,
        }
        let node = fleet.reports(&name, &registration).await;
        let (cordoned, taints) = shape(&node);
        assert_eq!(
            (cordoned, taints.iter().map(String::as_str).collect::<Vec<_>>()),
            expect,
            "{case}: {node}"
        );
        assert_eq!(
            node["metadata"]["labels"]["kubernetes.io/arch"],
            json!(match before {
                Before::OperatorsNode => Value::Null,
                _ => json!("amd64"),
            }),
            "{case}"
        );
        let record =
            fleet.record(&name).await.unwrap_or_else(|| panic!("{case}: the registration is recorded"));
        assert_eq!(record["type"], RECORD_TYPE, "{case}");

        // Deleted by an operator: the node's next status, in this session or a later one,
        // re-creates it cordoned, with the taints it asks for.
        fleet.delete_node(&name).await;
        let again = fleet.reports(&name, &registration).await;
        let expect_taints: Vec<String> = registration.taints.iter().map(NodeTaint::to_string).collect();
        assert_eq!(shape(&again), (true, expect_taints), "{case}: re-created {again}");
    }
}

#[tokio::test]
async fn a_registration_asking_for_what_no_node_may_hold_registers_nothing() {
    let fleet = fleet().await;
    let bad = Registration {
        unschedulable: false,
        taints: vec![NodeTaint { key: "dedicated".into(), value: String::new(), effect: "Sometimes".into() }],
    };
    let session = fleet.server.open(&identity("n1")).expect("a session");
    let refused = session.receive(report(&bad)).await.expect_err("refused");
    assert!(matches!(refused, NodeServerError::BadRegistration { .. }), "{refused}");
    assert!(refused.to_string().contains("Sometimes"), "{refused}");
    assert!(fleet.node("n1").await.is_none());
    assert!(fleet.record("n1").await.is_none(), "a refused registration is not a first registration");
}

#[test]
fn a_record_is_named_for_its_node_within_a_name_s_length() {
    assert_eq!(record_name("n1"), "node-registration-n1");
    let long = format!("{}.example.com", "a".repeat(230));
    let name = record_name(&long);
    assert_eq!(name.len(), "node-registration-".len() + 65, "{name}");
    assert!(name.split('.').all(|label| label.len() <= 63), "each label of a name fits: {name}");
    assert_ne!(name, record_name(&format!("{}.example.org", "a".repeat(230))));
}

/// Each report renews the node's Lease in `kube-node-lease`, held by the node for the ready
/// timeout; a report within a quarter of it does not write it again.
#[tokio::test]
async fn a_report_renews_the_nodes_own_lease() {
    let fleet = fleet().await;
    let leases = fleet.admin.resource("coordination.k8s.io", "leases").expect("leases");
    let lease = |fleet: &Fleet| {
        let (admin, leases) = (fleet.admin.clone(), leases.clone());
        async move { admin.get(&leases, Some("kube-node-lease"), "n0").await.expect("the lease") }
    };
    let session = fleet.server.open(&identity("n0")).expect("a session");
    session.receive(report(&asking(false, ""))).await.expect("the status is taken");
    let first = lease(&fleet).await;
    assert_eq!(first["spec"]["holderIdentity"], "n0");
    assert_eq!(first["spec"]["leaseDurationSeconds"], Config::default().ready_timeout.as_secs());
    let node = fleet.node("n0").await.expect("the node");
    assert_eq!(first["metadata"]["ownerReferences"][0]["uid"], node["metadata"]["uid"]);
    session.receive(report(&asking(false, ""))).await.expect("the status is taken");
    let second = lease(&fleet).await;
    assert_eq!(
        second["metadata"]["resourceVersion"], first["metadata"]["resourceVersion"],
        "renewed at most every quarter of the ready timeout"
    );
}

#[tokio::test]
async fn a_node_named_longer_than_a_record_name_can_be_has_its_registration_recorded() {
    let fleet = fleet().await;
    let label = "n".repeat(60);
    let name = format!("{label}.{label}.{label}.{label}.example");
    fleet.reports(&name, &asking(false, "")).await;
    let record = fleet.record(&name).await.expect("the registration is recorded under a name that fits");
    assert_eq!(record["type"], RECORD_TYPE);
}
