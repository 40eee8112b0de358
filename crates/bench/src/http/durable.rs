//! The durable-HTTP ceiling (`kayra-bench http-durable DIR`): the least a durable create over
//! HTTP costs on this machine. A bare axum handler inserts each POST's body into raw sled under
//! a fresh key and answers 201 with the body once a flush covers the insert; flushes are
//! group-committed by one committer thread, as the product's store commits, so concurrent
//! POSTs share them. It does HTTP and the fsync and nothing else: no authentication, decoding,
//! admission or watch.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use kayra_store_sled::raw::RawSled;
use tokio::sync::oneshot;

/// A waiter for the next flush.
type Waiter = oneshot::Sender<Result<(), String>>;

/// One committer thread: it takes every waiter that arrived, flushes once for all of them,
/// and answers each.
fn committer(raw: RawSled) -> std::sync::mpsc::Sender<Waiter> {
    let (waiters, waiting) = std::sync::mpsc::channel::<Waiter>();
    std::thread::spawn(move || {
        while let Ok(first) = waiting.recv() {
            let mut batch = vec![first];
            batch.extend(waiting.try_iter());
            let flushed = raw.flush();
            for waiter in batch {
                let _ = waiter.send(flushed.clone());
            }
        }
    });
    waiters
}

/// `kayra-bench http-durable DIR`: serves the durable create on a free port and prints
/// `listening PORT`.
pub(crate) async fn serve(args: &[String]) -> Result<(), String> {
    let [dir] = args else { return Err("usage: kayra-bench http-durable DIR".into()) };
    let raw = RawSled::open(std::path::Path::new(dir))?;
    let waiters = committer(raw.clone());
    let next = Arc::new(AtomicU64::new(0));
    let router = kayra_apiserver::durable_router(move |body: bytes::Bytes| {
        let (raw, waiters, next) = (raw.clone(), waiters.clone(), next.clone());
        async move {
            let key = next.fetch_add(1, Ordering::Relaxed).to_be_bytes();
            if raw.insert(&key, &body).is_err() {
                return false;
            }
            let (flushed, flush) = oneshot::channel();
            waiters.send(flushed).is_ok() && matches!(flush.await, Ok(Ok(())))
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.map_err(|e| e.to_string())?;
    println!("listening {}", listener.local_addr().map_err(|e| e.to_string())?.port());
    kayra_apiserver::serve(listener, None, router, Default::default(), std::future::pending()).await;
    Ok(())
}
