//! The RBAC table: every combination of verb, resource and subresource, namespace scope,
//! binding kind, subject kind and resourceNames, decided by the authorizer in-process and
//! again by the server over HTTPS, both against what Kubernetes RBAC says.

use kayra_api::kinds::rbac::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use kayra_authz::{Action, Caller, Rbac};
use kayra_testkit::{Store, TestServer};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

const FLEET: &str = "fleet.example.com";
const RBAC: &str = "authorization.example.com";

/// Where a user's grant reaches, and whether it names only `web`.
#[derive(Debug, Clone, Copy)]
enum Reach {
    Nothing,
    NamespaceA,
    Everywhere,
}

struct User {
    name: &'static str,
    groups: &'static str,
    reach: Reach,
    only_web: bool,
}

const USERS: &[User] = &[
    User { name: "u-role", groups: "", reach: Reach::NamespaceA, only_web: false },
    User { name: "u-role-web", groups: "", reach: Reach::NamespaceA, only_web: true },
    User { name: "u-crole", groups: "", reach: Reach::NamespaceA, only_web: false },
    User { name: "u-crole-web", groups: "", reach: Reach::NamespaceA, only_web: true },
    User { name: "u-cluster", groups: "", reach: Reach::Everywhere, only_web: false },
    User { name: "u-cluster-web", groups: "", reach: Reach::Everywhere, only_web: true },
    User { name: "u-group", groups: "g-a", reach: Reach::NamespaceA, only_web: false },
    User { name: "u-none", groups: "g-none", reach: Reach::Nothing, only_web: false },
];

/// The grant: read and update applications, patch their status.
fn rules(only_web: bool) -> Value {
    let names = if only_web { json!(["web"]) } else { json!([]) };
    json!([
        {"apis": [FLEET], "resources": ["applications"], "resourceNames": names, "verbs": ["get", "list", "watch", "update"]},
        {"apis": [FLEET], "resources": ["applications/status"], "resourceNames": names, "verbs": ["patch"]},
    ])
}

/// The RBAC objects: a Role and a ClusterRole of each grant, and one binding per user.
fn objects() -> Vec<(&'static str, Option<&'static str>, Value)> {
    let mut objects = Vec::new();
    for (suffix, only_web) in [("", false), ("-web", true)] {
        let name = format!("table-grant{suffix}");
        objects.push((
            "roles",
            Some("a"),
            json!({"kind": "Role", "metadata": {"name": name, "namespace": "a"}, "rules": rules(only_web)}),
        ));
        objects.push((
            "clusterroles",
            None,
            json!({"kind": "ClusterRole", "metadata": {"name": name}, "rules": rules(only_web)}),
        ));
    }
    let binding = |kind: &str, name: &str, subject: Value, role_kind: &str, role: &str| json!({"kind": kind, "metadata": {"name": name, "namespace": "a"}, "subjects": [subject], "roleRef": {"kind": role_kind, "name": role}});
    let user = |name: &str| json!({"kind": "User", "name": name});
    objects.push((
        "rolebindings",
        Some("a"),
        binding("RoleBinding", "b-role", user("u-role"), "Role", "table-grant"),
    ));
    objects.push((
        "rolebindings",
        Some("a"),
        binding("RoleBinding", "b-role-web", user("u-role-web"), "Role", "table-grant-web"),
    ));
    objects.push((
        "rolebindings",
        Some("a"),
        binding("RoleBinding", "b-crole", user("u-crole"), "ClusterRole", "table-grant"),
    ));
    objects.push((
        "rolebindings",
        Some("a"),
        binding("RoleBinding", "b-crole-web", user("u-crole-web"), "ClusterRole", "table-grant-web"),
    ));
    objects.push((
        "rolebindings",
        Some("a"),
        binding(
            "RoleBinding",
            "b-group",
            json!({"kind": "Group", "name": "g-a"}),
            "ClusterRole",
            "table-grant",
        ),
    ));
    let mut missing = binding("RoleBinding", "b-to-missing-role", user("u-none"), "Role", "table-grant");
    missing["metadata"]["namespace"] = json!("b");
    objects.push(("rolebindings", Some("b"), missing));
    let mut cluster =
        binding("ClusterRoleBinding", "b-cluster", user("u-cluster"), "ClusterRole", "table-grant");
    cluster["metadata"].as_object_mut().unwrap().remove("namespace");
    objects.push(("clusterrolebindings", None, cluster));
    let mut cluster_web = binding(
        "ClusterRoleBinding",
        "b-cluster-web",
        user("u-cluster-web"),
        "ClusterRole",
        "table-grant-web",
    );
    cluster_web["metadata"].as_object_mut().unwrap().remove("namespace");
    objects.push(("clusterrolebindings", None, cluster_web));
    objects
}

/// One request of the table.
#[derive(Debug)]
struct Case {
    verb: &'static str,
    resource: &'static str,
    namespace: Option<&'static str>,
    name: Option<&'static str>,
}

fn cases() -> Vec<Case> {
    let mut cases = Vec::new();
    for namespace in ["a", "b"] {
        for name in ["web", "db"] {
            for resource in ["applications", "applications/status", "services"] {
                for verb in ["get", "update", "patch", "delete"] {
                    if resource.ends_with("/status") && verb == "delete" {
                        continue;
                    }
                    cases.push(Case { verb, resource, namespace: Some(namespace), name: Some(name) });
                }
            }
        }
    }
    for resource in ["applications", "services"] {
        for namespace in [Some("a"), Some("b"), None] {
            for verb in ["list", "watch", "create", "deletecollection"] {
                if verb == "create" && namespace.is_none() {
                    continue;
                }
                cases.push(Case { verb, resource, namespace, name: None });
            }
        }
    }
    cases
}

/// What Kubernetes RBAC decides, from the grant's description alone.
fn expected(user: &User, case: &Case) -> bool {
    let granted = match case.resource {
        "applications" => matches!(case.verb, "get" | "list" | "watch" | "update"),
        "applications/status" => case.verb == "patch",
        _ => false,
    };
    let reached = match user.reach {
        Reach::Nothing => false,
        Reach::NamespaceA => case.namespace == Some("a"),
        Reach::Everywhere => true,
    };
    granted && reached && (!user.only_web || case.name == Some("web"))
}

fn request(
    server: &TestServer,
    client: &reqwest::Client,
    token: &str,
    case: &Case,
) -> reqwest::RequestBuilder {
    let (plural, sub) = match case.resource.split_once('/') {
        Some((plural, sub)) => (plural, Some(sub)),
        None => (case.resource, None),
    };
    let mut path = format!("{}/apis/{FLEET}/v1", server.url());
    if let Some(namespace) = case.namespace {
        path.push_str(&format!("/namespaces/{namespace}"));
    }
    path.push_str(&format!("/{plural}"));
    if let Some(name) = case.name {
        path.push_str(&format!("/{name}"));
    }
    if let Some(sub) = sub {
        path.push_str(&format!("/{sub}"));
    }
    let kind = if plural == "applications" { "Application" } else { "Service" };
    let spec = if plural == "applications" {
        json!({"command": ["/bin/true"]})
    } else {
        json!({"ports": [{"port": 80}]})
    };
    let body = json!({"apiVersion": format!("{FLEET}/v1"), "kind": kind,
                      "metadata": {"name": case.name.unwrap_or("new"), "namespace": case.namespace}, "spec": spec});
    let builder = match case.verb {
        "get" | "list" => client.get(path),
        "watch" => client.get(format!("{path}?watch=true&timeoutSeconds=1")),
        "create" => client.post(path).json(&body),
        "update" => client.put(path).json(&body),
        "patch" => client
            .request(Method::PATCH, path)
            .header("Content-Type", "application/merge-patch+json")
            .body(r#"{"metadata":{"labels":{"patched":"yes"}}}"#),
        "delete" | "deletecollection" => client.delete(path),
        other => unreachable!("no request for {other}"),
    };
    builder.bearer_auth(token)
}

#[tokio::test]
async fn the_rbac_table_holds_in_process_and_over_http() {
    let server = TestServer::start(Store::Memory).await;
    let admin = server.admin();
    let url = server.url();
    let mut rbac = Rbac::default();
    for namespace in ["a", "b"] {
        let body = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}});
        admin.post(format!("{url}/api/v1/namespaces")).json(&body).send().await.unwrap();
        rbac.add_namespace(namespace);
        for name in ["web", "db"] {
            let app = json!({"apiVersion": format!("{FLEET}/v1"), "kind": "Application", "metadata": {"name": name}, "spec": {"command": ["/bin/true"]}});
            let service = json!({"apiVersion": format!("{FLEET}/v1"), "kind": "Service", "metadata": {"name": name}, "spec": {"ports": [{"port": 80}]}});
            for (plural, body) in [("applications", app), ("services", service)] {
                let created = admin
                    .post(format!("{url}/apis/{FLEET}/v1/namespaces/{namespace}/{plural}"))
                    .json(&body)
                    .send()
                    .await
                    .unwrap();
                assert_eq!(created.status(), StatusCode::CREATED, "{:?}", created.text().await);
            }
        }
    }
    for (plural, namespace, mut object) in objects() {
        object["apiVersion"] = json!(format!("{RBAC}/v1"));
        let path = match namespace {
            Some(namespace) => format!("{url}/apis/{RBAC}/v1/namespaces/{namespace}/{plural}"),
            None => format!("{url}/apis/{RBAC}/v1/{plural}"),
        };
        let created = admin.post(path).json(&object).send().await.unwrap();
        assert_eq!(created.status(), StatusCode::CREATED, "{:?}", created.text().await);
        match plural {
            "roles" => rbac.add_role(serde_json::from_value::<Role>(object).unwrap()),
            "clusterroles" => rbac.add_cluster_role(serde_json::from_value::<ClusterRole>(object).unwrap()),
            "rolebindings" => rbac.add_binding(serde_json::from_value::<RoleBinding>(object).unwrap()),
            _ => rbac.add_cluster_binding(serde_json::from_value::<ClusterRoleBinding>(object).unwrap()),
        }
    }
    for user in USERS {
        server.add_token(&format!("{}-token", user.name), user.name, user.groups);
    }
    let client = server.anonymous();
    let probe = Case { verb: "list", resource: "applications", namespace: None, name: None };
    let ready = crate::eventually(StatusCode::OK, || {
        request(
            &server,
            &client,
            "u-cluster-web-token",
            &Case { name: Some("web"), verb: "get", namespace: Some("b"), ..probe },
        )
    })
    .await;
    assert_eq!(ready, StatusCode::OK, "the last binding reached the server's RBAC index");

    let mut failures = Vec::new();
    let mut checked = 0;
    for user in USERS {
        let mut groups: Vec<String> =
            user.groups.split(',').filter(|g| !g.is_empty()).map(str::to_owned).collect();
        groups.push("system:authenticated".to_owned());
        let caller = Caller { user: user.name.to_owned(), groups };
        for case in cases() {
            let want = expected(user, &case);
            let action = Action::Resource {
                verb: case.verb.to_owned(),
                api: FLEET.to_owned(),
                resource: case.resource.to_owned(),
                namespace: case.namespace.map(str::to_owned),
                name: case.name.map(str::to_owned),
            };
            if rbac.allows(&caller, &action) != want {
                failures.push(format!("in-process: {} {case:?} should be {want}", user.name));
            }
            let code = request(&server, &client, &format!("{}-token", user.name), &case)
                .send()
                .await
                .unwrap()
                .status();
            if (code != StatusCode::FORBIDDEN) != want {
                failures.push(format!(
                    "over HTTP: {} {case:?} answered {code}, should be allowed={want}",
                    user.name
                ));
            }
            checked += 1;
        }
    }
    assert!(checked >= 450, "only {checked} cases");
    assert!(failures.is_empty(), "{} of {checked} cases failed:\n{}", failures.len(), failures.join("\n"));
}
