//! Requests become the RBAC questions kube-apiserver would ask of them.

use std::sync::Arc;

use kayra_api::clock::SystemClock;
use kayra_api::scheme::Scheme;
use kayra_api::verb::Verb;
use kayra_authn::Identity;
use kayra_registry::{Registry, RegistryError};
use kayra_store::mvcc::{MvccStore, Options};

use super::*;

#[test]
fn a_list_selecting_one_metadata_name_is_authorized_as_a_request_for_that_name() {
    let check = |selector: &str, expected: Option<&str>| {
        assert_eq!(selected_name(selector).as_deref(), expected, "{selector:?}");
    };
    check("metadata.name=n1", Some("n1"));
    check("metadata.name==n1", Some("n1"));
    check("spec.unschedulable=false,metadata.name=n1", Some("n1"));
    check("metadata.name!=n1", None);
    check("metadata.name=", None);
    check("metadata.namespace=n1", None);
    check("spec.nodeName=n1", None);
    check("", None);
}

fn layer() -> ApplicationLayer {
    let store = Arc::new(MvccStore::in_memory(Options::default()).expect("a memory store"));
    let registry = Registry::new(store, Arc::new(SystemClock), "/registry/");
    ApplicationLayer::new(Arc::new(Scheme::new("example.com")), registry)
}

#[tokio::test]
async fn each_request_is_the_rbac_question_kube_apiserver_asks() {
    let layer = layer();
    let kind = |group: &str, plural: &str| layer.scheme().find(group, "v1", plural).expect("served").clone();
    let apps = kind("fleet.example.com", "applications");
    let cases: Vec<(Request, Action)> = vec![
        (
            Request::kind(Verb::Get, apps.clone(), Some("demo"), Some("web")).subresource("log"),
            Action::Resource {
                verb: "get".into(),
                api: "fleet.example.com".into(),
                resource: "applications/log".into(),
                namespace: Some("demo".into()),
                name: Some("web".into()),
            },
        ),
        (
            Request::kind(Verb::List, kind("", "nodes"), Some("ignored"), None)
                .field_selector(Some("metadata.name=n1")),
            Action::Resource {
                verb: "list".into(),
                api: String::new(),
                resource: "nodes".into(),
                namespace: None,
                name: Some("n1".into()),
            },
        ),
        (
            Request::kind(Verb::List, kind("catalog.example.com", "subscriptions"), Some("demo"), None)
                .field_selector(Some("metadata.name=s")),
            Action::Resource {
                verb: "list".into(),
                api: "catalog.example.com".into(),
                resource: "subscriptions".into(),
                namespace: Some("demo".into()),
                name: None,
            },
        ),
        (
            Request::check(),
            Action::Resource {
                verb: "create".into(),
                api: "authorization.example.com".into(),
                resource: "check".into(),
                namespace: None,
                name: None,
            },
        ),
        (Request::path("/apis"), Action::NonResource { verb: "get".into(), path: "/apis".into() }),
    ];
    for (request, expected) in cases {
        assert_eq!(layer.action(&request.clone().decided()), expected, "{request:?}");
    }
}

#[tokio::test]
async fn a_stream_to_a_process_is_a_create_whatever_the_method() {
    let layer = layer();
    let pods = layer.scheme().find("", "v1", "pods").expect("served").clone();
    let apps = layer.scheme().find("fleet.example.com", "v1", "applications").expect("served").clone();
    for (kind, api) in [(&pods, ""), (&apps, "fleet.example.com")] {
        for sub in kayra_api::scheme::STREAMS {
            // kubectl's WebSocket GET, then its SPDY POST.
            for verb in [Verb::Get, Verb::Create] {
                let request = Request::kind(verb, kind.clone(), Some("demo"), Some("web")).subresource(sub);
                let decided = request.decided();
                assert_eq!(decided.verb, Verb::Create, "{sub}");
                assert_eq!(
                    layer.action(&decided),
                    Action::Resource {
                        verb: "create".into(),
                        api: api.into(),
                        resource: format!("{}/{sub}", kind.plural),
                        namespace: Some("demo".into()),
                        name: Some("web".into()),
                    }
                );
            }
        }
    }
    // Any other subresource keeps the verb its method reads as.
    let log = Request::kind(Verb::Get, pods, Some("demo"), Some("web")).subresource("log");
    assert_eq!(log.decided().verb, Verb::Get);
}

#[tokio::test]
async fn a_caller_without_a_namespace_grant_sees_the_namespaces_it_is_bound_in() {
    let layer = layer();
    let nobody = Identity::new("mallory", "", vec![]);
    let namespaces = layer.scheme().find("", "v1", "namespaces").expect("served").clone();
    let list = Request::kind(Verb::List, namespaces.clone(), None, None);
    match layer.authorize(&nobody, &list) {
        Ok(Scope::Namespaces { visible, denied }) => {
            assert!(visible.is_empty());
            assert!(denied.contains("User \"mallory\" cannot list resource \"namespaces\""), "{denied}");
        }
        other => panic!("expected the bound namespaces, got {other:?}"),
    }
    let watch = Request::kind(Verb::Watch, namespaces.clone(), None, None);
    assert!(matches!(layer.authorize(&nobody, &watch), Err(RegistryError::Forbidden(_))));
    let create = Request::kind(Verb::Create, namespaces, None, None);
    assert!(matches!(layer.authorize(&nobody, &create), Err(RegistryError::Forbidden(_))));
    let admin = Identity::new("admin", "", vec![kayra_authz::MASTERS.to_owned()]);
    assert!(matches!(layer.authorize(&admin, &list), Ok(Scope::All)));
}

#[tokio::test]
async fn impersonation_needs_impersonate_on_every_user_group_and_uid() {
    let layer = layer();
    let nobody = Identity::new("mallory", "", vec![]);
    let wanted = Impersonation { user: "alice".into(), groups: vec!["devs".into()], uid: None };
    match layer.impersonate(&nobody, &wanted) {
        Err(RegistryError::Forbidden(message)) => {
            assert!(message.contains("cannot impersonate resource \"users\""), "{message}")
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    let admin = Identity::new("admin", "", vec![kayra_authz::MASTERS.to_owned()]);
    let acting = layer.impersonate(&admin, &wanted).expect("a master may impersonate");
    assert_eq!((acting.user.as_str(), acting.groups.contains(&"devs".to_owned())), ("alice", true));
}

#[tokio::test]
async fn only_the_replicas_read_a_session_log_and_nobody_impersonates_them() {
    let layer = layer();
    let admin = Identity::new("admin", "", vec![kayra_authz::MASTERS.to_owned()]);
    let replica =
        Identity::new("system:kayra:controller:r1", "", vec![kayra_authn::CONTROLLERS_GROUP.to_owned()]);
    let node = Identity::new("system:node:n1", "", vec![kayra_authz::NODES.to_owned()]);
    let bootstrap = Identity::new(
        "system:bootstrap:abcdef",
        "",
        vec![kayra_authn::bootstrap::BOOTSTRAPPERS.to_owned(), "system:bootstrappers:workers".to_owned()],
    );
    for (asked, what) in
        [(Request::session_log("n1"), "nodes/sessionlog"), (Request::session_usage(), "sessionusage")]
    {
        assert!(matches!(layer.authorize(&replica, &asked), Ok(Scope::All)), "a replica may read {what}");
        for (caller, who) in
            [(&admin, "a master"), (&node, "the node itself"), (&bootstrap, "a bootstrap token")]
        {
            match layer.authorize(caller, &asked) {
                Err(RegistryError::Forbidden(message)) => assert!(message.contains(what), "{message}"),
                other => panic!("{who} reads no {what}: {other:?}"),
            }
        }
    }
    let wanted = Impersonation {
        user: "anyone".into(),
        groups: vec![kayra_authn::CONTROLLERS_GROUP.to_owned()],
        uid: None,
    };
    assert!(
        matches!(layer.impersonate(&admin, &wanted), Err(RegistryError::Forbidden(_))),
        "not even a master acts as a replica"
    );
}
