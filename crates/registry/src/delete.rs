//! Deleting an object: preconditions, finalizers and the deletion mark, and the propagation
//! policy of a Kind that owns dependents.

use std::sync::Arc;

use kayra_store::{Compare, Op, Outcome, Txn};
use serde_json::{Value, json};

use crate::{
    DeleteOptions, Deleted, Object, RETRIES, Registry, RegistryError, Resource, finalizers, meta_str,
    not_found, object, parse_revision, stale,
};

/// The finalizer a `Foreground` delete adds to an object that owns dependents: the garbage
/// collector deletes the dependents that block their owner's deletion, then removes it.
pub const FOREGROUND_FINALIZER: &str = "foregroundDeletion";

/// The finalizer an `Orphan` delete adds to an object that owns dependents: the garbage
/// collector releases the dependents (they stay, owned by nothing), then removes it.
pub const ORPHAN_FINALIZER: &str = "orphan";

const ORPHAN_POLICY: &str = "Orphan";
const FOREGROUND_POLICY: &str = "Foreground";

/// Records a delete's propagation policy in the finalizers of an object that owns dependents,
/// as kube-apiserver does: `Foreground` adds `foregroundDeletion` and drops `orphan`, `Orphan`
/// the reverse, `Background` drops both; no policy changes nothing. Also on an object already
/// terminating, so a second delete may change its mind. Answers whether the finalizers changed.
fn propagate(object: &mut Object, policy: Option<&str>) -> bool {
    let Some(policy) = policy else { return false };
    let wanted = match policy {
        FOREGROUND_POLICY => Some(FOREGROUND_FINALIZER),
        ORPHAN_POLICY => Some(ORPHAN_FINALIZER),
        _ => None,
    };
    let before = finalizers(object);
    let mut after: Vec<String> = before
        .iter()
        .filter(|f| {
            Some(f.as_str()) == wanted || !matches!(f.as_str(), FOREGROUND_FINALIZER | ORPHAN_FINALIZER)
        })
        .cloned()
        .collect();
    if let Some(wanted) = wanted.filter(|wanted| !after.iter().any(|f| f == wanted)) {
        after.push(wanted.to_owned());
    }
    if after == before {
        return false;
    }
    let metadata = object::metadata_mut(object);
    if after.is_empty() {
        metadata.remove("finalizers");
    } else {
        metadata.insert("finalizers".into(), json!(after));
    }
    true
}

impl Registry {
    /// Deletes an object, or marks it for deletion while finalizers remain. The deleter's
    /// admission decides on the object as it stands; a refusal deletes nothing, dry run or not.
    pub async fn delete(
        &self,
        resource: &Resource,
        namespace: Option<&str>,
        name: &str,
        options: &DeleteOptions,
    ) -> Result<Deleted, RegistryError> {
        if let Some(policy) = &options.propagation_policy
            && !matches!(policy.as_str(), ORPHAN_POLICY | "Background" | FOREGROUND_POLICY)
        {
            return Err(RegistryError::BadRequest(format!(
                "propagationPolicy {policy:?} is not one of Orphan, Background, Foreground"
            )));
        }
        if options.grace_period_seconds.is_some_and(|seconds| seconds < 0) {
            return Err(RegistryError::BadRequest("gracePeriodSeconds must not be negative".to_owned()));
        }
        let pinned = options
            .resource_version
            .as_deref()
            .filter(|rv| !rv.is_empty())
            .map(parse_revision)
            .transpose()?;
        let key = self.key(resource, namespace, name);
        for _ in 0..RETRIES {
            let Some(current) = self.store.get(&key).await? else {
                return Err(not_found(resource, name));
            };
            let mut object = Arc::unwrap_or_clone(self.stored_object(resource, &key, &current)?);
            if let Some(uid) = options.uid.as_deref().filter(|uid| *uid != meta_str(&object, "uid")) {
                return Err(RegistryError::Conflict {
                    resource: resource.qualified(),
                    name: name.to_owned(),
                    message: format!(
                        "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                        meta_str(&object, "uid")
                    ),
                });
            }
            if let Some(rv) = pinned.filter(|rv| *rv != current.mod_revision) {
                return Err(RegistryError::Conflict {
                    resource: resource.qualified(),
                    name: name.to_owned(),
                    message: format!(
                        "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {}",
                        current.mod_revision
                    ),
                });
            }
            options.validate(resource, &object)?;
            let refinalized = resource.strategy.owns_dependents()
                && propagate(&mut object, options.propagation_policy.as_deref());
            let terminating = !meta_str(&object, "deletionTimestamp").is_empty();
            if resource.strategy.finalizing(&object) {
                if terminating && !refinalized {
                    return Ok(Deleted::Pending(object));
                }
                if !terminating {
                    let metadata = object::metadata_mut(&mut object);
                    metadata.insert("deletionTimestamp".into(), Value::String(self.now()));
                    metadata.insert("deletionGracePeriodSeconds".into(), json!(0));
                    resource.strategy.mark_deleting(&mut object);
                }
                if options.dry_run {
                    return Ok(Deleted::Pending(object));
                }
                // The key stays on its lease: an update does not make an expiring object permanent.
                let txn = Txn {
                    compares: vec![Compare::ModifiedAt(key.clone(), current.mod_revision)],
                    ops: vec![Op::Put {
                        key: key.clone(),
                        value: Self::encode(&object),
                        lease: current.lease,
                    }],
                };
                match Outcome::from(self.store.txn(txn).await?) {
                    Outcome::Applied(revision) => {
                        object::metadata_mut(&mut object)
                            .insert("resourceVersion".into(), Value::String(revision.to_string()));
                        return Ok(Deleted::Pending(object));
                    }
                    Outcome::Conflict(_) => continue,
                }
            }
            if options.dry_run {
                return Ok(Deleted::Gone(object));
            }
            match self.delete_with_history(resource, &key, current.mod_revision).await? {
                Outcome::Applied(_) => return Ok(Deleted::Gone(object)),
                Outcome::Conflict(_) => continue,
            }
        }
        Err(stale(resource, name))
    }
}
