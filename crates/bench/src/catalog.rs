//! The catalog benchmark: one sync fanning out to 1 000 subscriptions through a gateway, each
//! subscriber's mode one HTTP step. Prints the time from the sync to the last `synced: true` and
//! to the last of the `Synced` Events the reconciler writes, and subscriptions reconciled per
//! second with their Events counted in the work, next to the gateway's own request rate at the
//! reconciler's concurrency, measured in the same run on a quiet server (after the setup's
//! Events, before the sync).

use std::time::{Duration, Instant};

use kayra_catalog::steps::{Mode, ReconcilerConfig, Step};
use kayra_testkit::{Store, TestServer};
use reqwest::Method;
use serde_json::{Value, json};

use crate::report::{Report, Size};

/// Subscriptions, and requests of the gateway's own measurement: full size, then smoke.
const SUBSCRIBERS: (usize, usize) = (1000, 10);
const GATEWAY_REQUESTS: (usize, usize) = (5000, 160);
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

async fn until_all_synced(
    client: &reqwest::Client,
    server: &TestServer,
    subscribers: usize,
) -> Result<Duration, String> {
    let started = Instant::now();
    while synced(client, server).await? < subscribers {
        if started.elapsed() > Duration::from_secs(600) {
            return Err("the sync did not finish within 10 minutes".to_owned());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(started.elapsed())
}

/// How many `Synced` Events, in every namespace, record a reconciliation to `sync_id`.
async fn synced_events(
    client: &reqwest::Client,
    server: &TestServer,
    sync_id: &str,
) -> Result<usize, String> {
    let events = send(client, server, Method::GET, "/api/v1/events", None).await?;
    let suffix = format!(" {sync_id}");
    Ok(events["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["reason"] == "Synced" && e["message"].as_str().is_some_and(|m| m.ends_with(&suffix)))
        .count())
}

/// Waits until every one of the `subscribers` subscriptions' `Synced` Event for `sync_id` exists.
async fn until_all_events(
    client: &reqwest::Client,
    server: &TestServer,
    sync_id: &str,
    subscribers: usize,
) -> Result<(), String> {
    let started = Instant::now();
    loop {
        let written = synced_events(client, server, sync_id).await?;
        if written >= subscribers {
            return Ok(());
        }
        if started.elapsed() > Duration::from_secs(600) {
            return Err(format!("only {written} of {subscribers} Events for {sync_id} within 10 minutes"));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Watches Events from now on, in every namespace: answers the message of each `Synced` Event
/// as it is written, so the clock can stop at the last one without polling a growing list; and
/// the task reading the watch, to end it.
async fn watch_synced_events(
    client: &reqwest::Client,
    server: &TestServer,
) -> Result<(tokio::sync::mpsc::UnboundedReceiver<String>, tokio::task::JoinHandle<()>), String> {
    let list = send(client, server, Method::GET, "/api/v1/events", None).await?;
    let revision =
        list["metadata"]["resourceVersion"].as_str().ok_or("the Event list has no resourceVersion")?;
    let url = format!("{}/api/v1/events?watch=true&resourceVersion={revision}", server.http_url());
    let mut response =
        client.get(url).bearer_auth(server.admin_token()).send().await.map_err(|e| e.to_string())?;
    if !response.status().is_success() {
        return Err(format!("watching Events answered {}", response.status()));
    }
    let (sender, receiver) = tokio::sync::mpsc::unbounded_channel();
    let reading = tokio::spawn(async move {
        let mut pending = Vec::new();
        while let Ok(Some(chunk)) = response.chunk().await {
            pending.extend_from_slice(&chunk);
            while let Some(end) = pending.iter().position(|byte| *byte == b'\n') {
                let line: Vec<u8> = pending.drain(..=end).collect();
                let Ok(event) = serde_json::from_slice::<Value>(&line) else { continue };
                if event["type"] == "ADDED" && event["object"]["reason"] == "Synced" {
                    let message = event["object"]["message"].as_str().unwrap_or_default().to_owned();
                    if sender.send(message).is_err() {
                        return;
                    }
                }
            }
        }
    });
    Ok((receiver, reading))
}

/// The gateway alone, at the reconciler's concurrency: requests per second.
async fn gateway_ceiling(client: &reqwest::Client, gateway: &str, requests: usize) -> Result<f64, String> {
    let started = Instant::now();
    let tasks: Vec<_> = (0..CONCURRENCY)
        .map(|worker| {
            let (client, url) = (client.clone(), format!("{gateway}/hooks/tenant-{worker}/build-1"));
            tokio::spawn(async move {
                for _ in 0..requests / CONCURRENCY {
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
    Ok((requests / CONCURRENCY * CONCURRENCY) as f64 / started.elapsed().as_secs_f64())
}

pub(crate) async fn run(size: Size) -> Result<(), String> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let (subscribers, gateway_requests) =
        size.pick((SUBSCRIBERS.0, GATEWAY_REQUESTS.0), (SUBSCRIBERS.1, GATEWAY_REQUESTS.1));
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
    for i in 0..subscribers {
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
    until_all_synced(&client, &server, subscribers).await?;
    until_all_events(&client, &server, "build-0", subscribers).await?;
    println!(
        "{subscribers} namespaces and subscriptions created one at a time, and brought to their first build with its Events: {:.1} s\n",
        setup.elapsed().as_secs_f64()
    );

    // The gateway alone, in the same run, while the server is quiet: the setup's Events are all
    // written and the sync has not started.
    let gateway_rate = gateway_ceiling(&client, &gateway, gateway_requests).await?;

    let (mut events, watching) = watch_synced_events(&client, &server).await?;
    let started = Instant::now();
    let registration = send(
        &client,
        &server,
        Method::PUT,
        "/apis/catalog.example.com/v1/apiregistrations/bench.example.com/sync",
        Some(json!({})),
    )
    .await?;
    let sync_id =
        registration["sync_id"].as_str().ok_or(format!("the sync answered no sync_id: {registration}"))?;
    let to_synced = until_all_synced(&client, &server, subscribers).await?.max(started.elapsed());
    let suffix = format!(" {sync_id}");
    let mut written = 0;
    while written < subscribers {
        let message = tokio::time::timeout(Duration::from_secs(600), events.recv())
            .await
            .map_err(|_| format!("only {written} of {subscribers} Events for {sync_id} within 10 minutes"))?
            .ok_or("the watch of Events ended")?;
        if message.ends_with(&suffix) {
            written += 1;
        }
    }
    let to_events = started.elapsed();
    let rate = subscribers as f64 / to_events.as_secs_f64();

    println!("one sync to {subscribers} subscriptions, one step and one Event each, {CONCURRENCY} at a time");
    println!("  sync to the last synced: true   {:>8.2} s", to_synced.as_secs_f64());
    println!("  sync to the last Synced Event   {:>8.2} s", to_events.as_secs_f64());
    println!("  subscriptions reconciled        {rate:>8.0}/s (Events included)");
    println!(
        "  the gateway alone, quiet server {gateway_rate:>8.0} requests/s   ratio {:.3}",
        rate / gateway_rate
    );
    let mut report = Report::new("catalog", size);
    report.figure(
        format!("sync to {subscribers} subscriptions, to the last synced: true"),
        to_synced.as_secs_f64(),
        "s",
    );
    report.figure(
        format!("sync to {subscribers} subscriptions, to the last Synced Event"),
        to_events.as_secs_f64(),
        "s",
    );
    report
        .figure(
            format!("subscriptions reconciled, Events included, of the gateway's requests at {CONCURRENCY}"),
            rate,
            "/s",
        )
        .ceiling(gateway_rate);
    report.print();
    // An open watch would hold the server's drain for its whole grace period.
    watching.abort();
    server.shutdown().await;
    Ok(())
}
