//! Create, update, patch and delete.

use std::sync::Arc;

use kayra_registry::{
    Admit, DeleteOptions, Deleted, FieldManager, Part, PatchKind, RegistryError, Resource, Strategy,
    WriteOptions,
};
use kayra_store::Store;
use serde_json::json;

use super::{meta, unadmitted, unadmitted_delete, widget, widgets, world};

const UNNAMED: FieldManager = FieldManager { name: String::new(), subresource: String::new() };
const DRY_RUN: WriteOptions = WriteOptions {
    dry_run: true,
    part: Part::Main,
    admit: Admit::unadmitted_housekeeping(),
    manager: UNNAMED,
    author: None,
};
const STATUS: WriteOptions = WriteOptions {
    dry_run: false,
    part: Part::Status,
    admit: Admit::unadmitted_housekeeping(),
    manager: UNNAMED,
    author: None,
};

#[tokio::test]
async fn create_stamps_identity_and_get_reads_it_back() {
    let w = world().await;
    let created = w.registry.create(&w.widgets, Some("default"), widget("a", 1), unadmitted()).await.unwrap();
    assert_eq!(meta(&created, "namespace"), "default");
    assert_eq!(meta(&created, "generation"), 1);
    assert_eq!(meta(&created, "creationTimestamp"), "2026-11-30T12:00:00Z");
    assert_eq!(meta(&created, "uid").as_str().unwrap().len(), 36);
    assert_eq!(meta(&created, "resourceVersion"), &json!(w.store.revision().await.unwrap().to_string()));
    assert_eq!(created["spec"]["color"], "blue", "the Kind's defaults apply");
    let read = w.registry.get(&w.widgets, Some("default"), "a").await.unwrap();
    assert_eq!(read, created);
    assert!(matches!(
        w.registry.get(&w.widgets, Some("team-a"), "a").await,
        Err(RegistryError::NotFound { resource, name }) if resource == "widgets.fleet.example.com" && name == "a"
    ));
}

#[tokio::test]
async fn create_refuses_what_kubernetes_refuses_and_writes_nothing() {
    let w = world().await;
    w.registry.create(&w.widgets, Some("default"), widget("taken", 1), unadmitted()).await.unwrap();
    let before = w.store.revision().await.unwrap();
    let cases: Vec<(serde_json::Value, Option<&str>, &str)> = vec![
        (widget("taken", 1), Some("default"), "AlreadyExists"),
        (widget("Bad_Name", 1), Some("default"), "Invalid metadata.name"),
        (widget("zero", 0), Some("default"), "Invalid spec.size"),
        (json!({"kind": "Widget", "metadata": {"name": "nospec"}}), Some("default"), "Invalid spec.size"),
        (
            json!({"kind": "Widget", "metadata": {}, "spec": {"size": 1}}),
            Some("default"),
            "Invalid metadata.name",
        ),
        (
            json!({"kind": "Gadget", "metadata": {"name": "g"}, "spec": {"size": 1}}),
            Some("default"),
            "BadRequest",
        ),
        (
            json!({"apiVersion": "v2", "kind": "Widget", "metadata": {"name": "g"}, "spec": {"size": 1}}),
            Some("default"),
            "BadRequest",
        ),
        (
            json!({"kind": "Widget", "metadata": {"name": "x", "namespace": "team-a"}, "spec": {"size": 1}}),
            Some("default"),
            "BadRequest",
        ),
        (
            json!({"kind": "Widget", "metadata": {"name": "x", "resourceVersion": "5"}, "spec": {"size": 1}}),
            Some("default"),
            "Invalid metadata.resourceVersion",
        ),
        (
            json!({"kind": "Widget", "metadata": {"name": "x", "labels": {"a": 1}}, "spec": {"size": 1}}),
            Some("default"),
            "Invalid metadata.labels.a",
        ),
        (
            json!({"kind": "Widget", "metadata": {"name": "x", "labels": {"bad key": "v"}}, "spec": {"size": 1}}),
            Some("default"),
            "Invalid metadata.labels.bad key",
        ),
        (json!(["not", "an", "object"]), Some("default"), "BadRequest"),
        (widget("elsewhere", 1), Some("nowhere"), "NotFound namespaces"),
    ];
    for (body, namespace, expected) in cases {
        let error = w.registry.create(&w.widgets, namespace, body.clone(), unadmitted()).await.unwrap_err();
        let described = match &error {
            RegistryError::AlreadyExists { .. } => "AlreadyExists".to_owned(),
            RegistryError::Invalid { causes, .. } => format!("Invalid {}", causes[0].field),
            RegistryError::BadRequest(_) => "BadRequest".to_owned(),
            RegistryError::NotFound { resource, .. } => format!("NotFound {resource}"),
            other => format!("{other:?}"),
        };
        assert_eq!(described, expected, "{body}: {error}");
    }
    assert_eq!(w.store.revision().await.unwrap(), before, "refused creates write nothing");
}

#[tokio::test]
async fn generate_name_and_dry_run() {
    let w = world().await;
    let body = json!({"kind": "Widget", "metadata": {"generateName": "job-"}, "spec": {"size": 1}});
    let a = w.registry.create(&w.widgets, Some("default"), body.clone(), unadmitted()).await.unwrap();
    let b = w.registry.create(&w.widgets, Some("default"), body, unadmitted()).await.unwrap();
    let (a, b) = (meta(&a, "name").as_str().unwrap(), meta(&b, "name").as_str().unwrap());
    assert!(a.starts_with("job-") && a.len() == 9 && a != b, "{a} {b}");

    let before = w.store.revision().await.unwrap();
    let dry = w.registry.create(&w.widgets, Some("default"), widget("dry", 1), DRY_RUN).await.unwrap();
    assert_eq!(meta(&dry, "name"), "dry");
    assert!(matches!(
        w.registry.get(&w.widgets, Some("default"), "dry").await,
        Err(RegistryError::NotFound { .. })
    ));
    assert_eq!(w.store.revision().await.unwrap(), before);
}

#[tokio::test]
async fn updates_are_optimistic_and_generation_follows_the_spec() {
    let w = world().await;
    let created = w.registry.create(&w.widgets, Some("default"), widget("u", 1), unadmitted()).await.unwrap();
    let mut body = serde_json::Value::Object(created.clone());
    body["metadata"]["labels"] = json!({"tier": "web"});
    let relabelled =
        w.registry.update(&w.widgets, Some("default"), "u", body.clone(), unadmitted()).await.unwrap();
    assert_eq!(meta(&relabelled, "generation"), 1, "metadata changes leave generation alone");
    assert_ne!(meta(&relabelled, "resourceVersion"), meta(&created, "resourceVersion"));

    let stale = w.registry.update(&w.widgets, Some("default"), "u", body.clone(), unadmitted()).await;
    assert!(
        matches!(stale, Err(RegistryError::Conflict { ref message, .. }) if message.contains("has been modified")),
        "{stale:?}"
    );

    let mut body = serde_json::Value::Object(relabelled.clone());
    body["spec"]["size"] = json!(2);
    body["status"] = json!({"phase": "Forged"});
    body["metadata"]["uid"] = json!("forged");
    let resized = w.registry.update(&w.widgets, Some("default"), "u", body, unadmitted()).await.unwrap();
    assert_eq!(meta(&resized, "generation"), 2);
    assert_eq!(resized.get("status"), None, "the object's endpoint never writes status");
    assert_eq!(meta(&resized, "uid"), meta(&created, "uid"), "uid is immutable");

    let same = w
        .registry
        .update(&w.widgets, Some("default"), "u", serde_json::Value::Object(resized.clone()), unadmitted())
        .await
        .unwrap();
    assert_eq!(
        meta(&same, "resourceVersion"),
        meta(&resized, "resourceVersion"),
        "a no-op update writes nothing"
    );

    let mut body = serde_json::Value::Object(resized.clone());
    body["status"] = json!({"phase": "Running"});
    body["spec"]["size"] = json!(99);
    let status = w.registry.update(&w.widgets, Some("default"), "u", body, STATUS).await.unwrap();
    assert_eq!(status["status"]["phase"], "Running");
    assert_eq!(status["spec"]["size"], 2, "/status never writes anything else");
    assert_eq!(meta(&status, "generation"), 2);

    // An approval writes the conditions and nothing else, not even the rest of the status.
    let mut body = serde_json::Value::Object(status.clone());
    body["status"] = json!({"phase": "Forged", "conditions": [{"type": "Approved", "status": "True"}]});
    body["spec"]["size"] = json!(99);
    let approval = WriteOptions { part: Part::Approval, ..unadmitted() };
    let approved = w.registry.update(&w.widgets, Some("default"), "u", body, approval).await.unwrap();
    assert_eq!(
        approved["status"],
        json!({"phase": "Running", "conditions": [{"type": "Approved", "status": "True"}]})
    );
    assert_eq!(approved["spec"]["size"], 2);

    let renamed = w.registry.update(&w.widgets, Some("default"), "u", widget("other", 1), unadmitted()).await;
    assert!(matches!(renamed, Err(RegistryError::BadRequest(_))));
    let missing =
        w.registry.update(&w.widgets, Some("default"), "gone", widget("gone", 1), unadmitted()).await;
    assert!(matches!(missing, Err(RegistryError::NotFound { .. })));
}

/// Placement is the control plane's decision, not a new desired state from the object's author:
/// as kube-apiserver's `pods/binding`, a binding (and the unbinding that undoes it) writes the
/// spec and the status and leaves `generation` where the author's last change put it.
#[tokio::test]
async fn a_binding_leaves_the_generation_its_author_wrote() {
    let w = world().await;
    let ns = Some("default");
    w.registry.create(&w.widgets, ns, widget("placed", 1), unadmitted()).await.unwrap();
    let binding = || WriteOptions { part: Part::Binding, ..unadmitted() };
    let place = |node: Option<&'static str>| {
        move |current: &kayra_registry::Object| {
            let mut object = current.clone();
            object["spec"]["node"] = json!(node);
            object.insert("status".into(), json!({"scheduled": node.is_some()}));
            Ok(object)
        }
    };
    let bound =
        w.registry.update_with(&w.widgets, ns, "placed", None, binding(), place(Some("n1"))).await.unwrap();
    assert_eq!((&bound["spec"]["node"], &bound["status"]["scheduled"]), (&json!("n1"), &json!(true)));
    assert_eq!(meta(&bound, "generation"), 1, "a binding is not the author's change");
    let unbound =
        w.registry.update_with(&w.widgets, ns, "placed", None, binding(), place(None)).await.unwrap();
    assert_eq!(unbound["spec"]["node"], json!(null));
    assert_eq!(meta(&unbound, "generation"), 1, "nor is undoing one");
    assert_eq!(meta(&w.registry.get(&w.widgets, ns, "placed").await.unwrap(), "generation"), 1);

    let mut body = serde_json::Value::Object(unbound);
    body["spec"]["size"] = json!(2);
    let resized = w.registry.update(&w.widgets, ns, "placed", body, unadmitted()).await.unwrap();
    assert_eq!(meta(&resized, "generation"), 2, "the author's own change still counts");
}

#[tokio::test]
async fn patches_merge_or_apply_operations_and_change_nothing_when_they_fail() {
    let w = world().await;
    w.registry.create(&w.widgets, Some("default"), widget("p", 1), unadmitted()).await.unwrap();
    let merged = w
        .registry
        .patch(
            &w.widgets,
            Some("default"),
            "p",
            PatchKind::Merge,
            br#"{"metadata":{"labels":{"a":"b"}},"spec":{"color":null,"size":3}}"#,
            unadmitted(),
        )
        .await
        .unwrap();
    assert_eq!(merged["metadata"]["labels"]["a"], "b");
    assert_eq!(merged["spec"]["size"], 3);
    assert_eq!(merged["spec"]["color"], "blue", "defaults fill what a patch removed");
    let patched = w
        .registry
        .patch(&w.widgets, Some("default"), "p", PatchKind::Json, br#"[{"op":"test","path":"/spec/size","value":3},{"op":"replace","path":"/spec/size","value":4}]"#, unadmitted())
        .await
        .unwrap();
    assert_eq!(patched["spec"]["size"], 4);
    let before = w.store.revision().await.unwrap();
    for (kind, patch) in [
        (PatchKind::Json, &br#"[{"op":"test","path":"/spec/size","value":1},{"op":"replace","path":"/spec/size","value":9}]"#[..]),
        (PatchKind::Json, br#"{"op":"replace"}"#),
        (PatchKind::Merge, br#"[1,2]"#),
        (PatchKind::Merge, br#"{"metadata":{"name":"renamed"}}"#),
        (PatchKind::Merge, b"not json"),
    ] {
        let refused = w.registry.patch(&w.widgets, Some("default"), "p", kind, patch, unadmitted()).await;
        assert!(matches!(refused, Err(RegistryError::BadRequest(_))), "{}: {refused:?}", String::from_utf8_lossy(patch));
    }
    let invalid = w
        .registry
        .patch(&w.widgets, Some("default"), "p", PatchKind::Merge, br#"{"spec":{"size":-1}}"#, unadmitted())
        .await;
    assert!(matches!(invalid, Err(RegistryError::Invalid { .. })));
    let pinned = w
        .registry
        .patch(
            &w.widgets,
            Some("default"),
            "p",
            PatchKind::Merge,
            br#"{"metadata":{"resourceVersion":"1"},"spec":{"size":5}}"#,
            unadmitted(),
        )
        .await;
    assert!(
        matches!(pinned, Err(RegistryError::Conflict { .. })),
        "a patch pinned to an old version conflicts"
    );
    assert_eq!(w.store.revision().await.unwrap(), before);

    let status = w
        .registry
        .patch(
            &w.widgets,
            Some("default"),
            "p",
            PatchKind::Merge,
            br#"{"status":{"phase":"Running"},"spec":{"size":7}}"#,
            STATUS,
        )
        .await
        .unwrap();
    assert_eq!(
        (status["status"]["phase"].as_str(), status["spec"]["size"].as_i64()),
        (Some("Running"), Some(4))
    );
}

#[tokio::test]
async fn finalizers_hold_a_deleted_object_until_they_are_removed() {
    let w = world().await;
    let mut body = widget("f", 1);
    body["metadata"]["finalizers"] = json!(["example.com/cleanup"]);
    let created = w.registry.create(&w.widgets, Some("default"), body, unadmitted()).await.unwrap();
    let pending = w.registry.delete(&w.widgets, Some("default"), "f", &unadmitted_delete()).await.unwrap();
    let Deleted::Pending(marked) = pending else { panic!("finalizers keep the object") };
    assert_eq!(meta(&marked, "deletionTimestamp"), "2026-11-30T12:00:00Z");
    assert_eq!(meta(&marked, "uid"), meta(&created, "uid"));
    let again = w.registry.delete(&w.widgets, Some("default"), "f", &unadmitted_delete()).await.unwrap();
    assert!(matches!(again, Deleted::Pending(_)));
    let released = w
        .registry
        .patch(
            &w.widgets,
            Some("default"),
            "f",
            PatchKind::Merge,
            br#"{"metadata":{"finalizers":null}}"#,
            unadmitted(),
        )
        .await
        .unwrap();
    assert!(kayra_registry::finalizers(&released).is_empty());
    assert!(matches!(
        w.registry.get(&w.widgets, Some("default"), "f").await,
        Err(RegistryError::NotFound { .. })
    ));
}

#[tokio::test]
async fn deletes_honour_preconditions_policy_and_dry_run() {
    let w = world().await;
    let created = w.registry.create(&w.widgets, Some("default"), widget("d", 1), unadmitted()).await.unwrap();
    let refusals = [
        DeleteOptions { uid: Some("someone-else".into()), ..unadmitted_delete() },
        DeleteOptions { resource_version: Some("1".into()), ..unadmitted_delete() },
    ];
    for options in &refusals {
        let refused = w.registry.delete(&w.widgets, Some("default"), "d", options).await;
        assert!(
            matches!(refused, Err(RegistryError::Conflict { ref message, .. }) if message.starts_with("Precondition failed")),
            "{refused:?}"
        );
    }
    let bad_policy = DeleteOptions { propagation_policy: Some("Eventually".into()), ..unadmitted_delete() };
    assert!(matches!(
        w.registry.delete(&w.widgets, Some("default"), "d", &bad_policy).await,
        Err(RegistryError::BadRequest(_))
    ));
    let dry = DeleteOptions { dry_run: true, ..unadmitted_delete() };
    assert!(matches!(w.registry.delete(&w.widgets, Some("default"), "d", &dry).await, Ok(Deleted::Gone(_))));
    assert!(w.registry.get(&w.widgets, Some("default"), "d").await.is_ok(), "a dry run deletes nothing");
    let exact = DeleteOptions {
        uid: meta(&created, "uid").as_str().map(str::to_owned),
        resource_version: meta(&created, "resourceVersion").as_str().map(str::to_owned),
        propagation_policy: Some("Background".into()),
        ..unadmitted_delete()
    };
    let Deleted::Gone(last) = w.registry.delete(&w.widgets, Some("default"), "d", &exact).await.unwrap()
    else {
        panic!("no finalizers: gone at once")
    };
    assert_eq!(last, created);
    assert!(matches!(
        w.registry.delete(&w.widgets, Some("default"), "d", &exact).await,
        Err(RegistryError::NotFound { .. })
    ));
}

#[tokio::test]
async fn a_terminating_namespace_takes_no_new_objects() {
    let w = world().await;
    let namespaces = super::namespaces();
    let mut body =
        json!({"kind": "Namespace", "metadata": {"name": "closing", "finalizers": ["kubernetes"]}});
    body["apiVersion"] = json!("v1");
    w.registry.create(&namespaces, None, body, unadmitted()).await.unwrap();
    w.registry.delete(&namespaces, None, "closing", &unadmitted_delete()).await.unwrap();
    let refused = w.registry.create(&w.widgets, Some("closing"), widget("late", 1), unadmitted()).await;
    assert!(
        matches!(refused, Err(RegistryError::Forbidden(ref m)) if m.contains("being terminated")),
        "{refused:?}"
    );
}

#[test]
fn a_namespace_is_terminating_once_marked_for_deletion_or_in_phase_terminating() {
    let cases = [
        (json!({"metadata": {"name": "open"}}), false),
        (json!({"metadata": {"name": "open"}, "status": {"phase": "Active"}}), false),
        (json!({"metadata": {"name": "closing", "deletionTimestamp": "2026-11-30T12:00:00Z"}}), true),
        (json!({"metadata": {"name": "closing"}, "status": {"phase": "Terminating"}}), true),
    ];
    for (namespace, terminating) in cases {
        let object = namespace.as_object().unwrap();
        assert_eq!(kayra_registry::namespace_terminating(object), terminating, "{namespace}");
    }
}

#[tokio::test]
async fn deleting_a_namespace_deletes_what_it_holds_then_itself() {
    let w = world().await;
    let namespaces = super::terminating_namespaces();
    let body = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "doomed"}, "spec": {"finalizers": ["kubernetes"]}});
    w.registry.create(&namespaces, None, body, unadmitted()).await.unwrap();
    w.registry.create(&w.widgets, Some("doomed"), widget("plain", 1), unadmitted()).await.unwrap();
    let mut held = widget("held", 1);
    held["metadata"]["finalizers"] = json!(["example.com/hold"]);
    w.registry.create(&w.widgets, Some("doomed"), held, unadmitted()).await.unwrap();

    let Deleted::Pending(marked) =
        w.registry.delete(&namespaces, None, "doomed", &unadmitted_delete()).await.unwrap()
    else {
        panic!("a namespace waits for its contents")
    };
    assert_eq!(marked["status"]["phase"], "Terminating");
    let contents = [w.widgets.clone()];
    assert!(
        !w.registry.finalize_namespace(&namespaces, &contents, "doomed").await.unwrap(),
        "an object with finalizers holds it"
    );
    assert!(matches!(
        w.registry.get(&w.widgets, Some("doomed"), "plain").await,
        Err(RegistryError::NotFound { .. })
    ));
    w.registry
        .patch(
            &w.widgets,
            Some("doomed"),
            "held",
            PatchKind::Merge,
            br#"{"metadata":{"finalizers":null}}"#,
            unadmitted(),
        )
        .await
        .unwrap();
    assert!(w.registry.finalize_namespace(&namespaces, &contents, "doomed").await.unwrap());
    assert!(matches!(w.registry.get(&namespaces, None, "doomed").await, Err(RegistryError::NotFound { .. })));
}

#[tokio::test]
async fn a_json_patch_cannot_grow_an_object_without_bound() {
    let w = world().await;
    let mut body = widget("g", 1);
    body["spec"]["list"] = json!(vec!["0123456789"; 8]);
    w.registry.create(&w.widgets, Some("default"), body, unadmitted()).await.unwrap();
    let doubling: Vec<serde_json::Value> =
        (0..40).map(|_| json!({"op": "copy", "from": "/spec/list", "path": "/spec/list/-"})).collect();
    let patch = serde_json::to_vec(&doubling).unwrap();
    let refused =
        w.registry.patch(&w.widgets, Some("default"), "g", PatchKind::Json, &patch, unadmitted()).await;
    assert!(
        matches!(refused, Err(RegistryError::BadRequest(ref m)) if m.contains("would grow")),
        "{refused:?}"
    );
    let kept = w.registry.get(&w.widgets, Some("default"), "g").await.unwrap();
    assert_eq!(kept["spec"]["list"].as_array().unwrap().len(), 8, "nothing was written");
}

/// Widgets labelled `expires: soon` cease to exist two seconds after the fixed clock's now.
struct ExpiringRules;

impl kayra_registry::Strategy for ExpiringRules {
    fn expires_at(&self, object: &kayra_registry::Object) -> Option<std::time::SystemTime> {
        let soon = object.get("metadata")?.get("labels")?.get("expires")? == "soon";
        soon.then(|| kayra_api::clock::Clock::now(&crate::FixedClock) + std::time::Duration::from_secs(2))
    }
}

#[tokio::test]
async fn an_expiring_object_lives_on_a_lease_that_updates_keep() {
    let w = world().await;
    let expiring =
        kayra_registry::Resource { strategy: std::sync::Arc::new(ExpiringRules), ..w.widgets.clone() };
    let mut body = widget("brief", 1);
    body["metadata"]["labels"] = json!({"expires": "soon"});
    w.registry.create(&expiring, Some("default"), body.clone(), unadmitted()).await.unwrap();
    w.registry.create(&expiring, Some("default"), widget("lasting", 1), unadmitted()).await.unwrap();
    let key = "/registry/fleet.example.com/widgets/default/brief";
    let lease = w.store.get(key).await.unwrap().unwrap().lease.expect("the expiring object is on a lease");
    assert!(
        w.store
            .get("/registry/fleet.example.com/widgets/default/lasting")
            .await
            .unwrap()
            .unwrap()
            .lease
            .is_none()
    );

    body["spec"]["size"] = json!(2);
    w.registry.update(&expiring, Some("default"), "brief", body, unadmitted()).await.unwrap();
    assert_eq!(w.store.get(key).await.unwrap().unwrap().lease, Some(lease), "an update keeps the lease");
    w.store.revoke_lease(lease).await.unwrap();
    let gone = w.registry.get(&expiring, Some("default"), "brief").await;
    assert!(matches!(gone, Err(RegistryError::NotFound { .. })), "{gone:?}");

    // An object that stops expiring leaves its lease; one that starts gets one.
    let mut body = widget("changing", 1);
    body["metadata"]["labels"] = json!({"expires": "soon"});
    w.registry.create(&expiring, Some("default"), body.clone(), unadmitted()).await.unwrap();
    let key = "/registry/fleet.example.com/widgets/default/changing";
    body["metadata"]["labels"] = json!({"expires": "never"});
    w.registry.update(&expiring, Some("default"), "changing", body.clone(), unadmitted()).await.unwrap();
    assert_eq!(w.store.get(key).await.unwrap().unwrap().lease, None, "no longer expiring, no longer leased");
    body["metadata"]["labels"] = json!({"expires": "soon"});
    w.registry.update(&expiring, Some("default"), "changing", body, unadmitted()).await.unwrap();
    assert!(w.store.get(key).await.unwrap().unwrap().lease.is_some(), "expiring again, leased again");
}

/// Owners: Widgets whose deletes propagate to dependents.
struct OwnerRules;

impl Strategy for OwnerRules {
    fn owns_dependents(&self) -> bool {
        true
    }
}

fn owners() -> Resource {
    Resource { kind: "Owner".into(), plural: "owners".into(), strategy: Arc::new(OwnerRules), ..widgets() }
}

/// Finalizers before, the policies of successive deletes, the finalizers after each (`None`:
/// gone).
type PolicyRow =
    (&'static [&'static str], &'static [Option<&'static str>], &'static [Option<&'static [&'static str]>]);

#[tokio::test]
async fn propagation_policies_become_garbage_collector_finalizers_on_owners_only() {
    let w = world().await;
    let policy = |policy: Option<&str>| DeleteOptions {
        propagation_policy: policy.map(str::to_owned),
        ..unadmitted_delete()
    };
    let finalizers_of = |deleted: &Deleted| match deleted {
        Deleted::Pending(object) => Some(kayra_registry::finalizers(object)),
        Deleted::Gone(_) => None,
    };
    let table: [PolicyRow; 7] = [
        (&[], &[Some("Background")], &[None]),
        (&[], &[None], &[None]),
        (&[], &[Some("Foreground")], &[Some(&["foregroundDeletion"])]),
        (&[], &[Some("Orphan")], &[Some(&["orphan"])]),
        (
            &["keep"],
            &[Some("Orphan"), Some("Foreground")],
            &[Some(&["keep", "orphan"]), Some(&["keep", "foregroundDeletion"])],
        ),
        (&[], &[Some("Orphan"), None, Some("Background")], &[Some(&["orphan"]), Some(&["orphan"]), None]),
        (&["orphan"], &[Some("Orphan")], &[Some(&["orphan"])]),
    ];
    for (at, (before, policies, after)) in table.iter().enumerate() {
        let name = format!("o{at}");
        let mut body = widget(&name, 1);
        body["kind"] = json!("Owner");
        body["metadata"]["finalizers"] = json!(before);
        w.registry.create(&owners(), Some("default"), body, unadmitted()).await.unwrap();
        for (step, (policy_name, expected)) in policies.iter().zip(after.iter()).enumerate() {
            let deleted =
                w.registry.delete(&owners(), Some("default"), &name, &policy(*policy_name)).await.unwrap();
            let expected = expected.map(|list| list.iter().map(|f| (*f).to_owned()).collect::<Vec<_>>());
            assert_eq!(finalizers_of(&deleted), expected, "row {at}, delete {step} ({policy_name:?})");
            if let Deleted::Pending(object) = &deleted {
                assert!(!meta(object, "deletionTimestamp").is_null(), "row {at}: marked for deletion");
            }
        }
        let stored = w.registry.get(&owners(), Some("default"), &name).await;
        assert_eq!(stored.is_ok(), after.last().unwrap().is_some(), "row {at}: stored or gone");
    }
    // A Kind that owns nothing accepts every policy and is simply deleted.
    for (at, name) in ["Foreground", "Orphan"].into_iter().enumerate() {
        let widget_name = format!("plain{at}");
        w.registry.create(&w.widgets, Some("default"), widget(&widget_name, 1), unadmitted()).await.unwrap();
        let deleted = w.registry.delete(&w.widgets, Some("default"), &widget_name, &policy(Some(name))).await;
        assert!(matches!(deleted, Ok(Deleted::Gone(_))), "{name}: {deleted:?}");
    }
}

/// Objects of a resource that expire at the same instant share one lease (a minute's Events
/// grant one lease, not one each); a lease that ended early is not offered again.
#[tokio::test]
async fn objects_that_expire_together_share_a_lease_until_it_ends() {
    let w = world().await;
    let expiring =
        kayra_registry::Resource { strategy: std::sync::Arc::new(ExpiringRules), ..w.widgets.clone() };
    let lease_of = |name: &str| {
        let key = format!("/registry/fleet.example.com/widgets/default/{name}");
        let store = w.store.clone();
        async move { store.get(&key).await.unwrap().map(|kv| kv.lease.expect("on a lease")) }
    };
    for name in ["a", "b"] {
        let mut body = widget(name, 1);
        body["metadata"]["labels"] = json!({"expires": "soon"});
        w.registry.create(&expiring, Some("default"), body, unadmitted()).await.unwrap();
    }
    let shared = lease_of("a").await.unwrap();
    assert_eq!(lease_of("b").await, Some(shared), "b expires with a, on a's lease");
    w.store.revoke_lease(shared).await.unwrap();
    assert_eq!((lease_of("a").await, lease_of("b").await), (None, None), "both went with it");
    let mut body = widget("c", 1);
    body["metadata"]["labels"] = json!({"expires": "soon"});
    w.registry.create(&expiring, Some("default"), body.clone(), unadmitted()).await.unwrap();
    let fresh = lease_of("c").await.unwrap();
    assert_ne!(fresh, shared, "a lease that ended is not offered again");
    // An update that moves onto the ended lease's expiry is given a live one too.
    w.store.revoke_lease(fresh).await.unwrap();
    w.registry.create(&expiring, Some("default"), widget("d", 1), unadmitted()).await.unwrap();
    let mut later = widget("d", 1);
    later["metadata"]["labels"] = json!({"expires": "soon"});
    w.registry.update(&expiring, Some("default"), "d", later, unadmitted()).await.unwrap();
    assert!(lease_of("d").await.is_some_and(|lease| lease != fresh && lease != shared));
}

/// A store that counts the transactions sent to it one by one and those sent together.
struct Tally {
    inner: kayra_store::mvcc::MvccStore,
    alone: std::sync::atomic::AtomicUsize,
    together: std::sync::Mutex<Vec<usize>>,
}

#[async_trait::async_trait]
impl Store for Tally {
    async fn get(&self, key: &str) -> Result<Option<kayra_store::KeyValue>, kayra_store::StoreError> {
        self.inner.get(key).await
    }
    async fn range(
        &self,
        request: &kayra_store::RangeRequest,
    ) -> Result<kayra_store::RangeResult, kayra_store::StoreError> {
        self.inner.range(request).await
    }
    async fn txn(&self, txn: kayra_store::Txn) -> Result<kayra_store::TxnResult, kayra_store::StoreError> {
        self.alone.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.inner.txn(txn).await
    }
    async fn txn_all(
        &self,
        txns: Vec<kayra_store::Txn>,
    ) -> Vec<Result<kayra_store::TxnResult, kayra_store::StoreError>> {
        self.together.lock().unwrap().push(txns.len());
        self.inner.txn_all(txns).await
    }
    async fn watch(
        &self,
        prefix: &str,
        after: kayra_store::Revision,
    ) -> Result<kayra_store::Watcher, kayra_store::StoreError> {
        self.inner.watch(prefix, after).await
    }
    async fn compact(&self, revision: kayra_store::Revision) -> Result<(), kayra_store::StoreError> {
        self.inner.compact(revision).await
    }
    async fn revision(&self) -> Result<kayra_store::Revision, kayra_store::StoreError> {
        self.inner.revision().await
    }
    async fn grant_lease(
        &self,
        ttl: std::time::Duration,
    ) -> Result<kayra_store::Lease, kayra_store::StoreError> {
        self.inner.grant_lease(ttl).await
    }
    async fn keep_alive(
        &self,
        lease: kayra_store::LeaseId,
    ) -> Result<std::time::Duration, kayra_store::StoreError> {
        self.inner.keep_alive(lease).await
    }
    async fn revoke_lease(&self, lease: kayra_store::LeaseId) -> Result<(), kayra_store::StoreError> {
        self.inner.revoke_lease(lease).await
    }
}

#[tokio::test]
async fn creates_sent_together_reach_the_store_together_and_each_answers_as_its_own() {
    let tally = Arc::new(Tally {
        inner: kayra_store::mvcc::MvccStore::in_memory(kayra_store::mvcc::Options::default()).unwrap(),
        alone: std::sync::atomic::AtomicUsize::new(0),
        together: std::sync::Mutex::default(),
    });
    let registry = kayra_registry::Registry::new(tally.clone(), Arc::new(crate::FixedClock), "/registry/");
    for namespace in ["default", "team-a"] {
        let body = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}});
        registry.create(&super::namespaces(), None, body, unadmitted()).await.unwrap();
    }
    let widgets = widgets();
    registry.create(&widgets, Some("default"), widget("taken", 1), unadmitted()).await.unwrap();
    let before = tally.alone.load(std::sync::atomic::Ordering::SeqCst);
    let from = tally.revision().await.unwrap().to_string();
    let watching = kayra_registry::WatchOptions { resource_version: Some(from), ..Default::default() };
    let mut watch = registry.watch(&widgets, &watching).await.expect("a watch of every widget");

    let generated = json!({"kind": "Widget", "metadata": {"generateName": "job-"}, "spec": {"size": 1}});
    let objects = vec![
        (Some("default".to_owned()), widget("one", 1)),
        (Some("default".to_owned()), widget("bad", 0)),
        (Some("default".to_owned()), widget("taken", 2)),
        (Some("team-a".to_owned()), widget("one", 3)),
        (Some("default".to_owned()), widget("one", 4)),
        (Some("team-a".to_owned()), generated.clone()),
        (Some("nowhere".to_owned()), widget("lost", 1)),
        (Some("team-a".to_owned()), generated),
    ];
    let answers = registry.create_all(&widgets, objects, unadmitted()).await;
    let outcome: Vec<String> = answers
        .iter()
        .map(|answer| match answer {
            Ok(object) => format!(
                "{}/{}",
                meta(object, "namespace").as_str().unwrap(),
                meta(object, "name").as_str().unwrap()
            ),
            Err(RegistryError::Invalid { .. }) => "invalid".to_owned(),
            Err(RegistryError::AlreadyExists { .. }) => "exists".to_owned(),
            Err(RegistryError::NotFound { .. }) => "no namespace".to_owned(),
            Err(other) => format!("{other:?}"),
        })
        .collect();
    assert_eq!(outcome[..5], ["default/one", "invalid", "exists", "team-a/one", "exists"], "{outcome:?}");
    assert!(outcome[5].starts_with("team-a/job-") && outcome[7].starts_with("team-a/job-"), "{outcome:?}");
    assert_ne!(outcome[5], outcome[7]);
    assert_eq!(outcome[6], "no namespace");
    assert_eq!(
        *tally.together.lock().unwrap(),
        [5],
        "the five admitted under names of their own went to the store together, the taken one among them"
    );
    assert_eq!(
        tally.alone.load(std::sync::atomic::Ordering::SeqCst) - before,
        1,
        "only the second `one` in default was written alone, and found its name taken"
    );

    let created: Vec<&kayra_registry::Object> =
        answers.iter().filter_map(|answer| answer.as_ref().ok()).collect();
    let mut versions: Vec<u64> = created
        .iter()
        .map(|object| meta(object, "resourceVersion").as_str().unwrap().parse().unwrap())
        .collect();
    versions.sort_unstable();
    versions.dedup();
    assert_eq!(versions.len(), 4, "each create has a revision of its own");
    for object in &created {
        let (namespace, name) = (meta(object, "namespace").as_str(), meta(object, "name").as_str().unwrap());
        let stored = registry.get(&widgets, namespace, name).await.unwrap();
        assert_eq!(&stored, *object, "the answer is what was stored");
        assert_eq!(meta(&stored, "uid").as_str().map(str::len), Some(36), "stamped as any create");
    }
    assert_eq!(
        registry.get(&widgets, Some("default"), "taken").await.unwrap()["spec"]["size"],
        1,
        "a taken name keeps its object"
    );
    let mut seen = Vec::new();
    while seen.len() < 4 {
        match tokio::time::timeout(std::time::Duration::from_secs(5), watch.next()).await {
            Ok(Ok(kayra_registry::WatchEvent::Added(object))) => {
                seen.push(meta(&object, "resourceVersion").as_str().unwrap().parse::<u64>().unwrap());
            }
            other => panic!("each create is one ADDED, got {other:?}"),
        }
    }
    assert_eq!(seen, versions, "a watcher sees each create once, in revision order");
}

#[tokio::test]
async fn expiring_objects_created_together_share_their_lease() {
    let w = world().await;
    let expiring = Resource { strategy: Arc::new(ExpiringRules), ..w.widgets.clone() };
    let objects = ["a", "b", "c"]
        .into_iter()
        .map(|name| {
            let mut body = widget(name, 1);
            body["metadata"]["labels"] = json!({"expires": "soon"});
            (Some("default".to_owned()), body)
        })
        .collect();
    for answer in w.registry.create_all(&expiring, objects, unadmitted()).await {
        answer.unwrap();
    }
    let lease_of = |name: &str| {
        let key = format!("/registry/fleet.example.com/widgets/default/{name}");
        let store = w.store.clone();
        async move { store.get(&key).await.unwrap().and_then(|kv| kv.lease) }
    };
    let shared = lease_of("a").await.expect("on a lease");
    assert_eq!((lease_of("b").await, lease_of("c").await), (Some(shared), Some(shared)));
    w.store.revoke_lease(shared).await.unwrap();
    assert_eq!(
        w.registry.list(&expiring, Some("default"), &Default::default()).await.unwrap().items.len(),
        0
    );
}
