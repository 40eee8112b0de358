//! Escalation prevention, reference checks, impersonation, namespace self-service and the
//! rules review, over real TLS against the assembled server.

use kayra_testkit::{Store, TestServer};
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::{eventually, status_of};

const RBAC: &str = "/apis/authorization.example.com/v1";

struct World {
    server: TestServer,
    url: String,
}

impl World {
    /// A server with namespaces `a` and `b`, and `alice` holding `admin` in `a`.
    async fn start() -> World {
        let server = TestServer::start(Store::Memory).await;
        let url = server.url();
        let world = World { server, url };
        for namespace in ["a", "b"] {
            let body = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}});
            let created = world
                .admin()
                .post(format!("{}/api/v1/namespaces", world.url))
                .json(&body)
                .send()
                .await
                .unwrap();
            assert_eq!(created.status(), StatusCode::CREATED);
        }
        world.server.add_token("alice-token", "alice", "");
        world.bind("a", "alice-admin", "User", "alice", "ClusterRole", "admin").await;
        let ready = eventually(StatusCode::OK, || {
            world.as_user(
                "alice-token",
                reqwest::Method::GET,
                "/apis/fleet.example.com/v1/namespaces/a/applications",
            )
        })
        .await;
        assert_eq!(ready, StatusCode::OK);
        world
    }

    fn admin(&self) -> reqwest::Client {
        self.server.admin()
    }

    fn as_user(&self, token: &str, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        self.server.anonymous().request(method, format!("{}{path}", self.url)).bearer_auth(token)
    }

    async fn bind(
        &self,
        namespace: &str,
        name: &str,
        subject_kind: &str,
        subject: &str,
        role_kind: &str,
        role: &str,
    ) {
        let binding = json!({"apiVersion": "authorization.example.com/v1", "kind": "RoleBinding", "metadata": {"name": name},
                             "subjects": [{"kind": subject_kind, "name": subject}], "roleRef": {"kind": role_kind, "name": role}});
        let path = format!("{}{RBAC}/namespaces/{namespace}/rolebindings", self.url);
        let created = self.admin().post(path).json(&binding).send().await.unwrap();
        assert_eq!(created.status(), StatusCode::CREATED, "{:?}", created.text().await);
    }
}

fn role(name: &str, rules: Value) -> Value {
    json!({"apiVersion": "authorization.example.com/v1", "kind": "Role", "metadata": {"name": name}, "rules": rules})
}

fn binding(name: &str, user: &str, role_kind: &str, role: &str) -> Value {
    json!({"apiVersion": "authorization.example.com/v1", "kind": "RoleBinding", "metadata": {"name": name},
           "subjects": [{"kind": "User", "name": user}], "roleRef": {"kind": role_kind, "name": role}})
}

#[tokio::test]
async fn rbac_writes_grant_only_what_their_writer_holds() {
    let world = World::start().await;
    let post =
        |path: &str, body: &Value| world.as_user("alice-token", reqwest::Method::POST, path).json(body);
    let roles = format!("{RBAC}/namespaces/a/roles");
    let bindings = format!("{RBAC}/namespaces/a/rolebindings");

    let held = role(
        "app-reader",
        json!([{"apis": ["fleet.example.com"], "resources": ["applications"], "verbs": ["get", "list"]}]),
    );
    assert_eq!(
        post(&roles, &held).send().await.unwrap().status(),
        StatusCode::CREATED,
        "rules alice holds in a"
    );
    let nodes = role("node-writer", json!([{"apis": [""], "resources": ["nodes"], "verbs": ["update"]}]));
    let (code, body) = status_of(post(&roles, &nodes).send().await.unwrap()).await;
    assert_eq!(code, StatusCode::FORBIDDEN);
    assert_eq!(body["reason"], "Forbidden");
    let message = body["message"].as_str().unwrap();
    assert!(
        message.contains("attempting to grant RBAC permissions not currently held")
            && message.contains("nodes"),
        "{message}"
    );

    let to_edit = binding("bob-edits", "bob", "ClusterRole", "edit");
    assert_eq!(
        post(&bindings, &to_edit).send().await.unwrap().status(),
        StatusCode::CREATED,
        "edit is within admin"
    );
    let to_own_role = binding("bob-reads", "bob", "Role", "app-reader");
    assert_eq!(post(&bindings, &to_own_role).send().await.unwrap().status(), StatusCode::CREATED);
    let to_everything = binding("bob-rules", "bob", "ClusterRole", "cluster-admin");
    let (code, body) = status_of(post(&bindings, &to_everything).send().await.unwrap()).await;
    assert_eq!(code, StatusCode::FORBIDDEN, "{body}");
    let to_missing = binding("bob-ghost", "bob", "Role", "ghost");
    assert_eq!(post(&bindings, &to_missing).send().await.unwrap().status(), StatusCode::FORBIDDEN);
    let elsewhere = post(&format!("{RBAC}/namespaces/b/rolebindings"), &to_edit).send().await.unwrap();
    assert_eq!(elsewhere.status(), StatusCode::FORBIDDEN, "admin in a is nothing in b");

    world.server.add_token("sam-token", "sam", "");
    let sysadmin = json!({"apiVersion": "authorization.example.com/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "sam-sysadmin"},
                          "subjects": [{"kind": "User", "name": "sam"}], "roleRef": {"kind": "ClusterRole", "name": "sysadmin"}});
    let bound = world
        .admin()
        .post(format!("{}{RBAC}/clusterrolebindings", world.url))
        .json(&sysadmin)
        .send()
        .await
        .unwrap();
    assert_eq!(bound.status(), StatusCode::CREATED);
    let promote = json!({"apiVersion": "authorization.example.com/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "sam-everything"},
                         "subjects": [{"kind": "User", "name": "sam"}], "roleRef": {"kind": "ClusterRole", "name": "cluster-admin"}});
    let cluster_bindings = format!("{RBAC}/clusterrolebindings");
    // The refusal below proves something only once sam is a sysadmin: wait for the grant first.
    let sysadmin_now =
        eventually(StatusCode::OK, || world.as_user("sam-token", reqwest::Method::GET, &cluster_bindings))
            .await;
    assert_eq!(sysadmin_now, StatusCode::OK, "the sysadmin binding takes effect");
    let promoted = world
        .as_user("sam-token", reqwest::Method::POST, &cluster_bindings)
        .json(&promote)
        .send()
        .await
        .unwrap();
    let promoted = promoted.status();
    assert_eq!(
        promoted,
        StatusCode::FORBIDDEN,
        "a sysadmin manages RBAC but cannot grant itself cluster-admin"
    );
    let to_discovery = json!({"apiVersion": "authorization.example.com/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "sam-grants"},
                              "subjects": [{"kind": "User", "name": "vic"}], "roleRef": {"kind": "ClusterRole", "name": "system:discovery"}});
    let granted = world
        .as_user("sam-token", reqwest::Method::POST, &cluster_bindings)
        .json(&to_discovery)
        .send()
        .await
        .unwrap();
    assert_eq!(granted.status(), StatusCode::CREATED, "what it holds it may grant");

    let widen = json!({"rules": [{"apis": ["*"], "resources": ["*"], "verbs": ["*"]}]});
    let patched = world
        .as_user("alice-token", reqwest::Method::PATCH, &format!("{roles}/app-reader"))
        .header("Content-Type", "application/merge-patch+json")
        .body(widen.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(patched.status(), StatusCode::FORBIDDEN, "a patch cannot widen a role either");
    let dry_run = post(&format!("{roles}?dryRun=All"), &nodes).send().await.unwrap();
    assert_eq!(dry_run.status(), StatusCode::FORBIDDEN, "a dry run is admitted the same way");
    let kept = world.admin().get(format!("{}{roles}/app-reader", world.url)).send().await.unwrap();
    let kept: Value = kept.json().await.unwrap();
    assert_eq!(kept["rules"][0]["verbs"], json!(["get", "list"]), "the refused patch changed nothing");
}

#[tokio::test]
async fn workloads_name_only_secrets_and_services_their_writer_may_read() {
    let world = World::start().await;
    world.server.add_token("carol-token", "carol", "");
    let writer = role(
        "app-writer",
        json!([{"apis": ["fleet.example.com"], "resources": ["applications"], "verbs": ["create", "update", "get"]},
                                           {"apis": ["fleet.example.com"], "resources": ["secrets"], "resourceNames": ["shared"], "verbs": ["get"]}]),
    );
    let created = world
        .admin()
        .post(format!("{}{RBAC}/namespaces/a/roles", world.url))
        .json(&writer)
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), StatusCode::CREATED);
    world.bind("a", "carol-writes", "User", "carol", "Role", "app-writer").await;
    let apps = "/apis/fleet.example.com/v1/namespaces/a/applications";
    let app = |name: &str, secret: &str| {
        json!({"apiVersion": "fleet.example.com/v1", "kind": "Application", "metadata": {"name": name},
               "spec": {"command": ["/bin/true"], "env": [{"name": "PASSWORD", "secretRef": {"name": secret, "key": "password"}}]}})
    };
    let plain = json!({"apiVersion": "fleet.example.com/v1", "kind": "Application", "metadata": {"name": "plain"}, "spec": {"command": ["/bin/true"]}});
    let ready = eventually(StatusCode::CREATED, || {
        world.as_user("carol-token", reqwest::Method::POST, apps).json(&plain)
    })
    .await;
    assert_eq!(ready, StatusCode::CREATED);
    let allowed = world
        .as_user("carol-token", reqwest::Method::POST, apps)
        .json(&app("uses-shared", "shared"))
        .send()
        .await
        .unwrap();
    assert_eq!(allowed.status(), StatusCode::CREATED, "a Secret carol may get");
    let (code, body) = status_of(
        world
            .as_user("carol-token", reqwest::Method::POST, apps)
            .json(&app("steals", "db-root"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(code, StatusCode::FORBIDDEN);
    assert!(body["message"].as_str().unwrap().contains("secrets \"db-root\""), "{body}");
    let mut service = plain.clone();
    service["spec"]["serviceName"] = json!("payments");
    service["metadata"]["name"] = json!("joins");
    let joined =
        world.as_user("carol-token", reqwest::Method::POST, apps).json(&service).send().await.unwrap();
    assert_eq!(joined.status(), StatusCode::FORBIDDEN, "joining a Service needs get on it");
    let mut swapped = app("uses-shared", "db-root");
    swapped["metadata"]["resourceVersion"] = Value::Null;
    let updated = world
        .as_user("carol-token", reqwest::Method::PUT, &format!("{apps}/uses-shared"))
        .json(&swapped)
        .send()
        .await
        .unwrap();
    assert_eq!(updated.status(), StatusCode::FORBIDDEN, "nor can an update swap one in");
}

#[tokio::test]
async fn no_workload_may_run_as_root_not_even_an_administrators() {
    let world = World::start().await;
    let apps = format!("{}/apis/fleet.example.com/v1/namespaces/default/applications", world.url);
    let app = |name: &str, user: i64| {
        json!({"apiVersion": "fleet.example.com/v1", "kind": "Application", "metadata": {"name": name},
               "spec": {"command": ["/bin/true"], "securityContext": {"runAsUser": user, "runAsGroup": 0}}})
    };
    let (code, body) =
        status_of(world.admin().post(&apps).json(&app("as-root", 0)).send().await.unwrap()).await;
    assert_eq!((code, body["reason"].as_str()), (StatusCode::FORBIDDEN, Some("Forbidden")), "{body}");
    assert!(body["message"].as_str().unwrap().contains("spec.securityContext.runAsUser"), "{body}");
    let created = world.admin().post(&apps).json(&app("as-user", 1000)).send().await.unwrap();
    assert_eq!(created.status(), StatusCode::CREATED, "any other user, and group 0, are fine");
}

#[tokio::test]
async fn impersonation_needs_the_right_and_is_audited_as_both() {
    let world = World::start().await;
    let whoami = "/apis/authentication.k8s.io/v1/selfsubjectreviews";
    let review = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"});
    let (code, body) = status_of(
        world
            .as_user("alice-token", reqwest::Method::POST, whoami)
            .header("Impersonate-User", "admin")
            .json(&review)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(code, StatusCode::FORBIDDEN, "{body}");
    assert!(body["message"].as_str().unwrap().contains("cannot impersonate"), "{body}");
    let masters = world
        .as_user("alice-token", reqwest::Method::GET, "/api/v1/namespaces")
        .header("Impersonate-User", "alice")
        .header("Impersonate-Group", "system:masters")
        .send()
        .await
        .unwrap();
    assert_eq!(masters.status(), StatusCode::FORBIDDEN, "no self-promotion through a group");

    let (code, body) = status_of(
        world
            .admin()
            .post(format!("{}{whoami}", world.url))
            .header("Impersonate-User", "dora")
            .header("Impersonate-Group", "qa")
            .json(&review)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(code, StatusCode::CREATED);
    assert_eq!(body["status"]["userInfo"]["username"], "dora");
    assert_eq!(body["status"]["userInfo"]["groups"], json!(["qa", "system:authenticated"]));
    let as_dora = world
        .admin()
        .get(format!("{}/apis/fleet.example.com/v1/namespaces/a/applications", world.url))
        .header("Impersonate-User", "dora")
        .send()
        .await
        .unwrap();
    assert_eq!(as_dora.status(), StatusCode::FORBIDDEN, "the request is decided as dora");
    let groups_alone = world
        .admin()
        .get(format!("{}/api/v1/namespaces", world.url))
        .header("Impersonate-Group", "qa")
        .send()
        .await
        .unwrap();
    assert_eq!(groups_alone.status(), StatusCode::BAD_REQUEST);

    let impersonator = json!({"apiVersion": "authorization.example.com/v1", "kind": "ClusterRole", "metadata": {"name": "impersonate-dora"},
                              "rules": [{"apis": [""], "resources": ["users"], "resourceNames": ["dora"], "verbs": ["impersonate"]}]});
    world.admin().post(format!("{}{RBAC}/clusterroles", world.url)).json(&impersonator).send().await.unwrap();
    let grant = json!({"apiVersion": "authorization.example.com/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "alice-as-dora"},
                       "subjects": [{"kind": "User", "name": "alice"}], "roleRef": {"kind": "ClusterRole", "name": "impersonate-dora"}});
    world.admin().post(format!("{}{RBAC}/clusterrolebindings", world.url)).json(&grant).send().await.unwrap();
    let as_dora = eventually(StatusCode::CREATED, || {
        world
            .as_user("alice-token", reqwest::Method::POST, whoami)
            .header("Impersonate-User", "dora")
            .json(&review)
    })
    .await;
    assert_eq!(as_dora, StatusCode::CREATED);
    let as_erin = world
        .as_user("alice-token", reqwest::Method::POST, whoami)
        .header("Impersonate-User", "erin")
        .json(&review)
        .send()
        .await
        .unwrap();
    assert_eq!(as_erin.status(), StatusCode::FORBIDDEN, "only the named user");

    let audit = std::fs::read_to_string(world.server.data_dir().join("audit.log")).unwrap();
    let line = audit
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .find(|line| line["user"] == "dora" && line["impersonator"]["user"] == "alice")
        .unwrap_or_else(|| panic!("no audit line for alice as dora in:\n{audit}"));
    assert_eq!(line["code"], 201);
    let denied = audit
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .any(|line| line["user"] == "alice" && line["decision"] == "denied");
    assert!(denied, "the refused impersonation is audited under the real caller");
}

#[tokio::test]
async fn callers_list_the_namespaces_they_hold_a_binding_in() {
    let world = World::start().await;
    let list = world.as_user("alice-token", reqwest::Method::GET, "/api/v1/namespaces").send().await.unwrap();
    assert_eq!(list.status(), StatusCode::OK);
    let list: Value = list.json().await.unwrap();
    let names: Vec<&str> =
        list["items"].as_array().unwrap().iter().map(|n| n["metadata"]["name"].as_str().unwrap()).collect();
    let paged: Value = world
        .as_user("alice-token", reqwest::Method::GET, "/api/v1/namespaces?limit=1")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(paged["items"].as_array().unwrap().len(), 1, "{paged}");
    assert!(
        paged["metadata"].get("continue").is_none(),
        "a continue token would name a hidden namespace: {paged}"
    );
    assert_eq!(names, ["a"]);
    let own =
        world.as_user("alice-token", reqwest::Method::GET, "/api/v1/namespaces/a").send().await.unwrap();
    assert_eq!(own.status(), StatusCode::OK);
    let other =
        world.as_user("alice-token", reqwest::Method::GET, "/api/v1/namespaces/b").send().await.unwrap();
    assert_eq!(other.status(), StatusCode::FORBIDDEN);
    let watch = world
        .as_user("alice-token", reqwest::Method::GET, "/api/v1/namespaces?watch=true")
        .send()
        .await
        .unwrap();
    assert_eq!(watch.status(), StatusCode::FORBIDDEN, "watching every namespace needs a cluster-wide grant");

    world.server.add_token("nobody-token", "nobody", "");
    let empty =
        world.as_user("nobody-token", reqwest::Method::GET, "/api/v1/namespaces").send().await.unwrap();
    assert_eq!(empty.status(), StatusCode::OK);
    let empty: Value = empty.json().await.unwrap();
    assert_eq!(empty["items"], json!([]));
    let everything = world.admin().get(format!("{}/api/v1/namespaces", world.url)).send().await.unwrap();
    let everything: Value = everything.json().await.unwrap();
    assert!(everything["items"].as_array().unwrap().len() >= 3, "a cluster-wide grant sees every namespace");

    world.server.add_token("viewer-token", "viewer", "");
    let view = json!({"apiVersion": "authorization.example.com/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "viewer-views"},
                      "subjects": [{"kind": "User", "name": "viewer"}], "roleRef": {"kind": "ClusterRole", "name": "view"}});
    world.admin().post(format!("{}{RBAC}/clusterrolebindings", world.url)).json(&view).send().await.unwrap();
    let watch = eventually(StatusCode::OK, || {
        world.as_user("viewer-token", reqwest::Method::GET, "/api/v1/namespaces?watch=true&timeoutSeconds=1")
    })
    .await;
    assert_eq!(watch, StatusCode::OK, "reading applications everywhere is reading every namespace");
    let listed: Value = world
        .as_user("viewer-token", reqwest::Method::GET, "/api/v1/namespaces")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(listed["items"].as_array().unwrap().len(), everything["items"].as_array().unwrap().len());
}

#[tokio::test]
async fn the_rules_review_lists_what_the_caller_may_do() {
    let world = World::start().await;
    let review = json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectRulesReview", "spec": {"namespace": "a"}});
    let path = "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews";
    let (code, body) = status_of(
        world.as_user("alice-token", reqwest::Method::POST, path).json(&review).send().await.unwrap(),
    )
    .await;
    assert_eq!(code, StatusCode::CREATED, "{body}");
    let rules = body["status"]["resourceRules"].as_array().unwrap();
    assert!(
        rules.iter().any(|r| r["resources"].as_array().unwrap().contains(&json!("secrets"))),
        "admin's rules in a: {body}"
    );
    assert!(
        body["status"]["nonResourceRules"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["nonResourceURLs"].as_array().unwrap().contains(&json!("/version")))
    );
    let review_b = json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectRulesReview", "spec": {"namespace": "b"}});
    let (_, body) = status_of(
        world.as_user("alice-token", reqwest::Method::POST, path).json(&review_b).send().await.unwrap(),
    )
    .await;
    let rules = body["status"]["resourceRules"].as_array().unwrap();
    assert!(
        !rules.iter().any(|r| r["resources"].as_array().unwrap().contains(&json!("secrets"))),
        "nothing of admin in b: {body}"
    );
}

#[tokio::test]
async fn a_node_reaches_only_its_own_node() {
    let world = World::start().await;
    world.server.add_token("n1-token", "system:node:n1", "system:nodes");
    let node = |name: &str| json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}});
    let own = eventually(StatusCode::CREATED, || {
        world.as_user("n1-token", reqwest::Method::POST, "/api/v1/nodes").json(&node("n1"))
    })
    .await;
    assert_eq!(own, StatusCode::CREATED);
    let other = world
        .as_user("n1-token", reqwest::Method::POST, "/api/v1/nodes")
        .json(&node("n2"))
        .send()
        .await
        .unwrap();
    assert_eq!(other.status(), StatusCode::FORBIDDEN);
    world.admin().post(format!("{}/api/v1/nodes", world.url)).json(&node("n2")).send().await.unwrap();
    let status = json!({"status": {"conditions": [{"type": "Ready", "status": "False"}]}});
    let patch = |name: &str| {
        world
            .as_user("n1-token", reqwest::Method::PATCH, &format!("/api/v1/nodes/{name}/status"))
            .header("Content-Type", "application/merge-patch+json")
            .body(status.to_string())
    };
    assert_eq!(patch("n1").send().await.unwrap().status(), StatusCode::OK);
    assert_eq!(patch("n2").send().await.unwrap().status(), StatusCode::FORBIDDEN, "another node's status");
    // It reads its own Node, alone: not another's, nor every Node.
    let reads = [
        ("/api/v1/nodes/n1", StatusCode::OK),
        ("/api/v1/nodes/n1/status", StatusCode::OK),
        ("/api/v1/nodes?fieldSelector=metadata.name%3Dn1", StatusCode::OK),
        ("/api/v1/nodes/n2", StatusCode::FORBIDDEN),
        ("/api/v1/nodes/n2/status", StatusCode::FORBIDDEN),
        ("/api/v1/nodes?fieldSelector=metadata.name%3Dn2", StatusCode::FORBIDDEN),
        ("/api/v1/nodes", StatusCode::FORBIDDEN),
    ];
    for (path, expected) in reads {
        let read = world.as_user("n1-token", reqwest::Method::GET, path).send().await.unwrap();
        assert_eq!(read.status(), expected, "GET {path}");
    }
    let own =
        world.as_user("n1-token", reqwest::Method::GET, "/api/v1/nodes?fieldSelector=metadata.name%3Dn1");
    let listed: Value = own.send().await.unwrap().json().await.unwrap();
    assert_eq!(listed["items"].as_array().map(Vec::len), Some(1), "{listed}");
}

#[tokio::test]
async fn method_override_headers_are_ignored() {
    let world = World::start().await;
    let path = "/apis/fleet.example.com/v1/namespaces/a/applications";
    let app = json!({"apiVersion": "fleet.example.com/v1", "kind": "Application", "metadata": {"name": "kept"}, "spec": {"command": ["/bin/true"]}});
    world.admin().post(format!("{}{path}", world.url)).json(&app).send().await.unwrap();
    for header in ["X-HTTP-Method-Override", "X-HTTP-Method", "X-Method-Override"] {
        let got = world
            .as_user("alice-token", reqwest::Method::GET, &format!("{path}/kept"))
            .header(header, "DELETE")
            .send()
            .await
            .unwrap();
        assert_eq!(got.status(), StatusCode::OK, "{header}: GET semantics");
    }
    let still = world.admin().get(format!("{}{path}/kept", world.url)).send().await.unwrap();
    assert_eq!(still.status(), StatusCode::OK, "nothing was deleted");
}

#[tokio::test]
async fn deletecollection_deletes_what_the_selector_matches() {
    let world = World::start().await;
    let path = "/apis/fleet.example.com/v1/namespaces/a/applications";
    for (name, tier) in [("web-1", "web"), ("web-2", "web"), ("db", "db")] {
        let app = json!({"apiVersion": "fleet.example.com/v1", "kind": "Application", "metadata": {"name": name, "labels": {"tier": tier}}, "spec": {"command": ["/bin/true"]}});
        world.admin().post(format!("{}{path}", world.url)).json(&app).send().await.unwrap();
    }
    world.server.add_token("reader-token", "reader", "");
    world.bind("a", "reader-views", "User", "reader", "ClusterRole", "view").await;
    // The refusal below proves something only once the view binding is in force.
    let viewing =
        eventually(StatusCode::OK, || world.as_user("reader-token", reqwest::Method::GET, path)).await;
    assert_eq!(viewing, StatusCode::OK, "the view binding takes effect");
    let refused = world
        .as_user("reader-token", reqwest::Method::DELETE, &format!("{path}?labelSelector=tier%3Dweb"))
        .send()
        .await
        .unwrap()
        .status();
    assert_eq!(refused, StatusCode::FORBIDDEN, "view grants no deletecollection");
    let (code, body) = status_of(
        world
            .as_user("alice-token", reqwest::Method::DELETE, &format!("{path}?labelSelector=tier%3Dweb"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(code, StatusCode::OK, "{body}");
    assert_eq!(body["kind"], "ApplicationList");
    let deleted: Vec<&str> =
        body["items"].as_array().unwrap().iter().map(|i| i["metadata"]["name"].as_str().unwrap()).collect();
    assert_eq!(deleted, ["web-1", "web-2"]);
    let left: Value =
        world.admin().get(format!("{}{path}", world.url)).send().await.unwrap().json().await.unwrap();
    let left: Vec<&str> =
        left["items"].as_array().unwrap().iter().map(|i| i["metadata"]["name"].as_str().unwrap()).collect();
    assert_eq!(left, ["db"]);
    let namespaces = world.admin().delete(format!("{}/api/v1/namespaces", world.url)).send().await.unwrap();
    assert_eq!(namespaces.status(), StatusCode::METHOD_NOT_ALLOWED, "namespaces are deleted one at a time");
}
