//! The admission port: which writes it is asked about, and what a refusal or a mutation does.

use std::sync::{Arc, Mutex};

use kayra_api::validation::FieldError;
use kayra_registry::{
    Admission, AdmissionRequest, Admit, DeleteOptions, Deleted, Object, Operation, Part, PatchKind, Refusal,
    RegistryError, WriteOptions,
};
use kayra_store::Store;
use serde_json::json;

use super::{meta, unadmitted, widget, world};

/// What an admission was asked: operation, part, dry run, and the object's name.
type Asked = (Operation, Part, bool, String);

/// Records what it is asked, labels every object it may mutate, and refuses what `refuse` says.
struct Recorder {
    asked: Mutex<Vec<Asked>>,
    refuse: Option<Refusal>,
    mutate: bool,
}

impl Recorder {
    fn admitting() -> Arc<Recorder> {
        Arc::new(Recorder { asked: Mutex::default(), refuse: None, mutate: false })
    }

    fn refusing(refusal: Refusal) -> Arc<Recorder> {
        Arc::new(Recorder { asked: Mutex::default(), refuse: Some(refusal), mutate: false })
    }

    fn mutating() -> Arc<Recorder> {
        Arc::new(Recorder { asked: Mutex::default(), refuse: None, mutate: true })
    }

    fn asked(&self) -> Vec<Asked> {
        self.asked.lock().expect("not poisoned").clone()
    }
}

impl Admission for Recorder {
    fn mutate(
        &self,
        _request: &AdmissionRequest<'_>,
        object: &mut Object,
        _old: Option<&Object>,
    ) -> Result<bool, Refusal> {
        if self.mutate {
            let metadata = object.get_mut("metadata").and_then(|m| m.as_object_mut()).expect("metadata");
            metadata.insert("labels".into(), json!({"admitted": "yes"}));
            metadata.insert("uid".into(), json!("forged"));
            if let Some(spec) = object.get_mut("spec").and_then(|s| s.as_object_mut()) {
                spec.insert("tier".into(), json!("gold"));
            }
        }
        Ok(self.mutate)
    }

    fn validate(
        &self,
        request: &AdmissionRequest<'_>,
        object: &Object,
        old: Option<&Object>,
    ) -> Result<(), Refusal> {
        if request.operation == Operation::Delete {
            assert_eq!(old, Some(object), "a delete is decided on the object as it stands");
        }
        let name = kayra_registry::meta_str(object, "name").to_owned();
        self.asked.lock().expect("not poisoned").push((
            request.operation,
            request.part,
            request.dry_run,
            name,
        ));
        self.refuse.clone().map_or(Ok(()), Err)
    }
}

fn write(admission: &Arc<Recorder>, part: Part, dry_run: bool) -> WriteOptions {
    WriteOptions { dry_run, part, ..WriteOptions::new(Admit::by(admission.clone())) }
}

fn delete(admission: &Arc<Recorder>, dry_run: bool) -> DeleteOptions {
    DeleteOptions { dry_run, ..DeleteOptions::new(Admit::by(admission.clone())) }
}

#[tokio::test]
async fn admission_is_asked_about_every_write_delete_and_status_write_dry_run_included() {
    let w = world().await;
    let admission = Recorder::admitting();
    let (r, ns) = (&w.registry, Some("default"));
    let patch = br#"{"spec": {"size": 3}}"#;
    let status = json!({"apiVersion": "fleet.example.com/v1", "kind": "Widget", "metadata": {"name": "a"}, "status": {"phase": "Up"}});
    for dry_run in [true, false] {
        r.create(&w.widgets, ns, widget("a", 1), write(&admission, Part::Main, dry_run)).await.unwrap();
    }
    for dry_run in [true, false] {
        r.update(&w.widgets, ns, "a", widget("a", 2), write(&admission, Part::Main, dry_run)).await.unwrap();
        r.patch(&w.widgets, ns, "a", PatchKind::Merge, patch, write(&admission, Part::Main, dry_run))
            .await
            .unwrap();
        r.update(&w.widgets, ns, "a", status.clone(), write(&admission, Part::Status, dry_run))
            .await
            .unwrap();
        r.patch(
            &w.widgets,
            ns,
            "a",
            PatchKind::Merge,
            br#"{"status": {"phase": "Down"}}"#,
            write(&admission, Part::Status, dry_run),
        )
        .await
        .unwrap();
    }
    for dry_run in [true, false] {
        r.delete(&w.widgets, ns, "a", &delete(&admission, dry_run)).await.unwrap();
    }
    let a = || "a".to_owned();
    use Operation::{Create, Delete, Update};
    let expected = vec![
        (Create, Part::Main, true, a()),
        (Create, Part::Main, false, a()),
        (Update, Part::Main, true, a()),
        (Update, Part::Main, true, a()),
        (Update, Part::Status, true, a()),
        (Update, Part::Status, true, a()),
        (Update, Part::Main, false, a()),
        (Update, Part::Main, false, a()),
        (Update, Part::Status, false, a()),
        (Update, Part::Status, false, a()),
        (Delete, Part::Main, true, a()),
        (Delete, Part::Main, false, a()),
    ];
    assert_eq!(admission.asked(), expected);
}

#[tokio::test]
async fn a_refused_write_writes_nothing_dry_run_or_not() {
    let w = world().await;
    let (r, ns) = (&w.registry, Some("default"));
    r.create(&w.widgets, ns, widget("kept", 1), unadmitted()).await.unwrap();
    let stored = r.get(&w.widgets, ns, "kept").await.unwrap();
    let revision = w.store.revision().await.unwrap();
    let no = Recorder::refusing(Refusal::Forbidden("the rule says no: ask for more rights".into()));
    let status = json!({"apiVersion": "fleet.example.com/v1", "kind": "Widget", "metadata": {"name": "kept"}, "status": {"phase": "Up"}});
    for dry_run in [false, true] {
        let main = || write(&no, Part::Main, dry_run);
        let outcomes = [
            r.create(&w.widgets, ns, widget("new", 1), main()).await.map(|_| ()),
            r.update(&w.widgets, ns, "kept", widget("kept", 5), main()).await.map(|_| ()),
            r.patch(&w.widgets, ns, "kept", PatchKind::Merge, br#"{"spec": {"size": 7}}"#, main())
                .await
                .map(|_| ()),
            r.update(&w.widgets, ns, "kept", status.clone(), write(&no, Part::Status, dry_run))
                .await
                .map(|_| ()),
            r.delete(&w.widgets, ns, "kept", &delete(&no, dry_run)).await.map(|_| ()),
        ];
        for (at, outcome) in outcomes.into_iter().enumerate() {
            match outcome {
                Err(RegistryError::Forbidden(message)) => {
                    assert_eq!(message, "the rule says no: ask for more rights")
                }
                other => panic!("write {at} (dry run {dry_run}) was not refused: {other:?}"),
            }
        }
    }
    assert_eq!(no.asked().len(), 10, "every write was asked about");
    assert_eq!(w.store.revision().await.unwrap(), revision, "nothing was written");
    assert_eq!(r.get(&w.widgets, ns, "kept").await.unwrap(), stored);
    assert!(matches!(r.get(&w.widgets, ns, "new").await, Err(RegistryError::NotFound { .. })));
}

#[tokio::test]
async fn an_invalid_reference_is_invalid_and_names_the_field() {
    let w = world().await;
    let cause = FieldError::invalid("spec.secretRef.name", "\"db\"", "no such Secret: create it first");
    let invalid = Recorder::refusing(Refusal::Invalid(vec![cause.clone()]));
    let refused = w
        .registry
        .create(&w.widgets, Some("default"), widget("w", 1), write(&invalid, Part::Main, false))
        .await;
    match refused {
        Err(RegistryError::Invalid { kind, name, causes }) => {
            assert_eq!((kind.as_str(), name.as_str(), causes), ("Widget", "w", vec![cause]));
        }
        other => panic!("not refused as invalid: {other:?}"),
    }
}

#[tokio::test]
async fn a_mutating_admission_changes_the_object_before_validation_but_never_its_identity() {
    let w = world().await;
    let (r, ns) = (&w.registry, Some("default"));
    let labeller = Recorder::mutating();
    let created =
        r.create(&w.widgets, ns, widget("m", 1), write(&labeller, Part::Main, false)).await.unwrap();
    assert_eq!(meta(&created, "labels"), &json!({"admitted": "yes"}));
    assert_eq!(created["spec"]["tier"], "gold");
    assert_eq!(created, r.get(&w.widgets, ns, "m").await.unwrap(), "what is answered is what is stored");
    let uid = meta(&created, "uid").clone();
    assert_ne!(uid, json!("forged"), "a mutation does not choose the uid on create");
    let updated =
        r.update(&w.widgets, ns, "m", widget("m", 2), write(&labeller, Part::Main, false)).await.unwrap();
    assert_eq!(meta(&updated, "uid"), &uid, "a mutation does not change identity on update");
    assert_eq!(updated["spec"]["tier"], "gold");
    let status = json!({"apiVersion": "fleet.example.com/v1", "kind": "Widget", "metadata": {"name": "m"}, "spec": {"size": 9}, "status": {"phase": "Up"}});
    let plain = r.update(&w.widgets, ns, "m", widget("m", 4), unadmitted()).await.unwrap();
    let written = r.update(&w.widgets, ns, "m", status, write(&labeller, Part::Status, false)).await.unwrap();
    assert_eq!(written["spec"], plain["spec"], "a status write keeps the spec, mutated or not");
    assert_eq!(meta(&written, "labels"), meta(&plain, "labels"));
    assert_eq!(written["status"]["phase"], "Up");
    let deleted = r.delete(&w.widgets, ns, "m", &delete(&labeller, false)).await.unwrap();
    assert!(matches!(deleted, Deleted::Gone(_)));
}
