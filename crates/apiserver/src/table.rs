//! Server-side printing: lists, objects and watch events as `meta.k8s.io` Tables, with each
//! Kind's columns and `PartialObjectMetadata` rows.

use kayra_api::scheme::KindInfo;
use kayra_api::table::Column;
use kayra_registry::Object;
use serde_json::{Value, json};

/// A Table of `objects`. `include` is the `includeObject` parameter (`None`, `Metadata` (the
/// default) or `Object`); `definitions` is false for watch events after the first.
pub(crate) fn render(
    kind: &KindInfo,
    objects: &[Object],
    metadata: Value,
    version: &str,
    include: Option<&str>,
    definitions: bool,
) -> Value {
    render_columns(&kind.table_columns(), objects, metadata, version, include, definitions)
}

/// A Table of `objects` in `columns` (a history's Revisions, which are no Kind of the scheme);
/// otherwise as [`render`].
pub(crate) fn render_columns(
    columns: &[Column],
    objects: &[Object],
    metadata: Value,
    version: &str,
    include: Option<&str>,
    definitions: bool,
) -> Value {
    let now = jiff::Timestamp::now();
    let definitions: Vec<Value> = if definitions {
        columns
            .iter()
            .map(|c| json!({"name": c.name, "type": c.type_, "format": c.format, "description": c.description, "priority": c.priority}))
            .collect()
    } else {
        Vec::new()
    };
    let rows: Vec<Value> = objects
        .iter()
        .map(|object| {
            let value = Value::Object(object.clone());
            let cells: Vec<Value> = columns.iter().map(|c| (c.cell)(&value, now)).collect();
            let mut row = json!({"cells": cells});
            match include.unwrap_or("Metadata") {
                "None" => {}
                "Object" => row["object"] = value,
                _ => {
                    row["object"] = json!({
                        "kind": "PartialObjectMetadata", "apiVersion": format!("meta.k8s.io/{version}"),
                        "metadata": object.get("metadata").cloned().unwrap_or_else(|| json!({})),
                    })
                }
            }
            row
        })
        .collect();
    json!({
        "kind": "Table", "apiVersion": format!("meta.k8s.io/{version}"),
        "metadata": metadata, "columnDefinitions": definitions, "rows": rows,
    })
}
