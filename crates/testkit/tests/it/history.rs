//! History, rollback and the freeze door over real HTTPS: an Application's spec states listed
//! as Revisions (JSON and Table), a rollback that restores one as the caller's update (status
//! kept, a new revision, admission run on what is restored), the Kinds that keep none (404),
//! the two grants a rollback needs, and `spec.frozen`, which only `freeze` and `thaw` write,
//! both granted as `create` on `applications/freeze`.

use std::time::{Duration, Instant};

use kayra_testkit::{Store, TestServer};
use reqwest::{Client, Method, StatusCode};
use serde_json::{Value, json};

const NS: &str = "/apis/fleet.example.com/v1/namespaces/default";
const RBAC: &str = "/apis/authorization.example.com/v1";

fn web(version: &str, cause: &str, env: Value) -> Value {
    json!({"apiVersion": "fleet.example.com/v1", "kind": "Application",
           "metadata": {"name": "web", "annotations": {"kubernetes.io/change-cause": cause}},
           "spec": {"command": ["/bin/sleep", version], "env": env}})
}

async fn send(
    client: &Client,
    server: &TestServer,
    method: Method,
    path: &str,
    body: Option<Value>,
) -> (StatusCode, Value) {
    let mut request = client.request(method, format!("{}{path}", server.url()));
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.expect("the server answers");
    let code = response.status();
    (code, response.json().await.unwrap_or(Value::Null))
}

/// A user with a bearer token, bound in `default` to the ClusterRole `role`.
async fn user(server: &TestServer, name: &str, role: &str) -> Client {
    server.add_token(&format!("{name}-token"), name, "");
    let binding = json!({"apiVersion": "authorization.example.com/v1", "kind": "RoleBinding",
        "metadata": {"name": format!("{name}-{role}")},
        "subjects": [{"kind": "User", "name": name}], "roleRef": {"kind": "ClusterRole", "name": role}});
    let (code, answer) = send(
        &server.admin(),
        server,
        Method::POST,
        &format!("{RBAC}/namespaces/default/rolebindings"),
        Some(binding),
    )
    .await;
    assert_eq!(code, StatusCode::CREATED, "{answer}");
    server.token_builder(&format!("{name}-token")).build().unwrap()
}

/// A ClusterRole of `rules`.
async fn role(server: &TestServer, name: &str, rules: Value) {
    let role = json!({"apiVersion": "authorization.example.com/v1", "kind": "ClusterRole",
                      "metadata": {"name": name}, "rules": rules});
    let (code, answer) =
        send(&server.admin(), server, Method::POST, &format!("{RBAC}/clusterroles"), Some(role)).await;
    assert_eq!(code, StatusCode::CREATED, "{answer}");
}

/// Waits until `client` may read the Application `web` (its binding has reached the RBAC index).
async fn until_bound(client: &Client, server: &TestServer) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while send(client, server, Method::GET, &format!("{NS}/applications/web"), None).await.0 != StatusCode::OK
    {
        assert!(Instant::now() < deadline, "the binding never took effect");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn an_applications_spec_states_are_listed_and_one_is_rolled_back_to_as_an_update() {
    let server = TestServer::start_with(Store::Memory, |config| config.agent = false).await;
    let admin = server.admin();
    let (code, created) =
        send(&admin, &server, Method::POST, &format!("{NS}/applications"), Some(web("1", "one", json!([]))))
            .await;
    assert_eq!(code, StatusCode::CREATED, "{created}");
    let mut versions = vec![created["metadata"]["resourceVersion"].clone()];
    for (version, cause) in [("2", "two"), ("3", "three")] {
        let (code, written) = send(
            &admin,
            &server,
            Method::PUT,
            &format!("{NS}/applications/web"),
            Some(web(version, cause, json!([]))),
        )
        .await;
        assert_eq!(code, StatusCode::OK, "{written}");
        versions.push(written["metadata"]["resourceVersion"].clone());
    }
    let mut status = web("3", "three", json!([]));
    status["status"] = json!({"phase": "Running", "restarts": 2});
    let (code, answer) =
        send(&admin, &server, Method::PUT, &format!("{NS}/applications/web/status"), Some(status)).await;
    assert_eq!(code, StatusCode::OK, "{answer}");

    let (code, history) =
        send(&admin, &server, Method::GET, &format!("{NS}/applications/web/history"), None).await;
    assert_eq!(code, StatusCode::OK, "{history}");
    assert_eq!((history["apiVersion"].as_str(), history["kind"].as_str()), (Some("v1"), Some("List")));
    let items = history["items"].as_array().unwrap();
    let listed: Vec<(Value, Value, Value)> = items
        .iter()
        .map(|item| (item["revision"].clone(), item["generation"].clone(), item["changeCause"].clone()))
        .collect();
    assert_eq!(
        listed,
        [
            (versions[0].clone(), json!(1), json!("one")),
            (versions[1].clone(), json!(2), json!("two")),
            (versions[2].clone(), json!(3), json!("three"))
        ]
    );
    assert_eq!(
        (items[0]["kind"].as_str(), items[0]["apiVersion"].as_str()),
        (Some("Revision"), Some("fleet.example.com/v1"))
    );
    assert_eq!(items[0]["state"]["spec"]["command"], json!(["/bin/sleep", "1"]));
    assert!(items.iter().all(|item| item["user"].as_str().is_some_and(|user| !user.is_empty())));
    let table: Value = admin
        .get(format!("{}{NS}/applications/web/history", server.url()))
        .header("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io, application/json")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let columns: Vec<&str> =
        table["columnDefinitions"].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(columns, ["Revision", "Generation", "Age", "User", "Change-Cause"]);
    assert_eq!(table["rows"].as_array().unwrap().len(), 3);
    assert_eq!(table["rows"][0]["cells"][4], "one");

    // To the first: its spec, the status as it is, a new resourceVersion and generation.
    let path = format!("{NS}/applications/web/rollback");
    let first = versions[0].clone();
    let (code, rolled) = send(&admin, &server, Method::POST, &path, Some(json!({"toRevision": first}))).await;
    assert_eq!(code, StatusCode::OK, "{rolled}");
    assert_eq!(rolled["spec"]["command"], json!(["/bin/sleep", "1"]));
    assert_eq!(rolled["status"]["restarts"], 2, "the status stays");
    assert_eq!(rolled["metadata"]["generation"], 4);
    assert_eq!(rolled["metadata"]["annotations"]["kubernetes.io/change-cause"], "one");
    let (_, history) =
        send(&admin, &server, Method::GET, &format!("{NS}/applications/web/history"), None).await;
    let last = history["items"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(
        (last["revision"].clone(), last["generation"].clone()),
        (rolled["metadata"]["resourceVersion"].clone(), json!(4))
    );
    // Nothing named: the latest spec that differs from the current one (the third).
    let (code, previous) = send(&admin, &server, Method::POST, &path, Some(json!({}))).await;
    assert_eq!((code, &previous["spec"]["command"][1]), (StatusCode::OK, &json!("3")), "{previous}");
    let (code, refused) =
        send(&admin, &server, Method::POST, &path, Some(json!({"toRevision": "123456789"}))).await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "{refused}");
    assert_eq!(refused["details"]["causes"][0]["field"], "toRevision", "{refused}");
    let (code, refused) = send(&admin, &server, Method::POST, &path, Some(json!({"toRevision": "x"}))).await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "{refused}");

    // Kinds that keep no history have neither subresource.
    let secret = json!({"apiVersion": "fleet.example.com/v1", "kind": "Secret", "metadata": {"name": "db"}, "stringData": {"k": "v"}});
    assert_eq!(
        send(&admin, &server, Method::POST, &format!("{NS}/secrets"), Some(secret)).await.0,
        StatusCode::CREATED
    );
    for (method, path) in [
        (Method::GET, format!("{NS}/secrets/db/history")),
        (Method::POST, format!("{NS}/secrets/db/rollback")),
        (Method::GET, "/api/v1/namespaces/default/history".to_owned()),
    ] {
        let (code, answer) = send(&admin, &server, method, &path, Some(json!({}))).await;
        assert_eq!(code, StatusCode::NOT_FOUND, "{path}: {answer}");
    }
    assert_eq!(
        send(&admin, &server, Method::PUT, &format!("{NS}/applications/web/rollback"), Some(json!({})))
            .await
            .0,
        StatusCode::METHOD_NOT_ALLOWED
    );
}

#[tokio::test]
async fn a_rollback_needs_its_own_grant_and_the_update_it_is_and_is_admitted_as_one() {
    let server = TestServer::start_with(Store::Memory, |config| config.agent = false).await;
    let admin = server.admin();
    // The first spec names a Secret; the second does not.
    let secret = json!({"apiVersion": "fleet.example.com/v1", "kind": "Secret", "metadata": {"name": "hidden"}, "stringData": {"k": "v"}});
    assert_eq!(
        send(&admin, &server, Method::POST, &format!("{NS}/secrets"), Some(secret)).await.0,
        StatusCode::CREATED
    );
    let named = json!([{"name": "K", "secretRef": {"name": "hidden", "key": "k"}}]);
    let (code, created) =
        send(&admin, &server, Method::POST, &format!("{NS}/applications"), Some(web("1", "one", named)))
            .await;
    assert_eq!(code, StatusCode::CREATED, "{created}");
    let first = created["metadata"]["resourceVersion"].clone();
    let (code, _) = send(
        &admin,
        &server,
        Method::PUT,
        &format!("{NS}/applications/web"),
        Some(web("2", "two", json!([]))),
    )
    .await;
    assert_eq!(code, StatusCode::OK);

    let read = json!({"apis": ["fleet.example.com"], "resources": ["applications"], "verbs": ["get"]});
    let update = json!({"apis": ["fleet.example.com"], "resources": ["applications"], "verbs": ["update"]});
    let rollback =
        json!({"apis": ["fleet.example.com"], "resources": ["applications/rollback"], "verbs": ["create"]});
    role(&server, "rolls-only", json!([read, rollback])).await;
    role(&server, "updates-only", json!([read, update])).await;
    role(&server, "rolls-and-updates", json!([read, update, rollback])).await;
    let path = format!("{NS}/applications/web/rollback");
    let to_first = Some(json!({"toRevision": first}));
    for (name, role, needs) in [
        ("ron", "rolls-only", "cannot update resource \"applications\""),
        ("uma", "updates-only", "applications/rollback"),
    ] {
        let client = user(&server, name, role).await;
        until_bound(&client, &server).await;
        let (code, refused) = send(&client, &server, Method::POST, &path, to_first.clone()).await;
        assert_eq!(code, StatusCode::FORBIDDEN, "{name}: {refused}");
        assert!(refused["message"].as_str().unwrap().contains(needs), "{name}: {refused}");
    }
    // Both grants, but no `get` on the Secret the first spec names: refused as writing that
    // spec would be (the admission chain decides what is restored), and nothing is written.
    let both = user(&server, "bea", "rolls-and-updates").await;
    until_bound(&both, &server).await;
    let (code, refused) = send(&both, &server, Method::POST, &path, to_first.clone()).await;
    assert_eq!(code, StatusCode::FORBIDDEN, "{refused}");
    assert!(refused["message"].as_str().unwrap().contains("hidden"), "{refused}");
    let (_, stored) = send(&admin, &server, Method::GET, &format!("{NS}/applications/web"), None).await;
    assert_eq!(stored["spec"]["command"][1], "2");
    // The admin may read that Secret, so may restore that spec; bea may restore the second.
    let (code, rolled) = send(&admin, &server, Method::POST, &path, to_first).await;
    assert_eq!((code, &rolled["spec"]["command"][1]), (StatusCode::OK, &json!("1")), "{rolled}");
    let (code, rolled) = send(&both, &server, Method::POST, &path, Some(json!({"toRevision": 0}))).await;
    assert_eq!((code, &rolled["spec"]["command"][1]), (StatusCode::OK, &json!("2")), "{rolled}");
    // `view` reads histories, as it reads the workloads.
    let viewer = user(&server, "vic", "view").await;
    until_bound(&viewer, &server).await;
    let (code, history) =
        send(&viewer, &server, Method::GET, &format!("{NS}/applications/web/history"), None).await;
    assert_eq!((code, history["items"].as_array().map(Vec::len)), (StatusCode::OK, Some(4)), "{history}");
}

#[tokio::test]
async fn only_the_freeze_and_thaw_doors_write_spec_frozen_and_edit_may_use_neither() {
    let server = TestServer::start_with(Store::Memory, |config| config.agent = false).await;
    let admin = server.admin();
    let (code, created) =
        send(&admin, &server, Method::POST, &format!("{NS}/applications"), Some(web("1", "one", json!([]))))
            .await;
    assert_eq!(code, StatusCode::CREATED, "{created}");
    let app = format!("{NS}/applications/web");

    // A plain write of the field is refused, naming the door, whoever writes it.
    let patch = admin
        .patch(format!("{}{app}", server.url()))
        .header("Content-Type", "application/merge-patch+json")
        .body(r#"{"spec":{"frozen":true}}"#)
        .send()
        .await
        .unwrap();
    let (code, refused) = (patch.status(), patch.json::<Value>().await.unwrap());
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "{refused}");
    let cause = &refused["details"]["causes"][0];
    assert_eq!(cause["field"], "spec.frozen", "{refused}");
    assert!(cause["message"].as_str().unwrap().contains("/applications/<name>/freeze"), "{refused}");
    let mut frozen = web("1", "one", json!([]));
    frozen["spec"]["frozen"] = json!(true);
    assert_eq!(
        send(&admin, &server, Method::PUT, &app, Some(frozen.clone())).await.0,
        StatusCode::UNPROCESSABLE_ENTITY
    );
    frozen["metadata"]["name"] = json!("born-frozen");
    let (code, _) = send(&admin, &server, Method::POST, &format!("{NS}/applications"), Some(frozen)).await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "nor is an Application created frozen");

    // `edit` may change the workload but not use its doors; `admin` may.
    let editor = user(&server, "eve", "edit").await;
    until_bound(&editor, &server).await;
    for door in ["freeze", "thaw"] {
        let (code, refused) = send(&editor, &server, Method::POST, &format!("{app}/{door}"), None).await;
        assert_eq!(code, StatusCode::FORBIDDEN, "{door}: {refused}");
        assert!(refused["message"].as_str().unwrap().contains("applications/freeze"), "{door}: {refused}");
    }
    let (code, written) = send(&admin, &server, Method::POST, &format!("{app}/freeze"), None).await;
    assert_eq!(code, StatusCode::OK, "{written}");
    assert_eq!(
        (written["spec"]["frozen"].clone(), written["metadata"]["generation"].clone()),
        (json!(true), json!(2))
    );
    // What stays frozen through later writes that leave the field alone.
    let patched = editor
        .patch(format!("{}{app}", server.url()))
        .header("Content-Type", "application/merge-patch+json")
        .body(r#"{"spec":{"args":["x"]}}"#)
        .send()
        .await
        .unwrap();
    let patched: Value = patched.json().await.unwrap();
    assert_eq!(
        (patched["spec"]["frozen"].clone(), patched["spec"]["args"].clone()),
        (json!(true), json!(["x"])),
        "{patched}"
    );
    // A door's write is an operation, not a spec state of the history.
    let (_, history) = send(&admin, &server, Method::GET, &format!("{app}/history"), None).await;
    let generations: Vec<&Value> =
        history["items"].as_array().unwrap().iter().map(|item| &item["generation"]).collect();
    assert_eq!(generations, [&json!(1), &json!(3)]);
    // A rollback leaves the field as it is.
    let (code, rolled) =
        send(&admin, &server, Method::POST, &format!("{app}/rollback"), Some(json!({}))).await;
    assert_eq!((code, &rolled["spec"]["frozen"]), (StatusCode::OK, &json!(true)), "{rolled}");
    // Thawing is granted as freezing is: `create` on applications/freeze.
    role(&server, "freezer", json!([{"apis": ["fleet.example.com"], "resources": ["applications", "applications/freeze"], "verbs": ["get", "create"]}])).await;
    role(&server, "thaw-by-name", json!([{"apis": ["fleet.example.com"], "resources": ["applications", "applications/thaw"], "verbs": ["get", "create"]}])).await;
    let named = user(&server, "tom", "thaw-by-name").await;
    until_bound(&named, &server).await;
    let (code, refused) = send(&named, &server, Method::POST, &format!("{app}/thaw"), None).await;
    assert_eq!(code, StatusCode::FORBIDDEN, "no applications/thaw permission exists: {refused}");
    let freezer = user(&server, "fay", "freezer").await;
    until_bound(&freezer, &server).await;
    let (code, thawed) = send(&freezer, &server, Method::POST, &format!("{app}/thaw?dryRun=All"), None).await;
    assert_eq!((code, thawed["spec"].get("frozen")), (StatusCode::OK, None), "{thawed}");
    let (_, stored) = send(&admin, &server, Method::GET, &app, None).await;
    assert_eq!(stored["spec"]["frozen"], true, "a dry run writes nothing");
    let (code, thawed) = send(&freezer, &server, Method::POST, &format!("{app}/thaw"), Some(json!({}))).await;
    assert_eq!((code, thawed["spec"].get("frozen")), (StatusCode::OK, None), "{thawed}");
}
