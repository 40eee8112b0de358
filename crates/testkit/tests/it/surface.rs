//! The HTTP surface as a user meets it: `Audit-Id` on every answer and in the audit log, what
//! `kubectl auth can-i` reads from a review, what a plain `GET /apis` lists, OpenAPI documents a
//! real validator accepts, and discovery advertising exactly the verbs each route serves.

use std::collections::BTreeSet;

use kayra_testkit::{Store, TestServer};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::status_of;

/// The audit log's lines, parsed.
fn audit_lines(server: &TestServer) -> Vec<Value> {
    let text = std::fs::read_to_string(server.data_dir().join("audit.log")).unwrap_or_default();
    text.lines().map(|line| serde_json::from_str(line).expect("an audit line is JSON")).collect()
}

fn audit_id(response: &reqwest::Response) -> String {
    response
        .headers()
        .get("audit-id")
        .unwrap_or_else(|| panic!("no Audit-Id on a {} answer", response.status()))
        .to_str()
        .expect("visible ASCII")
        .to_owned()
}

#[tokio::test]
async fn every_answer_carries_its_audit_id_and_the_audit_line_the_same() {
    let server = TestServer::start(Store::Memory).await;
    let (admin, anonymous, url) = (server.admin(), server.anonymous(), server.url());
    let namespace = |name: &str| json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}});

    // Echoed: a write, audited under the id the client chose.
    let echoed = admin
        .post(format!("{url}/api/v1/namespaces"))
        .header("Audit-Id", "client-chosen-1")
        .json(&namespace("echoed"))
        .send()
        .await
        .unwrap();
    assert_eq!(echoed.status(), StatusCode::CREATED);
    assert_eq!(audit_id(&echoed), "client-chosen-1");

    // Minted: a fresh UUID per request, and the audit line carries it.
    let minted =
        admin.post(format!("{url}/api/v1/namespaces")).json(&namespace("minted")).send().await.unwrap();
    let minted_id = audit_id(&minted);
    assert!(uuid_shaped(&minted_id), "{minted_id}");
    let again = admin.get(format!("{url}/api/v1/namespaces/minted")).send().await.unwrap();
    assert_ne!(audit_id(&again), minted_id, "each request has its own id");

    // Refused before any handler: 401 to a stranger, 400 for a non-canonical path, 404.
    let stranger = anonymous
        .post(format!("{url}/api/v1/namespaces"))
        .header("Audit-Id", "stranger-1")
        .json(&namespace("nope"))
        .send()
        .await
        .unwrap();
    assert_eq!((stranger.status(), audit_id(&stranger).as_str()), (StatusCode::UNAUTHORIZED, "stranger-1"));
    let odd = admin.get(format!("{url}/api/v1/namespaces/a%2Fb")).send().await.unwrap();
    assert_eq!(odd.status(), StatusCode::BAD_REQUEST);
    assert!(uuid_shaped(&audit_id(&odd)));
    let missing = anonymous.get(format!("{url}/nope")).send().await.unwrap();
    assert!(uuid_shaped(&audit_id(&missing)), "a 401 for an unrouted path has one too");
    for path in ["/healthz", "/version", "/apis", "/openapi/v3"] {
        let answer = admin.get(format!("{url}{path}")).send().await.unwrap();
        assert!(uuid_shaped(&audit_id(&answer)), "{path}");
    }
    // A value that cannot be echoed safely is replaced.
    let long = admin.get(format!("{url}/version")).header("Audit-Id", "x".repeat(200)).send().await.unwrap();
    assert!(uuid_shaped(&audit_id(&long)));
    // The plain-HTTP listener too.
    let plain = reqwest::Client::new()
        .get(format!("{}/version", server.http_url()))
        .bearer_auth(server.admin_token())
        .header("Audit-Id", "over-http")
        .send()
        .await
        .unwrap();
    assert_eq!(audit_id(&plain), "over-http");

    let lines = audit_lines(&server);
    let line = |id: &str| {
        lines
            .iter()
            .find(|line| line["auditID"] == id)
            .unwrap_or_else(|| panic!("no audit line with auditID {id}: {lines:?}"))
    };
    assert_eq!(
        (line("client-chosen-1")["code"].as_u64(), line("client-chosen-1")["user"].as_str()),
        (Some(201), Some("admin"))
    );
    assert_eq!(line(&minted_id)["path"], "/api/v1/namespaces");
    assert_eq!(line("stranger-1")["decision"], "unauthenticated");
}

fn uuid_shaped(id: &str) -> bool {
    id.split('-').map(str::len).collect::<Vec<_>>() == [8, 4, 4, 4, 12]
}

#[tokio::test]
async fn a_plain_rbac_denial_has_no_reason_so_can_i_prints_a_bare_no() {
    let server = TestServer::start(Store::Memory).await;
    server.add_token("bob-token", "bob", "");
    let review = |verb: &str| {
        json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
               "spec": {"resourceAttributes": {"verb": verb, "group": "fleet.example.com", "resource": "applications", "namespace": "default"}}})
    };
    let path = format!("{}/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", server.url());
    let bob = server.token_builder("bob-token").build().unwrap();
    let (code, answer) = status_of(bob.post(&path).json(&review("delete")).send().await.unwrap()).await;
    assert_eq!(code, StatusCode::CREATED, "{answer}");
    assert_eq!(
        answer["status"],
        json!({"allowed": false}),
        "kubectl prints `no - <reason>` when there is one"
    );
    let (code, answer) =
        status_of(server.admin().post(&path).json(&review("delete")).send().await.unwrap()).await;
    assert_eq!(code, StatusCode::CREATED, "{answer}");
    assert_eq!(answer["status"]["allowed"], true);
}

#[tokio::test]
async fn a_plain_get_of_apis_lists_every_group_with_its_resources() {
    let server = TestServer::start(Store::Memory).await;
    let curl = reqwest::Client::new();
    let (code, created) = status_of(
        curl.post(format!("{}/apis/catalog.example.com/v1/apiregistrations", server.http_url()))
            .bearer_auth(server.admin_token())
            .json(&json!({"name": "compute.example.com", "short_name": "compute", "active": true, "owner": "sre-a"}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(code, StatusCode::CREATED, "{created}");
    for accept in ["*/*", "application/json"] {
        let response = curl
            .get(format!("{}/apis", server.http_url()))
            .bearer_auth(server.admin_token())
            .header("Accept", accept)
            .send()
            .await
            .unwrap();
        let (code, list) = status_of(response).await;
        assert_eq!((code, list["kind"].as_str()), (StatusCode::OK, Some("APIGroupList")), "{accept}");
        let groups = list["groups"].as_array().unwrap();
        let group = |name: &str| {
            groups
                .iter()
                .find(|g| g["name"] == name)
                .unwrap_or_else(|| panic!("{name} is not listed: {list}"))
        };
        // The fields Kubernetes clients decode are all there.
        for entry in groups {
            let preferred = &entry["preferredVersion"];
            assert!(entry["versions"].as_array().unwrap().contains(preferred), "{entry}");
            assert!(entry["resources"].is_array(), "{accept}: {entry}");
        }
        let resource = |group_name: &str, resource: &str| {
            group(group_name)["resources"]
                .as_array()
                .unwrap()
                .iter()
                .find(|r| r["name"] == resource)
                .unwrap_or_else(|| panic!("{group_name} lists no {resource}"))
                .clone()
        };
        let applications = resource("fleet.example.com", "applications");
        assert_eq!(
            (applications["kind"].as_str(), applications["namespaced"].as_bool()),
            (Some("Application"), Some(true))
        );
        assert!(applications["verbs"].as_array().unwrap().contains(&json!("watch")));
        assert_eq!(
            resource("fleet.example.com", "applications/status")["verbs"],
            json!(["get", "patch", "update"])
        );
        assert_eq!(resource("catalog.example.com", "apiregistrations/sync")["verbs"], json!(["update"]));
        assert_eq!(
            group("compute.example.com")["resources"],
            json!([]),
            "a registration whose document is not fetched yet is listed with no resources"
        );
    }
}

#[tokio::test]
async fn a_catalog_dry_run_is_refused_not_written() {
    let server = TestServer::start(Store::Memory).await;
    let registrations = format!("{}/apis/catalog.example.com/v1/apiregistrations", server.url());
    let (code, body) = status_of(
        server
            .admin()
            .post(format!("{registrations}?dryRun=All"))
            .json(&json!({"name": "compute.example.com", "short_name": "compute", "owner": "sre-a"}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(code, StatusCode::BAD_REQUEST, "{body}");
    let missing = server.admin().get(format!("{registrations}/compute.example.com")).send().await.unwrap();
    assert_eq!(missing.status(), StatusCode::NOT_FOUND, "nothing was written");
}

/// Every OpenAPI v3 document the server serves, by its path in the root document.
async fn openapi_documents(server: &TestServer) -> Vec<(String, Value)> {
    let admin = server.admin();
    let root: Value =
        admin.get(format!("{}/openapi/v3", server.url())).send().await.unwrap().json().await.unwrap();
    let mut documents = Vec::new();
    for (key, entry) in root["paths"].as_object().unwrap() {
        let url = entry["serverRelativeURL"].as_str().unwrap();
        let response = admin.get(format!("{}{url}", server.url())).send().await.unwrap();
        assert_eq!(response.status(), StatusCode::OK, "{url}");
        documents.push((key.clone(), response.json().await.unwrap()));
    }
    assert!(documents.len() >= 5, "{root}");
    documents
}

/// `openapi-spec-validator`, or `None` with the reason printed when this machine lacks it.
/// Under CI its absence is a failure: `.ci/run` installs it.
fn openapi_spec_validator() -> Option<&'static str> {
    let present = std::process::Command::new("openapi-spec-validator")
        .arg("--help")
        .output()
        .is_ok_and(|output| output.status.success());
    if !present {
        assert!(std::env::var_os("CI").is_none(), "openapi-spec-validator is required in CI");
        eprintln!(
            "skipped: openapi-spec-validator is not installed (pip install --break-system-packages openapi-spec-validator)"
        );
        return None;
    }
    Some("openapi-spec-validator")
}

#[tokio::test]
async fn every_openapi_v3_document_is_valid_openapi() {
    let Some(validator) = openapi_spec_validator() else { return };
    let server = TestServer::start(Store::Memory).await;
    let dir = tempfile::tempdir().unwrap();
    for (key, document) in openapi_documents(&server).await {
        let file = dir.path().join(format!("{}.json", key.replace('/', "_")));
        std::fs::write(&file, serde_json::to_vec(&document).unwrap()).unwrap();
        let output = std::process::Command::new(validator).arg(&file).output().expect("the validator runs");
        assert!(
            output.status.success(),
            "{key} is not valid OpenAPI:\n{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

#[tokio::test]
async fn openapi_operations_declare_their_parameters_and_errors() {
    let server = TestServer::start(Store::Memory).await;
    let documents = openapi_documents(&server).await;
    let (_, fleet) = documents.iter().find(|(key, _)| key == "apis/fleet.example.com/v1").unwrap();
    let paths = &fleet["paths"];
    let names = |parameters: &Value| -> BTreeSet<String> {
        parameters.as_array().into_iter().flatten().map(|p| p["name"].as_str().unwrap().to_owned()).collect()
    };
    let item = &paths["/apis/fleet.example.com/v1/namespaces/{namespace}/applications/{name}"];
    assert_eq!(names(&item["parameters"]), BTreeSet::from(["name".to_owned(), "namespace".to_owned()]));
    assert!(
        item["parameters"].as_array().unwrap().iter().all(|p| p["in"] == "path" && p["required"] == true)
    );
    let collection = &paths["/apis/fleet.example.com/v1/namespaces/{namespace}/applications"];
    let list = names(&collection["get"]["parameters"]);
    for wanted in
        ["labelSelector", "fieldSelector", "limit", "continue", "resourceVersion", "watch", "timeoutSeconds"]
    {
        assert!(list.contains(wanted), "list takes {wanted}: {list:?}");
    }
    for (operation, wanted) in [
        (&collection["post"], &["dryRun", "fieldManager", "fieldValidation"][..]),
        (&item["put"], &["dryRun", "fieldManager", "fieldValidation"]),
        (&item["patch"], &["dryRun", "fieldManager", "fieldValidation", "force"]),
        (&item["delete"], &["dryRun", "gracePeriodSeconds", "propagationPolicy"]),
        (&collection["delete"], &["labelSelector", "fieldSelector", "dryRun"]),
    ] {
        let declared = names(&operation["parameters"]);
        assert!(wanted.iter().all(|w| declared.contains(*w)), "{}: {declared:?}", operation["operationId"]);
    }
    let status = json!({"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.Status"});
    for (operation, codes) in [
        (&collection["post"], &["401", "403", "409", "422"][..]),
        (&item["get"], &["401", "403", "404"]),
        (&item["put"], &["401", "403", "404", "409", "422"]),
        (&item["delete"], &["401", "403", "404"]),
    ] {
        for code in codes {
            assert_eq!(
                operation["responses"][code]["content"]["application/json"]["schema"], status,
                "{} {code}",
                operation["operationId"]
            );
        }
    }
    assert_eq!(
        fleet["components"]["schemas"]["io.k8s.apimachinery.pkg.apis.meta.v1.Status"]["properties"]["code"]["type"],
        "integer"
    );

    // kubectl validates a create on the server only where fieldValidation is declared; the
    // catalog has no dry run to declare.
    let (_, catalog) = documents.iter().find(|(key, _)| key == "apis/catalog.example.com/v1").unwrap();
    let create =
        names(&catalog["paths"]["/apis/catalog.example.com/v1/apiregistrations"]["post"]["parameters"]);
    assert!(create.contains("fieldValidation") && !create.contains("dryRun"), "{create:?}");
    let patch = &catalog["paths"]["/apis/catalog.example.com/v1/apiregistrations/{name}"]["patch"];
    assert!(
        names(&patch["parameters"]).contains("fieldValidation"),
        "kubectl reads the patch operation: {patch}"
    );

    // Operations follow the verbs: a review is only created, a view only read.
    let (_, reviews) = documents.iter().find(|(key, _)| key == "apis/authorization.k8s.io/v1").unwrap();
    let reviews = reviews["paths"].as_object().unwrap();
    assert!(reviews.contains_key("/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"), "{reviews:?}");
    for (path, item) in reviews {
        let operations: Vec<&String> =
            item.as_object().unwrap().keys().filter(|k| *k != "parameters").collect();
        if path.ends_with("{name}") {
            // Listed only for kubectl, which reads a Kind's patch operation; it answers 405.
            assert_eq!(operations, ["patch"], "{path}");
            assert!(item["patch"]["responses"]["405"].is_object(), "{item}");
        } else {
            assert_eq!(operations, ["post"], "{path}");
        }
    }
}

/// How each verb is asked for, on a collection path and an object (or subresource) path.
fn request(verb: &str, collection: &str, object: &str) -> (Method, String) {
    match verb {
        "list" => (Method::GET, collection.to_owned()),
        "watch" => (Method::GET, format!("{collection}?watch=1&timeoutSeconds=1")),
        "create" => (Method::POST, collection.to_owned()),
        // Nothing carries this label: deleting the collection deletes nothing.
        "deletecollection" => (Method::DELETE, format!("{collection}?labelSelector=kayra-probe%3Dnothing")),
        "get" => (Method::GET, object.to_owned()),
        "update" => (Method::PUT, object.to_owned()),
        "patch" => (Method::PATCH, object.to_owned()),
        "delete" => (Method::DELETE, object.to_owned()),
        other => panic!("unknown verb {other}"),
    }
}

const VERBS: [&str; 8] = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"];

#[tokio::test]
async fn discovery_advertises_exactly_the_verbs_each_route_serves() {
    let server = TestServer::start(Store::Memory).await;
    let admin = server.admin();
    let accept = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";
    let mut checked = 0;
    let mut wrong = Vec::new();
    for root in ["/api", "/apis"] {
        let list: Value = admin
            .get(format!("{}{root}", server.url()))
            .header("Accept", accept)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        for group in list["items"].as_array().unwrap() {
            let name = group["metadata"]["name"].as_str().unwrap();
            let version = group["versions"][0]["version"].as_str().unwrap();
            let base =
                if name.is_empty() { format!("/api/{version}") } else { format!("/apis/{name}/{version}") };
            for resource in group["versions"][0]["resources"].as_array().unwrap() {
                let plural = resource["resource"].as_str().unwrap();
                let collection = if resource["scope"] == "Namespaced" {
                    format!("{base}/namespaces/default/{plural}")
                } else {
                    format!("{base}/{plural}")
                };
                let object = format!("{collection}/kayra-probe");
                let mut targets =
                    vec![(plural.to_owned(), collection.clone(), object.clone(), resource["verbs"].clone())];
                for sub in resource["subresources"].as_array().into_iter().flatten() {
                    let sub_name = sub["subresource"].as_str().unwrap();
                    let at = format!("{object}/{sub_name}");
                    targets.push((format!("{plural}/{sub_name}"), at.clone(), at, sub["verbs"].clone()));
                }
                for (what, collection, object, advertised) in targets {
                    let advertised: BTreeSet<&str> =
                        advertised.as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
                    for verb in VERBS {
                        // A subresource is one object's: it has no collection verbs to ask for.
                        if what.contains('/')
                            && matches!(verb, "list" | "watch" | "create" | "deletecollection")
                        {
                            continue;
                        }
                        let (method, path) = request(verb, &collection, &object);
                        let mut builder = admin.request(method.clone(), format!("{}{path}", server.url()));
                        if matches!(verb, "create" | "update" | "patch") {
                            let content_type = if verb == "patch" {
                                "application/merge-patch+json"
                            } else {
                                "application/json"
                            };
                            builder = builder.header("Content-Type", content_type).body("{}");
                        }
                        let code = builder.send().await.unwrap().status();
                        checked += 1;
                        let refused = code == StatusCode::METHOD_NOT_ALLOWED;
                        if advertised.contains(verb) == refused {
                            wrong.push(format!(
                                "{name}/{version} {what}: {verb} ({method} {path}) is {} but answered {code}",
                                if refused { "advertised" } else { "not advertised" }
                            ));
                        }
                    }
                }
            }
        }
    }
    assert!(checked > 100, "only {checked} probes");
    assert!(wrong.is_empty(), "discovery and the routes disagree:\n{}", wrong.join("\n"));
}
