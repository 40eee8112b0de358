//! The model test: random sequences of writes, reads, compactions and a watch, run against a
//! store and against a `BTreeMap` model; every answer, revision and event must agree.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};

use super::Harness;
use crate::{
    Compare, Event, EventKind, KeyValue, Op, Outcome, RangeRequest, Revision, Store, StoreError, Txn,
    TxnResult,
};

const KEYS: &[&str] = &["a", "a/b", "a/c", "ab", "b", "b/a", "c"];
const PREFIXES: &[&str] = &["", "a", "a/", "b", "c", "z"];

#[derive(Debug, Clone)]
enum Step {
    Put(usize, u8),
    Delete(usize),
    Create(usize, u8),
    UpdateIf { key: usize, value: u8, stale: bool },
    DeleteIf { key: usize, stale: bool },
    Txn { compares: Vec<(usize, bool)>, ops: Vec<(usize, Option<u8>)> },
    Get(usize),
    Range { prefix: usize, limit: Option<usize>, back: u64 },
    Compact { back: u64 },
}

fn step() -> impl Strategy<Value = Step> {
    let key = 0..KEYS.len();
    prop_oneof![
        4 => (key.clone(), any::<u8>()).prop_map(|(k, v)| Step::Put(k, v)),
        2 => key.clone().prop_map(Step::Delete),
        2 => (key.clone(), any::<u8>()).prop_map(|(k, v)| Step::Create(k, v)),
        2 => (key.clone(), any::<u8>(), any::<bool>()).prop_map(|(key, value, stale)| Step::UpdateIf { key, value, stale }),
        1 => (key.clone(), any::<bool>()).prop_map(|(key, stale)| Step::DeleteIf { key, stale }),
        2 => (
            proptest::collection::vec((key.clone(), any::<bool>()), 0..3),
            proptest::collection::btree_map(key.clone(), proptest::option::of(any::<u8>()), 1..4),
        )
            .prop_map(|(compares, ops)| Step::Txn { compares, ops: ops.into_iter().collect() }),
        2 => key.prop_map(Step::Get),
        2 => (0..PREFIXES.len(), proptest::option::of(1..4usize), 0..6u64)
            .prop_map(|(prefix, limit, back)| Step::Range { prefix, limit, back }),
        1 => (0..8u64).prop_map(|back| Step::Compact { back }),
    ]
}

/// What the store should hold: a snapshot per revision, the compaction point, every event.
struct Model {
    revision: Revision,
    compacted: Revision,
    snapshots: BTreeMap<Revision, Arc<BTreeMap<String, KeyValue>>>,
    events: Vec<Event>,
}

impl Model {
    fn current(&self) -> &BTreeMap<String, KeyValue> {
        self.snapshots.values().next_back().expect("the model always has a snapshot")
    }

    fn at(&self, revision: Revision) -> &BTreeMap<String, KeyValue> {
        self.snapshots.range(..=revision).next_back().expect("a snapshot at or before").1
    }

    /// Applies writes as one transaction, answering each key's previous value.
    fn write(&mut self, ops: &[(String, Option<Vec<u8>>)]) -> Vec<Option<KeyValue>> {
        let main = self.revision + 1;
        let mut next = self.current().clone();
        let mut prev = Vec::new();
        let mut changed = false;
        for (key, value) in ops {
            let old = next.get(key).cloned();
            prev.push(old.clone());
            match value {
                Some(value) => {
                    let kv = KeyValue {
                        key: key.clone(),
                        value: value.clone(),
                        create_revision: old.as_ref().map_or(main, |kv| kv.create_revision),
                        mod_revision: main,
                        version: old.as_ref().map_or(1, |kv| kv.version + 1),
                        lease: None,
                    };
                    next.insert(key.clone(), kv.clone());
                    self.events.push(Event { kind: EventKind::Put, kv, prev: old });
                    changed = true;
                }
                None if old.is_some() => {
                    next.remove(key);
                    let kv = KeyValue {
                        key: key.clone(),
                        value: Vec::new(),
                        create_revision: 0,
                        mod_revision: main,
                        version: 0,
                        lease: None,
                    };
                    self.events.push(Event { kind: EventKind::Delete, kv, prev: old });
                    changed = true;
                }
                None => {}
            }
        }
        if changed {
            self.revision = main;
            self.snapshots.insert(main, Arc::new(next));
        }
        prev
    }
}

fn put(key: &str, value: u8) -> (String, Option<Vec<u8>>) {
    (key.to_owned(), Some(vec![value]))
}

fn error(context: &str, error: StoreError) -> TestCaseError {
    TestCaseError::fail(format!("{context}: {error}"))
}

async fn run(store: Arc<dyn Store>, steps: Vec<Step>) -> Result<(), TestCaseError> {
    let start = store.revision().await.map_err(|e| error("revision", e))?;
    let mut model = Model {
        revision: start,
        compacted: 0,
        snapshots: BTreeMap::from([(start, Arc::new(BTreeMap::new()))]),
        events: Vec::new(),
    };
    let mut watcher = store.watch("", start).await.map_err(|e| error("watch", e))?;
    for step in steps {
        match step {
            Step::Put(k, v) => {
                let revision = store.put(KEYS[k], vec![v]).await.map_err(|e| error("put", e))?;
                model.write(&[put(KEYS[k], v)]);
                prop_assert_eq!(revision, model.revision);
            }
            Step::Delete(k) => {
                let prev = store.delete(KEYS[k]).await.map_err(|e| error("delete", e))?;
                let expected = model.write(&[(KEYS[k].to_owned(), None)]);
                prop_assert_eq!(Some(prev), expected.into_iter().next());
            }
            Step::Create(k, v) => {
                let outcome = store.create(KEYS[k], vec![v]).await.map_err(|e| error("create", e))?;
                let expected = match model.current().get(KEYS[k]).cloned() {
                    Some(current) => Outcome::Conflict(Some(current)),
                    None => {
                        model.write(&[put(KEYS[k], v)]);
                        Outcome::Applied(model.revision)
                    }
                };
                prop_assert_eq!(outcome, expected);
            }
            Step::UpdateIf { key, value, stale } => {
                let current = model.current().get(KEYS[key]).cloned();
                let revision = current.as_ref().map_or(1, |kv| kv.mod_revision + u64::from(stale));
                let outcome = store
                    .update_if(KEYS[key], vec![value], revision)
                    .await
                    .map_err(|e| error("update", e))?;
                let expected = match current {
                    Some(kv) if !stale => {
                        let _ = kv;
                        model.write(&[put(KEYS[key], value)]);
                        Outcome::Applied(model.revision)
                    }
                    other => Outcome::Conflict(other),
                };
                prop_assert_eq!(outcome, expected);
            }
            Step::DeleteIf { key, stale } => {
                let current = model.current().get(KEYS[key]).cloned();
                let revision = current.as_ref().map_or(1, |kv| kv.mod_revision + u64::from(stale));
                let outcome =
                    store.delete_if(KEYS[key], revision).await.map_err(|e| error("delete_if", e))?;
                let expected = match current {
                    Some(_) if !stale => {
                        model.write(&[(KEYS[key].to_owned(), None)]);
                        Outcome::Applied(model.revision)
                    }
                    other => Outcome::Conflict(other),
                };
                prop_assert_eq!(outcome, expected);
            }
            Step::Txn { compares, ops } => {
                let current = model.current().clone();
                let compares: Vec<Compare> = compares
                    .into_iter()
                    .map(|(k, exists)| match (exists, current.get(KEYS[k])) {
                        (true, Some(kv)) => Compare::ModifiedAt(KEYS[k].to_owned(), kv.mod_revision),
                        (true, None) => Compare::ModifiedAt(KEYS[k].to_owned(), 1),
                        (false, _) => Compare::Absent(KEYS[k].to_owned()),
                    })
                    .collect();
                let writes: Vec<(String, Option<Vec<u8>>)> =
                    ops.iter().map(|(k, v)| (KEYS[*k].to_owned(), v.map(|v| vec![v]))).collect();
                let txn_ops = writes
                    .iter()
                    .map(|(key, value)| match value {
                        Some(value) => Op::put(key.clone(), value.clone()),
                        None => Op::delete(key.clone()),
                    })
                    .collect();
                let result = store
                    .txn(Txn { compares: compares.clone(), ops: txn_ops })
                    .await
                    .map_err(|e| error("txn", e))?;
                let holds = compares.iter().all(|c| c.holds(current.get(c.key())));
                let expected = if holds {
                    let prev = model.write(&writes);
                    TxnResult::Applied { revision: model.revision, prev }
                } else {
                    let current = compares.iter().map(|c| current.get(c.key()).cloned()).collect();
                    TxnResult::Conflict { revision: model.revision, current }
                };
                prop_assert_eq!(result, expected);
            }
            Step::Get(k) => {
                let found = store.get(KEYS[k]).await.map_err(|e| error("get", e))?;
                prop_assert_eq!(found.as_ref(), model.current().get(KEYS[k]));
            }
            Step::Range { prefix, limit, back } => {
                // Revision zero asks for the current revision.
                let revision = model.revision.saturating_sub(back).max(model.compacted).max(start);
                let revision = if revision == 0 { model.revision } else { revision };
                let request = RangeRequest {
                    prefix: PREFIXES[prefix].to_owned(),
                    start: None,
                    limit,
                    revision: Some(revision).filter(|r| *r > 0),
                };
                let result = store.range(&request).await.map_err(|e| error("range", e))?;
                let all: Vec<&KeyValue> =
                    model.at(revision).values().filter(|kv| kv.key.starts_with(PREFIXES[prefix])).collect();
                let expected: Vec<KeyValue> =
                    all.iter().take(limit.unwrap_or(usize::MAX)).map(|kv| (*kv).clone()).collect();
                prop_assert_eq!(&result.kvs, &expected);
                prop_assert_eq!(result.count, all.len());
                prop_assert_eq!(result.more, all.len() > expected.len());
                prop_assert_eq!(result.revision, revision);
            }
            Step::Compact { back } => {
                let target = model.revision.saturating_sub(back);
                let result = store.compact(target).await;
                if target <= model.compacted {
                    prop_assert!(matches!(result, Err(StoreError::Compacted { .. })), "{result:?}");
                } else {
                    result.map_err(|e| error("compact", e))?;
                    model.compacted = target;
                }
            }
        }
    }
    for expected in &model.events {
        let event = tokio::time::timeout(Duration::from_secs(10), watcher.next())
            .await
            .map_err(|_| TestCaseError::fail("the watch fell silent"))?;
        prop_assert_eq!(event.map(|e| e.map_err(|e| e.to_string())), Some(Ok(expected.clone())));
    }
    prop_assert_eq!(store.revision().await.map_err(|e| error("revision", e))?, model.revision);
    Ok(())
}

/// Runs `cases` random sequences of up to 40 steps, each on a fresh store from `harness`.
/// For stores that own their revision counter: the model expects no other writer.
pub fn check(harness: &dyn Harness, cases: u32) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a test runtime starts");
    let mut runner = TestRunner::new(Config { cases, failure_persistence: None, ..Config::default() });
    let steps = proptest::collection::vec(step(), 1..40);
    let result = runner.run(&steps, |steps| {
        runtime.block_on(async {
            let store = harness.open().await;
            run(store, steps).await
        })
    });
    if let Err(failure) = result {
        panic!("the store disagrees with the model: {failure}");
    }
}
