//! The signer's loop over an in-memory application layer, with the real CA behind the port.

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use kayra_api::clock::{Clock, SystemClock};
use kayra_api::kinds::csr::{certificate, has_condition};
use kayra_api::scheme::Scheme;
use kayra_application::ApplicationLayer;
use kayra_application::client::Client;
use kayra_application::loops::bootstrap::BootstrapReconciler;
use kayra_application::loops::rbac::IndexReconciler;
use kayra_authn::Identity;
use kayra_loop::{Action, Key, Reconciler};
use kayra_registry::Registry;
use kayra_store::mvcc::{MvccStore, Options};
use serde_json::{Value, json};

use super::NodeCsrReconciler;
use crate::NodeCsrError;
use crate::ports::{RequestedSubject, Signer};

/// The port over the real CA, as the controller adapts it.
struct CaSigner(kayra_pki::Ca);

impl Signer for CaSigner {
    fn read_request(&self, request_pem: &str) -> Result<RequestedSubject, NodeCsrError> {
        let read = kayra_pki::read_certificate_request(request_pem)
            .map_err(|e| NodeCsrError::UnreadableRequest { source: Box::new(e) })?;
        Ok(RequestedSubject {
            common_name: read.subject.common_name,
            organizations: read.subject.organizations,
        })
    }

    fn sign_client(
        &self,
        request_pem: &str,
        subject: &RequestedSubject,
        ttl: Duration,
    ) -> Result<String, NodeCsrError> {
        let subject = kayra_pki::Subject {
            common_name: subject.common_name.clone(),
            organizations: subject.organizations.clone(),
        };
        self.0
            .sign_request(request_pem, &subject, kayra_pki::Usage::Client, ttl)
            .map_err(|e| NodeCsrError::Signing { source: Box::new(e) })
    }
}

/// A clock the test moves.
struct TestClock(Mutex<SystemTime>);

impl Clock for TestClock {
    fn now(&self) -> SystemTime {
        *self.0.lock().unwrap()
    }
}

impl TestClock {
    fn advance(&self, by: Duration) {
        let mut now = self.0.lock().unwrap();
        *now += by;
    }
}

struct World {
    control: Arc<ApplicationLayer>,
    admin: Client,
    signer: NodeCsrReconciler,
    clock: Arc<TestClock>,
}

async fn world() -> World {
    let store = Arc::new(MvccStore::in_memory(Options::default()).unwrap());
    let registry = Registry::new(store, Arc::new(SystemClock), "/registry/");
    let control = Arc::new(ApplicationLayer::new(Arc::new(Scheme::new("example.com")), registry));
    let admin = control.client(kayra_application::controller_identity("test"));
    let namespaces = admin.resource("", "namespaces").unwrap();
    admin
        .create(
            &namespaces,
            None,
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}}),
        )
        .await
        .unwrap();
    BootstrapReconciler::new(admin.clone()).ensure_all().await.unwrap();
    control.set_rbac(IndexReconciler::new(admin.clone()).unwrap().rebuild().await.unwrap());
    let clock = Arc::new(TestClock(Mutex::new(SystemTime::now())));
    let signer = NodeCsrReconciler::new(
        control.client(kayra_application::controller_identity("node-csr-signer")),
        Arc::new(CaSigner(kayra_pki::Ca::generate("test-ca").unwrap())),
    )
    .unwrap()
    .with_clock(clock.clone());
    World { control, admin, signer, clock }
}

fn bootstrapper() -> Identity {
    Identity::new("system:bootstrap:abcdef", "", vec!["system:bootstrappers".into()])
}

fn node(name: &str) -> Identity {
    Identity::new(format!("system:node:{name}"), "", vec!["system:nodes".into()])
}

/// A request for `cn`/`o` from the kubelet client signer unless `signer` says otherwise.
fn request(name: &str, cn: &str, o: &[&str], signer: &str) -> Value {
    use base64::Engine;
    let key = kayra_pki::generate_key().unwrap();
    let subject = kayra_pki::Subject {
        common_name: cn.to_owned(),
        organizations: o.iter().map(|o| (*o).to_owned()).collect(),
    };
    let pem = kayra_pki::certificate_request(&key, &subject).unwrap();
    json!({
        "apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
        "metadata": {"name": name},
        "spec": {
            "request": base64::engine::general_purpose::STANDARD.encode(pem),
            "signerName": signer,
            "usages": ["digital signature", "client auth"],
        }
    })
}

impl World {
    async fn create(&self, who: Identity, object: Value) {
        let client = self.control.client(who);
        let resource = client.resource("certificates.k8s.io", "certificatesigningrequests").unwrap();
        client.create(&resource, None, object).await.unwrap();
    }

    async fn get(&self, name: &str) -> Option<CertificateSigningRequest> {
        let resource = self.admin.resource("certificates.k8s.io", "certificatesigningrequests").unwrap();
        self.admin.get_as(&resource, None, name).await.ok()
    }

    async fn reconcile(&self, name: &str) -> Action {
        self.signer.reconcile(&Key::new(name)).await.unwrap()
    }

    async fn decide(&self, name: &str, type_: &str) {
        let resource = self.admin.resource("certificates.k8s.io", "certificatesigningrequests").unwrap();
        let mut csr = self.get(name).await.unwrap();
        csr.status.get_or_insert_with(Default::default).conditions =
            Some(vec![k8s_openapi::api::certificates::v1::CertificateSigningRequestCondition {
                type_: type_.into(),
                status: "True".into(),
                reason: Some("KubectlApprove".into()),
                ..Default::default()
            }]);
        self.admin.update_approval(&resource, name, &csr).await.unwrap();
    }

    async fn events(&self) -> Vec<String> {
        let events = self.admin.resource("", "events").unwrap();
        let listed = self.admin.list_all(&events, Some("default")).await.unwrap();
        let mut reasons: Vec<String> =
            listed.iter().map(|e| e["reason"].as_str().unwrap_or_default().to_owned()).collect();
        reasons.sort();
        reasons
    }
}

/// The certificate's subject as `CN` and each `O`.
fn subject_of(csr: &CertificateSigningRequest) -> (String, Vec<String>) {
    let pem = certificate(csr).expect("a certificate was issued");
    let (_, block) = x509_parser::pem::parse_x509_pem(pem).unwrap();
    let cert = block.parse_x509().unwrap();
    let cn = cert.subject().iter_common_name().next().unwrap().as_str().unwrap().to_owned();
    let o = cert.subject().iter_organization().map(|o| o.as_str().unwrap().to_owned()).collect();
    (cn, o)
}

#[tokio::test]
async fn a_bootstrap_request_for_a_node_is_approved_and_signed() {
    let world = world().await;
    world
        .create(
            bootstrapper(),
            request(
                "node-csr-a",
                "system:node:n1",
                &["system:nodes"],
                "kubernetes.io/kube-apiserver-client-kubelet",
            ),
        )
        .await;
    world.reconcile("node-csr-a").await;
    let csr = world.get("node-csr-a").await.unwrap();
    assert!(has_condition(&csr, "Approved"));
    let approved = &kayra_api::kinds::csr::conditions(&csr)[0];
    assert_eq!(approved.reason.as_deref(), Some("AutoApproved"));
    assert_eq!(subject_of(&csr), ("system:node:n1".to_owned(), vec!["system:nodes".to_owned()]));
    assert_eq!(csr.spec.username.as_deref(), Some("system:bootstrap:abcdef"));
    assert_eq!(world.events().await, ["AutoApproved", "Signed"]);
    // Signed once: looking again changes nothing and waits for the collection.
    let again = world.reconcile("node-csr-a").await;
    assert!(matches!(again, Action::RequeueAfter(left) if left <= Duration::from_secs(3600)), "{again:?}");
    assert_eq!(world.get("node-csr-a").await.unwrap(), csr);
}

#[tokio::test]
async fn a_node_renews_its_own_certificate_but_not_another_nodes() {
    let world = world().await;
    let kubelet = "kubernetes.io/kube-apiserver-client-kubelet";
    world.create(node("n1"), request("renew-own", "system:node:n1", &["system:nodes"], kubelet)).await;
    world.create(node("n1"), request("renew-other", "system:node:n2", &["system:nodes"], kubelet)).await;
    world.reconcile("renew-own").await;
    world.reconcile("renew-other").await;
    assert!(certificate(&world.get("renew-own").await.unwrap()).is_some());
    let other = world.get("renew-other").await.unwrap();
    assert!(!has_condition(&other, "Approved") && certificate(&other).is_none(), "waits for a person");
}

#[tokio::test]
async fn anything_else_waits_for_a_person_who_approves_or_denies() {
    let world = world().await;
    let admin = Identity::new("admin", "", vec!["system:masters".into()]);
    let client_signer = "kubernetes.io/kube-apiserver-client";
    world.create(admin.clone(), request("jane", "jane", &["devs"], client_signer)).await;
    world
        .create(
            admin.clone(),
            request(
                "masters",
                "system:node:n9",
                &["system:masters"],
                "kubernetes.io/kube-apiserver-client-kubelet",
            ),
        )
        .await;
    world.create(admin, request("denied", "joe", &[], client_signer)).await;
    for name in ["jane", "masters", "denied"] {
        let waiting = world.reconcile(name).await;
        assert!(
            matches!(waiting, Action::RequeueAfter(left) if left > Duration::from_secs(23 * 3600)),
            "{name}: {waiting:?}"
        );
        assert!(certificate(&world.get(name).await.unwrap()).is_none(), "{name} is pending");
    }
    world.decide("jane", "Approved").await;
    world.decide("masters", "Approved").await;
    world.decide("denied", "Denied").await;
    for name in ["jane", "masters", "denied"] {
        world.reconcile(name).await;
    }
    assert_eq!(subject_of(&world.get("jane").await.unwrap()), ("jane".to_owned(), vec!["devs".to_owned()]));
    // A node certificate names system:nodes, whatever groups the request asked for.
    assert_eq!(
        subject_of(&world.get("masters").await.unwrap()),
        ("system:node:n9".to_owned(), vec!["system:nodes".to_owned()])
    );
    let denied = world.get("denied").await.unwrap();
    assert!(certificate(&denied).is_none() && has_condition(&denied, "Denied"));
}

#[tokio::test]
async fn a_request_the_signer_will_not_sign_fails() {
    let world = world().await;
    let admin = Identity::new("admin", "", vec!["system:masters".into()]);
    world
        .create(admin, request("not-a-node", "jane", &[], "kubernetes.io/kube-apiserver-client-kubelet"))
        .await;
    world.decide("not-a-node", "Approved").await;
    world.reconcile("not-a-node").await;
    let failed = world.get("not-a-node").await.unwrap();
    assert!(has_condition(&failed, "Failed") && has_condition(&failed, "Approved"));
    assert!(certificate(&failed).is_none());
    assert!(world.events().await.contains(&"SignerValidationFailure".to_owned()));
}

#[tokio::test]
async fn decided_requests_go_after_an_hour_pending_ones_after_a_day() {
    let world = world().await;
    let kubelet = "kubernetes.io/kube-apiserver-client-kubelet";
    world.create(bootstrapper(), request("signed", "system:node:n1", &["system:nodes"], kubelet)).await;
    world.create(node("n1"), request("pending", "system:node:n2", &["system:nodes"], kubelet)).await;
    world.reconcile("signed").await;
    world.reconcile("pending").await;
    world.clock.advance(Duration::from_secs(3600));
    assert_eq!(world.reconcile("signed").await, Action::AwaitChange);
    assert!(world.get("signed").await.is_none(), "collected an hour after it was made");
    assert!(matches!(world.reconcile("pending").await, Action::RequeueAfter(_)));
    assert!(world.get("pending").await.is_some(), "a pending request stays a day");
    world.clock.advance(Duration::from_secs(23 * 3600));
    world.reconcile("pending").await;
    assert!(world.get("pending").await.is_none());
    // A key whose request is gone is left alone.
    assert_eq!(world.reconcile("pending").await, Action::AwaitChange);
}
