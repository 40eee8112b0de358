//! `POST /apis/authorization.example.com/v1/check`: apps asking Kayra for RBAC decisions about
//! their own APIs, for themselves, for a forwarded end-user token, or (with the right) for a
//! named user.

use kayra_testkit::{Store, TestServer};
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::{eventually, status_of};

const CHECK: &str = "/apis/authorization.example.com/v1/check";

#[tokio::test]
async fn apps_ask_for_decisions_on_their_own_apis() {
    let server = TestServer::start(Store::Memory).await;
    let (admin, url) = (server.admin(), server.url());
    server.add_token("app-token", "telemetry-app", "");
    server.add_token("bob-token", "bob", "dev");
    let role = json!({"apiVersion": "authorization.example.com/v1", "kind": "Role", "metadata": {"name": "machine-reader"},
                      "rules": [{"apis": ["compute.example.com"], "resources": ["machines", "machines/console"], "verbs": ["get", "list"]}]});
    admin
        .post(format!("{url}/apis/authorization.example.com/v1/namespaces/default/roles"))
        .json(&role)
        .send()
        .await
        .unwrap();
    let binding = json!({"apiVersion": "authorization.example.com/v1", "kind": "RoleBinding", "metadata": {"name": "dev-reads-machines"},
                         "subjects": [{"kind": "Group", "name": "dev"}], "roleRef": {"kind": "Role", "name": "machine-reader"}});
    admin
        .post(format!("{url}/apis/authorization.example.com/v1/namespaces/default/rolebindings"))
        .json(&binding)
        .send()
        .await
        .unwrap();

    let client = server.anonymous();
    let ask = |token: &'static str, body: Value| {
        client.post(format!("{url}{CHECK}")).bearer_auth(token).json(&body)
    };
    let machines = |verb: &str, namespace: &str| json!({"api": "compute.example.com", "namespace": namespace, "resource": "machines", "verb": verb, "token": "bob-token"});
    let ready = eventually(StatusCode::OK, || ask("app-token", machines("get", "default"))).await;
    assert_eq!(ready, StatusCode::OK);
    let decide = |body: Value| async {
        let (code, answer) = status_of(ask("app-token", body).send().await.unwrap()).await;
        assert_eq!(code, StatusCode::OK, "{answer}");
        answer
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while decide(machines("get", "default")).await["allowed"] != true {
        assert!(std::time::Instant::now() < deadline, "the binding never took effect");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(decide(machines("list", "default")).await["allowed"], true);
    assert_eq!(decide(machines("delete", "default")).await["allowed"], false);
    assert_eq!(decide(machines("get", "other")).await["allowed"], false, "only where the role is bound");
    let console = json!({"api": "compute.example.com", "namespace": "default", "resource": "machines", "subresource": "console", "name": "m1", "verb": "get", "token": "bob-token"});
    assert_eq!(decide(console).await["allowed"], true);
    let forged = json!({"api": "compute.example.com", "namespace": "default", "resource": "machines", "verb": "get", "token": "forged"});
    let answer = decide(forged).await;
    assert_eq!(
        (answer["allowed"].as_bool(), answer["reason"].as_str()),
        (Some(false), Some("the token does not authenticate"))
    );
    let itself =
        json!({"api": "compute.example.com", "namespace": "default", "resource": "machines", "verb": "get"});
    assert_eq!(decide(itself).await["allowed"], false, "the app itself holds no grant");

    let on_behalf = json!({"api": "compute.example.com", "namespace": "default", "resource": "machines", "verb": "get", "user": "eve", "groups": ["dev"]});
    let (code, _) = status_of(ask("app-token", on_behalf.clone()).send().await.unwrap()).await;
    assert_eq!(code, StatusCode::FORBIDDEN, "naming a user needs the right to ask about others");
    let (code, answer) =
        status_of(admin.post(format!("{url}{CHECK}")).json(&on_behalf).send().await.unwrap()).await;
    assert_eq!((code, answer["allowed"].as_bool()), (StatusCode::OK, Some(true)), "{answer}");

    let (code, _) = status_of(
        ask("app-token", json!({"api": "compute.example.com", "verb": "get"})).send().await.unwrap(),
    )
    .await;
    assert_eq!(code, StatusCode::BAD_REQUEST, "a resource is required");
    let (code, _) = status_of(
        ask("app-token", json!({"resource": "x", "verb": "get", "colour": "red"})).send().await.unwrap(),
    )
    .await;
    assert_eq!(code, StatusCode::BAD_REQUEST, "unknown fields are refused");
    let anonymous =
        client.post(format!("{url}{CHECK}")).json(&machines("get", "default")).send().await.unwrap();
    assert_eq!(anonymous.status(), StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn the_check_is_advertised_as_a_create_only_resource() {
    let server = TestServer::start(Store::Memory).await;
    let (admin, url) = (server.admin(), server.url());

    let accept = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";
    let aggregated: Value =
        admin.get(format!("{url}/apis")).header("Accept", accept).send().await.unwrap().json().await.unwrap();
    let group = aggregated["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|group| group["metadata"]["name"] == "authorization.example.com")
        .unwrap_or_else(|| panic!("authorization.example.com is not listed: {aggregated}"));
    let check = group["versions"][0]["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|resource| resource["resource"] == "check")
        .unwrap_or_else(|| panic!("aggregated discovery lists no check: {group}"));
    assert_eq!((check["scope"].as_str(), &check["verbs"]), (Some("Cluster"), &json!(["create"])), "{check}");

    let (code, legacy) =
        status_of(admin.get(format!("{url}/apis/authorization.example.com/v1")).send().await.unwrap()).await;
    assert_eq!(code, StatusCode::OK, "{legacy}");
    let check = legacy["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|resource| resource["name"] == "check")
        .unwrap_or_else(|| panic!("the resource list has no check: {legacy}"));
    assert_eq!(
        (check["namespaced"].as_bool(), &check["verbs"]),
        (Some(false), &json!(["create"])),
        "{check}"
    );

    // What is advertised is what is served: a POST decides, anything else is not allowed.
    let (code, answer) = status_of(
        admin
            .post(format!("{url}{CHECK}"))
            .json(&json!({"api": "compute.example.com", "resource": "machines", "verb": "get"}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!((code, answer["allowed"].as_bool()), (StatusCode::OK, Some(true)), "{answer}");
    for (method, path) in [
        (reqwest::Method::GET, CHECK.to_owned()),
        (reqwest::Method::GET, format!("{CHECK}/anything")),
        (reqwest::Method::DELETE, format!("{CHECK}/anything")),
    ] {
        let code = admin.request(method.clone(), format!("{url}{path}")).send().await.unwrap().status();
        assert_eq!(code, StatusCode::METHOD_NOT_ALLOWED, "{method} {path}");
    }
}
