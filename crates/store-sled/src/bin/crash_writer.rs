//! A writer for the crash test: opens the store at the directory given as its argument and
//! writes as fast as it can from several tasks, printing one line per acknowledged write:
//! `put <key> <revision>` or `txn <key-a> <key-b> <revision>`. The test kills it with SIGKILL
//! at a random point and checks the store against what was acknowledged.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};

use kayra_store::mvcc::Options;
use kayra_store::{Op, Store, Txn};

const WRITERS: usize = 16;

#[tokio::main]
async fn main() -> ExitCode {
    let Some(dir) = std::env::args_os().nth(1).map(PathBuf::from) else {
        eprintln!("usage: kayra-sled-crash-writer <store directory> <round>");
        return ExitCode::from(64);
    };
    let round = std::env::args().nth(2).unwrap_or_default();
    let store = match kayra_store_sled::open(&dir, Options::default()) {
        Ok(store) => Arc::new(store),
        Err(error) => {
            eprintln!("cannot open {}: {error}", dir.display());
            return ExitCode::FAILURE;
        }
    };
    let out = Arc::new(Mutex::new(std::io::stdout()));
    let writers = (0..WRITERS).map(|writer| {
        let (store, out, round) = (store.clone(), out.clone(), round.clone());
        tokio::spawn(async move {
            for n in 0u64.. {
                let line = if n % 2 == 0 {
                    let key = format!("put/{round}/{writer}/{n}");
                    match store.put(&key, key.as_bytes().to_vec()).await {
                        Ok(revision) => format!("put {key} {revision}"),
                        Err(error) => return eprintln!("put failed: {error}"),
                    }
                } else {
                    let (a, b) = (format!("a/{round}/{writer}/{n}"), format!("b/{round}/{writer}/{n}"));
                    let ops = vec![Op::put(a.clone(), a.clone()), Op::put(b.clone(), b.clone())];
                    match store.txn(Txn { compares: Vec::new(), ops }).await {
                        Ok(result) => format!("txn {a} {b} {}", result.revision()),
                        Err(error) => return eprintln!("txn failed: {error}"),
                    }
                };
                let mut out = out.lock().expect("stdout lock");
                if writeln!(out, "{line}").and_then(|()| out.flush()).is_err() {
                    return;
                }
            }
        })
    });
    for writer in writers.collect::<Vec<_>>() {
        let _ = writer.await;
    }
    ExitCode::FAILURE
}
