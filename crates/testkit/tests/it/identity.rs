//! Workload identity over real HTTPS: the issuer's public documents read without credentials,
//! a token minted through an Application's `token` subresource used as a bearer token within
//! what a RoleBinding to its ServiceAccount allows, TokenReview of live, deleted, expired and
//! forged tokens, a key rotation that keeps old tokens valid, and a verifier elsewhere (PyJWT)
//! checking a token against the discovery document and JWKS alone.

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use kayra_testkit::{Store, TestServer};
use reqwest::StatusCode;
use serde_json::{Value, json};

use super::{APPS, app, eventually, status_of};

const RBAC: &str = "/apis/authorization.example.com/v1/namespaces/default";
const REVIEWS: &str = "/apis/authentication.k8s.io/v1/tokenreviews";

/// Mints a token for the Application `name` through its `token` subresource.
async fn token_for(server: &TestServer, name: &str, spec: Value) -> String {
    let request = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec});
    let response = server
        .admin()
        .post(format!("{}{APPS}/{name}/token", server.url()))
        .json(&request)
        .send()
        .await
        .unwrap();
    let (code, body) = status_of(response).await;
    assert_eq!(code, StatusCode::CREATED, "{body}");
    assert_eq!(body["kind"], "TokenRequest");
    assert!(body["status"]["expirationTimestamp"].as_str().is_some_and(|at| at.ends_with('Z')), "{body}");
    body["status"]["token"].as_str().expect("a token").to_owned()
}

/// The TokenReview status of `token` for `audiences`, as the admin asks.
pub(super) async fn review(server: &TestServer, token: &str, audiences: &[&str]) -> Value {
    let review = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
                        "spec": {"token": token, "audiences": audiences}});
    let response =
        server.admin().post(format!("{}{REVIEWS}", server.url())).json(&review).send().await.unwrap();
    let (code, body) = status_of(response).await;
    assert_eq!(code, StatusCode::CREATED, "{body}");
    assert!(body["spec"].get("token").is_none(), "the answer does not carry the token back");
    body["status"].clone()
}

async fn create_app(server: &TestServer, name: &str) -> String {
    let created =
        server.admin().post(format!("{}{APPS}", server.url())).json(&app(name)).send().await.unwrap();
    let (code, body) = status_of(created).await;
    assert_eq!(code, StatusCode::CREATED, "{body}");
    body["metadata"]["uid"].as_str().expect("a uid").to_owned()
}

/// What the admin reads at `path`, as JSON.
async fn admin_get(server: &TestServer, path: &str) -> Value {
    server.admin().get(format!("{}{path}", server.url())).send().await.unwrap().json().await.unwrap()
}

/// The issuer's key set, read from its Secret as the admin.
async fn signing_keys(server: &TestServer) -> kayra_oidc::keys::KeySet {
    let path = "/apis/fleet.example.com/v1/namespaces/kayra-system/secrets/service-account-signing-keys";
    let secret = admin_get(server, path).await;
    let text = STANDARD.decode(secret["data"]["keys.json"].as_str().expect("the keys")).expect("base64");
    kayra_oidc::keys::KeySet::from_stored(&serde_json::from_slice(&text).expect("stored keys"))
        .expect("a key set")
}

#[tokio::test]
async fn the_issuers_documents_are_public_and_carry_only_public_keys() {
    let server = TestServer::start(Store::Memory).await;
    let url = server.url();
    let anonymous = server.anonymous();
    let response = anonymous.get(format!("{url}/.well-known/openid-configuration")).send().await.unwrap();
    let (code, discovery) = status_of(response).await;
    assert_eq!(code, StatusCode::OK, "{discovery}");
    assert_eq!(discovery["issuer"], url.as_str());
    assert_eq!(discovery["jwks_uri"], format!("{url}/openid/v1/jwks"));
    assert_eq!(discovery["id_token_signing_alg_values_supported"], json!(["ES256"]));
    let (code, jwks) = status_of(anonymous.get(format!("{url}/openid/v1/jwks")).send().await.unwrap()).await;
    assert_eq!(code, StatusCode::OK);
    let keys = jwks["keys"].as_array().expect("keys");
    assert_eq!(keys.len(), 1);
    assert!(keys[0].get("d").is_none(), "no private material: {jwks}");
    assert_eq!((keys[0]["kty"].as_str(), keys[0]["alg"].as_str()), (Some("EC"), Some("ES256")));
    let (code, _) = status_of(anonymous.post(format!("{url}/openid/v1/jwks")).send().await.unwrap()).await;
    assert_eq!(code, StatusCode::METHOD_NOT_ALLOWED);
    let (code, _) = status_of(anonymous.get(format!("{url}{REVIEWS}")).send().await.unwrap()).await;
    assert_eq!(code, StatusCode::UNAUTHORIZED, "everything else still needs an identity");
    let mut limited = None;
    for _ in 0..40 {
        let response = anonymous.get(format!("{url}/openid/v1/jwks")).send().await.unwrap();
        if response.status() == StatusCode::TOO_MANY_REQUESTS {
            limited = Some(status_of(response).await.1);
            break;
        }
    }
    let limited = limited.expect("the documents are rate-limited");
    assert_eq!(
        (limited["kind"].as_str(), limited["reason"].as_str()),
        (Some("Status"), Some("TooManyRequests"))
    );
    let discovered = admin_get(&server, "/apis/authentication.k8s.io/v1").await;
    let names: Vec<&str> = discovered["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .filter_map(|r| r["name"].as_str())
        .collect();
    assert!(names.contains(&"tokenreviews"), "{names:?}");
    let fleet = admin_get(&server, "/apis/fleet.example.com/v1").await;
    let token = fleet["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .find(|r| r["name"] == "applications/token")
        .expect("discovered");
    assert_eq!(token["kind"], "TokenRequest");
    assert_eq!(token["verbs"], json!(["create"]));
}

#[tokio::test]
async fn an_applications_token_is_its_service_account_within_what_its_role_binding_allows() {
    let server = TestServer::start(Store::Memory).await;
    let url = server.url();
    create_app(&server, "web").await;
    for (spec, field) in [
        (json!({"expirationSeconds": 599}), "spec.expirationSeconds"),
        (json!({"expirationSeconds": 172_801}), "spec.expirationSeconds"),
        (json!({"audiences": [""]}), "spec.audiences"),
        (json!({"boundObjectRef": {"kind": "Secret", "name": "x"}}), "spec.boundObjectRef"),
    ] {
        let request = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec});
        let response =
            server.admin().post(format!("{url}{APPS}/web/token")).json(&request).send().await.unwrap();
        let (code, status) = status_of(response).await;
        assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "{spec}: {status}");
        assert!(status["message"].as_str().unwrap_or_default().contains(field), "{status}");
    }
    let missing =
        server.admin().post(format!("{url}{APPS}/nobody/token")).json(&json!({})).send().await.unwrap();
    assert_eq!(missing.status(), StatusCode::NOT_FOUND);
    let through_pod = server
        .admin()
        .post(format!("{url}/api/v1/namespaces/default/pods/web/token"))
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    let (code, answered) = status_of(through_pod).await;
    assert_eq!(code, StatusCode::CREATED, "the Pod view mints the same token: {answered}");
    assert!(answered["status"]["token"].as_str().is_some_and(|token| token.split('.').count() == 3));
    let token = token_for(&server, "web", json!({})).await;
    let workload = server.token_builder(&token).build().unwrap();
    let whoami = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"});
    let (code, me) = status_of(
        workload
            .post(format!("{url}/apis/authentication.k8s.io/v1/selfsubjectreviews"))
            .json(&whoami)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(code, StatusCode::CREATED, "{me}");
    assert_eq!(me["status"]["userInfo"]["username"], "system:serviceaccount:default:web");
    assert_eq!(
        me["status"]["userInfo"]["groups"],
        json!(["system:serviceaccounts", "system:serviceaccounts:default", "system:authenticated"])
    );
    let list = || workload.get(format!("{url}{APPS}"));
    assert_eq!(list().send().await.unwrap().status(), StatusCode::FORBIDDEN, "nothing is bound to it yet");
    let role = json!({"apiVersion": "authorization.example.com/v1", "kind": "Role", "metadata": {"name": "app-reader"},
                      "rules": [{"apis": ["fleet.example.com"], "resources": ["applications"], "verbs": ["get", "list"]}]});
    let created = server.admin().post(format!("{url}{RBAC}/roles")).json(&role).send().await.unwrap();
    assert_eq!(created.status(), StatusCode::CREATED);
    let binding = json!({"apiVersion": "authorization.example.com/v1", "kind": "RoleBinding", "metadata": {"name": "web-reads"},
                         "subjects": [{"kind": "ServiceAccount", "name": "web", "namespace": "default"}],
                         "roleRef": {"kind": "Role", "name": "app-reader"}});
    let created =
        server.admin().post(format!("{url}{RBAC}/rolebindings")).json(&binding).send().await.unwrap();
    assert_eq!(created.status(), StatusCode::CREATED);
    assert_eq!(eventually(StatusCode::OK, list).await, StatusCode::OK, "the binding allows listing");
    let secrets = workload
        .get(format!("{url}/apis/fleet.example.com/v1/namespaces/default/secrets"))
        .send()
        .await
        .unwrap();
    assert_eq!(secrets.status(), StatusCode::FORBIDDEN, "what the binding does not allow");
    // Reviewing tokens takes create on tokenreviews, which the workload lacks.
    let asked =
        json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}});
    let (code, status) =
        status_of(workload.post(format!("{url}{REVIEWS}")).json(&asked).send().await.unwrap()).await;
    assert_eq!(code, StatusCode::FORBIDDEN, "{status}");
    assert!(!status.to_string().contains(&token), "a refusal never quotes the token");
}

#[tokio::test]
async fn a_token_review_answers_for_live_deleted_expired_and_forged_tokens() {
    let server = TestServer::start(Store::Memory).await;
    let url = server.url();
    let uid = create_app(&server, "web").await;
    let token =
        token_for(&server, "web", json!({"audiences": ["vault", &url], "expirationSeconds": 600})).await;
    let live = review(&server, &token, &[]).await;
    assert_eq!(live["authenticated"], true, "{live}");
    assert_eq!(live["user"]["username"], "system:serviceaccount:default:web");
    assert_eq!(live["user"]["uid"], uid.as_str());
    assert_eq!(live["audiences"], json!([url]));
    assert!(
        live["user"]["extra"]["authentication.kubernetes.io/credential-id"][0]
            .as_str()
            .is_some_and(|id| id.starts_with("JTI="))
    );
    let vault = review(&server, &token, &["vault", "other"]).await;
    assert_eq!(
        (vault["authenticated"].as_bool(), vault["audiences"].clone()),
        (Some(true), json!(["vault"]))
    );
    let elsewhere = review(&server, &token, &["other"]).await;
    assert_eq!(elsewhere["authenticated"], false, "no audience intersects: {elsewhere}");
    // Forged: the claims changed after signing, and a token signed by a key the issuer never had.
    let parts: Vec<&str> = token.split('.').collect();
    let mut claims: Value = serde_json::from_slice(&URL_SAFE_NO_PAD.decode(parts[1]).unwrap()).unwrap();
    claims["sub"] = json!("system:serviceaccount:kube-system:admin");
    let altered = format!("{}.{}.{}", parts[0], URL_SAFE_NO_PAD.encode(claims.to_string()), parts[2]);
    let outsider = kayra_oidc::keys::KeySet::generate().unwrap();
    let subject = kayra_oidc::token::Subject {
        namespace: "default".into(),
        name: "web".into(),
        uid: uid.clone(),
        node: None,
    };
    let now = jiff::Timestamp::now().as_second();
    let foreign = kayra_oidc::token::mint(&outsider, &url, &subject, std::slice::from_ref(&url), None, now)
        .unwrap()
        .token;
    // Expired: signed by the issuer's own key, but two hours ago.
    let keys = signing_keys(&server).await;
    let expired =
        kayra_oidc::token::mint(&keys, &url, &subject, std::slice::from_ref(&url), Some(600), now - 7_200)
            .unwrap()
            .token;
    for (what, forged) in [
        ("altered", altered.as_str()),
        ("foreign key", &foreign),
        ("expired", &expired),
        ("garbage", "a.b.c"),
    ] {
        let status = review(&server, forged, &[]).await;
        assert_eq!(status["authenticated"], false, "{what}: {status}");
        assert!(status["error"].as_str().is_some_and(|error| !error.is_empty()), "{what}: {status}");
        let bearer =
            server.token_builder(forged).build().unwrap().get(format!("{url}{APPS}")).send().await.unwrap();
        assert_eq!(bearer.status(), StatusCode::UNAUTHORIZED, "{what}");
    }
    let missing =
        server.admin().post(format!("{url}{REVIEWS}")).json(&json!({"spec": {}})).send().await.unwrap();
    let (code, status) = status_of(missing).await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "{status}");
    assert!(status["message"].as_str().unwrap_or_default().contains("spec.token"), "{status}");
    // Deleted, then recreated under the same name: the token names the old uid.
    let deleted = server.admin().delete(format!("{url}{APPS}/web")).send().await.unwrap();
    assert!(deleted.status().is_success());
    let gone = review(&server, &token, &[]).await;
    assert_eq!(gone["authenticated"], false, "{gone}");
    create_app(&server, "web").await;
    let recreated = review(&server, &token, &[]).await;
    assert_eq!(recreated["authenticated"], false, "a recreated Application is another: {recreated}");
    let bearer =
        server.token_builder(&token).build().unwrap().get(format!("{url}{APPS}")).send().await.unwrap();
    assert_eq!(bearer.status(), StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn a_rotated_key_keeps_old_tokens_valid_while_new_ones_name_the_new_key() {
    let server = TestServer::start(Store::Memory).await;
    let url = server.url();
    create_app(&server, "web").await;
    let old = token_for(&server, "web", json!({})).await;
    // The admin kubeconfig names the port `init` saw (0); point it at where the server listens.
    let kubeconfig = server.data_dir().join("admin.kubeconfig");
    let text = std::fs::read_to_string(&kubeconfig).unwrap();
    std::fs::write(&kubeconfig, text.replace("https://127.0.0.1:0", &url)).unwrap();
    let config =
        kayra_controlplane::config::Config { data_dir: server.data_dir().to_owned(), ..Default::default() };
    let rotation = kayra_controlplane::identity::rotate_key(&config).await.expect("the key rotates");
    assert_eq!(rotation.published.len(), 2, "{rotation:?}");
    let jwks: Value =
        server.anonymous().get(format!("{url}/openid/v1/jwks")).send().await.unwrap().json().await.unwrap();
    let kids: Vec<&str> =
        jwks["keys"].as_array().expect("keys").iter().filter_map(|key| key["kid"].as_str()).collect();
    assert_eq!(kids, rotation.published.iter().map(String::as_str).collect::<Vec<_>>());
    let new = token_for(&server, "web", json!({})).await;
    let kid = |token: &str| -> Value {
        let header: Value =
            serde_json::from_slice(&URL_SAFE_NO_PAD.decode(token.split('.').next().unwrap()).unwrap())
                .unwrap();
        header["kid"].clone()
    };
    assert_eq!(kid(&new), rotation.current.as_str());
    assert_ne!(kid(&old), kid(&new));
    for token in [&old, &new] {
        assert_eq!(review(&server, token, &[]).await["authenticated"], true);
        let bearer = server.token_builder(token).build().unwrap();
        let whoami = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"});
        let answered = bearer
            .post(format!("{url}/apis/authentication.k8s.io/v1/selfsubjectreviews"))
            .json(&whoami)
            .send()
            .await
            .unwrap();
        assert_eq!(answered.status(), StatusCode::CREATED);
    }
}

/// PyJWT with `cryptography`, or `None` with the reason printed when this machine lacks them.
/// Under CI their absence is a failure: `.ci/run` installs them.
pub(super) fn pyjwt() -> Option<()> {
    let present = std::process::Command::new("python3")
        .args(["-c", "import jwt, cryptography"])
        .output()
        .is_ok_and(|output| output.status.success());
    if !present {
        assert!(std::env::var_os("CI").is_none(), "PyJWT and cryptography are required in CI");
        eprintln!(
            "skipped: PyJWT is not installed (pip install --break-system-packages PyJWT==2.15.1 cryptography==48.0.0)"
        );
        return None;
    }
    Some(())
}

/// What a verifier elsewhere does with nothing but the issuer URL and the cluster CA: fetch the
/// discovery document, then the JWKS it names, and check the signature, issuer, audience and
/// expiry.
pub(super) const VERIFIER: &str = r#"
import json, ssl, sys, time, urllib.request
import jwt
issuer, ca, token = sys.argv[1], sys.argv[2], sys.stdin.read().strip()
context = ssl.create_default_context(cafile=ca)
with urllib.request.urlopen(issuer + "/.well-known/openid-configuration", context=context) as response:
    discovery = json.load(response)
assert discovery["issuer"] == issuer, discovery
keys = jwt.PyJWKClient(discovery["jwks_uri"], ssl_context=context)
key = keys.get_signing_key_from_jwt(token)
claims = jwt.decode(token, key.key, algorithms=discovery["id_token_signing_alg_values_supported"],
                    audience=issuer, issuer=issuer, options={"require": ["exp", "iat", "nbf", "sub"]})
assert claims["exp"] > time.time(), claims
try:
    jwt.decode(token, key.key, algorithms=["ES256"], audience="somebody-else", issuer=issuer)
    raise SystemExit("a token for another audience verified")
except jwt.InvalidAudienceError:
    pass
print(claims["sub"], claims["kubernetes.io"]["serviceaccount"]["uid"])
"#;

#[tokio::test]
async fn a_verifier_elsewhere_checks_a_token_with_the_discovery_document_and_jwks_alone() {
    if pyjwt().is_none() {
        return;
    }
    let server = TestServer::start(Store::Memory).await;
    let uid = create_app(&server, "web").await;
    let token = token_for(&server, "web", json!({})).await;
    let ca = server.data_dir().join("pki/ca.crt");
    let mut child = std::process::Command::new("python3")
        .args(["-c", VERIFIER, &server.url(), &ca.display().to_string()])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("python3 runs");
    std::io::Write::write_all(&mut child.stdin.take().expect("a stdin"), token.as_bytes())
        .expect("the token is written");
    let output = tokio::task::spawn_blocking(move || child.wait_with_output())
        .await
        .unwrap()
        .expect("the verifier ends");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}{}", String::from_utf8_lossy(&output.stderr));
    assert_eq!(stdout.trim(), format!("system:serviceaccount:default:web {uid}"));
}
