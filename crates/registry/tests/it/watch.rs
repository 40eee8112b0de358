//! Watches through the watch cache.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use kayra_registry::{
    ListOptions, PatchKind, Registry, RegistryError, WatchEvent, WatchOptions, WatchStream,
};
use kayra_store::mvcc::{MvccStore, Options};
use kayra_store::{
    Change, KeyValue, Lease, LeaseId, RangeRequest, RangeResult, Revision, Store, StoreError, Txn, TxnResult,
    WatchBatch, Watcher,
};
use serde_json::json;

use super::{FixedClock, meta, unadmitted, unadmitted_delete, widget, widgets, world};

async fn next(stream: &mut WatchStream) -> (String, String) {
    let event = tokio::time::timeout(Duration::from_secs(10), stream.next())
        .await
        .expect("an event in time")
        .expect("the watch goes on");
    (event.kind().to_owned(), meta(event.object(), "name").as_str().unwrap().to_owned())
}

fn from(rv: Option<&str>) -> WatchOptions {
    WatchOptions { resource_version: rv.map(str::to_owned), ..WatchOptions::default() }
}

#[tokio::test]
async fn a_watch_from_now_starts_with_what_exists() {
    let w = world().await;
    for name in ["a", "b"] {
        w.registry.create(&w.widgets, Some("default"), widget(name, 1), unadmitted()).await.unwrap();
    }
    for rv in [None, Some("0")] {
        let mut stream = w.registry.watch(&w.widgets, &from(rv)).await.unwrap();
        assert_eq!(next(&mut stream).await, ("ADDED".into(), "a".into()));
        assert_eq!(next(&mut stream).await, ("ADDED".into(), "b".into()));
    }
    let mut stream = w.registry.watch(&w.widgets, &from(None)).await.unwrap();
    next(&mut stream).await;
    next(&mut stream).await;
    w.registry
        .patch(&w.widgets, Some("default"), "a", PatchKind::Merge, br#"{"spec":{"size":2}}"#, unadmitted())
        .await
        .unwrap();
    w.registry.delete(&w.widgets, Some("default"), "b", &unadmitted_delete()).await.unwrap();
    assert_eq!(next(&mut stream).await, ("MODIFIED".into(), "a".into()));
    assert_eq!(next(&mut stream).await, ("DELETED".into(), "b".into()));
}

/// A watch from now has brought its client up to the revision it started at only once every
/// current object was taken: a client that reads the revision to know what it holds (the fleet
/// index that placement admission decides on) must not believe it knows objects still queued.
#[tokio::test]
async fn a_watch_from_now_reaches_its_start_only_after_the_last_current_object() {
    let w = world().await;
    let mut last = 0;
    for name in ["a", "b", "c"] {
        let created =
            w.registry.create(&w.widgets, Some("default"), widget(name, 1), unadmitted()).await.unwrap();
        last = meta(&created, "resourceVersion").as_str().unwrap().parse().unwrap();
    }
    // A first watch takes every object, so the cache holds them all when the second starts.
    let mut first = w.registry.watch(&w.widgets, &from(None)).await.unwrap();
    for _ in 0..3 {
        next(&mut first).await;
    }
    let mut stream = w.registry.watch(&w.widgets, &from(None)).await.unwrap();
    assert!(stream.revision() < last, "nothing taken yet, but revision {} claimed", stream.revision());
    next(&mut stream).await;
    next(&mut stream).await;
    assert!(stream.revision() < last, "one object still queued, but revision {} claimed", stream.revision());
    next(&mut stream).await;
    assert!(stream.revision() >= last, "every object taken, revision {}", stream.revision());
}

#[tokio::test]
async fn a_watch_from_a_list_sees_only_later_changes_with_their_versions() {
    let w = world().await;
    w.registry.create(&w.widgets, Some("default"), widget("old", 1), unadmitted()).await.unwrap();
    let list = w.registry.list(&w.widgets, Some("default"), &ListOptions::default()).await.unwrap();
    let created =
        w.registry.create(&w.widgets, Some("default"), widget("new", 1), unadmitted()).await.unwrap();
    let mut stream = w.registry.watch(&w.widgets, &from(Some(&list.resource_version))).await.unwrap();
    let event = stream.next().await.unwrap();
    assert!(matches!(&event, WatchEvent::Added(object) if **object == created), "{event:?}");
    let deleted = w.registry.delete(&w.widgets, Some("default"), "new", &unadmitted_delete()).await.unwrap();
    let event = stream.next().await.unwrap();
    let WatchEvent::Deleted(last) = event else { panic!("expected a delete") };
    assert_eq!(meta(&last, "uid"), meta(&created, "uid"));
    assert_ne!(
        meta(&last, "resourceVersion"),
        meta(&created, "resourceVersion"),
        "DELETED carries the delete's version"
    );
    drop(deleted);
}

#[tokio::test]
async fn selectors_turn_changes_into_arrivals_and_departures() {
    let w = world().await;
    let mut body = widget("sel", 1);
    body["metadata"]["labels"] = json!({"tier": "web"});
    w.registry.create(&w.widgets, Some("default"), body, unadmitted()).await.unwrap();
    w.registry.create(&w.widgets, Some("team-a"), widget("elsewhere", 1), unadmitted()).await.unwrap();
    let options = WatchOptions {
        namespace: Some("default".into()),
        label_selector: Some("tier=web".into()),
        field_selector: Some("metadata.name=sel".into()),
        resource_version: None,
    };
    let mut stream = w.registry.watch(&w.widgets, &options).await.unwrap();
    assert_eq!(next(&mut stream).await, ("ADDED".into(), "sel".into()));
    let relabel = |tier: &'static str| {
        let (registry, widgets) = (w.registry.clone(), w.widgets.clone());
        async move {
            let patch = format!(r#"{{"metadata":{{"labels":{{"tier":"{tier}"}}}}}}"#);
            registry
                .patch(&widgets, Some("default"), "sel", PatchKind::Merge, patch.as_bytes(), unadmitted())
                .await
                .unwrap();
        }
    };
    relabel("db").await;
    w.registry
        .patch(
            &w.widgets,
            Some("team-a"),
            "elsewhere",
            PatchKind::Merge,
            br#"{"metadata":{"labels":{"tier":"web"}}}"#,
            unadmitted(),
        )
        .await
        .unwrap();
    relabel("web").await;
    assert_eq!(next(&mut stream).await, ("DELETED".into(), "sel".into()), "leaving the selector");
    assert_eq!(next(&mut stream).await, ("ADDED".into(), "sel".into()), "entering it again");
    let bad = WatchOptions { field_selector: Some("spec.bogus=1".into()), ..WatchOptions::default() };
    assert!(matches!(w.registry.watch(&w.widgets, &bad).await, Err(RegistryError::BadRequest(_))));
}

#[tokio::test]
async fn revisions_outside_the_cache_are_refused() {
    let w = world().await;
    let created = w.registry.create(&w.widgets, Some("default"), widget("x", 1), unadmitted()).await.unwrap();
    w.registry.watch(&w.widgets, &from(None)).await.unwrap();
    for size in 2..4200 {
        let patch = format!(r#"{{"spec":{{"size":{size}}}}}"#);
        w.registry
            .patch(&w.widgets, Some("default"), "x", PatchKind::Merge, patch.as_bytes(), unadmitted())
            .await
            .unwrap();
    }
    let current = w.store.revision().await.unwrap().to_string();
    w.registry.watch(&w.widgets, &from(Some(&current))).await.expect("the cache catches up");
    let old = meta(&created, "resourceVersion").as_str().unwrap().to_owned();
    match w.registry.watch(&w.widgets, &from(Some(&old))).await {
        Err(RegistryError::Expired { message, .. }) => {
            assert!(message.starts_with("too old resource version"), "{message}")
        }
        other => panic!("a revision older than the cache's window must expire, got {other:?}"),
    }
    let future = (w.store.revision().await.unwrap() + 100).to_string();
    assert!(matches!(
        w.registry.watch(&w.widgets, &from(Some(&future))).await,
        Err(RegistryError::TooLargeResourceVersion { .. })
    ));
}

#[tokio::test]
async fn a_slow_client_is_cut_off_and_resumes_without_gaps() {
    let w = world().await;
    w.registry.create(&w.widgets, Some("default"), widget("s", 1), unadmitted()).await.unwrap();
    let mut stream = w.registry.watch(&w.widgets, &from(None)).await.unwrap();
    assert_eq!(next(&mut stream).await.0, "ADDED");
    let total = 1500;
    for size in 2..2 + total {
        let patch = format!(r#"{{"spec":{{"size":{size}}}}}"#);
        w.registry
            .patch(&w.widgets, Some("default"), "s", PatchKind::Merge, patch.as_bytes(), unadmitted())
            .await
            .unwrap();
    }
    // Once the cache has seen every write, the unread client has overflowed.
    let current = w.store.revision().await.unwrap().to_string();
    w.registry.watch(&w.widgets, &from(Some(&current))).await.unwrap();
    let mut sizes = Vec::new();
    let mut cut_offs = 0;
    while sizes.len() < total as usize {
        match tokio::time::timeout(Duration::from_secs(10), stream.next()).await.expect("in time") {
            Ok(event) => sizes.push(event.object()["spec"]["size"].as_i64().unwrap()),
            Err(RegistryError::Expired { .. }) => {
                cut_offs += 1;
                let resume = stream.revision().to_string();
                stream = w.registry.watch(&w.widgets, &from(Some(&resume))).await.unwrap();
            }
            Err(other) => panic!("{other}"),
        }
    }
    assert_eq!(
        sizes,
        (2..2 + total).collect::<Vec<_>>(),
        "every change once, in order ({cut_offs} cut-offs)"
    );
    assert!(cut_offs > 0, "1500 unread events overflow a client's queue");
}

/// A store that counts the watches, range reads and point reads made of it; armed, it reports progress up
/// to its next change before sending that change, and holds the change back until released, as
/// etcd before 3.4.25 and 3.5.8 could do. Made lazy, its watchers report progress only when
/// their reader asks for it, as etcd's do between their periodic reports.
struct Counting {
    inner: Arc<MvccStore>,
    watches: AtomicUsize,
    ranges: AtomicUsize,
    gets: AtomicUsize,
    race: Arc<Race>,
    lazy: Arc<AtomicBool>,
    /// Whether its watchers say their progress reports may overtake changes, as etcd's
    /// before 3.4.31 and 3.5.13 may.
    unordered: AtomicBool,
    /// Whether the version before each change that its watchers send is replaced by bytes
    /// that are no object, so that a reader that decodes it fails.
    garbled_prev: Arc<AtomicBool>,
    /// Whether each change its watchers send carries bytes that are no object, so that a
    /// reader that decodes it fails.
    garbled_values: Arc<AtomicBool>,
    /// Whether a point read answers bytes that are no object (at the right revision), so that
    /// a writer that decodes what it read fails.
    garbled_gets: AtomicBool,
}

/// A registry over `store`, with the namespace `default`.
async fn registry_over(store: &Arc<Counting>) -> Registry {
    let registry = Registry::new(store.clone(), Arc::new(FixedClock), "/registry/");
    let namespace = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}});
    registry.create(&super::namespaces(), None, namespace, unadmitted()).await.unwrap();
    registry
}

#[derive(Default)]
struct Race {
    armed: AtomicBool,
    release: tokio::sync::Notify,
}

impl Counting {
    fn new() -> Counting {
        Counting {
            inner: Arc::new(MvccStore::in_memory(Options::default()).unwrap()),
            watches: AtomicUsize::new(0),
            ranges: AtomicUsize::new(0),
            gets: AtomicUsize::new(0),
            race: Arc::default(),
            lazy: Arc::default(),
            unordered: AtomicBool::new(false),
            garbled_prev: Arc::default(),
            garbled_values: Arc::default(),
            garbled_gets: AtomicBool::new(false),
        }
    }
}

#[async_trait]
impl Store for Counting {
    async fn get(&self, key: &str) -> Result<Option<KeyValue>, StoreError> {
        self.gets.fetch_add(1, Ordering::SeqCst);
        let mut found = self.inner.get(key).await?;
        if self.garbled_gets.load(Ordering::SeqCst)
            && let Some(kv) = &mut found
        {
            kv.value = b"not an object".to_vec();
        }
        Ok(found)
    }
    async fn range(&self, request: &RangeRequest) -> Result<RangeResult, StoreError> {
        self.ranges.fetch_add(1, Ordering::SeqCst);
        self.inner.range(request).await
    }
    async fn txn(&self, txn: Txn) -> Result<TxnResult, StoreError> {
        self.inner.txn(txn).await
    }
    async fn watch(&self, prefix: &str, after: Revision) -> Result<Watcher, StoreError> {
        self.watches.fetch_add(1, Ordering::SeqCst);
        let mut inner = self.inner.watch(prefix, after).await?;
        let (sender, mut watcher) = kayra_store::watch::watch_channel(64, after, Vec::new());
        if self.unordered.load(Ordering::SeqCst) {
            watcher = watcher.with_unordered_progress();
        }
        let race = self.race.clone();
        let lazy = self.lazy.clone();
        let garbled_prev = self.garbled_prev.clone();
        let garbled_values = self.garbled_values.clone();
        let store = self.inner.clone();
        tokio::spawn(async move {
            // Lazy, progress is withheld until a reader asks, then reported once it reaches
            // the revision the store had when asked, as etcd answers a progress request.
            let (mut withheld, mut owed) = (0, None);
            loop {
                let change = tokio::select! {
                    change = inner.next_change() => match change {
                        Some(Ok(Change::Progress(revision))) if lazy.load(Ordering::SeqCst) => {
                            match owed {
                                Some(wanted) if revision >= wanted => {
                                    owed = None;
                                    Ok(Change::Progress(revision))
                                }
                                _ => {
                                    withheld = revision;
                                    continue;
                                }
                            }
                        }
                        Some(change) => change,
                        None => return,
                    },
                    () = sender.progress_requested() => {
                        let Ok(wanted) = store.revision().await else { return };
                        if withheld < wanted {
                            owed = Some(wanted);
                            continue;
                        }
                        Ok(Change::Progress(withheld))
                    }
                };
                let batch = match change {
                    Ok(Change::Event(mut event)) => {
                        let revision = event.revision();
                        if garbled_prev.load(Ordering::SeqCst)
                            && let Some(prev) = &mut event.prev
                        {
                            prev.value = b"not an object".to_vec();
                        }
                        if garbled_values.load(Ordering::SeqCst) {
                            event.kv.value = b"not an object".to_vec();
                        }
                        if race.armed.swap(false, Ordering::SeqCst) {
                            sender.offer(Arc::new(WatchBatch { revision, events: Vec::new() }));
                            race.release.notified().await;
                        }
                        WatchBatch { revision, events: vec![event] }
                    }
                    Ok(Change::Progress(revision)) => WatchBatch { revision, events: Vec::new() },
                    Err(error) => return sender.fail(error),
                };
                if sender.offer(Arc::new(batch)) == kayra_store::watch::Delivery::Gone {
                    return;
                }
            }
        });
        Ok(watcher)
    }
    async fn compact(&self, revision: Revision) -> Result<(), StoreError> {
        self.inner.compact(revision).await
    }
    async fn revision(&self) -> Result<Revision, StoreError> {
        self.inner.revision().await
    }
    async fn grant_lease(&self, ttl: Duration) -> Result<Lease, StoreError> {
        self.inner.grant_lease(ttl).await
    }
    async fn keep_alive(&self, lease: LeaseId) -> Result<Duration, StoreError> {
        self.inner.keep_alive(lease).await
    }
    async fn revoke_lease(&self, lease: LeaseId) -> Result<(), StoreError> {
        self.inner.revoke_lease(lease).await
    }
}

#[tokio::test]
async fn many_clients_share_one_store_watch() {
    let store = Arc::new(Counting::new());
    let registry = registry_over(&store).await;
    let widgets = widgets();
    let mut streams = Vec::new();
    for _ in 0..100 {
        streams.push(registry.watch(&widgets, &from(None)).await.unwrap());
    }
    registry.create(&widgets, Some("default"), widget("fan", 1), unadmitted()).await.unwrap();
    for stream in &mut streams {
        assert_eq!(next(stream).await, ("ADDED".into(), "fan".into()));
    }
    assert_eq!(store.watches.load(Ordering::SeqCst), 1, "one store watch for a hundred clients");
}

/// A change is decoded once: the version before it, which tells a selector's departures, is the
/// one the cache already holds, not the store's copy decoded again.
#[tokio::test]
async fn the_version_before_a_change_is_the_one_the_cache_holds() {
    let store = Arc::new(Counting::new());
    store.garbled_prev.store(true, Ordering::SeqCst);
    let registry = registry_over(&store).await;
    let widgets = widgets();
    let mut body = widget("sel", 1);
    body["metadata"]["labels"] = json!({"tier": "web"});
    registry.create(&widgets, Some("default"), body, unadmitted()).await.unwrap();
    let options = WatchOptions { label_selector: Some("tier=web".into()), ..WatchOptions::default() };
    let mut stream = registry.watch(&widgets, &options).await.unwrap();
    assert_eq!(next(&mut stream).await, ("ADDED".into(), "sel".into()));
    for tier in ["db", "web"] {
        let patch = format!(r#"{{"metadata":{{"labels":{{"tier":"{tier}"}}}}}}"#);
        registry
            .patch(&widgets, Some("default"), "sel", PatchKind::Merge, patch.as_bytes(), unadmitted())
            .await
            .unwrap();
    }
    assert_eq!(next(&mut stream).await, ("DELETED".into(), "sel".into()), "leaving the selector");
    assert_eq!(next(&mut stream).await, ("ADDED".into(), "sel".into()), "entering it again");
    registry.delete(&widgets, Some("default"), "sel", &unadmitted_delete()).await.unwrap();
    let (kind, name) = next(&mut stream).await;
    assert_eq!((kind.as_str(), name.as_str()), ("DELETED", "sel"), "deleted");
    assert_eq!(store.watches.load(Ordering::SeqCst), 1, "the cache never started over");
}

/// A write reads the stored version it replaces; when the watch cache holds that very version,
/// the write takes the cache's decoded object instead of decoding the stored bytes again.
#[tokio::test]
async fn a_write_takes_the_version_it_replaces_from_the_cache_when_the_cache_holds_it() {
    let store = Arc::new(Counting::new());
    let registry = registry_over(&store).await;
    let widgets = widgets();
    registry.create(&widgets, Some("default"), widget("cached", 1), unadmitted()).await.unwrap();
    let mut stream = registry.watch(&widgets, &WatchOptions::default()).await.unwrap();
    assert_eq!(next(&mut stream).await, ("ADDED".into(), "cached".into()));
    store.garbled_gets.store(true, Ordering::SeqCst);
    for size in [2, 3] {
        let patch = format!(r#"{{"spec":{{"size":{size}}}}}"#);
        let patched = registry
            .patch(&widgets, Some("default"), "cached", PatchKind::Merge, patch.as_bytes(), unadmitted())
            .await
            .expect("the version replaced came from the cache, not from the garbled read");
        assert_eq!(patched["spec"]["size"], size);
        assert_eq!(next(&mut stream).await, ("MODIFIED".into(), "cached".into()));
    }
    registry.delete(&widgets, Some("default"), "cached", &unadmitted_delete()).await.unwrap();
    assert_eq!(next(&mut stream).await, ("DELETED".into(), "cached".into()));
    // A Kind no cache follows is decoded from what the store answered.
    let refused = registry
        .patch(
            &super::namespaces(),
            None,
            "default",
            PatchKind::Merge,
            br#"{"metadata":{"labels":{"a":"b"}}}"#,
            unadmitted(),
        )
        .await
        .expect_err("the garbled read is decoded");
    assert!(matches!(refused, RegistryError::Corrupt { .. }), "{refused:?}");
}

/// A create reads its namespace from the store, and takes it decoded from the namespaces' watch
/// cache when the cache holds the version read; a namespace being deleted refuses it just the same.
#[tokio::test]
async fn a_create_takes_its_namespace_from_the_cache_when_the_cache_holds_the_version_read() {
    let store = Arc::new(Counting::new());
    let registry = registry_over(&store).await;
    let (widgets, namespaces) = (widgets(), super::namespaces());
    store.garbled_gets.store(true, Ordering::SeqCst);
    let refused = registry.create(&widgets, Some("default"), widget("early", 1), unadmitted()).await;
    assert!(matches!(refused, Err(RegistryError::Corrupt { .. })), "no cache yet, so decoded: {refused:?}");
    store.garbled_gets.store(false, Ordering::SeqCst);
    let mut watching = registry.watch(&namespaces, &WatchOptions::default()).await.unwrap();
    assert_eq!(next(&mut watching).await, ("ADDED".into(), "default".into()));
    let closing = json!({"apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": "closing", "finalizers": ["kubernetes"]}});
    registry.create(&namespaces, None, closing, unadmitted()).await.unwrap();
    assert_eq!(next(&mut watching).await, ("ADDED".into(), "closing".into()));
    store.garbled_gets.store(true, Ordering::SeqCst);
    for namespace in ["default", "closing"] {
        registry
            .create(&widgets, Some(namespace), widget("cached", 1), unadmitted())
            .await
            .expect("the namespace came from the cache, not from the garbled read");
    }
    store.garbled_gets.store(false, Ordering::SeqCst);
    registry.delete(&namespaces, None, "closing", &unadmitted_delete()).await.unwrap();
    assert_eq!(next(&mut watching).await, ("MODIFIED".into(), "closing".into()));
    store.garbled_gets.store(true, Ordering::SeqCst);
    let refused = registry.create(&widgets, Some("closing"), widget("late", 1), unadmitted()).await;
    assert!(
        matches!(refused, Err(RegistryError::Forbidden(ref m)) if m.contains("being terminated")),
        "{refused:?}"
    );
}

#[tokio::test]
async fn a_change_this_registry_wrote_is_applied_as_written_not_decoded_again() {
    let store = Arc::new(Counting::new());
    let registry = registry_over(&store).await;
    let widgets = widgets();
    let mut stream = registry.watch(&widgets, &WatchOptions::default()).await.unwrap();
    store.garbled_values.store(true, Ordering::SeqCst);
    registry.create(&widgets, Some("default"), widget("written", 1), unadmitted()).await.unwrap();
    assert_eq!(next(&mut stream).await, ("ADDED".into(), "written".into()));
    let patch = br#"{"metadata":{"labels":{"tier":"web"}},"spec":{"size":2}}"#;
    registry
        .patch(&widgets, Some("default"), "written", PatchKind::Merge, patch, unadmitted())
        .await
        .unwrap();
    assert_eq!(next(&mut stream).await, ("MODIFIED".into(), "written".into()));
    let together =
        vec![(Some("default".to_owned()), widget("one", 1)), (Some("default".to_owned()), widget("two", 2))];
    for created in registry.create_all(&widgets, together, unadmitted()).await {
        created.unwrap();
    }
    assert_eq!(next(&mut stream).await, ("ADDED".into(), "one".into()));
    assert_eq!(next(&mut stream).await, ("ADDED".into(), "two".into()));
    // What the cache holds is what decoding the stored bytes would give.
    let listed = registry.list(&widgets, Some("default"), &ListOptions::default()).await.unwrap();
    assert_eq!(listed.items.len(), 3);
    for item in &listed.items {
        let key =
            format!("/registry/fleet.example.com/widgets/default/{}", meta(item, "name").as_str().unwrap());
        let stored = store.inner.get(&key).await.unwrap().expect("stored");
        let mut decoded: serde_json::Map<String, serde_json::Value> =
            serde_json::from_slice(&stored.value).unwrap();
        decoded["metadata"]["resourceVersion"] = json!(stored.mod_revision.to_string());
        assert_eq!(*item, decoded);
    }
    assert_eq!(store.watches.load(Ordering::SeqCst), 1, "the cache never decoded a garbled change");
    // A change written past this registry is decoded, and here the bytes are garbled: the cache
    // starts over.
    let outside = serde_json::to_vec(&widget("outside", 1)).unwrap();
    store.inner.put("/registry/fleet.example.com/widgets/default/outside", outside).await.unwrap();
    let restarted = async {
        while store.watches.load(Ordering::SeqCst) < 2 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(10), restarted).await.expect("the garbled change was decoded");
}

#[tokio::test]
async fn a_change_after_progress_reported_past_it_restarts_the_cache_rather_than_repeat_it() {
    let store = Arc::new(Counting::new());
    let registry = registry_over(&store).await;
    let widgets = widgets();
    let mut before = registry.watch(&widgets, &from(None)).await.unwrap();
    store.race.armed.store(true, Ordering::SeqCst);
    let created = registry.create(&widgets, Some("default"), widget("late", 1), unadmitted()).await.unwrap();
    let rv = meta(&created, "resourceVersion").as_str().unwrap().to_owned();
    // A client that saw the create elsewhere resumes here from its revision, which the cache
    // was told it had reached before the change itself arrived.
    let mut resumed =
        tokio::time::timeout(Duration::from_secs(10), registry.watch(&widgets, &from(Some(&rv))))
            .await
            .expect("the progress report lets the watch start")
            .unwrap();
    store.race.release.notify_one();
    let seen =
        tokio::time::timeout(Duration::from_secs(10), resumed.next()).await.expect("an answer in time");
    assert!(
        seen.is_err(),
        "the resumed watch is cut off to start over, not handed the change again: {seen:?}"
    );
    // The watch from before the create sees it once (or is cut off to resume), and the cache
    // starts over with it.
    let answer =
        tokio::time::timeout(Duration::from_secs(10), before.next()).await.expect("an answer in time");
    if let Ok(event) = answer {
        assert_eq!(meta(event.object(), "name"), "late");
    }
    let list = registry.list_json(&widgets, Some("default"), &ListOptions::default()).await.unwrap();
    assert_eq!(list.items.len(), 1, "the relisted cache holds the change");
    assert!(store.watches.load(Ordering::SeqCst) >= 2, "the cache watched the store again");
}

/// A store whose progress reports may overtake its changes reports a revision before the
/// change written at it: reads of the latest state, and the revision a watch says it reached,
/// go by the changes the cache applied, never by such a report.
#[tokio::test]
async fn a_progress_report_that_may_overtake_changes_answers_no_read() {
    let store = Arc::new(Counting::new());
    store.unordered.store(true, Ordering::SeqCst);
    let registry = registry_over(&store).await;
    let widgets = widgets();
    registry.create(&widgets, Some("default"), widget("early", 1), unadmitted()).await.unwrap();
    let mut watching = registry.watch(&widgets, &from(None)).await.unwrap();
    assert_eq!(next(&mut watching).await, ("ADDED".into(), "early".into()));
    let before = watching.revision();
    store.race.armed.store(true, Ordering::SeqCst);
    let created = registry.create(&widgets, Some("default"), widget("late", 1), unadmitted()).await.unwrap();
    let rv: u64 = meta(&created, "resourceVersion").as_str().unwrap().parse().unwrap();
    // The report of `rv` is in, the change at `rv` held back.
    let reported = tokio::time::timeout(Duration::from_secs(10), async {
        while registry.watch(&widgets, &from(Some(&rv.to_string()))).await.is_err() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    });
    reported.await.expect("the report lets a watch from it start");

    let got = registry.get_json(&widgets, Some("default"), "late").await;
    assert!(got.is_ok(), "a read of the latest state finds the change the report ran ahead of: {got:?}");
    let list = registry.list_json(&widgets, Some("default"), &ListOptions::default()).await.unwrap();
    assert_eq!(list.items.len(), 2, "a consistent list holds the change the report ran ahead of");
    assert!(
        watching.revision() < rv,
        "a watch says it reached only what it was sent: {} (from {before}), the change is at {rv}",
        watching.revision()
    );
    let mut from_now = registry.watch(&widgets, &from(None)).await.unwrap();
    assert_eq!(next(&mut from_now).await, ("ADDED".into(), "early".into()));
    assert!(
        from_now.revision() < rv,
        "a watch from now starts at what the cache applied, not at the report: {}",
        from_now.revision()
    );
    store.race.release.notify_one();
}

/// A consistent list of a resource that is quiet while others change is answered from its
/// cache: the cache learns from a progress report it asks for that nothing of it changed,
/// rather than waiting for the store's next periodic report or reading the store.
#[tokio::test]
async fn a_consistent_list_of_a_quiet_resource_is_answered_from_the_cache_once_progress_is_asked() {
    let store = Arc::new(Counting::new());
    store.lazy.store(true, Ordering::SeqCst);
    let registry = registry_over(&store).await;
    let widgets = widgets();
    registry.create(&widgets, Some("default"), widget("kept", 1), unadmitted()).await.unwrap();
    let mut stream = registry.watch(&widgets, &from(None)).await.unwrap();
    assert_eq!(next(&mut stream).await, ("ADDED".into(), "kept".into()), "the cache has listed");
    // Another resource moves the store's revision on; the widgets' watch hears nothing of it.
    for name in ["a", "b", "c"] {
        let namespace = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}});
        registry.create(&super::namespaces(), None, namespace, unadmitted()).await.unwrap();
    }
    let read = store.ranges.load(Ordering::SeqCst);
    let list = tokio::time::timeout(
        Duration::from_secs(10),
        registry.list_json(&widgets, Some("default"), &ListOptions::default()),
    )
    .await
    .expect("answered in time")
    .unwrap();
    assert_eq!(list.items.len(), 1);
    assert_eq!(list.resource_version, store.revision().await.unwrap().to_string(), "as recent as the store");
    assert_eq!(store.ranges.load(Ordering::SeqCst), read, "answered from the cache, not the store");
}

/// A read of one object's latest state is its cache entry's JSON: no store read, the same
/// bytes a fresh encoding of the stored object gives, and not found once it is deleted.
#[tokio::test]
async fn a_read_of_the_latest_state_is_answered_from_the_cache() {
    let store = Arc::new(Counting::new());
    let registry = registry_over(&store).await;
    let widgets = widgets();
    registry.create(&widgets, Some("default"), widget("read", 1), unadmitted()).await.unwrap();
    let current = store.revision().await.unwrap().to_string();
    let _primed = registry.watch(&widgets, &from(Some(&current))).await.unwrap();
    let fresh = serde_json::to_vec(&registry.get(&widgets, Some("default"), "read").await.unwrap()).unwrap();
    let read = store.gets.load(Ordering::SeqCst);
    for _ in 0..3 {
        let json = registry.get_json(&widgets, Some("default"), "read").await.unwrap();
        assert_eq!(json.as_ref(), fresh.as_slice());
    }
    assert_eq!(store.gets.load(Ordering::SeqCst), read, "answered from the cache, not the store");
    registry.delete(&widgets, Some("default"), "read", &unadmitted_delete()).await.unwrap();
    let gone = registry.get_json(&widgets, Some("default"), "read").await;
    assert!(matches!(gone, Err(RegistryError::NotFound { .. })), "{gone:?}");
}

#[tokio::test]
async fn a_watch_on_an_empty_store_sees_the_first_write() {
    let store = Arc::new(MvccStore::in_memory(Options::default()).unwrap());
    let registry = Registry::new(store, Arc::new(FixedClock), "/registry/");
    let namespaces = super::namespaces();
    let mut stream = registry.watch(&namespaces, &from(None)).await.unwrap();
    let namespace = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "first"}});
    registry.create(&namespaces, None, namespace, unadmitted()).await.unwrap();
    assert_eq!(next(&mut stream).await, ("ADDED".into(), "first".into()));
}

#[tokio::test]
async fn a_watch_from_a_list_starts_although_other_resources_moved_the_revision_on() {
    let w = world().await;
    w.registry.create(&w.widgets, Some("default"), widget("quiet", 1), unadmitted()).await.unwrap();
    w.registry.watch(&w.widgets, &from(None)).await.unwrap();
    let namespace = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "elsewhere"}});
    w.registry.create(&super::namespaces(), None, namespace, unadmitted()).await.unwrap();
    let list = w.registry.list(&w.widgets, Some("default"), &ListOptions::default()).await.unwrap();
    let started = std::time::Instant::now();
    let mut stream = w
        .registry
        .watch(&w.widgets, &from(Some(&list.resource_version)))
        .await
        .expect("the cache knows it is up to date");
    assert!(started.elapsed() < Duration::from_secs(2), "no wait for a change that will not come");
    w.registry.create(&w.widgets, Some("default"), widget("later", 1), unadmitted()).await.unwrap();
    assert_eq!(next(&mut stream).await, ("ADDED".into(), "later".into()));
}

/// A registry whose watch caches hold `bytes` of changes, with a widget padded to `pad` bytes.
async fn padded_world(bytes: usize) -> (Registry, Arc<MvccStore>, kayra_registry::Resource) {
    let store = Arc::new(MvccStore::in_memory(Options::default()).unwrap());
    let registry =
        Registry::new(store.clone(), Arc::new(FixedClock), "/registry/").with_watch_window_bytes(bytes);
    let namespace = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}});
    registry.create(&super::namespaces(), None, namespace, unadmitted()).await.unwrap();
    registry.prime(&widgets()).await.unwrap();
    (registry, store, widgets())
}

/// Rewrites the padded widget `name`; answers the revision of the write.
async fn pad(registry: &Registry, widgets: &kayra_registry::Resource, name: &str, n: usize) -> String {
    let patch = json!({"spec": {"size": n, "pad": "p".repeat(10 * 1024)}}).to_string();
    let patched = registry
        .patch(widgets, Some("default"), name, PatchKind::Merge, patch.as_bytes(), unadmitted())
        .await
        .unwrap();
    meta(&patched, "resourceVersion").as_str().unwrap().to_owned()
}

#[tokio::test]
async fn the_window_keeps_recent_changes_up_to_its_bytes() {
    let (registry, _store, widgets) = padded_world(64 * 1024).await;
    registry.create(&widgets, Some("default"), widget("big", 1), unadmitted()).await.unwrap();
    let mut revisions = Vec::new();
    for n in 2..=21 {
        revisions.push(pad(&registry, &widgets, "big", n).await);
    }
    // Each change weighs about 20 KiB (the object before and after): 64 KiB hold the last few.
    let old = registry.watch(&widgets, &from(Some(&revisions[2]))).await;
    assert!(matches!(old, Err(RegistryError::Expired { .. })), "changes past the bytes are gone: {old:?}");
    let mut recent =
        registry.watch(&widgets, &from(Some(&revisions[17]))).await.expect("recent ones are kept");
    for n in 20..=21 {
        let event = tokio::time::timeout(Duration::from_secs(10), recent.next()).await.unwrap().unwrap();
        assert_eq!(event.object()["spec"]["size"], n);
    }
}

#[tokio::test]
async fn a_cache_reports_what_its_window_holds_and_the_revisions_it_spans() {
    let (registry, _store, widgets) = padded_world(64 * 1024).await;
    registry.create(&widgets, Some("default"), widget("big", 1), unadmitted()).await.unwrap();
    let mut revisions = Vec::new();
    for n in 2..=21 {
        revisions.push(pad(&registry, &widgets, "big", n).await);
    }
    // Once a watcher has the last change, the cache has applied it.
    let mut recent = registry.watch(&widgets, &from(Some(&revisions[18]))).await.unwrap();
    tokio::time::timeout(Duration::from_secs(10), recent.next()).await.unwrap().unwrap();
    let statuses = registry.watch_caches();
    let status = statuses
        .iter()
        .find(|status| (status.group.as_str(), status.resource.as_str()) == ("fleet.example.com", "widgets"))
        .unwrap_or_else(|| panic!("no widgets cache in {statuses:?}"));
    let last: u64 = revisions[19].parse().unwrap();
    assert_eq!((status.revision, status.objects, status.received), (last, 1, 21), "{status:?}");
    assert_eq!(status.capacity, 4096, "{status:?}");
    // Each change weighs about 20 KiB: the window holds the last few, and exactly what it says.
    assert!((1..21).contains(&status.events), "{status:?}");
    assert_eq!(status.oldest_revision, last - status.events as u64, "{status:?}");
    assert!(status.window_bytes > 0 && status.window_bytes <= 64 * 1024, "{status:?}");
    let oldest = status.oldest_revision.to_string();
    assert!(registry.watch(&widgets, &from(Some(&oldest))).await.is_ok(), "the oldest is served");
    let older = (status.oldest_revision - 1).to_string();
    let expired = registry.watch(&widgets, &from(Some(&older))).await;
    assert!(matches!(expired, Err(RegistryError::Expired { .. })), "older is not: {expired:?}");
}

#[tokio::test]
async fn a_client_is_cut_off_by_the_bytes_it_has_queued() {
    let (registry, _store, widgets) = padded_world(64 * 1024).await;
    registry.create(&widgets, Some("default"), widget("big", 1), unadmitted()).await.unwrap();
    let mut stream = registry.watch(&widgets, &from(None)).await.unwrap();
    let mut reader = registry.watch(&widgets, &from(None)).await.unwrap();
    let mut last = String::new();
    let added = tokio::time::timeout(Duration::from_secs(10), reader.next()).await.unwrap().unwrap();
    assert_eq!(added.kind(), "ADDED");
    for n in 2..=21 {
        last = pad(&registry, &widgets, "big", n).await;
        // A client that reads as events come is never cut off.
        let event = tokio::time::timeout(Duration::from_secs(10), reader.next()).await.unwrap().unwrap();
        assert_eq!(event.object()["spec"]["size"], n);
    }
    registry.watch(&widgets, &from(Some(&last))).await.unwrap();
    // 20 events of about 10 KiB are far fewer than a queue's count but more than its bytes.
    let mut sizes = Vec::new();
    let error = loop {
        match tokio::time::timeout(Duration::from_secs(10), stream.next()).await.expect("in time") {
            Ok(event) => sizes.push(event.object()["spec"]["size"].as_i64().unwrap()),
            Err(error) => break error,
        }
    };
    assert!(matches!(error, RegistryError::Expired { .. }), "{error}");
    assert!(sizes.len() < 21, "cut off before the end: {sizes:?}");
    assert_eq!(sizes, (1..=sizes.len() as i64).collect::<Vec<_>>(), "what it got, it got in order");
}

#[tokio::test]
async fn every_watcher_gets_the_one_encoding_of_an_object_version() {
    let w = world().await;
    let mut first = w.registry.watch(&w.widgets, &from(None)).await.unwrap();
    let mut second = w.registry.watch(&w.widgets, &from(None)).await.unwrap();
    w.registry.create(&w.widgets, Some("default"), widget("shared", 7), unadmitted()).await.unwrap();
    let (event, one) = first.next_json().await.unwrap();
    let (_, other) = second.next_json().await.unwrap();
    assert_eq!(one, serde_json::to_vec(event.object()).unwrap(), "the bytes are the object's JSON");
    assert_eq!(one.as_ptr(), other.as_ptr(), "encoded once, shared by both watchers");
    // A watch from now starts with the same bytes for what already exists.
    let mut third = w.registry.watch(&w.widgets, &from(None)).await.unwrap();
    let (added, again) = third.next_json().await.unwrap();
    assert_eq!((added.kind(), again.as_ptr()), ("ADDED", one.as_ptr()));
    w.registry.delete(&w.widgets, Some("default"), "shared", &unadmitted_delete()).await.unwrap();
    let (deleted, gone) = first.next_json().await.unwrap();
    let (_, gone_too) = second.next_json().await.unwrap();
    assert_eq!(deleted.kind(), "DELETED");
    assert_eq!(gone, serde_json::to_vec(deleted.object()).unwrap());
    assert_eq!(gone.as_ptr(), gone_too.as_ptr(), "the last state of a deleted object is one copy too");
}

#[tokio::test]
async fn a_client_drains_what_is_queued_without_waiting_and_sees_the_cache_move_with_other_writes() {
    let w = world().await;
    let mut stream = w.registry.watch(&w.widgets, &from(None)).await.unwrap();
    assert!(stream.try_next().is_none(), "nothing is queued");
    let mut progress = stream.cache_progress().expect("the cache lives");
    for name in ["a", "b"] {
        w.registry.create(&w.widgets, Some("default"), widget(name, 1), unadmitted()).await.unwrap();
    }
    assert_eq!(next(&mut stream).await, ("ADDED".into(), "a".into()));
    let queued = stream.try_next().expect("b is queued").expect("the watch goes on");
    assert_eq!(meta(queued.object(), "name"), "b");
    assert!(stream.try_next().is_none());

    // A write of another resource moves the cache on, and with it the stream's revision.
    let before = stream.revision();
    let namespace = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "elsewhere"}});
    w.registry.create(&super::namespaces(), None, namespace, unadmitted()).await.unwrap();
    tokio::time::timeout(Duration::from_secs(10), progress.wait_for(|reached| *reached > before))
        .await
        .expect("the cache moves in time")
        .expect("the cache lives");
    assert!(stream.revision() > before);
    assert!(stream.try_next().is_none(), "no event for another resource's write");
}
