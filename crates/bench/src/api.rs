//! The API benchmark: GET by name at 64 connections over HTTP/1.1 and HTTP/2, as
//! `system:masters` (which RBAC lets through before any rule) and as a user RBAC decides for
//! among 1 200 bindings of others, each beside the bare handler's rate; durable CREATE
//! at 1 and 64 clients, a LIST of 10 000 objects, and a write's delivery to 1 000 watchers.
//! Ceilings from the same run: a bare handler behind the same TLS listener, and bare sled
//! (insert+flush per write, and 64 writers sharing flushes).

use std::sync::Arc;
use std::time::{Duration, Instant};

use kayra_store_sled::raw::RawSled;
use kayra_testkit::{Store, TestServer};
use reqwest::Client;
use serde_json::{Value, json};

const CLIENTS: usize = 64;
const GETS_PER_CLIENT: usize = 200;
const CREATES_SINGLE: usize = 500;
const CREATES_PER_CLIENT: usize = 40;
const LIST_SIZE: usize = 10_000;
const WATCHERS: usize = 1000;
const WATCH_WRITES: usize = 20;
const APPS: &str = "/apis/fleet.example.com/v1/namespaces/default/applications";
const RBAC_ROUNDS: usize = 12;
const RBAC_GETS_PER_ROUND: usize = 40;
/// The bearer token of `bench-reader`, who holds `view` in `default` through a RoleBinding.
const READER_TOKEN: &str = "bench-reader-token";

fn app(name: &str) -> Value {
    json!({"apiVersion": "fleet.example.com/v1", "kind": "Application", "metadata": {"name": name},
           "spec": {"command": ["/bin/sleep", "1000"]}})
}

fn rate(operations: usize, elapsed: Duration) -> f64 {
    operations as f64 / elapsed.as_secs_f64()
}

/// `clients` tasks each sending `each` GETs to `url`; answers requests per second.
async fn hammer_gets(client: &Client, url: &str, clients: usize, each: usize) -> Result<f64, String> {
    let started = Instant::now();
    let tasks: Vec<_> = (0..clients)
        .map(|_| {
            let (client, url) = (client.clone(), url.to_owned());
            tokio::spawn(async move {
                for _ in 0..each {
                    let response = client.get(&url).send().await.map_err(|e| e.to_string())?;
                    if !response.status().is_success() {
                        return Err(format!("GET answered {}", response.status()));
                    }
                    response.bytes().await.map_err(|e| e.to_string())?;
                }
                Ok::<_, String>(())
            })
        })
        .collect();
    for task in tasks {
        task.await.map_err(|e| e.to_string())??;
    }
    Ok(rate(clients * each, started.elapsed()))
}

async fn creates(
    client: &Client,
    base: &str,
    prefix: &str,
    clients: usize,
    each: usize,
) -> Result<f64, String> {
    let started = Instant::now();
    let tasks: Vec<_> = (0..clients)
        .map(|c| {
            let (client, url, prefix) = (client.clone(), format!("{base}{APPS}"), prefix.to_owned());
            tokio::spawn(async move {
                for i in 0..each {
                    let response = client
                        .post(&url)
                        .json(&app(&format!("{prefix}-{c}-{i}")))
                        .send()
                        .await
                        .map_err(|e| format!("{e:?}"))?;
                    if response.status().as_u16() != 201 {
                        return Err(format!("CREATE answered {}", response.status()));
                    }
                    response.bytes().await.map_err(|e| e.to_string())?;
                }
                Ok::<_, String>(())
            })
        })
        .collect();
    for task in tasks {
        task.await.map_err(|e| e.to_string())??;
    }
    Ok(rate(clients * each, started.elapsed()))
}

fn clients(server: &TestServer) -> Result<(Client, Client), String> {
    let http1 = server
        .admin_builder()
        .http1_only()
        .pool_max_idle_per_host(CLIENTS)
        .build()
        .map_err(|e| e.to_string())?;
    let http2 = server.admin_builder().build().map_err(|e| e.to_string())?;
    Ok((http1, http2))
}

pub(crate) async fn run() -> Result<(), String> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    println!("API benchmark: one run; each ratio compares two figures from this run\n");
    let server = TestServer::start(Store::Sled).await;
    let (http1, http2) = clients(&server)?;
    let base = server.url();

    // The bare ceiling: the same TLS listener, a handler that answers a fixed object.
    let sample =
        http2.post(format!("{base}{APPS}")).json(&app("probe")).send().await.map_err(|e| e.to_string())?;
    let body = sample.bytes().await.map_err(|e| e.to_string())?;
    let tls = kayra_apiserver::tls_config(
        &server.pki_file("ca.crt"),
        &server.pki_file("server.crt"),
        &server.pki_file("server.key"),
    )?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.map_err(|e| e.to_string())?;
    let bare_url =
        format!("https://127.0.0.1:{}/bare", listener.local_addr().map_err(|e| e.to_string())?.port());
    let (stop_bare, bare_stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(kayra_apiserver::serve(
        listener,
        Some(tls),
        kayra_apiserver::bare_router(body),
        Default::default(),
        async {
            let _ = bare_stopped.await;
        },
    ));

    let item = format!("{base}{APPS}/probe");
    let (mut allowed, mut decided) = rbac_overhead(&server, &item).await?;
    let median = |runs: &mut Vec<f64>| {
        runs.sort_by(f64::total_cmp);
        runs[runs.len() / 2]
    };
    let (allowed, decided) = (median(&mut allowed), median(&mut decided));
    println!(
        "GET by name, {CLIENTS} clients over HTTP/1.1, bearer tokens, median of {RBAC_ROUNDS} alternating rounds (target: RBAC within 10% of always-allow)"
    );
    println!(
        "  system:masters (no rule read) {allowed:>9.0}/s   RBAC-decided among 1 200 bindings {decided:>9.0}/s   overhead {:+.1}%\n",
        (allowed / decided - 1.0) * 100.0
    );

    // The same GETs as the RBAC-decided reader, with a bearer token (from rbac_overhead).
    let reader_h1 = server
        .token_builder(READER_TOKEN)
        .http1_only()
        .pool_max_idle_per_host(CLIENTS)
        .build()
        .map_err(|e| e.to_string())?;
    let reader_h2 = server.token_builder(READER_TOKEN).build().map_err(|e| e.to_string())?;
    let bare_h1 = hammer_gets(&http1, &bare_url, CLIENTS, GETS_PER_CLIENT).await?;
    let ours_h1 = hammer_gets(&http1, &item, CLIENTS, GETS_PER_CLIENT).await?;
    let rbac_h1 = hammer_gets(&reader_h1, &item, CLIENTS, GETS_PER_CLIENT).await?;
    let bare_h2 = hammer_gets(&http2, &bare_url, CLIENTS, GETS_PER_CLIENT).await?;
    let ours_h2 = hammer_gets(&http2, &item, CLIENTS, GETS_PER_CLIENT).await?;
    let rbac_h2 = hammer_gets(&reader_h2, &item, CLIENTS, GETS_PER_CLIENT).await?;
    let _ = stop_bare.send(());
    println!("GET by name, {CLIENTS} concurrent clients (target >= 0.30 x bare handler)");
    println!("  HTTP/1.1   bare {bare_h1:>9.0}/s");
    println!(
        "             system:masters, client certificate {ours_h1:>9.0}/s   ratio {:.2}",
        ours_h1 / bare_h1
    );
    println!(
        "             RBAC-decided reader, bearer token  {rbac_h1:>9.0}/s   ratio {:.2}",
        rbac_h1 / bare_h1
    );
    println!("  HTTP/2     bare {bare_h2:>9.0}/s");
    println!(
        "             system:masters, client certificate {ours_h2:>9.0}/s   ratio {:.2}",
        ours_h2 / bare_h2
    );
    println!(
        "             RBAC-decided reader, bearer token  {rbac_h2:>9.0}/s   ratio {:.2}\n",
        rbac_h2 / bare_h2
    );

    // Writes go over HTTP/1.1: reqwest's HTTP/2 client takes milliseconds per sequential
    // request body here, which would measure the client (see the issue notes).
    let single = creates(&http1, &base, "one", 1, CREATES_SINGLE).await?;
    let many = creates(&http1, &base, "many", CLIENTS, CREATES_PER_CLIENT).await?;
    let (raw_single, raw_group) = raw_sled().await?;
    println!("durable CREATE on sled");
    println!(
        "  1 client   ours {single:>9.0}/s   bare sled insert+flush {raw_single:>9.0}/s   ratio {:.2} (target >= 0.6)",
        single / raw_single
    );
    println!(
        "  {CLIENTS} clients ours {many:>9.0}/s   bare sled group commit {raw_group:>9.0}/s   ratio {:.2} (target >= 0.35)\n",
        many / raw_group
    );

    let existing = 1 + CREATES_SINGLE + CLIENTS * CREATES_PER_CLIENT;
    let per_client = (LIST_SIZE.saturating_sub(existing)).div_ceil(CLIENTS);
    creates(&http1, &base, "list", CLIENTS, per_client).await?;
    let mut list_times = Vec::new();
    let mut bytes = 0;
    for _ in 0..5 {
        let started = Instant::now();
        let response = http2.get(format!("{base}{APPS}")).send().await.map_err(|e| e.to_string())?;
        let body = response.bytes().await.map_err(|e| e.to_string())?;
        list_times.push(started.elapsed());
        bytes = body.len();
    }
    list_times.sort();
    let items = serde_json::from_slice::<Value>(
        &http2
            .get(format!("{base}{APPS}"))
            .send()
            .await
            .map_err(|e| e.to_string())?
            .bytes()
            .await
            .map_err(|e| e.to_string())?,
    )
    .map_err(|e| e.to_string())?["items"]
        .as_array()
        .map_or(0, Vec::len);
    println!(
        "LIST of {items} objects ({} KiB): median {:.1} ms\n",
        bytes / 1024,
        list_times[2].as_secs_f64() * 1e3
    );

    let latencies = watch_fan_out(&server).await?;
    let p = |q: f64| latencies[((latencies.len() as f64 - 1.0) * q) as usize].as_secs_f64() * 1e3;
    println!(
        "one write delivered to {WATCHERS} watchers ({WATCH_WRITES} writes): p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms (target p99 <= 50 ms)",
        p(0.5),
        p(0.99),
        p(1.0)
    );
    Ok(())
}

/// GET by name as `system:masters` (which RBAC lets through before looking at any rule) and as
/// a user whose grant RBAC finds among 1 000 namespace and 200 cluster bindings of others,
/// alternating three times; answers each run's rates.
async fn rbac_overhead(server: &TestServer, item: &str) -> Result<(Vec<f64>, Vec<f64>), String> {
    let admin = server.admin();
    let base = server.url();
    let rbac = format!("{base}/apis/authorization.example.com/v1");
    let post = |url: String, body: Value| {
        let admin = admin.clone();
        async move {
            let response = admin.post(url).json(&body).send().await.map_err(|e| e.to_string())?;
            if response.status().as_u16() != 201 {
                return Err(format!("setting up RBAC answered {}", response.status()));
            }
            Ok::<_, String>(())
        }
    };
    for i in 0..1000 {
        let binding = json!({"apiVersion": "authorization.example.com/v1", "kind": "RoleBinding",
            "metadata": {"name": format!("other-{i}")},
            "subjects": [{"kind": "User", "name": format!("user-{i}")}, {"kind": "Group", "name": format!("team-{i}")}],
            "roleRef": {"kind": "ClusterRole", "name": if i % 2 == 0 { "edit" } else { "view" }}});
        post(format!("{rbac}/namespaces/default/rolebindings"), binding).await?;
    }
    for i in 0..200 {
        let binding = json!({"apiVersion": "authorization.example.com/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": format!("other-{i}")},
            "subjects": [{"kind": "User", "name": format!("cluster-user-{i}")}],
            "roleRef": {"kind": "ClusterRole", "name": "view"}});
        post(format!("{rbac}/clusterrolebindings"), binding).await?;
    }
    let reader = json!({"apiVersion": "authorization.example.com/v1", "kind": "RoleBinding",
        "metadata": {"name": "bench-reader"}, "subjects": [{"kind": "User", "name": "bench-reader"}],
        "roleRef": {"kind": "ClusterRole", "name": "view"}});
    post(format!("{rbac}/namespaces/default/rolebindings"), reader).await?;
    server.add_token(READER_TOKEN, "bench-reader", "");
    let client = |token: &str| {
        server
            .token_builder(token)
            .http1_only()
            .pool_max_idle_per_host(CLIENTS)
            .build()
            .map_err(|e| e.to_string())
    };
    let (masters, reader) = (client(&server.admin_token())?, client(READER_TOKEN)?);
    let deadline = Instant::now() + Duration::from_secs(30);
    while reader.get(item).send().await.map_err(|e| e.to_string())?.status().as_u16() != 200 {
        if Instant::now() > deadline {
            return Err("the reader's binding never reached the RBAC index".to_owned());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Short rounds, alternating, so that the machine's noise falls on both alike.
    let (mut allowed, mut decided) = (Vec::new(), Vec::new());
    for _ in 0..RBAC_ROUNDS {
        allowed.push(hammer_gets(&masters, item, CLIENTS, RBAC_GETS_PER_ROUND).await?);
        decided.push(hammer_gets(&reader, item, CLIENTS, RBAC_GETS_PER_ROUND).await?);
    }
    Ok((allowed, decided))
}

/// Bare sled: insert+flush from one writer, and from 64 writers sharing flushes.
async fn raw_sled() -> Result<(f64, f64), String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let raw = RawSled::open(dir.path())?;
    let value = [b'v'; 600];
    let one = raw.clone();
    let single = tokio::task::spawn_blocking(move || -> Result<f64, String> {
        let started = Instant::now();
        for i in 0..CREATES_SINGLE {
            one.insert_durably(format!("single/{i}").as_bytes(), &value)?;
        }
        Ok(rate(CREATES_SINGLE, started.elapsed()))
    })
    .await
    .map_err(|e| e.to_string())??;
    let started = Instant::now();
    let threads: Vec<_> = (0..CLIENTS)
        .map(|t| {
            let raw = raw.clone();
            std::thread::spawn(move || -> Result<(), String> {
                for i in 0..CREATES_PER_CLIENT {
                    raw.insert_durably(format!("group/{t}/{i}").as_bytes(), &value)?;
                }
                Ok(())
            })
        })
        .collect();
    for thread in threads {
        thread.join().map_err(|_| "a writer panicked")??;
    }
    Ok((single, rate(CLIENTS * CREATES_PER_CLIENT, started.elapsed())))
}

/// Opens 1 000 watches, then writes and times each watcher's receipt of every write.
/// One watcher: watches `url`, adds a permit to `ready` once the watch is answered, then sends
/// how many lines (events) it has seen so far, and when, on every chunk that arrives.
pub(crate) async fn count_watch_lines(
    client: Client,
    url: String,
    sender: tokio::sync::mpsc::UnboundedSender<(usize, Instant)>,
    ready: Arc<tokio::sync::Semaphore>,
) {
    let Ok(mut response) = client.get(&url).send().await else { return };
    ready.add_permits(1);
    let mut seen = 0;
    while let Ok(Some(chunk)) = response.chunk().await {
        let now = Instant::now();
        seen += chunk.iter().filter(|b| **b == b'\n').count();
        let _ = sender.send((seen, now));
    }
}

async fn watch_fan_out(server: &TestServer) -> Result<Vec<Duration>, String> {
    let base = server.url();
    // A few connections: HTTP/2 caps streams per connection.
    let pools: Vec<Client> = (0..8)
        .map(|_| server.admin_builder().build().map_err(|e| e.to_string()))
        .collect::<Result<_, _>>()?;
    let writer = server.admin_builder().http1_only().build().map_err(|e| e.to_string())?;
    let created =
        writer.post(format!("{base}{APPS}")).json(&app("watched")).send().await.map_err(|e| e.to_string())?;
    let rv = created.json::<Value>().await.map_err(|e| e.to_string())?["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or("0")
        .to_owned();
    let (sender, mut receiver) = tokio::sync::mpsc::unbounded_channel::<(usize, Instant)>();
    let ready = Arc::new(tokio::sync::Semaphore::new(0));
    for w in 0..WATCHERS {
        let client = pools[w % pools.len()].clone();
        let url =
            format!("{base}{APPS}?watch=true&resourceVersion={rv}&fieldSelector=metadata.name%3Dwatched");
        tokio::spawn(count_watch_lines(client, url, sender.clone(), ready.clone()));
    }
    let _ = ready.acquire_many(WATCHERS as u32).await.map_err(|e| e.to_string())?;
    let mut latencies = Vec::with_capacity(WATCHERS * WATCH_WRITES);
    for write in 1..=WATCH_WRITES {
        let patch = format!(r#"{{"metadata":{{"labels":{{"n":"{write}"}}}}}}"#);
        let started = Instant::now();
        writer
            .patch(format!("{base}{APPS}/watched"))
            .header("Content-Type", "application/merge-patch+json")
            .body(patch)
            .send()
            .await
            .map_err(|e| e.to_string())?;
        let mut delivered = 0;
        while delivered < WATCHERS {
            let (seen, at) = tokio::time::timeout(Duration::from_secs(10), receiver.recv())
                .await
                .map_err(|_| format!("write {write}: only {delivered} of {WATCHERS} watchers heard it"))?
                .ok_or("the watchers went away")?;
            if seen >= write {
                delivered += 1;
                latencies.push(at - started);
            }
        }
    }
    latencies.sort();
    Ok(latencies)
}
