//! The conformance suite: what every implementation of [`Store`] must do, checked the same way
//! against memory, sled and etcd.
//!
//! An adapter's tests implement [`Harness`] and expand [`conformance_tests!`](crate::conformance_tests)
//! into one test per case; engines that own their revision counter also run [`model::check`],
//! which compares random operation sequences with a `BTreeMap` model.
//!
//! The cases assume nothing about a store's starting revision: each starts from the revision
//! the store reports, so a shared etcd under a fresh prefix works as well as an empty engine.

#![allow(clippy::missing_panics_doc, missing_docs)]

pub mod model;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use crate::{
    Compare, DEFAULT_MAX_VALUE_SIZE, Event, EventKind, KeyValue, Op, Outcome, RangeRequest, Revision, Store,
    StoreError, Txn, TxnResult, Watcher,
};

/// How the suite obtains stores to test.
#[async_trait]
pub trait Harness: Send + Sync {
    /// A store with no keys, whose watchers are cut off after at most 64 queued revisions and
    /// whose values are limited to [`DEFAULT_MAX_VALUE_SIZE`].
    async fn open(&self) -> Arc<dyn Store>;
}

/// Expands into one `#[tokio::test]` per conformance case. `$make` is an async function
/// answering `Option<impl Harness>`; `None` skips the case (the function says why).
#[macro_export]
macro_rules! conformance_tests {
    ($make:path) => {
        $crate::conformance_tests!(@each $make;
            put_get_and_key_metadata,
            every_write_advances_the_revision_once,
            range_reads_in_key_order_with_limit_and_continuation,
            range_reads_at_an_old_revision,
            create_refuses_an_existing_key,
            update_and_delete_only_at_the_expected_revision,
            transactions_are_all_or_nothing,
            transactions_sent_together_each_stand_alone,
            malformed_requests_change_nothing,
            concurrent_compare_and_swap_has_one_winner,
            watch_delivers_events_in_order_with_previous_values,
            watch_replays_history_and_resumes_without_gaps,
            slow_watchers_are_cut_off_and_resume_without_gaps,
            compaction_forgets_old_history_only,
            watchers_learn_progress_while_their_prefix_is_quiet,
            revoking_a_lease_deletes_its_keys,
            unrenewed_leases_expire_with_their_keys,
        );
    };
    (@each $make:path; $($case:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $case() {
                if let Some(harness) = $make().await {
                    $crate::conformance::$case(&harness).await;
                }
            }
        )*
    };
}

const PATIENCE: Duration = Duration::from_secs(15);

async fn next_event(watcher: &mut Watcher) -> Event {
    match tokio::time::timeout(PATIENCE, watcher.next()).await {
        Ok(Some(Ok(event))) => event,
        Ok(Some(Err(error))) => panic!("watch failed: {error}"),
        Ok(None) => panic!("watch ended"),
        Err(_) => panic!("no event within {PATIENCE:?}"),
    }
}

fn applied(outcome: Outcome) -> Revision {
    match outcome {
        Outcome::Applied(revision) => revision,
        Outcome::Conflict(current) => panic!("expected the write to apply, found {current:?}"),
    }
}

fn keys(kvs: &[KeyValue]) -> Vec<&str> {
    kvs.iter().map(|kv| kv.key.as_str()).collect()
}

pub async fn put_get_and_key_metadata(harness: &dyn Harness) {
    let store = harness.open().await;
    assert_eq!(store.get("a").await.unwrap(), None);
    let r1 = store.put("a", b"one".to_vec()).await.unwrap();
    let kv = store.get("a").await.unwrap().expect("a was written");
    assert_eq!(
        (kv.value.as_slice(), kv.create_revision, kv.mod_revision, kv.version),
        (&b"one"[..], r1, r1, 1)
    );
    assert_eq!(kv.lease, None);

    let r2 = store.put("a", b"two".to_vec()).await.unwrap();
    assert_eq!(r2, r1 + 1);
    let kv = store.get("a").await.unwrap().expect("a was written");
    assert_eq!(
        (kv.value.as_slice(), kv.create_revision, kv.mod_revision, kv.version),
        (&b"two"[..], r1, r2, 2)
    );
    assert_eq!(store.revision().await.unwrap(), r2);

    let prev = store.delete("a").await.unwrap().expect("a existed");
    assert_eq!((prev.value.as_slice(), prev.mod_revision), (&b"two"[..], r2));
    assert_eq!(store.get("a").await.unwrap(), None);

    let r4 = store.put("a", b"again".to_vec()).await.unwrap();
    let kv = store.get("a").await.unwrap().expect("a was written again");
    assert_eq!((kv.create_revision, kv.version), (r4, 1), "a key re-created after a delete starts over");
    assert_eq!(store.put("empty", Vec::new()).await.map(|_| ()).unwrap(), ());
    assert_eq!(store.get("empty").await.unwrap().expect("empty values are values").value, b"");
}

pub async fn every_write_advances_the_revision_once(harness: &dyn Harness) {
    let store = harness.open().await;
    let r0 = store.revision().await.unwrap();
    let r1 = store.put("x", b"1".to_vec()).await.unwrap();
    assert_eq!(r1, r0 + 1);
    let txn = Txn {
        compares: vec![],
        ops: vec![Op::put("y", "2"), Op::put("z", "3"), Op::delete("x"), Op::delete("never")],
    };
    let TxnResult::Applied { revision, prev } = store.txn(txn).await.unwrap() else {
        panic!("a transaction with no compares applies")
    };
    assert_eq!(revision, r1 + 1, "one transaction is one revision");
    assert_eq!(prev.iter().map(Option::is_some).collect::<Vec<_>>(), [false, false, true, false]);
    for key in ["y", "z"] {
        assert_eq!(store.get(key).await.unwrap().expect("written").mod_revision, revision);
    }
    assert_eq!(store.delete("never").await.unwrap(), None);
    assert_eq!(store.revision().await.unwrap(), revision, "deleting nothing writes nothing");
}

pub async fn range_reads_in_key_order_with_limit_and_continuation(harness: &dyn Harness) {
    let store = harness.open().await;
    for key in ["p/c", "p/a", "q/a", "p/b", "o/z", "p/d", "p", "p0"] {
        store.put(key, key.as_bytes().to_vec()).await.unwrap();
    }
    let all = store.range(&RangeRequest::prefix("p/")).await.unwrap();
    assert_eq!(keys(&all.kvs), ["p/a", "p/b", "p/c", "p/d"]);
    assert_eq!((all.count, all.more, all.revision), (4, false, store.revision().await.unwrap()));
    assert!(all.kvs.iter().all(|kv| kv.value == kv.key.as_bytes()));

    let mut request = RangeRequest { limit: Some(3), ..RangeRequest::prefix("p/") };
    let page = store.range(&request).await.unwrap();
    assert_eq!((keys(&page.kvs), page.count, page.more), (vec!["p/a", "p/b", "p/c"], 4, true));
    request.start = Some(format!("{}\0", page.kvs.last().unwrap().key));
    let page = store.range(&request).await.unwrap();
    assert_eq!((keys(&page.kvs), page.count, page.more), (vec!["p/d"], 1, false));

    let everything = store.range(&RangeRequest::prefix("")).await.unwrap();
    assert_eq!(keys(&everything.kvs), ["o/z", "p", "p/a", "p/b", "p/c", "p/d", "p0", "q/a"]);
    let none = store.range(&RangeRequest::prefix("nothing/")).await.unwrap();
    assert_eq!((none.kvs.len(), none.count, none.more), (0, 0, false));

    let outside = RangeRequest { start: Some("q/a".into()), ..RangeRequest::prefix("p/") };
    assert!(matches!(store.range(&outside).await, Err(StoreError::InvalidArgument(_))));
}

pub async fn range_reads_at_an_old_revision(harness: &dyn Harness) {
    let store = harness.open().await;
    store.put("k/1", b"old".to_vec()).await.unwrap();
    let before = store.put("k/2", b"old".to_vec()).await.unwrap();
    store.put("k/1", b"new".to_vec()).await.unwrap();
    store.delete("k/2").await.unwrap();
    store.put("k/3", b"new".to_vec()).await.unwrap();

    let old =
        store.range(&RangeRequest { revision: Some(before), ..RangeRequest::prefix("k/") }).await.unwrap();
    assert_eq!(old.revision, before);
    assert_eq!(keys(&old.kvs), ["k/1", "k/2"]);
    assert!(old.kvs.iter().all(|kv| kv.value == b"old"));

    let paged = RangeRequest { revision: Some(before), limit: Some(1), ..RangeRequest::prefix("k/") };
    let first = store.range(&paged).await.unwrap();
    let rest = RangeRequest { start: Some("k/1\0".into()), ..paged };
    let second = store.range(&rest).await.unwrap();
    assert_eq!((keys(&first.kvs), keys(&second.kvs)), (vec!["k/1"], vec!["k/2"]), "pages at one revision");

    let current = store.revision().await.unwrap();
    let future = RangeRequest { revision: Some(current + 10), ..RangeRequest::prefix("k/") };
    assert!(matches!(store.range(&future).await, Err(StoreError::FutureRevision { .. })));
}

pub async fn create_refuses_an_existing_key(harness: &dyn Harness) {
    let store = harness.open().await;
    let revision = applied(store.create("c", b"first".to_vec()).await.unwrap());
    match store.create("c", b"second".to_vec()).await.unwrap() {
        Outcome::Conflict(Some(current)) => {
            assert_eq!((current.value.as_slice(), current.mod_revision), (&b"first"[..], revision));
        }
        other => panic!("a second create must conflict with the first, got {other:?}"),
    }
    assert_eq!(store.get("c").await.unwrap().unwrap().value, b"first");
    assert_eq!(store.revision().await.unwrap(), revision, "a failed compare writes nothing");
}

pub async fn update_and_delete_only_at_the_expected_revision(harness: &dyn Harness) {
    let store = harness.open().await;
    let r1 = store.put("u", b"1".to_vec()).await.unwrap();
    let r2 = applied(store.update_if("u", b"2".to_vec(), r1).await.unwrap());
    match store.update_if("u", b"stale".to_vec(), r1).await.unwrap() {
        Outcome::Conflict(Some(current)) => assert_eq!(current.mod_revision, r2),
        other => panic!("a stale update must conflict, got {other:?}"),
    }
    assert!(matches!(store.update_if("absent", b"x".to_vec(), r1).await.unwrap(), Outcome::Conflict(None)));
    assert!(matches!(store.delete_if("u", r1).await.unwrap(), Outcome::Conflict(Some(_))));
    assert_eq!(store.get("u").await.unwrap().unwrap().value, b"2");
    applied(store.delete_if("u", r2).await.unwrap());
    assert_eq!(store.get("u").await.unwrap(), None);
    assert!(matches!(store.delete_if("u", r2).await.unwrap(), Outcome::Conflict(None)));
}

pub async fn transactions_are_all_or_nothing(harness: &dyn Harness) {
    let store = harness.open().await;
    let ra = store.put("t/a", b"a".to_vec()).await.unwrap();
    let rb = store.put("t/b", b"b".to_vec()).await.unwrap();
    let failing = Txn {
        compares: vec![
            Compare::ModifiedAt("t/a".into(), ra),
            Compare::ModifiedAt("t/b".into(), ra),
            Compare::Absent("t/c".into()),
        ],
        ops: vec![Op::put("t/a", "A"), Op::delete("t/b"), Op::put("t/c", "C")],
    };
    match store.txn(failing).await.unwrap() {
        TxnResult::Conflict { revision, current } => {
            assert_eq!(revision, rb);
            let seen: Vec<_> = current.iter().map(|kv| kv.as_ref().map(|kv| kv.mod_revision)).collect();
            assert_eq!(seen, [Some(ra), Some(rb), None]);
        }
        other => panic!("one failing compare fails the whole transaction, got {other:?}"),
    }
    let untouched = store.range(&RangeRequest::prefix("t/")).await.unwrap();
    assert_eq!(keys(&untouched.kvs), ["t/a", "t/b"]);
    assert_eq!(untouched.revision, rb);

    let passing = Txn {
        compares: vec![
            Compare::ModifiedAt("t/a".into(), ra),
            Compare::ModifiedAt("t/b".into(), rb),
            Compare::Absent("t/c".into()),
        ],
        ops: vec![Op::put("t/a", "A"), Op::delete("t/b"), Op::put("t/c", "C")],
    };
    let TxnResult::Applied { revision, prev } = store.txn(passing).await.unwrap() else {
        panic!("every compare holds")
    };
    assert_eq!(revision, rb + 1);
    assert_eq!(
        prev.iter().map(|kv| kv.as_ref().map(|kv| kv.value.clone())).collect::<Vec<_>>(),
        [Some(b"a".to_vec()), Some(b"b".to_vec()), None]
    );
    let after = store.range(&RangeRequest::prefix("t/")).await.unwrap();
    assert_eq!(keys(&after.kvs), ["t/a", "t/c"]);
    assert!(after.kvs.iter().all(|kv| kv.mod_revision == revision));
}

pub async fn transactions_sent_together_each_stand_alone(harness: &dyn Harness) {
    let store = harness.open().await;
    let r0 = store.put("all/taken", b"old".to_vec()).await.unwrap();
    let mut watcher = store.watch("all/", r0).await.unwrap();
    let lease = store.grant_lease(Duration::from_secs(60)).await.unwrap().id;
    let create = |key: &str, value: &str, lease| Txn {
        compares: vec![Compare::Absent(key.to_owned())],
        ops: vec![Op::Put { key: key.to_owned(), value: value.as_bytes().to_vec(), lease }],
    };
    let unknown = crate::LeaseId(0x7eed);
    let mut txns = vec![
        create("all/a", "a", Some(lease)),
        create("all/taken", "new", None),
        create("all/b", "b", Some(unknown)),
        Txn { compares: vec![], ops: vec![Op::put("all/c", "c1"), Op::put("all/c", "c2")] },
    ];
    // Many more, each on the shared lease (fewer than a watcher of the harness may queue).
    txns.extend((0..48).map(|i| create(&format!("all/many/{i:02}"), "m", Some(lease))));
    let results = store.txn_all(txns).await;
    assert_eq!(results.len(), 52, "one result per transaction, in the order sent");
    let TxnResult::Applied { revision: ra, .. } = results[0].as_ref().expect("the first applies") else {
        panic!("a create of a free key applies, got {:?}", results[0])
    };
    match results[1].as_ref().expect("a failed compare is no error") {
        TxnResult::Conflict { current, .. } => {
            assert_eq!(current[0].as_ref().map(|kv| kv.value.clone()), Some(b"old".to_vec()));
        }
        other => panic!("a create of a taken key conflicts alone, got {other:?}"),
    }
    assert!(matches!(results[2], Err(StoreError::LeaseNotFound(_))), "got {:?}", results[2]);
    assert!(matches!(results[3], Err(StoreError::InvalidArgument(_))), "got {:?}", results[3]);
    let mut revisions = vec![*ra];
    for result in &results[4..] {
        match result {
            Ok(TxnResult::Applied { revision, .. }) => revisions.push(*revision),
            other => panic!("each create of a free key applies, got {other:?}"),
        }
    }
    let mut distinct = revisions.clone();
    distinct.sort_unstable();
    distinct.dedup();
    assert_eq!(distinct.len(), revisions.len(), "each applied transaction has a revision of its own");
    assert_eq!(store.revision().await.unwrap(), *distinct.last().unwrap(), "nothing else was written");
    assert_eq!(store.get("all/taken").await.unwrap().unwrap().value, b"old");
    assert_eq!(store.get("all/b").await.unwrap(), None);
    assert_eq!(store.get("all/c").await.unwrap(), None);
    let mut seen = Vec::new();
    for _ in 0..revisions.len() {
        let event = next_event(&mut watcher).await;
        assert_eq!(event.kv.lease, Some(lease), "{}", event.kv.key);
        seen.push(event.revision());
    }
    assert_eq!(seen, distinct, "a watcher sees each write once, at its own revision, in revision order");
    store.revoke_lease(lease).await.unwrap();
    assert_eq!(
        store.range(&RangeRequest::prefix("all/")).await.unwrap().count,
        1,
        "only the old key is left"
    );
}

pub async fn malformed_requests_change_nothing(harness: &dyn Harness) {
    let store = harness.open().await;
    let r0 = store.put("m", b"kept".to_vec()).await.unwrap();
    let twice = Txn { compares: vec![], ops: vec![Op::put("m", "1"), Op::delete("m")] };
    assert!(matches!(store.txn(twice).await, Err(StoreError::InvalidArgument(_))));
    let empty = Txn { compares: vec![], ops: vec![Op::put("ok", "1"), Op::put("", "x")] };
    assert!(matches!(store.txn(empty).await, Err(StoreError::InvalidArgument(_))));
    let big = vec![b'x'; DEFAULT_MAX_VALUE_SIZE + 1];
    match store.put("big", big).await {
        Err(StoreError::ValueTooLarge { key, size, limit }) => {
            assert_eq!(
                (key.as_str(), size, limit),
                ("big", DEFAULT_MAX_VALUE_SIZE + 1, DEFAULT_MAX_VALUE_SIZE)
            );
        }
        other => panic!("an oversize value must be refused, got {other:?}"),
    }
    let unknown_lease = Txn {
        compares: vec![],
        ops: vec![Op::Put {
            key: "leased".into(),
            value: b"v".to_vec(),
            lease: Some(crate::LeaseId(0x7eed)),
        }],
    };
    assert!(matches!(store.txn(unknown_lease).await, Err(StoreError::LeaseNotFound(_))));
    assert_eq!(store.revision().await.unwrap(), r0);
    assert_eq!(keys(&store.range(&RangeRequest::prefix("")).await.unwrap().kvs), ["m"]);
    assert!(store.put("at-limit", vec![b'x'; DEFAULT_MAX_VALUE_SIZE]).await.is_ok());
}

pub async fn concurrent_compare_and_swap_has_one_winner(harness: &dyn Harness) {
    let store = harness.open().await;
    let base = store.put("race", b"0".to_vec()).await.unwrap();
    let contenders = 32;
    let updates = (0..contenders).map(|i| {
        let store = store.clone();
        tokio::spawn(async move { store.update_if("race", format!("{i}").into_bytes(), base).await })
    });
    let creates = (0..contenders).map(|i| {
        let store = store.clone();
        tokio::spawn(async move { store.create("fresh", format!("{i}").into_bytes()).await })
    });
    let handles: Vec<_> = updates.chain(creates).collect();
    let mut winners = [0, 0];
    for (n, handle) in handles.into_iter().enumerate() {
        if let Outcome::Applied(_) = handle.await.expect("task ran").expect("store answered") {
            winners[n / contenders] += 1;
        }
    }
    assert_eq!(winners, [1, 1], "exactly one update and one create win");
    assert_eq!(store.get("race").await.unwrap().unwrap().version, 2);
    assert_eq!(store.get("fresh").await.unwrap().unwrap().version, 1);
}

pub async fn watch_delivers_events_in_order_with_previous_values(harness: &dyn Harness) {
    let store = harness.open().await;
    let r0 = store.put("w/a", b"a0".to_vec()).await.unwrap();
    let mut watcher = store.watch("w/", r0).await.unwrap();
    store.put("outside", b"x".to_vec()).await.unwrap();
    let r1 = store.put("w/a", b"a1".to_vec()).await.unwrap();
    let txn =
        Txn { compares: vec![], ops: vec![Op::put("w/b", "b1"), Op::delete("w/a"), Op::put("out/b", "x")] };
    let r2 = store.txn(txn).await.unwrap().revision();

    let e = next_event(&mut watcher).await;
    assert_eq!(
        (e.kind, e.kv.key.as_str(), e.kv.value.as_slice(), e.revision()),
        (EventKind::Put, "w/a", &b"a1"[..], r1)
    );
    assert_eq!((e.kv.version, e.kv.create_revision), (2, r0));
    assert_eq!(e.prev.as_ref().map(|kv| (kv.value.as_slice(), kv.mod_revision)), Some((&b"a0"[..], r0)));
    let e = next_event(&mut watcher).await;
    assert_eq!(
        (e.kind, e.kv.key.as_str(), e.revision(), e.prev.is_none()),
        (EventKind::Put, "w/b", r2, true)
    );
    let e = next_event(&mut watcher).await;
    assert_eq!((e.kind, e.kv.key.as_str(), e.revision()), (EventKind::Delete, "w/a", r2));
    assert_eq!(e.prev.map(|kv| kv.value), Some(b"a1".to_vec()));

    let r3 = store.put("w/c", b"c".to_vec()).await.unwrap();
    let e = next_event(&mut watcher).await;
    assert_eq!((e.kv.key.as_str(), e.revision()), ("w/c", r3), "events outside the prefix are never seen");
}

pub async fn watch_replays_history_and_resumes_without_gaps(harness: &dyn Harness) {
    let store = harness.open().await;
    let r0 = store.revision().await.unwrap();
    let mut written = Vec::new();
    for i in 0..20 {
        written.push(store.put(&format!("h/{}", i % 7), format!("{i}").into_bytes()).await.unwrap());
    }
    let mut watcher = store.watch("h/", r0).await.unwrap();
    let mut seen = Vec::new();
    for _ in 0..8 {
        seen.push(next_event(&mut watcher).await.revision());
    }
    drop(watcher);
    for i in 20..30 {
        written.push(store.put(&format!("h/{}", i % 7), format!("{i}").into_bytes()).await.unwrap());
    }
    let mut resumed = store.watch("h/", *seen.last().unwrap()).await.unwrap();
    while seen.len() < written.len() {
        let event = next_event(&mut resumed).await;
        assert_eq!(event.kv.value, format!("{}", seen.len()).into_bytes(), "values arrive in write order");
        seen.push(event.revision());
    }
    assert_eq!(seen, written, "resuming after the last revision seen loses and repeats nothing");
    let current = store.revision().await.unwrap();
    assert!(matches!(store.watch("h/", current + 5).await, Err(StoreError::FutureRevision { .. })));
}

pub async fn slow_watchers_are_cut_off_and_resume_without_gaps(harness: &dyn Harness) {
    let store = harness.open().await;
    let r0 = store.revision().await.unwrap();
    let mut watcher = store.watch("s/", r0).await.unwrap();
    let total = 400;
    let mut written = Vec::new();
    for i in 0..total {
        written.push(store.put(&format!("s/{}", i % 10), format!("{i}").into_bytes()).await.unwrap());
    }
    let mut seen: Vec<Revision> = Vec::new();
    let mut cut_offs = 0;
    while seen.len() < total {
        match tokio::time::timeout(PATIENCE, watcher.next()).await.expect("the watch answers") {
            Some(Ok(event)) => seen.push(event.revision()),
            Some(Err(StoreError::WatchLagged { resume_after })) => {
                assert_eq!(resume_after, seen.last().copied().unwrap_or(r0), "resume from what was received");
                cut_offs += 1;
                watcher = store.watch("s/", resume_after).await.unwrap();
            }
            other => panic!("unexpected end of watch: {other:?}"),
        }
    }
    assert_eq!(seen, written, "a slow watcher gets every event, once, in order ({cut_offs} cut-offs)");
}

pub async fn watchers_learn_progress_while_their_prefix_is_quiet(harness: &dyn Harness) {
    let store = harness.open().await;
    let start = store.put("quiet/a", b"1".to_vec()).await.unwrap();
    let mut watcher = store.watch("quiet/", start).await.unwrap();
    let elsewhere = store.put("busy/b", b"2".to_vec()).await.unwrap();
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        match tokio::time::timeout_at(deadline, watcher.next_change()).await {
            Ok(Some(Ok(crate::Change::Progress(reached)))) if reached >= elsewhere => break,
            Ok(Some(Ok(crate::Change::Progress(_)))) => continue,
            other => panic!("expected progress up to {elsewhere}, got {other:?}"),
        }
    }
    let next = store.put("quiet/c", b"3".to_vec()).await.unwrap();
    loop {
        match tokio::time::timeout(PATIENCE, watcher.next_change()).await {
            Ok(Some(Ok(crate::Change::Event(event)))) => {
                assert_eq!(event.revision(), next);
                break;
            }
            Ok(Some(Ok(crate::Change::Progress(_)))) => continue,
            other => panic!("expected the event at {next}, got {other:?}"),
        }
    }
}

pub async fn compaction_forgets_old_history_only(harness: &dyn Harness) {
    let store = harness.open().await;
    let r1 = store.put("c/a", b"1".to_vec()).await.unwrap();
    let r2 = store.put("c/a", b"2".to_vec()).await.unwrap();
    let r3 = store.put("c/b", b"3".to_vec()).await.unwrap();
    store.delete("c/b").await.unwrap();
    let r5 = store.put("c/a", b"5".to_vec()).await.unwrap();
    let at_r3 =
        store.range(&RangeRequest { revision: Some(r3), ..RangeRequest::prefix("c/") }).await.unwrap();

    store.compact(r3).await.unwrap();
    let again =
        store.range(&RangeRequest { revision: Some(r3), ..RangeRequest::prefix("c/") }).await.unwrap();
    assert_eq!(again.kvs, at_r3.kvs, "reads at the compaction point still work");
    let old = RangeRequest { revision: Some(r2), ..RangeRequest::prefix("c/") };
    assert!(matches!(store.range(&old).await, Err(StoreError::Compacted { .. })));
    assert!(matches!(store.compact(r1).await, Err(StoreError::Compacted { .. })));
    assert!(matches!(store.compact(r5 + 100).await, Err(StoreError::FutureRevision { .. })));

    match store.watch("c/", r1).await {
        Err(StoreError::Compacted { .. }) => {}
        Ok(mut watcher) => match tokio::time::timeout(PATIENCE, watcher.next()).await {
            Ok(Some(Err(StoreError::Compacted { .. }))) => {}
            other => panic!("a watch from compacted history must fail, got {other:?}"),
        },
        Err(other) => panic!("a watch from compacted history must fail as compacted, got {other}"),
    }
    let mut watcher = store.watch("c/", r3).await.unwrap();
    let e = next_event(&mut watcher).await;
    assert_eq!((e.kind, e.kv.key.as_str()), (EventKind::Delete, "c/b"));
    assert_eq!(e.prev.map(|kv| kv.value), Some(b"3".to_vec()));
    let e = next_event(&mut watcher).await;
    assert_eq!((e.revision(), e.prev.map(|kv| kv.mod_revision)), (r5, Some(r2)));
    assert_eq!(store.get("c/a").await.unwrap().unwrap().version, 3);
}

pub async fn revoking_a_lease_deletes_its_keys(harness: &dyn Harness) {
    let store = harness.open().await;
    let lease = store.grant_lease(Duration::from_secs(60)).await.unwrap();
    assert!(lease.ttl >= Duration::from_secs(60));
    let leased = |key: &str| Op::Put { key: key.into(), value: b"v".to_vec(), lease: Some(lease.id) };
    let r1 = store
        .txn(Txn { compares: vec![], ops: vec![leased("l/a"), leased("l/b")] })
        .await
        .unwrap()
        .revision();
    store.put("l/kept", b"v".to_vec()).await.unwrap();
    // Rewriting a key without the lease detaches it.
    store.txn(Txn { compares: vec![], ops: vec![leased("l/detached")] }).await.unwrap();
    store.put("l/detached", b"mine".to_vec()).await.unwrap();
    assert_eq!(store.get("l/a").await.unwrap().unwrap().lease, Some(lease.id));
    assert!(store.keep_alive(lease.id).await.unwrap() >= Duration::from_secs(60));

    let mut watcher = store.watch("l/", store.revision().await.unwrap()).await.unwrap();
    store.revoke_lease(lease.id).await.unwrap();
    let (a, b) = (next_event(&mut watcher).await, next_event(&mut watcher).await);
    assert_eq!((a.kind, b.kind), (EventKind::Delete, EventKind::Delete));
    assert_eq!(a.revision(), b.revision(), "a lease's keys go at one revision");
    assert!(a.revision() > r1);
    let left = store.range(&RangeRequest::prefix("l/")).await.unwrap();
    assert_eq!(keys(&left.kvs), ["l/detached", "l/kept"]);
    let renewed = store.keep_alive(lease.id).await;
    assert!(matches!(renewed, Err(StoreError::LeaseNotFound(_))), "{renewed:?}");
    assert!(matches!(store.revoke_lease(lease.id).await, Err(StoreError::LeaseNotFound(_))));
}

/// The lease [`unrenewed_leases_expire_with_their_keys`] renews, then lets lapse. Its expiry is
/// awaited for [`PATIENCE`], five times the lease.
const RENEWED_LEASE: Duration = Duration::from_secs(3);
/// How often that lease is renewed: a tenth of it, so a renewal may come 2.7 s late on a busy
/// machine (many times what a renewal takes on a quiet one) before the lease lapses under it.
const RENEWAL_PERIOD: Duration = Duration::from_millis(300);

pub async fn unrenewed_leases_expire_with_their_keys(harness: &dyn Harness) {
    let store = harness.open().await;
    let lease = store.grant_lease(RENEWED_LEASE).await.unwrap();
    let op = Op::Put { key: "e/session".into(), value: b"alive".to_vec(), lease: Some(lease.id) };
    let written = store.txn(Txn { compares: vec![], ops: vec![op] }).await.unwrap().revision();
    let mut watcher = store.watch("e/", written).await.unwrap();
    let granted = tokio::time::Instant::now();
    while granted.elapsed() < RENEWED_LEASE + RENEWAL_PERIOD {
        tokio::time::sleep(RENEWAL_PERIOD).await;
        store.keep_alive(lease.id).await.expect("a lease kept alive stays");
    }
    assert!(store.get("e/session").await.unwrap().is_some(), "keep-alives hold the key past its TTL");
    let expired = next_event(&mut watcher).await;
    assert_eq!((expired.kind, expired.kv.key.as_str()), (EventKind::Delete, "e/session"));
    assert_eq!(store.get("e/session").await.unwrap(), None);
    let renewed = store.keep_alive(lease.id).await;
    assert!(matches!(renewed, Err(StoreError::LeaseNotFound(_))), "{renewed:?}");
}
