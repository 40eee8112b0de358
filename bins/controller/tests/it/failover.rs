//! Failover drills on three replicas of a real three-member etcd, with a client that keeps
//! writing and one that keeps watching: every replica restarted in turn (a rolling upgrade),
//! then the etcd leader killed during the burst, then the replica leading the scheduler. No acknowledged write is lost, a write whose
//! answer was lost is never applied twice, the watcher resumes from its last resourceVersion
//! on another replica without a gap or a duplicate (or is told 410 and relists), and writes
//! resume within etcd's own election plus a second.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::replicas::{replica_of, three_member_etcd};
use crate::{Controller, have_kubectl};

const SECRETS: &str = "/apis/fleet.example.com/v1/namespaces/default/secrets";

/// A client of every replica, as a balancer in front of them would be used: one request to
/// each in turn, the next one on a failure.
#[derive(Clone)]
struct Balanced {
    http: reqwest::Client,
    urls: Arc<Vec<String>>,
    token: String,
}

impl Balanced {
    fn new(replicas: &[&Controller]) -> Balanced {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let ca = std::fs::read(replicas[0].dir.path().join("data/pki/ca.crt")).unwrap();
        let http = reqwest::Client::builder()
            .tls_certs_only([reqwest::Certificate::from_pem(&ca).unwrap()])
            .connect_timeout(Duration::from_secs(2))
            .build()
            .unwrap();
        let urls = Arc::new(replicas.iter().map(|replica| replica.url()).collect());
        Balanced { http, urls, token: replicas[0].token() }
    }

    fn get(&self, at: usize, path: &str) -> reqwest::RequestBuilder {
        let url = format!("{}{path}", self.urls[at % self.urls.len()]);
        self.http.get(url).bearer_auth(&self.token)
    }
}

/// What the writer did: each acknowledged name with when its answer came, the names whose
/// create answered 409 after an earlier attempt failed (their first attempt had been applied
/// though its answer was lost), and the failed attempts.
#[derive(Default)]
struct Writes {
    acknowledged: Vec<(String, Instant)>,
    applied_unanswered: Vec<String>,
    failed_attempts: usize,
}

async fn write_until(client: Balanced, stop: Arc<AtomicBool>) -> Writes {
    let mut writes = Writes::default();
    let mut at = 0;
    for n in 0.. {
        if stop.load(Ordering::SeqCst) {
            break;
        }
        let name = format!("w-{n}");
        let body = json!({"apiVersion": "fleet.example.com/v1", "kind": "Secret",
            "metadata": {"name": name}, "stringData": {"n": n.to_string()}});
        let mut retried = false;
        loop {
            at += 1;
            let url = format!("{}{SECRETS}", client.urls[at % client.urls.len()]);
            let sent = client.http.post(url).bearer_auth(&client.token).json(&body);
            let answer = sent.timeout(Duration::from_secs(10)).send().await.map(|r| r.status().as_u16());
            match answer {
                Ok(201) => {
                    writes.acknowledged.push((name, Instant::now()));
                    break;
                }
                Ok(409) if retried => {
                    writes.applied_unanswered.push(name);
                    break;
                }
                Ok(code) if code != 409 && code != 201 && code < 500 => panic!("a create answered {code}"),
                _ => {
                    writes.failed_attempts += 1;
                    retried = true;
                    if stop.load(Ordering::SeqCst) {
                        return writes;
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }
    }
    writes
}

/// What the watcher saw: the names added (and how often), the resourceVersions it resumed
/// from, and how often it was told its revision was gone and listed again.
#[derive(Default)]
struct Seen {
    added: BTreeMap<String, usize>,
    resumed: usize,
    relisted: usize,
    out_of_order: Vec<String>,
}

async fn list(client: &Balanced, at: &mut usize, seen: &mut Seen) -> u64 {
    loop {
        *at += 1;
        let listed =
            async { client.get(*at, SECRETS).send().await?.error_for_status()?.json::<Value>().await };
        if let Ok(list) = listed.await {
            for item in list["items"].as_array().into_iter().flatten() {
                let name = item["metadata"]["name"].as_str().unwrap_or_default().to_owned();
                seen.added.entry(name).or_insert(1);
            }
            return list["metadata"]["resourceVersion"].as_str().and_then(|rv| rv.parse().ok()).unwrap_or(0);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// When the watcher may stop: once it has seen every write the writer made (known when the
/// writer has stopped), or when the test gives up waiting for the rest.
#[derive(Clone, Default)]
struct Until {
    written: Arc<Mutex<Option<BTreeSet<String>>>>,
    give_up: Arc<AtomicBool>,
}

impl Until {
    fn reached(&self, seen: &Seen) -> bool {
        self.give_up.load(Ordering::SeqCst)
            || self
                .written
                .lock()
                .unwrap()
                .as_ref()
                .is_some_and(|written| written.iter().all(|name| seen.added.contains_key(name)))
    }
}

async fn watch_until(client: Balanced, until: Until) -> Seen {
    let mut seen = Seen::default();
    let mut at = 0;
    let mut from = list(&client, &mut at, &mut seen).await;
    while !until.reached(&seen) {
        at += 1;
        let path = format!("{SECRETS}?watch=true&allowWatchBookmarks=true&resourceVersion={from}");
        let Ok(mut response) = client.get(at, &path).send().await else {
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        if response.status().as_u16() == 410 {
            seen.relisted += 1;
            from = list(&client, &mut at, &mut seen).await;
            continue;
        }
        if !response.status().is_success() {
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        }
        seen.resumed += 1;
        let mut pending = Vec::new();
        'stream: loop {
            let chunk = tokio::select! {
                chunk = response.chunk() => chunk,
                () = tokio::time::sleep(Duration::from_millis(500)) => {
                    if until.reached(&seen) { break 'stream } else { continue }
                }
            };
            let Ok(Some(chunk)) = chunk else { break };
            pending.extend_from_slice(&chunk);
            while let Some(end) = pending.iter().position(|byte| *byte == b'\n') {
                let line: Vec<u8> = pending.drain(..=end).collect();
                let Ok(event) = serde_json::from_slice::<Value>(&line) else { continue };
                if event["type"] == "ERROR" {
                    seen.relisted += 1;
                    from = list(&client, &mut at, &mut seen).await;
                    break 'stream;
                }
                let object = &event["object"];
                let rv: u64 = object["metadata"]["resourceVersion"]
                    .as_str()
                    .and_then(|rv| rv.parse().ok())
                    .unwrap_or(0);
                if rv <= from && event["type"] != "BOOKMARK" {
                    seen.out_of_order.push(format!("{} at {rv} after {from}", event["type"]));
                }
                from = from.max(rv);
                if event["type"] == "ADDED" {
                    let name = object["metadata"]["name"].as_str().unwrap_or_default().to_owned();
                    *seen.added.entry(name).or_default() += 1;
                }
            }
        }
    }
    seen
}

/// The replica whose current process leads election `name`, as its log says.
fn wait_for_leader(replicas: &[Controller], name: &str) -> usize {
    let key = format!("key=/registry/elections/{name} ");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        for (n, replica) in replicas.iter().enumerate() {
            let candidate = format!("candidate={}-", replica.child.id());
            if replica
                .log()
                .lines()
                .any(|line| line.contains("leading") && line.contains(&key) && line.contains(&candidate))
            {
                return n;
            }
        }
        assert!(Instant::now() < deadline, "a replica leads {name} within 30 s");
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn rolling_restarts_and_etcd_leader_and_replica_kills_lose_no_write_and_no_watch_event() {
    if !have_kubectl() {
        return;
    }
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let Some(mut etcd) = three_member_etcd(&runtime) else { return };
    let endpoints = etcd.endpoints().join(",");
    let on_etcd = ["--store", "etcd", "--etcd-endpoints", endpoints.as_str()];
    let first = Controller::start(&on_etcd);
    let second = replica_of(&first, &on_etcd);
    let third = replica_of(&first, &on_etcd);
    let client = Balanced::new(&[&first, &second, &third]);
    let stop = Arc::new(AtomicBool::new(false));
    let until = Until::default();
    let mut watcher = runtime.spawn(watch_until(client.clone(), until.clone()));
    let writer = runtime.spawn(write_until(client.clone(), stop.clone()));
    std::thread::sleep(Duration::from_secs(2));

    // A rolling upgrade: each replica stops (as its service manager stops it) and starts
    // again on the same data directory while the others serve.
    let mut replicas = [first, second, third];
    for replica in &mut replicas {
        replica.restart();
        std::thread::sleep(Duration::from_secs(2));
    }

    // The etcd leader dies during the burst.
    let leader = runtime.block_on(etcd.leader()).expect("etcd has a leader");
    let killed = Instant::now();
    etcd.kill(leader);
    let elected = loop {
        if runtime.block_on(etcd.leader()).is_some_and(|new| new != leader) {
            break killed.elapsed();
        }
        assert!(killed.elapsed() < Duration::from_secs(30), "etcd elects another leader");
        std::thread::sleep(Duration::from_millis(20));
    };
    std::thread::sleep(Duration::from_secs(5));

    // The replica leading the scheduler dies (kill -9) while writes go through the others.
    let leads = wait_for_leader(&replicas, "scheduler");
    let _ = replicas[leads].child.kill();
    let _ = replicas[leads].child.wait();
    std::thread::sleep(Duration::from_secs(5));
    stop.store(true, Ordering::SeqCst);
    let writes = runtime.block_on(writer).unwrap();
    // The watcher goes on until it has seen every write, for a minute at most: a watch that
    // reconnected late in the run is still catching up when the writer stops.
    let written: BTreeSet<String> = writes
        .acknowledged
        .iter()
        .map(|(name, _)| name.clone())
        .chain(writes.applied_unanswered.iter().cloned())
        .collect();
    *until.written.lock().unwrap() = Some(written);
    let seen =
        match runtime.block_on(async { tokio::time::timeout(Duration::from_secs(60), &mut watcher).await }) {
            Ok(seen) => seen.unwrap(),
            Err(_) => {
                until.give_up.store(true, Ordering::SeqCst);
                runtime.block_on(watcher).unwrap()
            }
        };

    // The write-unavailability window: the longest wait for an acknowledgement from the
    // kill on.
    let after: Vec<Instant> =
        writes.acknowledged.iter().map(|(_, at)| *at).filter(|at| *at > killed).collect();
    assert!(!after.is_empty(), "a write is acknowledged after the etcd leader's death");
    let resumed = std::iter::once(killed)
        .chain(after.iter().copied())
        .zip(after.iter().copied())
        .map(|(before, next)| next.duration_since(before))
        .max()
        .unwrap_or_default();
    assert!(
        resumed <= elected + Duration::from_secs(1),
        "writes resume within etcd's election ({elected:?}) plus 1 s after its leader's death: no write was acknowledged for {resumed:?}"
    );
    assert!(writes.acknowledged.len() > 20, "the writer kept writing: {}", writes.acknowledged.len());

    // Every acknowledged write, and every write applied though its answer was lost, is there
    // exactly once; the watcher saw each of them exactly once, in order.
    let mut at = 0;
    let mut stored = Seen::default();
    runtime.block_on(list(&client, &mut at, &mut stored));
    let stored: BTreeSet<&String> = stored.added.keys().collect();
    let written: BTreeSet<&String> =
        writes.acknowledged.iter().map(|(name, _)| name).chain(&writes.applied_unanswered).collect();
    let lost: Vec<_> = written.difference(&stored).collect();
    assert!(lost.is_empty(), "acknowledged writes lost: {lost:?}");
    let unseen: Vec<_> = written.iter().filter(|name| !seen.added.contains_key(**name)).collect();
    assert!(
        unseen.is_empty(),
        "the watcher missed {unseen:?} in the minute after the last write (relisted {} times)",
        seen.relisted
    );
    let twice: Vec<_> = seen.added.iter().filter(|(_, times)| **times > 1).collect();
    assert!(twice.is_empty(), "the watcher saw these twice: {twice:?}");
    assert!(
        seen.out_of_order.is_empty(),
        "events at or before the revision resumed from: {:?}",
        seen.out_of_order
    );
    assert!(seen.resumed >= 2, "the watch resumed on another replica at least once: {}", seen.resumed);
    eprintln!(
        "failover drill: {} writes acknowledged, {} applied with their answer lost, {} failed attempts; \
         the watch resumed {} times and relisted {} times; etcd elected in {elected:?}, the longest wait for a write after the kill {resumed:?}",
        writes.acknowledged.len(),
        writes.applied_unanswered.len(),
        writes.failed_attempts,
        seen.resumed,
        seen.relisted
    );
    drop(replicas);
}
