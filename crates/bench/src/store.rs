//! The storage benchmark. Each figure is a rate (operations per second) or a latency, taken
//! from one run; each ceiling is the same work done by the bare engine underneath.

use std::sync::Arc;
use std::time::{Duration, Instant};

use kayra_store::mvcc::{MvccStore, Options};
use kayra_store::{Op, RangeRequest, Store, Txn};
use kayra_store_etcd::EtcdStore;
use kayra_store_etcd::raw::RawEtcd;
use kayra_store_etcd::test_server::{EtcdServer, StartError};
use kayra_store_sled::raw::RawSled;

use crate::report::{Report, Size};

const VALUE: [u8; 256] = [b'v'; 256];
const WRITERS: usize = 64;

/// How much work each measurement does; etcd commits are slower, so it does less.
#[derive(Clone, Copy)]
struct Sizes {
    single_puts: usize,
    puts_per_writer: usize,
    gets: usize,
    watch_samples: usize,
    range_keys: usize,
}

const ENGINE: Sizes =
    Sizes { single_puts: 2_000, puts_per_writer: 100, gets: 50_000, watch_samples: 500, range_keys: 10_000 };
const ETCD: Sizes =
    Sizes { single_puts: 1_000, puts_per_writer: 40, gets: 10_000, watch_samples: 300, range_keys: 10_000 };
const ENGINE_SMOKE: Sizes =
    Sizes { single_puts: 50, puts_per_writer: 2, gets: 1_000, watch_samples: 20, range_keys: 500 };
const ETCD_SMOKE: Sizes =
    Sizes { single_puts: 20, puts_per_writer: 1, gets: 200, watch_samples: 10, range_keys: 200 };

struct Figures {
    range_keys: usize,
    single_put: f64,
    concurrent_put: f64,
    get: f64,
    range: Duration,
    watch_p50: Duration,
    watch_p99: Duration,
}

struct Ceiling {
    name: &'static str,
    single_put: f64,
    concurrent_put: f64,
    get: f64,
}

pub(crate) async fn run(size: Size) -> Result<(), String> {
    println!("storage benchmark: one run; each ratio compares two figures from this run\n");
    let (engine, etcd) = size.pick((ENGINE, ETCD), (ENGINE_SMOKE, ETCD_SMOKE));
    let mut report = Report::new("store", size);
    let memory = MvccStore::in_memory(Options::default()).map_err(|e| e.to_string())?;
    let figures = measure(Arc::new(memory), engine).await?;
    add("memory", &figures, None, &mut report);

    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let sled =
        kayra_store_sled::open(&dir.path().join("kayra"), Options::default()).map_err(|e| e.to_string())?;
    let figures = measure(Arc::new(sled), engine).await?;
    let ceiling = sled_ceiling(&dir.path().join("raw"), engine).await?;
    add("sled", &figures, Some(&ceiling), &mut report);

    match EtcdServer::start().await {
        Ok(server) => {
            let store = EtcdStore::connect(server.options("/bench/")).await.map_err(|e| e.to_string())?;
            let figures = measure(Arc::new(store), etcd).await?;
            let ceiling = etcd_ceiling(server.endpoint(), etcd).await?;
            add("etcd", &figures, Some(&ceiling), &mut report);
        }
        // How a benchmark says it could not measure a part for want of a tool.
        Err(error @ StartError::Missing) => println!("skipped: store on etcd: {error}"),
        Err(error) => return Err(format!("etcd: {error}")),
    }
    report.print();
    Ok(())
}

fn rate(operations: usize, elapsed: Duration) -> f64 {
    operations as f64 / elapsed.as_secs_f64()
}

async fn measure(store: Arc<dyn Store>, sizes: Sizes) -> Result<Figures, String> {
    let started = Instant::now();
    for i in 0..sizes.single_puts {
        store.put(&format!("single/{i:08}"), VALUE.to_vec()).await.map_err(|e| e.to_string())?;
    }
    let single_put = rate(sizes.single_puts, started.elapsed());

    let started = Instant::now();
    let writers: Vec<_> = (0..WRITERS)
        .map(|writer| {
            let store = store.clone();
            tokio::spawn(async move {
                for i in 0..sizes.puts_per_writer {
                    store.put(&format!("concurrent/{writer:02}/{i:06}"), VALUE.to_vec()).await?;
                }
                Ok::<_, kayra_store::StoreError>(())
            })
        })
        .collect();
    for writer in writers {
        writer.await.map_err(|e| e.to_string())?.map_err(|e| e.to_string())?;
    }
    let concurrent_put = rate(WRITERS * sizes.puts_per_writer, started.elapsed());

    let started = Instant::now();
    for i in 0..sizes.gets {
        let key = format!("single/{:08}", i % sizes.single_puts);
        store.get(&key).await.map_err(|e| e.to_string())?.ok_or("a written key is missing")?;
    }
    let get = rate(sizes.gets, started.elapsed());

    for chunk in (0..sizes.range_keys).collect::<Vec<_>>().chunks(100) {
        let ops = chunk.iter().map(|i| Op::put(format!("range/{i:06}"), VALUE.to_vec())).collect();
        store.txn(Txn { compares: Vec::new(), ops }).await.map_err(|e| e.to_string())?;
    }
    let mut reads = Vec::new();
    for _ in 0..5 {
        let started = Instant::now();
        let read = store.range(&RangeRequest::prefix("range/")).await.map_err(|e| e.to_string())?;
        reads.push(started.elapsed());
        if read.kvs.len() != sizes.range_keys {
            return Err(format!("the range read {} keys, not {}", read.kvs.len(), sizes.range_keys));
        }
    }
    reads.sort();

    let from = store.revision().await.map_err(|e| e.to_string())?;
    let mut watcher = store.watch("watched/", from).await.map_err(|e| e.to_string())?;
    let mut latencies = Vec::with_capacity(sizes.watch_samples);
    for i in 0..sizes.watch_samples {
        let started = Instant::now();
        store.put(&format!("watched/{i}"), VALUE.to_vec()).await.map_err(|e| e.to_string())?;
        match tokio::time::timeout(Duration::from_secs(10), watcher.next()).await {
            Ok(Some(Ok(_))) => latencies.push(started.elapsed()),
            other => return Err(format!("the watch did not deliver: {other:?}")),
        }
    }
    latencies.sort();
    Ok(Figures {
        range_keys: sizes.range_keys,
        single_put,
        concurrent_put,
        get,
        range: reads[reads.len() / 2],
        watch_p50: latencies[latencies.len() / 2],
        watch_p99: latencies[latencies.len() * 99 / 100],
    })
}

async fn sled_ceiling(path: &std::path::Path, sizes: Sizes) -> Result<Ceiling, String> {
    let raw = RawSled::open(path)?;
    let blocking = raw.clone();
    let (single_put, get) = tokio::task::spawn_blocking(move || -> Result<(f64, f64), String> {
        let started = Instant::now();
        for i in 0..sizes.single_puts {
            blocking.insert_durably(format!("single/{i:08}").as_bytes(), &VALUE)?;
        }
        let single_put = rate(sizes.single_puts, started.elapsed());
        let started = Instant::now();
        for i in 0..sizes.gets {
            blocking.get(format!("single/{:08}", i % sizes.single_puts).as_bytes())?.ok_or("missing key")?;
        }
        Ok((single_put, rate(sizes.gets, started.elapsed())))
    })
    .await
    .map_err(|e| e.to_string())??;
    let started = Instant::now();
    let threads: Vec<_> = (0..WRITERS)
        .map(|writer| {
            let raw = raw.clone();
            std::thread::spawn(move || -> Result<(), String> {
                for i in 0..sizes.puts_per_writer {
                    raw.insert_durably(format!("concurrent/{writer:02}/{i:06}").as_bytes(), &VALUE)?;
                }
                Ok(())
            })
        })
        .collect();
    for thread in threads {
        thread.join().map_err(|_| "a writer thread panicked")??;
    }
    let concurrent_put = rate(WRITERS * sizes.puts_per_writer, started.elapsed());
    Ok(Ceiling { name: "bare sled: insert+flush, get", single_put, concurrent_put, get })
}

async fn etcd_ceiling(endpoint: &str, sizes: Sizes) -> Result<Ceiling, String> {
    let raw = RawEtcd::connect(endpoint).await?;
    let started = Instant::now();
    for i in 0..sizes.single_puts {
        raw.put(format!("/raw/single/{i:08}").as_bytes(), &VALUE).await?;
    }
    let single_put = rate(sizes.single_puts, started.elapsed());
    let started = Instant::now();
    let writers: Vec<_> = (0..WRITERS)
        .map(|writer| {
            let raw = raw.clone();
            tokio::spawn(async move {
                for i in 0..sizes.puts_per_writer {
                    raw.put(format!("/raw/concurrent/{writer:02}/{i:06}").as_bytes(), &VALUE).await?;
                }
                Ok::<_, String>(())
            })
        })
        .collect();
    for writer in writers {
        writer.await.map_err(|e| e.to_string())??;
    }
    let concurrent_put = rate(WRITERS * sizes.puts_per_writer, started.elapsed());
    let started = Instant::now();
    for i in 0..sizes.gets {
        if !raw.get(format!("/raw/single/{:08}", i % sizes.single_puts).as_bytes()).await? {
            return Err("a written key is missing".to_owned());
        }
    }
    let get = rate(sizes.gets, started.elapsed());
    Ok(Ceiling { name: "bare etcd-client: put, get", single_put, concurrent_put, get })
}

/// Adds one engine's figures to the report, each beside the bare engine's where it has one.
fn add(backend: &str, ours: &Figures, ceiling: Option<&Ceiling>, report: &mut Report) {
    if let Some(ceiling) = ceiling {
        println!("{backend}: ceiling {}", ceiling.name);
    }
    let rates = [
        ("put, 1 writer, durable".to_owned(), ours.single_put, ceiling.map(|c| c.single_put)),
        (format!("put, {WRITERS} writers, durable"), ours.concurrent_put, ceiling.map(|c| c.concurrent_put)),
        ("point get".to_owned(), ours.get, ceiling.map(|c| c.get)),
    ];
    for (name, value, bare) in rates {
        let figure = report.figure(format!("{backend}: {name}"), value, "ops/s");
        if let Some(bare) = bare {
            figure.ceiling(bare);
        }
    }
    let range = format!("{backend}: range read of {} keys, median", ours.range_keys);
    report.figure(range, ours.range.as_secs_f64() * 1e3, "ms");
    report.figure(
        format!("{backend}: watch delivery, put to event, p50"),
        ours.watch_p50.as_secs_f64() * 1e6,
        "us",
    );
    report.figure(
        format!("{backend}: watch delivery, put to event, p99"),
        ours.watch_p99.as_secs_f64() * 1e6,
        "us",
    );
    if ceiling.is_some() {
        // Group commit: how many times the single writer's durable rate 64 writers reach.
        report.figure(
            format!("{backend}: {WRITERS} writers over 1 writer (group commit)"),
            ours.concurrent_put / ours.single_put,
            "x",
        );
    }
}
