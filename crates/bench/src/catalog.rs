//! The catalog benchmark: one sync fanning out to 1 000 subscriptions through a gateway, each
//! subscriber's mode one HTTP step. Prints subscriptions reconciled per second and the time from
//! the sync to the last `synced: true`, next to the gateway's own request rate at the
//! reconciler's concurrency, measured in the same run.

use std::time::{Duration, Instant};

use kayra_catalog::steps::{Mode, ReconcilerConfig, Step};
use kayra_testkit::{Store, TestServer};
use reqwest::Method;
use serde_json::{Value, json};

const SUBSCRIBERS: usize = 1000;
const GATEWAY_REQUESTS: usize = 5000;
/// The reconciler's concurrency (`kayra-controller`'s catalog loop).
const CONCURRENCY: usize = 16;

/// A gateway that answers every request with a fixed OpenAPI document: the fetch and every
/// step succeed, at the cost of a bare handler.
async fn gateway() -> Result<String, String> {
    let document = json!({"openapi": "3.1.0", "info": {"title": "bench", "version": "1"}, "paths": {
        "/apis/bench.example.com/v1/namespaces/{namespace}/things": {"get": {}, "post": {}},
    }});
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.map_err(|e| e.to_string())?;
    let url = format!("http://{}", listener.local_addr().map_err(|e| e.to_string())?);
    let body = bytes::Bytes::from(document.to_string());
    tokio::spawn(kayra_apiserver::serve(
        listener,
        None,
        kayra_apiserver::bare_router(body),
        Default::default(),
        std::future::pending::<()>(),
    ));
    Ok(url)
}

async fn send(
    client: &reqwest::Client,
    server: &TestServer,
    method: Method,
    path: &str,
    body: Option<Value>,
) -> Result<Value, String> {
    let mut request =
        client.request(method, format!("{}{path}", server.http_url())).bearer_auth(server.admin_token());
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.map_err(|e| e.to_string())?;
    let code = response.status();
    let value: Value = response.json().await.unwrap_or(Value::Null);
    if !code.is_success() {
        return Err(format!("{path} answered {code}: {value}"));
    }
    Ok(value)
}

/// How many subscriptions report `synced: true`.
async fn synced(client: &reqwest::Client, server: &TestServer) -> Result<usize, String> {
    let status = send(
        client,
        server,
        Method::GET,
        "/apis/catalog.example.com/v1/apiregistrations/bench.example.com/status",
        None,
    )
    .await?;
    Ok(status["subscriptions"].as_array().into_iter().flatten().filter(|s| s["synced"] == true).count())
}

async fn until_all_synced(client: &reqwest::Client, server: &TestServer) -> Result<Duration, String> {
    let started = Instant::now();
    while synced(client, server).await? < SUBSCRIBERS {
        if started.elapsed() > Duration::from_secs(600) {
            return Err("the sync did not finish within 10 minutes".to_owned());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(started.elapsed())
}

pub(crate) async fn run() -> Result<(), String> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    println!("catalog benchmark: one run; the ratio compares two figures from this run\n");
    let gateway = gateway().await?;
    let step = Step {
        name: "notify".into(),
        url: "{{ .Gateway }}/hooks/{{ .Subscription.Namespace }}/{{ .SyncID }}".into(),
        ..Step::default()
    };
    let mut reconciler =
        ReconcilerConfig { gateway_url: Some(gateway.clone()), ..ReconcilerConfig::default() };
    reconciler.mode.insert("trigger".into(), Mode { steps: vec![step] });
    let mut server = TestServer::start_with(Store::Sled, |config| config.reconciler = reconciler).await;
    let client = reqwest::Client::builder().pool_max_idle_per_host(64).build().map_err(|e| e.to_string())?;

    let setup = Instant::now();
    let registration =
        json!({"name": "bench.example.com", "active": true, "mode": "trigger", "sync_id": "build-0"});
    send(&client, &server, Method::POST, "/apis/catalog.example.com/v1/apiregistrations", Some(registration))
        .await?;
    for i in 0..SUBSCRIBERS {
        let namespace = format!("tenant-{i}");
        let body = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}});
        send(&client, &server, Method::POST, "/api/v1/namespaces", Some(body)).await?;
        let path = format!("/apis/catalog.example.com/v1/namespaces/{namespace}/subscriptions");
        send(
            &client,
            &server,
            Method::POST,
            &path,
            Some(json!({"api": "bench.example.com", "active": true})),
        )
        .await?;
    }
    until_all_synced(&client, &server).await?;
    println!(
        "{SUBSCRIBERS} namespaces and subscriptions created one at a time, and brought to their first build: {:.1} s\n",
        setup.elapsed().as_secs_f64()
    );

    let started = Instant::now();
    send(
        &client,
        &server,
        Method::PUT,
        "/apis/catalog.example.com/v1/apiregistrations/bench.example.com/sync",
        Some(json!({})),
    )
    .await?;
    let elapsed = until_all_synced(&client, &server).await?.max(started.elapsed());
    let rate = SUBSCRIBERS as f64 / elapsed.as_secs_f64();

    // The gateway alone, at the reconciler's concurrency, in the same run.
    let gateway_started = Instant::now();
    let tasks: Vec<_> = (0..CONCURRENCY)
        .map(|worker| {
            let (client, url) = (client.clone(), format!("{gateway}/hooks/tenant-{worker}/build-1"));
            tokio::spawn(async move {
                for _ in 0..GATEWAY_REQUESTS / CONCURRENCY {
                    client
                        .post(&url)
                        .send()
                        .await
                        .map_err(|e| e.to_string())?
                        .bytes()
                        .await
                        .map_err(|e| e.to_string())?;
                }
                Ok::<_, String>(())
            })
        })
        .collect();
    for task in tasks {
        task.await.map_err(|e| e.to_string())??;
    }
    let gateway_rate = GATEWAY_REQUESTS as f64 / gateway_started.elapsed().as_secs_f64();

    println!("one sync to {SUBSCRIBERS} subscriptions, one step each, {CONCURRENCY} at a time");
    println!("  sync to the last synced: true   {:>8.2} s", elapsed.as_secs_f64());
    println!("  subscriptions reconciled        {rate:>8.0}/s");
    println!(
        "  the gateway alone               {gateway_rate:>8.0} requests/s   ratio {:.3}",
        rate / gateway_rate
    );
    server.shutdown().await;
    Ok(())
}
