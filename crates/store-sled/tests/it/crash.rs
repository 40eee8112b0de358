//! Kill a writer with SIGKILL at a random point, reopen, and check that every acknowledged
//! write is there, no write is half there, and revisions only move forward.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use kayra_store::mvcc::Options;
use kayra_store::{RangeRequest, Store};
use rand::Rng;

const ROUNDS: usize = 8;

#[test]
fn acknowledged_writes_survive_sigkill_and_nothing_is_half_written() {
    let dir = tempfile::tempdir().unwrap();
    let mut floor = 0;
    let mut rng = rand::rng();
    for round in 0..ROUNDS {
        let mut child = Command::new(env!("CARGO_BIN_EXE_kayra-sled-crash-writer"))
            .arg(dir.path())
            .arg(round.to_string())
            .stdout(Stdio::piped())
            .spawn()
            .expect("the writer starts");
        let stdout = child.stdout.take().expect("piped stdout");
        let (lines, acked) = std::sync::mpsc::channel::<String>();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if lines.send(line).is_err() {
                    break;
                }
            }
        });
        // Let it write for a random while once it is open (its first acknowledgement: opening
        // takes longer as the store grows and the machine is busy), then kill it mid-flight.
        let first = acked.recv_timeout(Duration::from_secs(60));
        let first =
            first.unwrap_or_else(|_| panic!("round {round}: the writer acknowledged nothing within 60 s"));
        std::thread::sleep(Duration::from_millis(rng.random_range(150..900)));
        child.kill().expect("SIGKILL delivered");
        child.wait().expect("the writer is reaped");
        reader.join().expect("the reader thread ends");
        let acks: Vec<String> = std::iter::once(first).chain(acked.try_iter()).collect();
        floor = verify(dir.path(), round, &acks, floor);
    }
}

/// Checks the store against the acknowledgements; answers the revision reached.
fn verify(path: &std::path::Path, round: usize, acks: &[String], floor: u64) -> u64 {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let store = kayra_store_sled::open(path, Options::default()).expect("the store reopens");
        let everything = store.range(&RangeRequest::prefix("")).await.unwrap();
        let stored: BTreeMap<&str, &[u8]> =
            everything.kvs.iter().map(|kv| (kv.key.as_str(), kv.value.as_slice())).collect();
        let mut highest = 0;
        for ack in acks {
            let fields: Vec<&str> = ack.split(' ').collect();
            let (keys, revision) = match fields.as_slice() {
                ["put", key, revision] => (vec![*key], revision),
                ["txn", a, b, revision] => (vec![*a, *b], revision),
                _ => panic!("round {round}: unexpected line {ack:?}"),
            };
            highest = highest.max(revision.parse::<u64>().expect("a revision"));
            for key in keys {
                assert_eq!(
                    stored.get(key),
                    Some(&key.as_bytes()),
                    "round {round}: acknowledged {key} was lost"
                );
            }
        }
        for (key, value) in stored.iter().filter(|(key, _)| **key != "probe") {
            assert_eq!(key.as_bytes(), *value, "round {round}: {key} holds a torn value");
            if let Some(rest) = key.strip_prefix("a/") {
                assert!(
                    stored.contains_key(format!("b/{rest}").as_str()),
                    "round {round}: half a transaction: {key}"
                );
            }
            if let Some(rest) = key.strip_prefix("b/") {
                assert!(
                    stored.contains_key(format!("a/{rest}").as_str()),
                    "round {round}: half a transaction: {key}"
                );
            }
        }
        let revision = store.revision().await.unwrap();
        assert!(
            revision >= highest && revision >= floor,
            "round {round}: the revision went back to {revision}"
        );
        eprintln!(
            "round {round}: {} writes acknowledged, {} keys stored, revision {revision}",
            acks.len(),
            stored.len()
        );
        let next = store.put("probe", round.to_string().into_bytes()).await.unwrap();
        assert!(next > revision, "round {round}: a new write must get a new revision");
        next
    })
}
