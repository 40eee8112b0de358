//! The registry's Kubernetes semantics, over the in-memory store.

mod admission;
mod apply;
mod history;
mod list;
mod patch;
mod watch;
mod write;

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use kayra_api::clock::Clock;
use kayra_api::validation::FieldError;
use kayra_registry::{Admit, DeleteOptions, NoRules, Object, Registry, Resource, Strategy, WriteOptions};
use kayra_store::mvcc::{MvccStore, Options};
use serde_json::{Value, json};

/// A clock fixed at 2026-11-30T12:00:00Z.
struct FixedClock;

impl Clock for FixedClock {
    fn now(&self) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_796_040_000)
    }
}

/// Widgets need a positive `spec.size`.
struct WidgetRules;

impl Strategy for WidgetRules {
    fn default(&self, object: &mut Object) {
        if let Some(spec) = object.get_mut("spec").and_then(Value::as_object_mut) {
            spec.entry("color").or_insert_with(|| json!("blue"));
        }
    }

    fn validate(&self, object: &Object, _old: Option<&Object>) -> Vec<FieldError> {
        match object.get("spec").and_then(|spec| spec.get("size")).and_then(Value::as_i64) {
            Some(size) if size > 0 => Vec::new(),
            Some(size) => vec![FieldError::invalid("spec.size", size, "must be greater than zero")],
            None => vec![FieldError::required("spec.size")],
        }
    }
}

fn widgets() -> Resource {
    Resource {
        group: "fleet.example.com".into(),
        version: "v1".into(),
        kind: "Widget".into(),
        plural: "widgets".into(),
        namespaced: true,
        status_subresource: true,
        field_labels: vec!["status.phase", "spec.size"],
        strategy: Arc::new(WidgetRules),
    }
}

fn namespaces() -> Resource {
    Resource {
        group: String::new(),
        version: "v1".into(),
        kind: "Namespace".into(),
        plural: "namespaces".into(),
        namespaced: false,
        status_subresource: true,
        field_labels: vec!["status.phase"],
        strategy: Arc::new(NoRules),
    }
}

/// Namespaces as Kubernetes deletes them: `Terminating` while `spec.finalizers` is not empty.
struct NamespaceRules;

impl Strategy for NamespaceRules {
    fn finalizing(&self, object: &Object) -> bool {
        let spec = object
            .get("spec")
            .and_then(|s| s.get("finalizers"))
            .and_then(Value::as_array)
            .is_some_and(|f| !f.is_empty());
        spec || !kayra_registry::finalizers(object).is_empty()
    }

    fn mark_deleting(&self, object: &mut Object) {
        object.insert("status".into(), json!({"phase": "Terminating"}));
    }
}

fn terminating_namespaces() -> Resource {
    Resource { strategy: Arc::new(NamespaceRules), ..namespaces() }
}

struct World {
    registry: Registry,
    store: Arc<MvccStore>,
    widgets: Resource,
}

async fn world() -> World {
    let store = Arc::new(MvccStore::in_memory(Options::default()).unwrap());
    let registry = Registry::new(store.clone(), Arc::new(FixedClock), "/registry/");
    for namespace in ["default", "team-a"] {
        let body = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}});
        registry.create(&namespaces(), None, body, unadmitted()).await.unwrap();
    }
    // As a server does: caches start before any list, so lists can be watched from.
    registry.prime(&widgets()).await.unwrap();
    World { registry, store, widgets: widgets() }
}

/// A write only the registry's own rules decide on: these tests are of the registry itself.
fn unadmitted() -> WriteOptions {
    WriteOptions::new(Admit::unadmitted_housekeeping())
}

/// A delete only the registry's own rules decide on.
fn unadmitted_delete() -> DeleteOptions {
    DeleteOptions::new(Admit::unadmitted_housekeeping())
}

fn widget(name: &str, size: i64) -> Value {
    json!({"apiVersion": "fleet.example.com/v1", "kind": "Widget", "metadata": {"name": name}, "spec": {"size": size}})
}

fn meta<'a>(object: &'a Object, field: &str) -> &'a Value {
    object.get("metadata").and_then(|m| m.get(field)).unwrap_or(&Value::Null)
}
