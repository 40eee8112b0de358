//! The `scale` subresource of ApplicationSets over real HTTPS: read, merge- and JSON-patched and
//! replaced as `kubectl scale` and autoscalers do, advertised in discovery, and refused with 422
//! for a set that has not exactly one replicated component.

use kayra_testkit::{Store, TestServer};
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::status_of;

const SETS: &str = "/apis/fleet.example.com/v1/namespaces/default/applicationsets";

fn set(name: &str, components: Value) -> Value {
    json!({"apiVersion": "fleet.example.com/v1", "kind": "ApplicationSet", "metadata": {"name": name},
           "spec": {"applications": components}})
}

#[tokio::test]
async fn a_set_scales_through_its_scale_subresource() {
    let server = TestServer::start(Store::Memory).await;
    let client = server.admin();
    let url = |path: &str| format!("{}{SETS}{path}", server.url());
    let web = json!({"name": "web", "spec": {"command": ["/bin/web"]}, "scale": {"replicas": 2}});
    let agent = json!({"name": "agent", "spec": {"command": ["/bin/agent"]}, "scale": {"nodeSpread": {}}});
    let api = json!({"name": "api", "spec": {"command": ["/bin/api"]}, "scale": {"replicas": 1}});
    for body in
        [set("shop", json!([agent, web])), set("spread", json!([agent])), set("two", json!([web, api]))]
    {
        let (code, body) = status_of(client.post(url("")).json(&body).send().await.unwrap()).await;
        assert_eq!(code, StatusCode::CREATED, "{body}");
    }

    let (code, scale) = status_of(client.get(url("/shop/scale")).send().await.unwrap()).await;
    assert_eq!(code, StatusCode::OK, "{scale}");
    assert_eq!(
        (scale["apiVersion"].as_str(), scale["kind"].as_str()),
        (Some("autoscaling/v1"), Some("Scale"))
    );
    assert_eq!(scale["spec"]["replicas"], 2);
    assert!(scale["status"]["replicas"].as_i64().is_some_and(|n| n <= 2), "{scale}");
    assert_eq!(
        scale["status"]["selector"],
        "fleet.example.com/application-set=shop,fleet.example.com/component=web"
    );
    let stale = scale["metadata"]["resourceVersion"].as_str().unwrap().to_owned();

    // What kubectl scale sends.
    let patched = client
        .patch(url("/shop/scale"))
        .header("Content-Type", "application/merge-patch+json")
        .body(r#"{"spec":{"replicas":5}}"#)
        .send()
        .await
        .unwrap();
    let (code, scale) = status_of(patched).await;
    assert_eq!((code, &scale["spec"]["replicas"]), (StatusCode::OK, &json!(5)), "{scale}");
    let (_, stored) = status_of(client.get(url("/shop")).send().await.unwrap()).await;
    assert_eq!(stored["spec"]["applications"][1]["scale"], json!({"replicas": 5}));
    assert_eq!(
        stored["spec"]["applications"][0]["scale"],
        json!({"nodeSpread": {}}),
        "only the replicated one"
    );
    assert_eq!(stored["metadata"]["generation"], 2);

    let json_patch = client
        .patch(url("/shop/scale"))
        .header("Content-Type", "application/json-patch+json")
        .body(r#"[{"op": "replace", "path": "/spec/replicas", "value": 4}]"#)
        .send()
        .await
        .unwrap();
    assert_eq!(status_of(json_patch).await.1["spec"]["replicas"], 4);
    let put = |replicas: Value, version: &str| {
        let body = json!({"apiVersion": "autoscaling/v1", "kind": "Scale",
                          "metadata": {"name": "shop", "namespace": "default", "resourceVersion": version},
                          "spec": {"replicas": replicas}});
        client.put(url("/shop/scale")).json(&body).send()
    };
    let (code, body) = status_of(put(json!(3), &stale).await.unwrap()).await;
    assert_eq!(code, StatusCode::CONFLICT, "a stale resourceVersion: {body}");
    let (code, body) = status_of(put(json!(-1), "").await.unwrap()).await;
    assert_eq!(
        (code, body["reason"].as_str()),
        (StatusCode::UNPROCESSABLE_ENTITY, Some("Invalid")),
        "{body}"
    );
    let (code, body) = status_of(put(json!(3), "").await.unwrap()).await;
    assert_eq!((code, &body["spec"]["replicas"]), (StatusCode::OK, &json!(3)), "{body}");
    // The set's loop follows: `status.replicas` counts the component's Applications.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let (_, scale) = status_of(client.get(url("/shop/scale")).send().await.unwrap()).await;
        if scale["status"]["replicas"] == 3 {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the set did not follow its scale: {scale}");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }

    for (name, why) in
        [("spread", "no component scaled by replicas"), ("two", "2 components scaled by replicas")]
    {
        let (code, body) = status_of(client.get(url(&format!("/{name}/scale"))).send().await.unwrap()).await;
        assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
        assert!(body["message"].as_str().unwrap().contains(why), "{body}");
        let refused = client
            .patch(url(&format!("/{name}/scale")))
            .header("Content-Type", "application/merge-patch+json")
            .body(r#"{"spec":{"replicas":5}}"#)
            .send()
            .await
            .unwrap();
        assert_eq!(refused.status(), StatusCode::UNPROCESSABLE_ENTITY);
    }
    let (code, _) = status_of(client.get(url("/missing/scale")).send().await.unwrap()).await;
    assert_eq!(code, StatusCode::NOT_FOUND);
    let (code, _) = status_of(client.delete(url("/shop/scale")).send().await.unwrap()).await;
    assert_eq!(code, StatusCode::METHOD_NOT_ALLOWED);

    let (_, discovery) =
        status_of(client.get(format!("{}/apis/fleet.example.com/v1", server.url())).send().await.unwrap())
            .await;
    let scale = discovery["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "applicationsets/scale")
        .cloned()
        .expect("applicationsets/scale is advertised");
    assert_eq!(
        (scale["group"].as_str(), scale["version"].as_str(), scale["kind"].as_str()),
        (Some("autoscaling"), Some("v1"), Some("Scale"))
    );
    assert_eq!(scale["verbs"], json!(["get", "patch", "update"]));
}

/// A Scale written with no resourceVersion (as `kubectl scale` patches it, or a PUT without
/// one) lands on the set as it stands: a 409 would be an answer to a precondition nobody set,
/// though the set's loop and other writers change the set all the time.
#[tokio::test]
async fn a_scale_with_no_version_wins_over_writers_of_the_set() {
    let server = TestServer::start(Store::Memory).await;
    let client = server.admin();
    let url = |path: &str| format!("{}{SETS}{path}", server.url());
    let web = json!({"name": "web", "spec": {"command": ["/bin/web"]}, "scale": {"replicas": 1}});
    let (code, body) =
        status_of(client.post(url("")).json(&set("busy", json!([web]))).send().await.unwrap()).await;
    assert_eq!(code, StatusCode::CREATED, "{body}");

    // Another writer relabels the set as fast as it can, each write moving its resourceVersion.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = tokio::spawn({
        let (client, target, stop) = (client.clone(), url("/busy"), stop.clone());
        async move {
            let mut writes = 0;
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                let patch = json!({"metadata": {"labels": {"tick": writes.to_string()}}});
                let answer = client
                    .patch(&target)
                    .header("Content-Type", "application/merge-patch+json")
                    .body(patch.to_string())
                    .send()
                    .await
                    .unwrap();
                assert_eq!(answer.status(), StatusCode::OK);
                writes += 1;
            }
            writes
        }
    });
    for replicas in 0..100 {
        let answer = if replicas % 2 == 0 {
            let body = json!({"apiVersion": "autoscaling/v1", "kind": "Scale",
                              "metadata": {"name": "busy", "namespace": "default"},
                              "spec": {"replicas": replicas}});
            client.put(url("/busy/scale")).json(&body).send().await.unwrap()
        } else {
            client
                .patch(url("/busy/scale"))
                .header("Content-Type", "application/merge-patch+json")
                .body(json!({"spec": {"replicas": replicas}}).to_string())
                .send()
                .await
                .unwrap()
        };
        let (code, scale) = status_of(answer).await;
        assert_eq!((code, &scale["spec"]["replicas"]), (StatusCode::OK, &json!(replicas)), "{scale}");
    }
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let writes = writer.await.unwrap();
    assert!(writes > 0, "the other writer wrote while the set was scaled");
    let (_, stored) = status_of(client.get(url("/busy")).send().await.unwrap()).await;
    assert_eq!(stored["spec"]["applications"][0]["scale"], json!({"replicas": 99}));
}
