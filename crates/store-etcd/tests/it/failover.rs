//! A three-member etcd cluster losing members: with a follower dead, every read through a store
//! that knows all three endpoints succeeds, so does every write but one that met the broken
//! connection, and a store still connects; with the
//! leader dead, writes resume once the others elect a new one, and every write acknowledged
//! before, during or after is there afterwards, once.

use std::time::{Duration, Instant};

use kayra_store::{Compare, Op, RangeRequest, Store, Txn, TxnResult};
use kayra_store_etcd::EtcdStore;
use kayra_store_etcd::test_server::{EtcdCluster, StartError, skip_test};

async fn cluster() -> Option<EtcdCluster> {
    match EtcdCluster::start(3).await {
        Ok(cluster) => Some(cluster),
        Err(StartError::Missing) => {
            skip_test(StartError::Missing);
            None
        }
        Err(error) => panic!("{error}"),
    }
}

/// Creates `key`, once: the compare makes a retried create fail instead of applying twice.
fn create(key: &str) -> Txn {
    Txn { compares: vec![Compare::Absent(key.to_owned())], ops: vec![Op::put(key, b"v".to_vec())] }
}

#[tokio::test]
async fn a_dead_follower_fails_no_read_or_connect_and_a_dead_leader_only_pauses_writes() {
    let Some(mut cluster) = cluster().await else { return };
    let store = EtcdStore::connect(cluster.options("/failover/")).await.expect("the cluster answers");
    let leader = cluster.leader().await.expect("the cluster has a leader");
    let follower = (leader + 1) % 3;
    cluster.kill(follower);
    // A write that was on its way to the dead member when it died may be reported failed (it
    // may not be tried again: nothing says it did not arrive); none is lost, reads never fail.
    let mut failed_early = 0;
    for n in 0..30 {
        let key = format!("follower-down/{n}");
        match store.txn(create(&key)).await {
            Ok(TxnResult::Applied { .. }) => {}
            Ok(conflict) => panic!("{key} was created twice: {conflict:?}"),
            Err(error) => {
                assert!(error.is_retryable(), "{key}: {error}");
                failed_early += 1;
            }
        }
        let read = store.range(&RangeRequest::prefix("follower-down/")).await;
        assert_eq!(read.expect("a read with one follower dead").count, n + 1 - failed_early);
    }
    assert!(failed_early <= 1, "only the write that met the broken connection failed: {failed_early}");
    for _ in 0..5 {
        EtcdStore::connect(cluster.options("/failover/"))
            .await
            .expect("a store connects with one member dead");
    }
    cluster.restart(follower).await.expect("the follower comes back");

    // The leader dies in the middle of a burst of creates, one started every 20 ms, each on
    // its own (so that one waiting does not hold back the next). A write a follower had
    // already proposed to the dead leader is reported failed once another member leads (etcd
    // itself would answer it only at its request timeout, 7 s with the default 1 s election);
    // those started after the death are acknowledged once a new leader is elected.
    let store = std::sync::Arc::new(store);
    let mut writes = Vec::new();
    let mut killed = None;
    let started = Instant::now();
    let mut n = 0;
    while started.elapsed() < Duration::from_secs(10) {
        if killed.is_none() && started.elapsed() > Duration::from_secs(1) {
            cluster.kill(leader);
            killed = Some(Instant::now());
        }
        let (store, key) = (store.clone(), format!("leader-down/{n}"));
        writes.push(tokio::spawn(async move {
            let at = Instant::now();
            let outcome = store.txn(create(&key)).await;
            if let Ok(conflict @ TxnResult::Conflict { .. }) = &outcome {
                panic!("{key} was created twice: {conflict:?}");
            }
            (key, at, Instant::now(), outcome.is_ok())
        }));
        n += 1;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let killed = killed.expect("the leader was killed");
    let mut outcomes = Vec::new();
    for write in writes {
        outcomes.push(write.await.expect("a write finishes"));
    }
    let read = store.range(&RangeRequest::prefix("leader-down/")).await.expect("a read after the election");
    let stored: Vec<&str> = read.kvs.iter().map(|kv| kv.key.as_str()).collect();
    let failed = outcomes.iter().filter(|(_, _, _, ok)| !ok).count();
    for (key, _, _, acknowledged) in &outcomes {
        if *acknowledged {
            assert!(
                stored.contains(&key.as_str()),
                "{key} was acknowledged and lost ({failed} writes failed)"
            );
        }
    }
    assert!(stored.len() <= outcomes.len(), "no write was applied twice");
    let resumed = outcomes
        .iter()
        .filter(|(_, at, _, ok)| *ok && *at > killed)
        .map(|(_, _, done, _)| *done)
        .min()
        .expect("writes resumed after the leader died");
    let paused = resumed.saturating_duration_since(killed);
    eprintln!("writes resumed {paused:?} after the leader died; {failed} of {} failed", outcomes.len());
    assert!(
        paused < Duration::from_secs(6),
        "a write started after the leader died is acknowledged within etcd's election (about 1 s \
         here) and the retry's patience (3 s), with room for a loaded machine: 6 s, not {paused:?}"
    );
}

#[tokio::test]
async fn a_write_proposed_to_a_leader_that_died_is_given_up_once_another_leads() {
    let Some(mut cluster) = cluster().await else { return };
    let leader = cluster.leader().await.expect("the cluster has a leader");
    let follower = (leader + 1) % 3;
    // Through the follower only, so the write is its proposal to the leader.
    let endpoint = cluster.endpoints()[follower].clone();
    let store = EtcdStore::connect(kayra_store_etcd::EtcdOptions::new(vec![endpoint], "/lost/"))
        .await
        .expect("the follower answers");
    store.txn(create("before")).await.expect("a write while the leader lives");

    // The leader hangs, so the follower's proposal reaches no one, then dies.
    cluster.pause(leader);
    let sent = Instant::now();
    let write = tokio::spawn({
        let store = store.clone();
        async move { store.txn(create("proposed-to-the-dead")).await }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    cluster.kill(leader);
    let elected = loop {
        if cluster.leader().await.is_some_and(|now| now != leader) {
            break sent.elapsed();
        }
        assert!(sent.elapsed() < Duration::from_secs(10), "the others elect a leader");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let outcome = write.await.expect("the write finishes");
    let answered = sent.elapsed();
    eprintln!("elected after {elected:?}, the write answered after {answered:?}: {outcome:?}");
    let error = outcome.expect_err("the proposal was lost with the leader");
    assert!(error.is_retryable(), "{error}");
    assert!(
        answered < elected + Duration::from_secs(2),
        "given up within a second or two of the election ({elected:?}), not at etcd's request \
         timeout (7 s): {answered:?}"
    );
    store.txn(create("after")).await.expect("writes go on under the new leader");
}
