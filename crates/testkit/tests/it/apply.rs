//! Server-side apply over real TLS and HTTP: `application/apply-patch+yaml` in YAML and JSON,
//! create-on-apply (`201`) and its `create` grant, merging by list keys, conflicts as
//! kube-apiserver answers them, `force`, dry run, and the managers every other write records.

use kayra_testkit::{Store, TestServer};
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::{APPS, eventually, status_of};

fn apply(client: &reqwest::Client, url: &str, body: impl Into<reqwest::Body>) -> reqwest::RequestBuilder {
    client.patch(url).header("Content-Type", "application/apply-patch+yaml").body(body)
}

fn managers(object: &Value) -> Vec<(String, String)> {
    object["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|entry| {
            (entry["manager"].as_str().unwrap().to_owned(), entry["operation"].as_str().unwrap().to_owned())
        })
        .collect()
}

const WEB: &str = "apiVersion: fleet.example.com/v1
kind: Application
metadata:
  name: web
spec:
  command: [/bin/sleep, \"100\"]
  env:
  - name: A
    value: \"1\"
  ports:
  - port: 8080
";

#[tokio::test]
async fn an_apply_creates_merges_by_key_conflicts_and_is_forced() {
    let server = TestServer::start(Store::Memory).await;
    let (client, url) = (server.admin(), format!("{}{APPS}/web", server.url()));

    let (code, created) =
        status_of(apply(&client, &format!("{url}?fieldManager=ops"), WEB).send().await.unwrap()).await;
    assert_eq!(code, StatusCode::CREATED, "{created}");
    assert_eq!(managers(&created), [("ops".to_owned(), "Apply".to_owned())]);
    assert_eq!(created["spec"]["ports"], json!([{"port": 8080, "protocol": "TCP"}]), "defaulted");
    let fields = &created["metadata"]["managedFields"][0]["fieldsV1"]["f:spec"];
    assert_eq!(
        fields["f:ports"],
        json!({"k:{\"port\":8080,\"protocol\":\"TCP\"}": {".": {}, "f:port": {}}}),
        "the defaulted key names the item; the default is nobody's"
    );

    let (code, refused) = status_of(apply(&client, &url, WEB).send().await.unwrap()).await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(
        refused["message"],
        "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch"
    );

    // Another manager's variable merges in beside the first's, by name (JSON is YAML too).
    let other = json!({"apiVersion": "fleet.example.com/v1", "kind": "Application", "metadata": {"name": "web"},
                       "spec": {"env": [{"name": "B", "value": "2"}]}});
    let (code, merged) = status_of(
        apply(&client, &format!("{url}?fieldManager=other"), other.to_string()).send().await.unwrap(),
    )
    .await;
    assert_eq!(code, StatusCode::OK, "{merged}");
    assert_eq!(merged["spec"]["env"], json!([{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]));

    let changed = json!({"apiVersion": "fleet.example.com/v1", "kind": "Application", "metadata": {"name": "web"},
                         "spec": {"env": [{"name": "A", "value": "9"}, {"name": "B", "value": "2"}]}});
    let conflicting = format!("{url}?fieldManager=other&force=false");
    let (code, conflict) =
        status_of(apply(&client, &conflicting, changed.to_string()).send().await.unwrap()).await;
    assert_eq!(code, StatusCode::CONFLICT);
    assert_eq!(conflict["reason"], "Conflict");
    assert_eq!(
        conflict["message"],
        "Apply failed with 1 conflict: conflict with \"ops\": .spec.env[name=\"A\"].value"
    );
    assert_eq!(
        conflict["details"],
        json!({"causes": [{"type": "FieldManagerConflict", "message": "conflict with \"ops\"", "field": ".spec.env[name=\"A\"].value"}]})
    );
    let forced = format!("{url}?fieldManager=other&force=true");
    let (code, taken) = status_of(apply(&client, &forced, changed.to_string()).send().await.unwrap()).await;
    assert_eq!(code, StatusCode::OK);
    assert_eq!(taken["spec"]["env"][0], json!({"name": "A", "value": "9"}));

    // `force` is an apply's alone; a strategic merge patch is not taken, and the 415 says what is.
    let merge =
        client.patch(format!("{url}?force=true")).header("Content-Type", "application/merge-patch+json");
    let (code, _) = status_of(merge.body("{}").send().await.unwrap()).await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY);
    let strategic = client.patch(&url).header("Content-Type", "application/strategic-merge-patch+json");
    let (code, unsupported) = status_of(strategic.body("{}").send().await.unwrap()).await;
    assert_eq!(code, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    assert!(
        unsupported["message"].as_str().unwrap().contains("application/apply-patch+yaml"),
        "{unsupported}"
    );
    let (code, _) =
        status_of(apply(&client, &format!("{url}?fieldManager=ops"), "apiVersion: [").send().await.unwrap())
            .await;
    assert_eq!(code, StatusCode::BAD_REQUEST, "not YAML");

    // A dry run answers what it would create, and stores nothing.
    let dry = WEB.replace("name: web", "name: dry");
    let dry_url = format!("{}{APPS}/dry?fieldManager=ops&dryRun=All", server.url());
    assert_eq!(apply(&client, &dry_url, dry).send().await.unwrap().status(), StatusCode::CREATED);
    assert_eq!(
        client.get(format!("{}{APPS}/dry", server.url())).send().await.unwrap().status(),
        StatusCode::NOT_FOUND
    );
}

#[tokio::test]
async fn every_write_records_its_manager() {
    let server = TestServer::start(Store::Memory).await;
    let client = server.admin();
    let agent = "kubectl/v1.32.4 (linux/amd64) kubernetes/abcdef0";
    let body = json!({"apiVersion": "fleet.example.com/v1", "kind": "Application", "metadata": {"name": "a"}, "spec": {"command": ["/bin/true"]}});
    let post = client.post(format!("{}{APPS}", server.url())).header("User-Agent", agent).json(&body);
    let (code, created) = status_of(post.send().await.unwrap()).await;
    assert_eq!(code, StatusCode::CREATED);
    assert_eq!(
        managers(&created),
        [("kubectl".to_owned(), "Update".to_owned())],
        "named by the user agent's first word"
    );
    let labelled = client
        .patch(format!("{}{APPS}/a?fieldManager=kubectl-label", server.url()))
        .header("Content-Type", "application/merge-patch+json")
        .body(r#"{"metadata":{"labels":{"tier":"web"}}}"#);
    let (_, labelled) = status_of(labelled.send().await.unwrap()).await;
    assert_eq!(
        entry(&labelled, "kubectl-label")["fieldsV1"],
        json!({"f:metadata": {"f:labels": {".": {}, "f:tier": {}}}})
    );
    let status = client
        .patch(format!("{}{APPS}/a/status?fieldManager=node", server.url()))
        .header("Content-Type", "application/merge-patch+json")
        .body(r#"{"status":{"phase":"Running"}}"#);
    let (_, with_status) = status_of(status.send().await.unwrap()).await;
    assert_eq!(entry(&with_status, "node")["subresource"], "status", "{with_status}");

    // A no-op apply writes nothing (a Secret, which no loop writes meanwhile).
    let secret =
        "apiVersion: fleet.example.com/v1\nkind: Secret\nmetadata:\n  name: s\nstringData:\n  k: v\n";
    let url =
        format!("{}/apis/fleet.example.com/v1/namespaces/default/secrets/s?fieldManager=ops", server.url());
    let (code, first) = status_of(apply(&client, &url, secret).send().await.unwrap()).await;
    assert_eq!(code, StatusCode::CREATED, "{first}");
    let (code, again) = status_of(apply(&client, &url, secret).send().await.unwrap()).await;
    assert_eq!(code, StatusCode::OK);
    assert_eq!(again["metadata"]["resourceVersion"], first["metadata"]["resourceVersion"], "no write");
}

/// The entry of `manager` among the object's managers.
fn entry(object: &Value, manager: &str) -> Value {
    let entries = object["metadata"]["managedFields"].as_array().cloned().unwrap_or_default();
    entries.into_iter().find(|entry| entry["manager"] == manager).unwrap_or(Value::Null)
}

#[tokio::test]
async fn creating_by_apply_needs_create() {
    let server = TestServer::start(Store::Memory).await;
    let (admin, url) = (server.admin(), server.url());
    server.add_token("patcher-token", "patcher", "");
    let rbac = "/apis/authorization.example.com/v1/namespaces/default";
    let role = json!({"apiVersion": "authorization.example.com/v1", "kind": "Role", "metadata": {"name": "patcher"},
                      "rules": [{"apis": ["fleet.example.com"], "resources": ["applications"], "verbs": ["get", "patch"]}]});
    let binding = json!({"apiVersion": "authorization.example.com/v1", "kind": "RoleBinding", "metadata": {"name": "patcher"},
                         "subjects": [{"kind": "User", "name": "patcher"}], "roleRef": {"kind": "Role", "name": "patcher"}});
    for (path, body) in [("roles", role), ("rolebindings", binding)] {
        let created = admin.post(format!("{url}{rbac}/{path}")).json(&body).send().await.unwrap();
        assert_eq!(created.status(), StatusCode::CREATED);
    }
    let patcher = server.token_builder("patcher-token").build().unwrap();
    let web = format!("{url}{APPS}/web?fieldManager=patcher");
    let ready = eventually(StatusCode::NOT_FOUND, || patcher.get(format!("{url}{APPS}/web"))).await;
    assert_eq!(ready, StatusCode::NOT_FOUND, "the binding holds");
    let (code, refused) = status_of(apply(&patcher, &web, WEB).send().await.unwrap()).await;
    assert_eq!(code, StatusCode::FORBIDDEN, "{refused}");
    assert!(
        refused["message"].as_str().unwrap().contains("cannot create resource \"applications\""),
        "{refused}"
    );
    assert_eq!(
        apply(&admin, &format!("{url}{APPS}/web?fieldManager=ops"), WEB).send().await.unwrap().status(),
        StatusCode::CREATED
    );
    let (code, patched) = status_of(
        apply(&patcher, &web, WEB.replace("\"1\"", "\"1\"\n  - name: P\n    value: p")).send().await.unwrap(),
    )
    .await;
    assert_eq!(code, StatusCode::OK, "{patched}");
}

/// Apply meets the doors and the history: it may not set `spec.frozen`, which only `freeze`
/// and `thaw` write (and which an applier that never owned it leaves as the door set it), and
/// each apply that changes the spec is a state of the object's history.
#[tokio::test]
async fn an_apply_keeps_to_the_doors_and_each_change_it_makes_is_a_revision() {
    let server = TestServer::start_with(Store::Memory, |config| config.agent = false).await;
    let (client, url) = (server.admin(), format!("{}{APPS}/web", server.url()));
    let applied = format!("{url}?fieldManager=gitops");
    let (code, created) = status_of(apply(&client, &applied, WEB).send().await.unwrap()).await;
    assert_eq!(code, StatusCode::CREATED, "{created}");

    let frozen = format!("{WEB}  frozen: true\n");
    let (code, refused) = status_of(apply(&client, &applied, frozen).send().await.unwrap()).await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "{refused}");
    assert_eq!(refused["details"]["causes"][0]["field"], "spec.frozen", "{refused}");

    let door = client.post(format!("{url}/freeze")).send().await.unwrap();
    assert_eq!(door.status(), StatusCode::OK);
    let changed = WEB.replace("\"100\"", "\"200\"");
    let (code, reapplied) = status_of(apply(&client, &applied, changed).send().await.unwrap()).await;
    assert_eq!(code, StatusCode::OK, "{reapplied}");
    assert_eq!(reapplied["spec"]["frozen"], true, "the door's field stays as the door set it");
    assert_eq!(reapplied["spec"]["command"], json!(["/bin/sleep", "200"]));
    let freeze = reapplied["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .find(|entry| entry["subresource"] == "freeze")
        .unwrap_or_else(|| panic!("the door's write is recorded as its subresource: {reapplied}"));
    assert_eq!(freeze["fieldsV1"]["f:spec"], json!({"f:frozen": {}}), "{freeze}");

    let history = client.get(format!("{url}/history")).send().await.unwrap();
    let history: Value = history.json().await.unwrap();
    let commands: Vec<&Value> = history["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|item| &item["state"]["spec"]["command"][1])
        .collect();
    assert_eq!(commands, [&json!("100"), &json!("200")], "each apply that changed the spec: {history}");
}
