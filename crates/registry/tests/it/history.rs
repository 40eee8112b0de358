//! History, rollback and doors: the last spec states kept beside each object, written in the
//! object's own transaction and deleted with it; a rollback that restores one as an update; a
//! field only its door writes.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use kayra_api::scheme::{Door, FROZEN};
use kayra_registry::{
    Object, Part, PatchKind, Registry, RegistryError, Resource, Strategy, WriteOptions, meta_str,
};
use kayra_store::mvcc::{MvccStore, Options};
use kayra_store::{
    KeyValue, Lease, LeaseId, RangeRequest, RangeResult, Revision, Store, StoreError, Txn, TxnResult, Watcher,
};
use serde_json::{Value, json};

use super::{FixedClock, WidgetRules, meta, namespaces, unadmitted, unadmitted_delete, widgets};

/// Widgets whose history is kept and whose `spec.frozen` only the `freeze` and `thaw` doors
/// write; a rollback keeps `spec.owner` as it is now.
struct Kept;

impl Strategy for Kept {
    fn default(&self, object: &mut Object) {
        WidgetRules.default(object);
    }

    fn validate(&self, object: &Object, old: Option<&Object>) -> Vec<kayra_api::validation::FieldError> {
        WidgetRules.validate(object, old)
    }

    fn keeps_history(&self) -> bool {
        true
    }

    fn doors(&self) -> &[Door] {
        &[FROZEN]
    }

    fn restored(&self, current: &Object, restored: &mut Object) {
        let owner = current.get("spec").and_then(|spec| spec.get("owner")).cloned();
        if let (Some(owner), Some(spec)) = (owner, restored.get_mut("spec").and_then(Value::as_object_mut)) {
            spec.insert("owner".into(), owner);
        }
    }
}

fn kept() -> Resource {
    Resource { strategy: Arc::new(Kept), ..widgets() }
}

/// A store that counts what is asked of it.
struct Counting {
    inner: MvccStore,
    gets: AtomicUsize,
    ranges: AtomicUsize,
    txns: AtomicUsize,
    ops: AtomicUsize,
}

impl Counting {
    /// (gets, ranges, transactions, operations) so far.
    fn counts(&self) -> [usize; 4] {
        [&self.gets, &self.ranges, &self.txns, &self.ops].map(|count| count.load(Ordering::SeqCst))
    }
}

#[async_trait]
impl Store for Counting {
    async fn get(&self, key: &str) -> Result<Option<KeyValue>, StoreError> {
        self.gets.fetch_add(1, Ordering::SeqCst);
        self.inner.get(key).await
    }
    async fn range(&self, request: &RangeRequest) -> Result<RangeResult, StoreError> {
        self.ranges.fetch_add(1, Ordering::SeqCst);
        self.inner.range(request).await
    }
    async fn txn(&self, txn: Txn) -> Result<TxnResult, StoreError> {
        self.txns.fetch_add(1, Ordering::SeqCst);
        self.ops.fetch_add(txn.ops.len(), Ordering::SeqCst);
        self.inner.txn(txn).await
    }
    async fn watch(&self, prefix: &str, after: Revision) -> Result<Watcher, StoreError> {
        self.inner.watch(prefix, after).await
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

struct World {
    registry: Registry,
    store: Arc<Counting>,
}

async fn world(limit: usize) -> World {
    let store = Arc::new(Counting {
        inner: MvccStore::in_memory(Options::default()).unwrap(),
        gets: AtomicUsize::new(0),
        ranges: AtomicUsize::new(0),
        txns: AtomicUsize::new(0),
        ops: AtomicUsize::new(0),
    });
    let registry = Registry::new(store.clone(), Arc::new(FixedClock), "/registry/").with_history_limit(limit);
    let body = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}});
    registry.create(&namespaces(), None, body, unadmitted()).await.unwrap();
    World { registry, store }
}

const NS: Option<&str> = Some("default");

fn by(user: &str) -> WriteOptions {
    WriteOptions { author: Some(user.to_owned()), ..unadmitted() }
}

fn widget(size: i64, cause: Option<&str>) -> Value {
    let mut widget = json!({"apiVersion": "fleet.example.com/v1", "kind": "Widget", "metadata": {"name": "w"},
                            "spec": {"size": size}});
    if let Some(cause) = cause {
        widget["metadata"]["annotations"] = json!({"kubernetes.io/change-cause": cause});
    }
    widget
}

/// The keys under an object's history folder.
async fn history_keys(w: &World) -> Vec<String> {
    let found = w.store.inner.range(&RangeRequest::prefix("/registry/history/")).await.unwrap();
    found.kvs.into_iter().map(|kv| kv.key).collect()
}

fn sizes(history: &kayra_registry::History) -> Vec<i64> {
    history.entries.iter().map(|entry| entry.state["spec"]["size"].as_i64().unwrap()).collect()
}

#[tokio::test]
async fn the_last_spec_states_are_kept_each_at_its_writes_revision_and_bounded() {
    let w = world(3).await;
    let r = &w.registry;
    let created = r.create(&kept(), NS, widget(1, Some("first")), by("alice")).await.unwrap();
    let mut versions = vec![meta(&created, "resourceVersion").clone()];
    for size in 2..=4 {
        let written = r.update(&kept(), NS, "w", widget(size, None), by("bob")).await.unwrap();
        versions.push(meta(&written, "resourceVersion").clone());
    }
    // Neither a status write, nor metadata alone, nor a write that changes nothing is a state.
    let mut with_status = widget(4, None);
    with_status["status"] = json!({"phase": "Up"});
    let status = WriteOptions { part: Part::Status, ..by("node") };
    r.update(&kept(), NS, "w", with_status, status).await.unwrap();
    let mut labelled = widget(4, None);
    labelled["metadata"]["labels"] = json!({"team": "a"});
    r.update(&kept(), NS, "w", labelled.clone(), by("carol")).await.unwrap();
    r.update(&kept(), NS, "w", labelled, by("carol")).await.unwrap();

    let history = r.history(&kept(), NS, "w").await.unwrap();
    assert_eq!(sizes(&history), [2, 3, 4], "the last three states, oldest first");
    let generations: Vec<i64> = history.entries.iter().map(|entry| entry.generation).collect();
    assert_eq!(generations, [2, 3, 4]);
    for (entry, version) in history.entries.iter().zip(&versions[1..]) {
        assert_eq!(json!(entry.revision.to_string()), *version, "an entry's revision is its write's");
        assert_eq!(entry.user.as_deref(), Some("bob"));
        assert_eq!(entry.time, "2026-11-30T12:00:00Z");
        assert_eq!(entry.state["spec"]["color"], "blue", "the state as stored, defaults applied");
    }
    assert_eq!(history_keys(&w).await.len(), 3, "never more entries than the limit");
    assert_eq!(meta(&history.object, "generation"), 4);

    // The first state's change cause, while it was kept.
    let w = world(3).await;
    w.registry.create(&kept(), NS, widget(1, Some("first")), by("alice")).await.unwrap();
    let history = w.registry.history(&kept(), NS, "w").await.unwrap();
    assert_eq!(history.entries[0].change_cause.as_deref(), Some("first"));
    assert_eq!(history.entries[0].user.as_deref(), Some("alice"));
    // A Kind that keeps none has none to read.
    assert!(matches!(
        w.registry.history(&widgets(), NS, "w").await,
        Err(RegistryError::BadRequest(message)) if message.contains("keep no history")
    ));
}

#[tokio::test]
async fn recording_a_state_is_one_more_put_in_the_objects_own_transaction_and_no_read() {
    let w = world(10).await;
    let r = &w.registry;
    // The same writes of a Kind that keeps no history and of one that does.
    let mut costs = Vec::new();
    for resource in [widgets(), kept()] {
        let before = w.store.counts();
        let mut body = widget(1, None);
        body["metadata"]["name"] = json!(format!("w-{}", costs.len()));
        let name = body["metadata"]["name"].as_str().unwrap().to_owned();
        r.create(&resource, NS, body.clone(), unadmitted()).await.unwrap();
        let created = w.store.counts();
        body["spec"]["size"] = json!(2);
        r.update(&resource, NS, &name, body, unadmitted()).await.unwrap();
        let updated = w.store.counts();
        let patch = br#"{"spec": {"size": 3}}"#;
        r.patch(&resource, NS, &name, PatchKind::Merge, patch, unadmitted()).await.unwrap();
        let patched = w.store.counts();
        let cost =
            |from: [usize; 4], to: [usize; 4]| -> [usize; 4] { std::array::from_fn(|i| to[i] - from[i]) };
        costs.push([cost(before, created), cost(created, updated), cost(updated, patched)]);
    }
    for (plain, kept) in costs[0].iter().zip(&costs[1]) {
        let [gets, ranges, txns, ops] = *plain;
        assert_eq!(
            *kept,
            [gets, ranges, txns, ops + 1],
            "one more put, in the same transaction, nothing read"
        );
    }
}

#[tokio::test]
async fn an_objects_history_goes_with_it_in_one_transaction_even_after_the_limit_was_lowered() {
    let w = world(5).await;
    w.registry.create(&kept(), NS, widget(1, None), unadmitted()).await.unwrap();
    for size in 2..=5 {
        w.registry.update(&kept(), NS, "w", widget(size, None), unadmitted()).await.unwrap();
    }
    assert_eq!(history_keys(&w).await.len(), 5);
    // The same store served with a lower limit: the older slots stay until the delete.
    let lowered = Registry::new(w.store.clone(), Arc::new(FixedClock), "/registry/").with_history_limit(2);
    lowered.update(&kept(), NS, "w", widget(6, None), unadmitted()).await.unwrap();
    // Generation 6 takes slot 0 under the new limit, where generation 5 was: the listing shows
    // the newest two states left, and never more than the limit.
    assert_eq!(sizes(&lowered.history(&kept(), NS, "w").await.unwrap()), [4, 6]);
    assert_eq!(history_keys(&w).await.len(), 5);
    let before = w.store.inner.revision().await.unwrap();
    lowered.delete(&kept(), NS, "w", &unadmitted_delete()).await.unwrap();
    assert_eq!(
        w.store.inner.revision().await.unwrap(),
        before + 1,
        "the object and its history at one revision"
    );
    assert!(history_keys(&w).await.is_empty(), "{:?}", history_keys(&w).await);
    // A new object of the same name starts a history of its own.
    w.registry.create(&kept(), NS, widget(9, None), unadmitted()).await.unwrap();
    assert_eq!(sizes(&w.registry.history(&kept(), NS, "w").await.unwrap()), [9]);
}

#[tokio::test]
async fn a_rollback_restores_a_spec_as_an_update_keeping_status_and_what_only_a_door_writes() {
    let w = world(10).await;
    let r = &w.registry;
    let mut first = widget(1, Some("size one"));
    first["spec"]["owner"] = json!("a");
    r.create(&kept(), NS, first, by("alice")).await.unwrap();
    for (size, owner) in [(2, "a"), (3, "b")] {
        let mut body = widget(size, Some(&format!("size {size}")));
        body["spec"]["owner"] = json!(owner);
        r.update(&kept(), NS, "w", body, by("alice")).await.unwrap();
    }
    let mut status = widget(3, None);
    status["status"] = json!({"phase": "Up"});
    r.update(&kept(), NS, "w", status, WriteOptions { part: Part::Status, ..unadmitted() }).await.unwrap();
    let freeze = WriteOptions { part: Part::Door("freeze"), ..unadmitted() };
    let frozen = r
        .update_with(&kept(), NS, "w", None, freeze, |current| {
            let mut object = current.clone();
            object["spec"]["frozen"] = json!(true);
            Ok(object)
        })
        .await
        .unwrap();
    assert_eq!(meta(&frozen, "generation"), 4, "a door moves generation");
    let history = r.history(&kept(), NS, "w").await.unwrap();
    assert_eq!(sizes(&history), [1, 2, 3], "a door's write is no new state");

    let first_revision = history.entries[0].revision;
    let rolled = r.rollback(&kept(), NS, "w", Some(first_revision), by("bob")).await.unwrap();
    assert_eq!(rolled["spec"]["size"], 1, "the state restored");
    assert_eq!(rolled["spec"]["owner"], "b", "what the Kind keeps stays as it is now");
    assert_eq!(rolled["spec"]["frozen"], true, "what only a door writes stays as it is now");
    assert_eq!(rolled["status"], json!({"phase": "Up"}), "the status stays");
    assert_eq!(meta(&rolled, "generation"), 5);
    assert_ne!(meta(&rolled, "resourceVersion"), meta(&frozen, "resourceVersion"));
    assert_eq!(rolled["metadata"]["annotations"]["kubernetes.io/change-cause"], "size one");
    let history = r.history(&kept(), NS, "w").await.unwrap();
    assert_eq!(sizes(&history), [1, 2, 3, 1], "the rollback is a new entry");
    let last = history.entries.last().unwrap();
    assert_eq!((last.user.as_deref(), last.change_cause.as_deref()), (Some("bob"), Some("size one")));
    assert_eq!(json!(last.revision.to_string()), *meta(&rolled, "resourceVersion"));

    // No revision named: the most recent one whose spec differs from the current one.
    let previous = r.rollback(&kept(), NS, "w", None, unadmitted()).await.unwrap();
    assert_eq!(previous["spec"]["size"], 3);
    // A dry run writes nothing.
    let dry = WriteOptions { dry_run: true, ..unadmitted() };
    let planned = r.rollback(&kept(), NS, "w", Some(first_revision), dry).await.unwrap();
    assert_eq!(planned["spec"]["size"], 1);
    assert_eq!(r.get(&kept(), NS, "w").await.unwrap()["spec"]["size"], 3);
    // A revision the history does not list.
    match r.rollback(&kept(), NS, "w", Some(999_999), unadmitted()).await {
        Err(RegistryError::Invalid { causes, .. }) => assert_eq!(causes[0].field, "toRevision"),
        other => panic!("{other:?}"),
    }
    // A Kind that keeps none has none to roll back to.
    assert!(matches!(
        r.rollback(&widgets(), NS, "w", None, unadmitted()).await,
        Err(RegistryError::BadRequest(_))
    ));
    assert_eq!(meta_str(&r.get(&kept(), NS, "w").await.unwrap(), "name"), "w");
}

#[tokio::test]
async fn a_field_only_a_door_writes_is_refused_to_every_other_write() {
    let w = world(10).await;
    let r = &w.registry;
    let door_refusal = |result: Result<Object, RegistryError>, why: &str| match result {
        Err(RegistryError::Invalid { causes, .. }) => {
            assert_eq!(causes[0].field, "spec.frozen", "{why}");
            assert!(
                causes[0].message.contains("POST .../widgets/<name>/freeze"),
                "{why}: {}",
                causes[0].message
            );
        }
        other => panic!("{why}: {other:?}"),
    };
    let mut frozen = widget(1, None);
    frozen["spec"]["frozen"] = json!(true);
    door_refusal(r.create(&kept(), NS, frozen.clone(), unadmitted()).await, "created frozen");
    r.create(&kept(), NS, widget(1, None), unadmitted()).await.unwrap();
    door_refusal(r.update(&kept(), NS, "w", frozen.clone(), unadmitted()).await, "an update");
    let patch = br#"{"spec": {"frozen": true}}"#;
    door_refusal(r.patch(&kept(), NS, "w", PatchKind::Merge, patch, unadmitted()).await, "a patch");
    // `false` is the flag unset: saying so changes nothing.
    let mut unset = widget(1, None);
    unset["spec"]["frozen"] = json!(false);
    r.update(&kept(), NS, "w", unset, unadmitted()).await.unwrap();
    // Through the door, and only there; another door does not open it.
    let resource = kept();
    let through = |door: &'static str, value: bool| {
        let options = WriteOptions { part: Part::Door(door), ..unadmitted() };
        r.update_with(&resource, NS, "w", None, options, move |current| {
            let mut object = current.clone();
            object["spec"]["frozen"] = json!(value);
            Ok(object)
        })
    };
    door_refusal(through("scale", true).await, "not this field's door");
    assert_eq!(through("freeze", true).await.unwrap()["spec"]["frozen"], true);
    // A later ordinary write that leaves it alone is fine; one that drops it is a change.
    let mut kept_frozen = widget(7, None);
    kept_frozen["spec"]["frozen"] = json!(true);
    r.update(&kept(), NS, "w", kept_frozen, unadmitted()).await.unwrap();
    door_refusal(r.update(&kept(), NS, "w", widget(8, None), unadmitted()).await, "dropping it");
    let patch = br#"{"spec": {"size": 9}}"#;
    let patched = r.patch(&kept(), NS, "w", PatchKind::Merge, patch, unadmitted()).await.unwrap();
    assert_eq!((patched["spec"]["size"].clone(), patched["spec"]["frozen"].clone()), (json!(9), json!(true)));
    assert!(!through("thaw", false).await.unwrap()["spec"]["frozen"].as_bool().unwrap());
    // Deleting a Kind's history: none is left behind, and keys of other objects stay.
    let other = json!({"apiVersion": "fleet.example.com/v1", "kind": "Widget", "metadata": {"name": "w2"}, "spec": {"size": 1}});
    r.create(&kept(), NS, other, unadmitted()).await.unwrap();
    r.delete(&kept(), NS, "w", &unadmitted_delete()).await.unwrap();
    let left = history_keys(&w).await;
    assert!(
        left.iter().all(|key| key.starts_with("/registry/history/fleet.example.com/widgets/default/w2/")),
        "{left:?}"
    );
}
