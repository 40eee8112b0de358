//! Replacing an object: update, update-with-a-builder, merge and JSON patches, and the shared
//! replace under them that carries over what a writer may not change, stamps `generation` and
//! compares-and-swaps.

use kayra_store::{Compare, Op, Outcome, Revision, Txn};
use serde_json::{Value, json};

use crate::admission::Operation;
use crate::{
    Managed, Object, Part, PatchKind, RETRIES, Registry, RegistryError, Resource, WriteOptions, invalid,
    meta_str, not_found, object, parse_revision, path, stale,
};

/// The largest number of operations a JSON patch may hold.
pub const MAX_PATCH_OPERATIONS: usize = 10_000;

impl Registry {
    /// Replaces an object (or its status). A `resourceVersion` in the body must be current;
    /// without one the write applies to whatever is current.
    pub async fn update(
        &self,
        resource: &Resource,
        namespace: Option<&str>,
        name: &str,
        body: Value,
        options: WriteOptions,
    ) -> Result<Object, RegistryError> {
        let object = self.body(resource, namespace, body)?;
        let given = meta_str(&object, "name");
        if given != name {
            return Err(RegistryError::BadRequest(format!(
                "the name of the object ({given}) does not match the name on the URL ({name})"
            )));
        }
        let expected = match meta_str(&object, "resourceVersion") {
            "" => None,
            rv => Some(parse_revision(rv)?),
        };
        self.replace(resource, namespace, name, expected, options, Managed::Recorded, |_| Ok(object.clone()))
            .await
    }

    /// Writes what `build` makes of the current object, at `resource_version` when given (else
    /// on whatever is current, built again when another writer won a race): for a subresource
    /// whose write is computed from the object as it stands, such as a binding.
    pub async fn update_with(
        &self,
        resource: &Resource,
        namespace: Option<&str>,
        name: &str,
        resource_version: Option<&str>,
        options: WriteOptions,
        build: impl Fn(&Object) -> Result<Object, RegistryError>,
    ) -> Result<Object, RegistryError> {
        let expected = resource_version.filter(|rv| !rv.is_empty()).map(parse_revision).transpose()?;
        let build = |current: &Object| -> Result<Object, RegistryError> {
            let built = build(current)?;
            let built = self.body(resource, namespace, Value::Object(built))?;
            if meta_str(&built, "name") != name {
                return Err(RegistryError::BadRequest("a write may not change the object's name".to_owned()));
            }
            Ok(built)
        };
        self.replace(resource, namespace, name, expected, options, Managed::Recorded, build).await
    }

    /// Applies a patch to the current object (or its status) and writes the result. A patch
    /// that sets `metadata.resourceVersion` applies only at that version; otherwise a patch
    /// that loses a race to another writer is re-applied to the newer object.
    pub async fn patch(
        &self,
        resource: &Resource,
        namespace: Option<&str>,
        name: &str,
        kind: PatchKind,
        patch: &[u8],
        options: WriteOptions,
    ) -> Result<Object, RegistryError> {
        let patch: Value = serde_json::from_slice(patch)
            .map_err(|error| RegistryError::BadRequest(format!("the patch is not valid JSON: {error}")))?;
        let operations = match kind {
            PatchKind::Json => {
                let operations: json_patch::Patch =
                    serde_json::from_value(patch.clone()).map_err(|error| {
                        RegistryError::BadRequest(format!("the JSON patch is malformed: {error}"))
                    })?;
                if operations.0.len() > MAX_PATCH_OPERATIONS {
                    return Err(RegistryError::BadRequest(format!(
                        "the JSON patch has {} operations, more than the {MAX_PATCH_OPERATIONS} allowed",
                        operations.0.len()
                    )));
                }
                Some(operations)
            }
            PatchKind::Merge => {
                if !patch.is_object() {
                    return Err(RegistryError::BadRequest("a merge patch must be a JSON object".to_owned()));
                }
                None
            }
        };
        let apply = |current: &Object| -> Result<Object, RegistryError> {
            let mut document = Value::Object(current.clone());
            match &operations {
                Some(operations) => apply_bounded(&mut document, operations)?,
                None => json_patch::merge(&mut document, &patch),
            }
            let patched = self.body(resource, namespace, document)?;
            if meta_str(&patched, "name") != name {
                return Err(RegistryError::BadRequest("a patch may not change the object's name".to_owned()));
            }
            // A JSON patch that sets `metadata.resourceVersion` applies only at that version.
            let sent = meta_str(&patched, "resourceVersion");
            if kind == PatchKind::Json && !sent.is_empty() && sent != meta_str(current, "resourceVersion") {
                return Err(stale(resource, name));
            }
            Ok(patched)
        };
        let pinned = match kind {
            PatchKind::Merge => patch.pointer("/metadata/resourceVersion").and_then(Value::as_str),
            PatchKind::Json => None,
        };
        let expected = pinned.filter(|rv| !rv.is_empty()).map(parse_revision).transpose()?;
        self.replace(resource, namespace, name, expected, options, Managed::Recorded, apply).await
    }

    /// The heart of update, patch and apply: read, build the new object from the current
    /// one, carry over what clients cannot change, record its managers, validate, and
    /// compare-and-swap; retried when another writer won a race and the caller did not pin a
    /// version.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn replace(
        &self,
        resource: &Resource,
        namespace: Option<&str>,
        name: &str,
        expected: Option<Revision>,
        options: WriteOptions,
        managed: Managed,
        build: impl Fn(&Object) -> Result<Object, RegistryError>,
    ) -> Result<Object, RegistryError> {
        let key = self.key(resource, namespace, name);
        for _ in 0..RETRIES {
            let Some(current) = self.store.get(&key).await? else {
                return Err(not_found(resource, name));
            };
            if expected.is_some_and(|expected| expected != current.mod_revision) {
                return Err(stale(resource, name));
            }
            let stored = self.stored_object(resource, &key, &current)?;
            let old: &Object = &stored;
            let mut object = build(old)?;
            let mut causes = object::check_metadata(&object);
            if !causes.is_empty() {
                return Err(invalid(resource, &object, std::mem::take(&mut causes)));
            }
            // An apply decided its managers with the object; what is carried over keeps them.
            let applied = (managed == Managed::Applied)
                .then(|| object::metadata_mut(&mut object).remove("managedFields"));
            carry_over(resource, old, &mut object, options.part);
            resource.strategy.default(&mut object);
            match applied {
                Some(Some(managers)) => {
                    object::metadata_mut(&mut object).insert("managedFields".into(), managers);
                }
                Some(None) => {
                    object::metadata_mut(&mut object).remove("managedFields");
                }
                None => self.record_update(resource, Some(old), &mut object, &options),
            }
            if options.mutate(resource, Operation::Update, &mut object, Some(old))? {
                // A mutating plugin changes only what the writer could: identity, history and
                // the part not written stay as stored.
                carry_over(resource, old, &mut object, options.part);
            }
            causes.extend(resource.strategy.validate(&object, Some(old)));
            causes.extend(crate::history::door_causes(resource, &object, Some(old), options.part));
            if !causes.is_empty() {
                return Err(invalid(resource, &object, causes));
            }
            options.validate(resource, Operation::Update, &object, Some(old))?;
            // `generation` counts the author's changes to the spec. A binding's placement (or its
            // undoing) is the control plane's decision, and leaves it, as `pods/binding` does.
            let moved = options.part != Part::Binding && object::spec_of(&object) != object::spec_of(old);
            if moved {
                let generation = path(old, "metadata.generation").and_then(Value::as_i64).unwrap_or(0) + 1;
                object::metadata_mut(&mut object).insert("generation".into(), json!(generation));
            }
            let finished =
                !meta_str(&object, "deletionTimestamp").is_empty() && !resource.strategy.finalizing(&object);
            if options.dry_run {
                return Ok(object);
            }
            if finished {
                match self.delete_with_history(resource, &key, current.mod_revision).await? {
                    Outcome::Applied(_) => return Ok(object),
                    Outcome::Conflict(_) if expected.is_none() => continue,
                    Outcome::Conflict(_) => return Err(stale(resource, name)),
                }
            }
            if object == *old {
                return Ok(old.clone());
            }
            let (lease, granted) = self.lease_for_update(resource, old, &object, current.lease).await?;
            let mut ops = vec![Op::Put { key: key.clone(), value: Self::encode(&object), lease }];
            if moved {
                ops.extend(self.history_put(resource, &key, &object, &options));
            }
            let txn = Txn { compares: vec![Compare::ModifiedAt(key.clone(), current.mod_revision)], ops };
            let outcome = match (self.store.txn(txn).await, granted) {
                // A shared lease that ended early (revoked with everything on it): the next
                // attempt is granted a fresh one.
                (Err(kayra_store::StoreError::LeaseNotFound(_)), Some(granted)) => {
                    self.forget_lease(resource, granted);
                    continue;
                }
                (result, _) => Outcome::from(result?),
            };
            if let (Some(granted), Outcome::Conflict(_)) = (granted, &outcome) {
                self.give_back(resource, granted).await;
            }
            match outcome {
                Outcome::Applied(revision) => {
                    object::metadata_mut(&mut object)
                        .insert("resourceVersion".into(), Value::String(revision.to_string()));
                    self.hand_over(resource, &key, revision, &object);
                    return Ok(object);
                }
                Outcome::Conflict(None) => return Err(not_found(resource, name)),
                Outcome::Conflict(Some(_)) if expected.is_none() => continue,
                Outcome::Conflict(Some(_)) => return Err(stale(resource, name)),
            }
        }
        Err(stale(resource, name))
    }
}

/// The largest document a JSON patch may build, in bytes: no stored object can be larger.
const MAX_PATCHED_SIZE: usize = 3 * 1024 * 1024;

/// Applies a JSON patch one operation at a time, refusing it as soon as copies and additions
/// would grow the document past [`MAX_PATCHED_SIZE`]: a few `copy` operations can otherwise
/// double it again and again. Measuring costs at most the bound, since each added value counts.
fn apply_bounded(document: &mut Value, operations: &json_patch::Patch) -> Result<(), RegistryError> {
    let size = |value: &Value| serde_json::to_vec(value).map_or(usize::MAX, |bytes| bytes.len());
    let mut total = size(document);
    for operation in &operations.0 {
        let described = serde_json::to_value(operation).unwrap_or(Value::Null);
        let added = match described.get("op").and_then(Value::as_str) {
            Some("add" | "replace") => described.get("value").map_or(0, size),
            Some("copy") => described
                .get("from")
                .and_then(Value::as_str)
                .and_then(|from| document.pointer(from))
                .map_or(0, size),
            _ => 0,
        };
        total = total.saturating_add(added);
        if total > MAX_PATCHED_SIZE {
            return Err(RegistryError::BadRequest(format!(
                "the JSON patch would grow the object past {MAX_PATCHED_SIZE} bytes"
            )));
        }
        json_patch::patch(document, std::slice::from_ref(operation))
            .map_err(|error| RegistryError::BadRequest(format!("the JSON patch does not apply: {error}")))?;
    }
    Ok(())
}

/// Copies onto a written object what the writer may not change: identity and history always,
/// and `status` (on the object), everything but `status` (on `/status`) or everything but
/// `status.conditions` (on `/approval`); a binding writes the object and its status.
fn carry_over(resource: &Resource, old: &Object, object: &mut Object, part: Part) {
    if part == Part::Approval {
        let conditions = object.get("status").and_then(|status| status.get("conditions")).cloned();
        *object = old.clone();
        let status = object.entry("status").or_insert_with(|| Value::Object(Default::default()));
        if let Some(status) = status.as_object_mut() {
            match conditions {
                Some(conditions) => status.insert("conditions".into(), conditions),
                None => status.remove("conditions"),
            };
        }
        return;
    }
    if part == Part::Status {
        let status = object.remove("status");
        *object = old.clone();
        match status {
            Some(status) => object.insert("status".into(), status),
            None => object.remove("status"),
        };
        return;
    }
    if resource.status_subresource && matches!(part, Part::Main | Part::Door(_)) {
        match old.get("status") {
            Some(status) => object.insert("status".into(), status.clone()),
            None => object.remove("status"),
        };
        resource.strategy.carried_status(old, object);
    }
    let old_metadata = old.get("metadata").and_then(Value::as_object).cloned().unwrap_or_default();
    let metadata = object::metadata_mut(object);
    for field in [
        "uid",
        "creationTimestamp",
        "generation",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "namespace",
        "resourceVersion",
    ] {
        match old_metadata.get(field) {
            Some(value) => metadata.insert(field.into(), value.clone()),
            None => metadata.remove(field),
        };
    }
}
