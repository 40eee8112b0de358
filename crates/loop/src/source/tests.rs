//! Sources: what a list-watch queues, what it knows, and how it recovers.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kayra_store::Store;
use kayra_store::mvcc::{MvccStore, Options};
use tokio_util::sync::CancellationToken;

use super::{Change, Changes, Feed, FeedError, Item, ListWatch, Listed, Sink, Source, StoreFeed, concerned};
use crate::Key;
use crate::queue::{Queue, State};

/// Every key queued so far, in the order workers would take them.
fn drain(queue: &Queue) -> Vec<String> {
    let mut taken = Vec::new();
    while let Some((key, _)) = queue.try_take_for_tests() {
        taken.push(key.as_str().to_owned());
        queue.finish_for_tests(&key);
    }
    taken
}

/// Waits until the queue holds `expected` (in any order).
async fn expect_queued(queue: &Queue, expected: &[&str]) {
    let mut seen = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            seen.extend(drain(queue));
            let mut sorted = seen.clone();
            sorted.sort();
            if sorted == expected {
                return;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("queued {seen:?}, expected {expected:?}"));
}

/// Maps a stored value (a comma-separated list of keys) to its keys.
fn by_value(kv: &kayra_store::KeyValue) -> Vec<Key> {
    String::from_utf8_lossy(&kv.value).split(',').filter(|key| !key.is_empty()).map(Key::new).collect()
}

#[tokio::test]
async fn a_list_watch_queues_what_it_lists_then_each_change_with_the_keys_it_used_to_concern() {
    let store: Arc<dyn Store> = Arc::new(MvccStore::in_memory(Options::default()).unwrap());
    store.put("/x/1", b"a".to_vec()).await.unwrap();
    store.put("/x/2", b"b,shared".to_vec()).await.unwrap();
    store.put("/y/1", b"elsewhere".to_vec()).await.unwrap();
    let source = Arc::new(ListWatch::new(StoreFeed::new(store.clone(), "/x/", Arc::new(by_value))));
    let queue = Arc::new(Queue::new(State::default(), 1));
    let stop = CancellationToken::new();
    let running = tokio::spawn({
        let (source, sink, stop) = (source.clone(), Sink::new(queue.clone()), stop.clone());
        async move { source.run(sink, stop).await }
    });
    expect_queued(&queue, &["a", "b", "shared"]).await;
    // An item whose keys change queues the keys it concerned too: what it no longer concerns
    // must hear of it.
    store.put("/x/1", b"c".to_vec()).await.unwrap();
    expect_queued(&queue, &["a", "c"]).await;
    store.delete("/x/2").await.unwrap();
    expect_queued(&queue, &["b", "shared"]).await;
    assert_eq!(source.known(), vec![Key::new("c")], "a resync knows what exists, not what went");
    stop.cancel();
    running.await.unwrap();
}

/// A feed that records how it is used and answers as scripted.
#[derive(Default)]
struct Scripted {
    lists: AtomicUsize,
    watches: Mutex<Vec<u64>>,
}

struct Script(Vec<Result<Change, FeedError>>);

#[async_trait::async_trait]
impl Changes for Script {
    async fn next(&mut self) -> Option<Result<Change, FeedError>> {
        if self.0.is_empty() {
            return std::future::pending().await;
        }
        Some(self.0.remove(0))
    }
}

#[async_trait::async_trait]
impl Feed for Arc<Scripted> {
    async fn list(&self) -> Result<Listed, FeedError> {
        let lists = self.lists.fetch_add(1, Ordering::SeqCst);
        Ok(Listed {
            revision: 10 * (lists as u64 + 1),
            items: vec![Item { id: "one".into(), keys: vec![Key::new("one")] }],
        })
    }

    async fn watch(&self, after: u64) -> Result<Box<dyn Changes>, FeedError> {
        let mut watches = self.watches.lock().unwrap();
        watches.push(after);
        Ok(Box::new(Script(match watches.len() {
            // The first watch sees one change, then is cut off.
            1 => vec![
                Ok(Change::Put {
                    item: Item { id: "two".into(), keys: vec![Key::new("two")] },
                    revision: 13,
                }),
                Err(FeedError::Failed("cut off".into())),
            ],
            // The resumed one finds its revision compacted away.
            2 => vec![Err(FeedError::Expired)],
            _ => Vec::new(),
        })))
    }
}

#[tokio::test]
async fn a_cut_off_watch_resumes_from_its_last_revision_and_a_compacted_one_lists_again() {
    let feed = Arc::new(Scripted::default());
    let source = Arc::new(ListWatch::new(feed.clone()));
    let queue = Arc::new(Queue::new(State::default(), 1));
    let stop = CancellationToken::new();
    let running = tokio::spawn({
        let (source, sink, stop) = (source.clone(), Sink::new(queue.clone()), stop.clone());
        async move { source.run(sink, stop).await }
    });
    tokio::time::timeout(Duration::from_secs(10), async {
        while feed.watches.lock().unwrap().len() < 3 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("the source watched three times");
    assert_eq!(*feed.watches.lock().unwrap(), vec![10, 13, 20], "resumed at 13, then listed again (at 20)");
    assert_eq!(feed.lists.load(Ordering::SeqCst), 2);
    // The second list no longer has "two": it is queued once more and forgotten.
    assert_eq!(source.known(), vec![Key::new("one")]);
    stop.cancel();
    running.await.unwrap();
}

#[test]
fn a_change_concerns_the_keys_it_left_then_those_it_has_each_once() {
    let keys = |names: &[&str]| names.iter().map(|name| Key::new(*name)).collect::<Vec<_>>();
    let names = |keys: Vec<Key>| keys.iter().map(|key| key.as_str().to_owned()).collect::<Vec<_>>();
    assert_eq!(names(concerned(None, keys(&["b", "c"]))), ["b", "c"]);
    assert_eq!(names(concerned(Some(keys(&["a", "b", "c"])), keys(&["b", "c", "d"]))), ["a", "b", "c", "d"]);
    assert_eq!(names(concerned(Some(keys(&["a", "b"])), Vec::new())), ["a", "b"]);
    // A Secret referenced from every node's Application: all 20 000 nodes, each once, the
    // one it no longer concerns first.
    let before: Vec<Key> = (0..20_000).map(|i| Key::new(format!("node-{i}"))).collect();
    let now: Vec<Key> = (1..20_000).map(|i| Key::new(format!("node-{i}"))).collect();
    let all = concerned(Some(before), now);
    assert_eq!(all.len(), 20_000);
    assert_eq!(all[0].as_str(), "node-0");
}
