//! The catalog over the memory store: scopes, registrations, subscriptions and syncs.

use std::sync::atomic::{AtomicUsize, Ordering};

use kayra_api::clock::SystemClock;
use kayra_store::mvcc::{MvccStore, Options};

use crate::DependencyRef;

use super::*;

/// `id-1`, `id-2`...
struct Counter(AtomicUsize);

impl IdGenerator for Counter {
    fn sync_id(&self) -> String {
        format!("id-{}", self.0.fetch_add(1, Ordering::SeqCst) + 1)
    }
}

/// Namespaces as a test sets them: every name active but those given another answer;
/// `None` is a namespace source that cannot be reached.
pub(super) struct TestNamespaces(pub(super) Vec<(&'static str, Option<NamespaceState>)>);

#[async_trait::async_trait]
impl Namespaces for TestNamespaces {
    async fn state(&self, name: &str) -> Result<NamespaceState, StoreError> {
        match self.0.iter().find(|(listed, _)| *listed == name) {
            None => Ok(NamespaceState::Active),
            Some((_, Some(state))) => Ok(*state),
            Some((_, None)) => {
                Err(StoreError::Unavailable { message: format!("reading namespace {name}"), source: None })
            }
        }
    }
}

fn scope(platform: &str, region: &str) -> Scope {
    Scope {
        root: "/registry/".into(),
        domain: "example.com".into(),
        platform: platform.into(),
        region: region.into(),
        reserved_groups: vec!["fleet.example.com".into(), "authorization.k8s.io".into()],
    }
}

fn catalog_in(store: &Arc<dyn Store>, scope: Scope, namespaces: TestNamespaces) -> Catalog {
    let ids = Arc::new(Counter(AtomicUsize::new(0)));
    Catalog::new(store.clone(), scope, Arc::new(namespaces), ids, Arc::new(SystemClock))
}

fn catalog(store: &Arc<dyn Store>, platform: &str, region: &str) -> Catalog {
    catalog_in(store, scope(platform, region), TestNamespaces(Vec::new()))
}

fn store() -> Arc<dyn Store> {
    Arc::new(MvccStore::in_memory(Options::default()).unwrap())
}

fn registration(name: &str, short: &str) -> ApiRegistration {
    ApiRegistration {
        name: name.into(),
        short_name: short.into(),
        active: true,
        owner: "sre-a".into(),
        ..ApiRegistration::default()
    }
}

#[tokio::test]
async fn create_stamps_the_scope_and_mints_a_sync_id() {
    let store = store();
    let catalog = catalog(&store, "sandbox", "eu-west-1");
    let mut body = registration("compute.example.com", "compute");
    body.platform = "elsewhere".into();
    body.canary_namespaces = vec!["sneaky".into()];
    let created = catalog.create_registration(body).await.unwrap();
    assert_eq!((created.object.platform.as_str(), created.object.region.as_str()), ("sandbox", "eu-west-1"));
    assert_eq!(created.object.sync_id, "id-1");
    assert!(created.object.canary_namespaces.is_empty(), "only the sync endpoint sets a canary");
    let json = created.to_json(&catalog.api_version(), "ApiRegistration");
    assert_eq!(json["metadata"]["name"], "compute.example.com");
    assert_eq!(json["apiVersion"], "catalog.example.com/v1");
    assert_eq!(json["short_name"], "compute");

    let explicit = ApiRegistration { sync_id: "release-42".into(), ..registration("vault.example.com", "") };
    assert_eq!(catalog.create_registration(explicit).await.unwrap().object.sync_id, "release-42");

    let single = catalog.create_registration(registration("compute", "")).await.unwrap_err();
    assert!(matches!(single, CatalogError::Invalid(_)), "{single}");
    let again = catalog.create_registration(registration("compute.example.com", "")).await.unwrap_err();
    assert!(matches!(again, CatalogError::Conflict(ref m) if m.contains("already exists")), "{again}");
    let alias = catalog.create_registration(registration("other.example.com", "compute")).await.unwrap_err();
    assert!(matches!(alias, CatalogError::Conflict(ref m) if m.contains("compute.example.com")), "{alias}");
    assert!(catalog.registration("other.example.com").await.is_err(), "a refused create writes nothing");
}

#[tokio::test]
async fn updates_keep_what_clients_do_not_own() {
    let store = store();
    let catalog = catalog(&store, "p", "r");
    catalog.create_registration(registration("compute.example.com", "compute")).await.unwrap();
    catalog.subscribe("sre", Subscription::new("", "compute.example.com", true)).await.unwrap();
    let canary = SyncRequest { canary_namespaces: vec!["sre".into()] };
    catalog.sync("compute.example.com", &canary).await.unwrap();

    let changes = |value: Value| value.as_object().unwrap().clone();
    let renamed = changes(json!({"name": "other.example.com"}));
    assert!(matches!(
        catalog.update_registration("compute.example.com", &renamed).await,
        Err(CatalogError::Invalid(_))
    ));
    let owner_only = changes(
        json!({"name": "compute.example.com", "owner": "sre-b", "canary_namespaces": [], "platform": "x"}),
    );
    let updated = catalog.update_registration("compute.example.com", &owner_only).await.unwrap();
    assert_eq!(updated.object.owner, "sre-b");
    assert!(
        updated.object.active && updated.object.short_name == "compute",
        "fields left out keep their values"
    );
    assert_eq!(updated.object.sync_id, "id-2", "an update without a sync_id keeps the current one");
    assert_eq!(updated.object.canary_namespaces, ["sre"], "an unrelated update does not end a rollout");
    assert_eq!(updated.object.platform, "p");

    let released = changes(json!({"short_name": ""}));
    catalog.update_registration("compute.example.com", &released).await.unwrap();
    catalog.create_registration(registration("next.example.com", "compute")).await.unwrap();

    let tagged = changes(json!({"sync_id": "release-7"}));
    assert_eq!(
        catalog.update_registration("compute.example.com", &tagged).await.unwrap().object.sync_id,
        "release-7"
    );
    let taken = changes(json!({"short_name": "compute"}));
    assert!(matches!(
        catalog.update_registration("compute.example.com", &taken).await,
        Err(CatalogError::Conflict(_))
    ));
    let wrong_type = changes(json!({"active": "yes"}));
    assert!(matches!(
        catalog.update_registration("compute.example.com", &wrong_type).await,
        Err(CatalogError::Invalid(_))
    ));
}

#[tokio::test]
async fn scopes_are_apart_but_dependencies_cross_them() {
    let store = store();
    let sandbox = catalog(&store, "sandbox", "eu-west-1");
    let prod = catalog(&store, "prod", "us-east-1");
    sandbox.create_registration(registration("compute.example.com", "compute")).await.unwrap();
    prod.create_registration(registration("compute.example.com", "compute")).await.unwrap();
    assert_eq!(prod.registrations().await.unwrap().len(), 1, "each instance sees its own");

    let dependency = DependencyRef {
        platform: "sandbox".into(),
        region: "eu-west-1".into(),
        name: "compute.example.com".into(),
    };
    let app = ApiRegistration { depends_on: vec![dependency.clone()], ..registration("app.example.com", "") };
    prod.create_registration(app).await.unwrap();
    let missing = DependencyRef { name: "vault.example.com".into(), ..dependency.clone() };
    let broken = ApiRegistration { depends_on: vec![missing], ..registration("broken.example.com", "") };
    let refused = prod.create_registration(broken).await.unwrap_err();
    assert!(
        refused.to_string().contains("no registration vault.example.com in sandbox/eu-west-1"),
        "{refused}"
    );

    let held = sandbox.delete_registration("compute.example.com").await.unwrap_err();
    assert!(
        matches!(held, CatalogError::Conflict(ref m) if m.contains("app.example.com in prod/us-east-1")),
        "{held}"
    );
    prod.delete_registration("app.example.com").await.unwrap();
    sandbox.delete_registration("compute.example.com").await.unwrap();
    assert!(
        prod.registration("compute.example.com").await.is_ok(),
        "the other scope's namesake is untouched"
    );
}

#[tokio::test]
async fn subscriptions_hold_their_registration_and_report_status() {
    let store = store();
    let catalog = catalog(&store, "p", "r");
    let missing =
        catalog.subscribe("sre", Subscription::new("", "compute.example.com", true)).await.unwrap_err();
    assert!(matches!(missing, CatalogError::NotFound(_)), "{missing}");
    catalog.create_registration(registration("compute.example.com", "compute")).await.unwrap();
    let subscribed =
        catalog.subscribe("sre", Subscription::new("", "compute.example.com", true)).await.unwrap();
    assert_eq!(subscribed.metadata["name"], "compute.example.com");
    assert_eq!(subscribed.object.status.state, "pending");
    assert!(matches!(
        catalog.subscribe("sre", Subscription::new("", "compute.example.com", true)).await,
        Err(CatalogError::Conflict(_))
    ));
    catalog.subscribe("apps", Subscription::new("", "compute.example.com", true)).await.unwrap();

    let held = catalog.delete_registration("compute.example.com").await.unwrap_err();
    assert!(matches!(held, CatalogError::Conflict(ref m) if m.contains("subscriptions")), "{held}");
    let typo = SyncRequest { canary_namespaces: vec!["sre-typo".into()] };
    assert!(matches!(catalog.sync("compute.example.com", &typo).await, Err(CatalogError::Sync(_))));

    let status = catalog.status("compute.example.com").await.unwrap();
    assert!(status.subscriptions.is_empty(), "none has been reconciled yet");
    assert_eq!(status.sync_id, "id-1");

    catalog.unsubscribe("sre", "compute.example.com").await.unwrap();
    catalog.unsubscribe("apps", "compute.example.com").await.unwrap();
    catalog.delete_registration("compute.example.com").await.unwrap();
    catalog.create_registration(registration("again.example.com", "compute")).await.unwrap();
}

#[tokio::test]
async fn reserved_groups_cannot_be_registered() {
    let store = store();
    let catalog = catalog(&store, "p", "r");
    for (name, why) in [
        ("catalog.example.com", "the catalog's own group is always reserved"),
        ("fleet.example.com", "a group the scope reserves"),
        ("authorization.k8s.io", "a Kubernetes group the embedder serves"),
    ] {
        let refused = catalog.create_registration(registration(name, "")).await.unwrap_err();
        assert!(
            matches!(&refused, CatalogError::Invalid(problems)
                if problems[0].to_string().starts_with(&format!("name: {name:?} is an API group"))),
            "{why}: {refused}"
        );
        assert!(
            matches!(catalog.registration(name).await, Err(CatalogError::NotFound(_))),
            "{why}: a refused create writes nothing"
        );
    }
    let elsewhere = catalog.create_registration(registration("catalog.example.org", "")).await;
    assert!(elsewhere.is_ok(), "another domain's catalog group is anyone's: {elsewhere:?}");
}

#[tokio::test]
async fn subscriptions_need_a_namespace_that_takes_them() {
    let store = store();
    let namespaces = TestNamespaces(vec![
        ("ghost", Some(NamespaceState::Absent)),
        ("leaving", Some(NamespaceState::Terminating)),
        ("unreachable", None),
    ]);
    let catalog = catalog_in(&store, scope("p", "r"), namespaces);
    catalog.create_registration(registration("compute.example.com", "compute")).await.unwrap();
    let subscribe = |namespace: &'static str| {
        catalog.subscribe(namespace, Subscription::new("", "compute.example.com", true))
    };

    let missing = subscribe("ghost").await.unwrap_err();
    assert!(
        matches!(&missing, CatalogError::NotFound(message) if message == "namespaces \"ghost\" not found"),
        "{missing}"
    );
    let leaving = subscribe("leaving").await.unwrap_err();
    assert!(matches!(&leaving, CatalogError::NamespaceTerminating(namespace) if namespace == "leaving"));
    assert_eq!(
        leaving.to_string(),
        "unable to create new content in namespace leaving because it is being terminated"
    );
    let unreachable = subscribe("unreachable").await.unwrap_err();
    assert!(
        matches!(&unreachable, CatalogError::Store(store) if store.is_retryable()),
        "a namespace source that cannot answer is a retryable store failure: {unreachable}"
    );
    assert!(catalog.all_subscriptions().await.unwrap().is_empty(), "a refused subscribe writes nothing");

    subscribe("sre").await.unwrap();
    assert_eq!(catalog.subscriptions("compute.example.com").await.unwrap().len(), 1);
}

#[tokio::test]
async fn a_canary_may_name_an_inactive_subscription() {
    let store = store();
    let catalog = catalog(&store, "p", "r");
    catalog.create_registration(registration("compute.example.com", "compute")).await.unwrap();
    catalog.subscribe("sre", Subscription::new("", "compute.example.com", true)).await.unwrap();
    catalog.subscribe("idle", Subscription::new("", "compute.example.com", false)).await.unwrap();

    let idle = SyncRequest { canary_namespaces: vec!["idle".into()] };
    let synced = catalog.sync("compute.example.com", &idle).await.unwrap();
    assert_eq!(synced.object.canary_namespaces, ["idle"], "an inactive subscription is still a subscription");

    let typo = SyncRequest { canary_namespaces: vec!["idle".into(), "idel".into()] };
    let refused = catalog.sync("compute.example.com", &typo).await.unwrap_err();
    assert!(
        matches!(&refused, CatalogError::Sync(SyncError::NotSubscribed { namespace, .. }) if namespace == "idel"),
        "{refused}"
    );
    assert_eq!(refused.to_string(), "namespace \"idel\" is not subscribed to compute.example.com");
}
