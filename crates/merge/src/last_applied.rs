//! `kubectl apply --server-side` on an object that client-side `kubectl apply` made, eased as
//! kube-apiserver eases it, for the manager `kubectl` alone (another manager opts out):
//!
//! - a conflict over a field the client-side configuration (the annotation
//!   `kubectl.kubernetes.io/last-applied-configuration`, at the resource's own apiVersion) set to
//!   the value the object still holds is no conflict: kubectl applied it, under another manager;
//! - when the object carries the annotation, the apply rewrites it to the configuration just
//!   applied, so that a later client-side apply still computes its patch from what was last
//!   applied. An annotation that would make the object's annotations too large is dropped.

use serde_json::{Map, Value};

use crate::managed::metadata;
use crate::operation::{Scope, compare, owned_paths};
use crate::path::canonical;
use crate::schema::Schema;
use crate::set::FieldSet;

/// The manager eased.
pub(crate) const KUBECTL: &str = "kubectl";

/// The annotation client-side apply keeps its configuration in.
pub(crate) const ANNOTATION: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// The most bytes an object's annotations (keys and values) may hold, as Kubernetes bounds them.
const MAX_ANNOTATIONS_BYTES: usize = 256 * 1024;

/// The fields `live`'s client-side configuration set that `live` still holds as it set them;
/// none when there is no such configuration, or it is of another apiVersion.
pub(crate) fn still_applied(
    schema: &Schema,
    live: &Map<String, Value>,
    api_version: &str,
    scope: Scope,
) -> FieldSet {
    let Some(text) = annotation(live) else { return FieldSet::new() };
    let Ok(Value::Object(applied)) = serde_json::from_str::<Value>(text) else { return FieldSet::new() };
    if applied.get("apiVersion").and_then(Value::as_str) != Some(api_version) {
        return FieldSet::new();
    }
    let differs = compare(schema, Some(&applied), live, scope);
    owned_paths(schema, &applied, scope)
        .difference(&differs.modified)
        .difference(&differs.added)
        .difference(&differs.removed)
}

/// When `live` carries a client-side configuration, sets `merged`'s to `config` (without the
/// annotation itself), as kubectl writes it: compact JSON and a newline.
pub(crate) fn rewrite(
    live: &Map<String, Value>,
    config: &Map<String, Value>,
    merged: &mut Map<String, Value>,
) {
    if annotation(live).is_none() {
        return;
    }
    let mut applied = config.clone();
    if let Some(Value::Object(metadata)) = applied.get_mut("metadata")
        && let Some(Value::Object(annotations)) = metadata.get_mut("annotations")
    {
        annotations.remove(ANNOTATION);
    }
    let text = format!("{}\n", canonical(&Value::Object(applied)));
    let Some(Value::Object(metadata)) = merged.get_mut("metadata") else { return };
    let annotations = metadata.entry("annotations").or_insert_with(|| Value::Object(Map::new()));
    let Value::Object(annotations) = annotations else { return };
    annotations.insert(ANNOTATION.to_owned(), Value::String(text));
    let size: usize =
        annotations.iter().map(|(key, value)| key.len() + value.as_str().map_or(0, str::len)).sum();
    if size > MAX_ANNOTATIONS_BYTES {
        annotations.remove(ANNOTATION);
    }
}

fn annotation(object: &Map<String, Value>) -> Option<&str> {
    let annotations = metadata(object)?.get("annotations")?;
    annotations.get(ANNOTATION)?.as_str().filter(|text| !text.is_empty())
}
