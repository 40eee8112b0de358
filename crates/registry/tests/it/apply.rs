//! Server-side apply and the managers every write records, through the registry.

use kayra_registry::{ApplyOptions, Creation, FieldManager, Part, PatchKind, RegistryError, WriteOptions};
use serde_json::{Value, json};

use super::{meta, unadmitted, widget, world};

fn as_manager(name: &str) -> WriteOptions {
    WriteOptions { manager: FieldManager { name: name.into(), subresource: String::new() }, ..unadmitted() }
}

fn applying(force: bool) -> ApplyOptions {
    ApplyOptions { force, creation: Creation::Allowed }
}

/// Each manager as `manager[/subresource] operation fieldsV1`.
fn managers(object: &serde_json::Map<String, Value>) -> Vec<String> {
    meta(object, "managedFields")
        .as_array()
        .into_iter()
        .flatten()
        .map(|entry| {
            let subresource =
                entry.get("subresource").and_then(Value::as_str).map(|s| format!("/{s}")).unwrap_or_default();
            format!(
                "{}{subresource} {} {}",
                entry["manager"].as_str().unwrap(),
                entry["operation"].as_str().unwrap(),
                entry["fieldsV1"]
            )
        })
        .collect()
}

#[tokio::test]
async fn an_apply_creates_then_conflicts_with_an_updater_until_forced() {
    let w = world().await;
    let (registry, widgets) = (&w.registry, &w.widgets);
    let apply = |body: Value, manager: &str, force: bool| {
        registry.apply(widgets, Some("default"), "a", body, as_manager(manager), applying(force))
    };
    let created = apply(widget("a", 2), "ops", false).await.unwrap();
    assert!(created.created);
    assert_eq!(created.object["spec"], json!({"size": 2, "color": "blue"}));
    // The default is nobody's; the creation is the applier's own.
    assert_eq!(managers(&created.object), [r#"ops Apply {"f:spec":{"f:size":{}}}"#]);
    assert_eq!(meta(&created.object, "managedFields")[0]["time"], "2026-11-30T12:00:00Z");

    let mut edited = created.object.clone();
    edited["spec"]["size"] = json!(5);
    let edited = registry
        .update(widgets, Some("default"), "a", Value::Object(edited), as_manager("editor"))
        .await
        .unwrap();
    assert_eq!(
        managers(&edited),
        [r#"editor Update {"f:spec":{"f:size":{}}}"#],
        "the editor took the size, and the applier is left with nothing"
    );

    let refused = apply(widget("a", 3), "ops", false).await.unwrap_err();
    let RegistryError::ApplyConflict { message, causes } = refused else { panic!("a conflict: {refused:?}") };
    assert_eq!(
        message,
        "Apply failed with 1 conflict: conflict with \"editor\" using fleet.example.com/v1: .spec.size"
    );
    assert_eq!(
        causes,
        [(".spec.size".to_owned(), "conflict with \"editor\" using fleet.example.com/v1".to_owned())]
    );
    let current = registry.get(widgets, Some("default"), "a").await.unwrap();
    assert_eq!(current["spec"]["size"], 5, "a refused apply changes nothing");

    let forced = apply(widget("a", 3), "ops", true).await.unwrap();
    assert!(!forced.created);
    assert_eq!(forced.object["spec"]["size"], 3);
    assert_eq!(managers(&forced.object), [r#"ops Apply {"f:spec":{"f:size":{}}}"#]);
}

#[tokio::test]
async fn an_apply_that_changes_nothing_writes_nothing() {
    let w = world().await;
    let apply = || {
        w.registry.apply(&w.widgets, Some("default"), "a", widget("a", 2), as_manager("ops"), applying(false))
    };
    let first = apply().await.unwrap();
    let second = apply().await.unwrap();
    assert_eq!(second.object, first.object, "the same resourceVersion and managers");
    // A dry run decides everything and stores nothing.
    let options = WriteOptions { dry_run: true, ..as_manager("ops") };
    let dry = w
        .registry
        .apply(&w.widgets, Some("default"), "b", widget("b", 1), options, applying(false))
        .await
        .unwrap();
    assert!(dry.created);
    assert!(matches!(
        w.registry.get(&w.widgets, Some("default"), "b").await,
        Err(RegistryError::NotFound { .. })
    ));
}

#[tokio::test]
async fn writes_of_the_status_and_the_object_are_recorded_apart() {
    let w = world().await;
    let (registry, widgets) = (&w.registry, &w.widgets);
    let created = registry
        .create(widgets, Some("default"), widget("a", 2), as_manager("kubectl-create"))
        .await
        .unwrap();
    assert_eq!(managers(&created), [r#"kubectl-create Update {"f:spec":{".":{},"f:color":{},"f:size":{}}}"#]);
    let mut with_status = created.clone();
    with_status.insert("status".into(), json!({"phase": "Ready"}));
    let status = WriteOptions { part: Part::Status, ..as_manager("node") };
    let written =
        registry.update(widgets, Some("default"), "a", Value::Object(with_status), status).await.unwrap();
    assert_eq!(
        managers(&written)[1],
        r#"node/status Update {"f:status":{".":{},"f:phase":{}}}"#,
        "through the subresource, as its own entry"
    );
    // An apply of the object neither owns nor conflicts on the status.
    let mut config = widget("a", 2);
    config["status"] = json!({"phase": "Mine"});
    let applied = registry
        .apply(widgets, Some("default"), "a", config, as_manager("ops"), applying(false))
        .await
        .unwrap();
    assert_eq!(applied.object["status"]["phase"], "Ready");
    assert!(managers(&applied.object).iter().any(|m| m == r#"ops Apply {"f:spec":{"f:size":{}}}"#));
}

#[tokio::test]
async fn what_an_apply_may_not_do() {
    let w = world().await;
    let (registry, widgets) = (&w.registry, &w.widgets);
    let apply = |body: Value, options: WriteOptions, apply: ApplyOptions| {
        registry.apply(widgets, Some("default"), "a", body, options, apply)
    };
    let untyped =
        apply(json!({"metadata": {"name": "a"}}), as_manager("ops"), applying(false)).await.unwrap_err();
    assert_eq!(untyped.to_string(), "invalid object type: /, Kind=");
    let renamed = apply(widget("b", 1), as_manager("ops"), applying(false)).await.unwrap_err();
    assert_eq!(renamed.to_string(), "the name of the object (b) does not match the name on the URL (a)");
    let forbidden = ApplyOptions { force: false, creation: Creation::Forbidden("cannot create".into()) };
    assert!(matches!(
        apply(widget("a", 1), as_manager("ops"), forbidden).await,
        Err(RegistryError::Forbidden(_))
    ));
    let mut with_uid = widget("a", 1);
    with_uid["metadata"]["uid"] = json!("u-1");
    let uid = apply(with_uid, as_manager("ops"), applying(false)).await.unwrap_err();
    assert!(uid.to_string().contains("uid mismatch: the provided object specified uid u-1"), "{uid}");
    let status = WriteOptions { part: Part::Status, ..as_manager("ops") };
    assert!(matches!(
        apply(widget("a", 1), status, applying(false)).await,
        Err(RegistryError::NotFound { .. })
    ));
    let mut with_managers = widget("a", 1);
    with_managers["metadata"]["managedFields"] = json!([]);
    let sent = apply(with_managers, as_manager("ops"), applying(false)).await.unwrap_err();
    assert_eq!(sent.to_string(), "metadata.managedFields must be nil");
}

#[tokio::test]
async fn a_json_patch_replaces_managers_at_the_version_it_names() {
    let w = world().await;
    let (registry, widgets) = (&w.registry, &w.widgets);
    let created = registry
        .create(widgets, Some("default"), widget("a", 2), as_manager("kubectl-client-side-apply"))
        .await
        .unwrap();
    let version = meta(&created, "resourceVersion").as_str().unwrap().to_owned();
    let patch = |version: &str| {
        serde_json::to_vec(&json!([
            {"op": "replace", "path": "/metadata/managedFields", "value": [
                {"manager": "kubectl", "operation": "Apply", "apiVersion": "fleet.example.com/v1", "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:size": {}}}},
            ]},
            {"op": "replace", "path": "/metadata/resourceVersion", "value": version},
        ]))
        .unwrap()
    };
    let stale = registry
        .patch(widgets, Some("default"), "a", PatchKind::Json, &patch("1"), as_manager("kubectl"))
        .await;
    assert!(matches!(stale, Err(RegistryError::Conflict { .. })), "{stale:?}");
    let moved = registry
        .patch(widgets, Some("default"), "a", PatchKind::Json, &patch(&version), as_manager("kubectl"))
        .await
        .unwrap();
    assert_eq!(managers(&moved), [r#"kubectl Apply {"f:spec":{"f:size":{}}}"#]);
}
