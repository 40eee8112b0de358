//! History and rollback: the last spec states of each object of a Kind that keeps history
//! ([`Strategy::keeps_history`]), and the write that restores one.
//!
//! Each state is one store key beside the object, `<root>history/<object key>/<slot>`, where
//! the slot is the object's `generation` modulo the registry's history limit: a write that moves
//! `generation` puts its entry in the same transaction as the object, overwriting the entry the
//! limit lets go, so recording costs one more put and no read, and an object never has more
//! entries than the limit (a limit lowered later leaves the higher slots, which the listing
//! passes over beyond the limit and the object's delete removes). An entry's resourceVersion is its key's modification revision:
//! the object's write and its entry share one revision. A delete reads the object's entries and
//! deletes them in the same transaction as the object, compared on the object's revision, so no
//! entry outlives it and none is written meanwhile.
//!
//! What is recorded is the author's spec: creates, updates and patches that change it, and
//! rollbacks. Status writes, bindings (placement is the control plane's, and leaves
//! `generation`) and door writes (freeze and thaw, operations rather than new states) add none.

use kayra_api::kinds::revision::CHANGE_CAUSE_ANNOTATION;
use kayra_api::validation::FieldError;
use kayra_store::{Compare, Op, Outcome, RangeRequest, Revision, Txn};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::{Object, Part, Registry, RegistryError, Resource, WriteOptions, invalid, meta_str, object};

/// How many spec states of each object a registry keeps unless configured otherwise.
pub const DEFAULT_HISTORY_LIMIT: usize = 10;

/// The most spec states of one object a registry may be configured to keep: each may be as
/// large as the object, and a delete removes them all in one transaction.
pub const MAX_HISTORY_LIMIT: usize = 100;

/// One past spec state of an object.
#[derive(Debug, Clone, PartialEq)]
pub struct HistoryEntry {
    /// The revision of the write that stored it: the object's resourceVersion after that write.
    pub revision: Revision,
    /// The object's `metadata.generation` after that write.
    pub generation: i64,
    /// When it was written, RFC 3339.
    pub time: String,
    /// Who wrote it, when known.
    pub user: Option<String>,
    /// The object's `kubernetes.io/change-cause` annotation at that write.
    pub change_cause: Option<String>,
    /// The object's fields other than `apiVersion`, `kind`, `metadata` and `status`.
    pub state: Map<String, Value>,
}

/// An object and the spec states its history keeps, oldest first.
#[derive(Debug, Clone, PartialEq)]
pub struct History {
    /// The object as it is now.
    pub object: Object,
    /// Its last spec states (at most the registry's limit), oldest first.
    pub entries: Vec<HistoryEntry>,
}

/// An entry as the store keeps it; its revision is the key's own.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Stored {
    uid: String,
    generation: i64,
    time: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    user: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    change_cause: Option<String>,
    state: Map<String, Value>,
}

impl Registry {
    /// The same registry keeping at most `limit` spec states of each object of a Kind that
    /// keeps history (bounded by [`MAX_HISTORY_LIMIT`]; 0 keeps none).
    pub fn with_history_limit(mut self, limit: usize) -> Registry {
        self.history_limit = limit.min(MAX_HISTORY_LIMIT);
        self
    }

    /// The folder of the store an object's history lives under.
    fn history_prefix(&self, object_key: &str) -> String {
        let relative = object_key.strip_prefix(&self.root).unwrap_or(object_key);
        format!("{}history/{relative}/", self.root)
    }

    /// The put that records `object`'s spec state, as just written by `options`, in the same
    /// transaction as the object: for a Kind that keeps history, when the write is the
    /// author's (not a binding or a door) and the registry keeps any.
    pub(crate) fn history_put(
        &self,
        resource: &Resource,
        key: &str,
        object: &Object,
        options: &WriteOptions,
    ) -> Option<Op> {
        if !resource.strategy.keeps_history() || self.history_limit == 0 || options.part != Part::Main {
            return None;
        }
        let generation = crate::path(object, "metadata.generation").and_then(Value::as_i64).unwrap_or(0);
        let slot = generation.rem_euclid(i64::try_from(self.history_limit).unwrap_or(i64::MAX));
        let change_cause = object
            .get("metadata")
            .and_then(|m| m.get("annotations"))
            .and_then(|a| a.get(CHANGE_CAUSE_ANNOTATION))
            .and_then(Value::as_str)
            .map(str::to_owned);
        let entry = Stored {
            uid: meta_str(object, "uid").to_owned(),
            generation,
            time: self.now(),
            user: options.author.clone(),
            change_cause,
            state: object::spec_of(object),
        };
        let value = serde_json::to_vec(&entry).expect("JSON values serialise");
        Some(Op::put(format!("{}{slot:03}", self.history_prefix(key)), value))
    }

    /// The deletes of every entry of the object at `key`'s history, for the transaction that
    /// deletes the object: read now, so the transaction must compare the object's revision
    /// read before this (no entry is written without the object).
    pub(crate) async fn history_deletes(
        &self,
        resource: &Resource,
        key: &str,
    ) -> Result<Vec<Op>, RegistryError> {
        if !resource.strategy.keeps_history() {
            return Ok(Vec::new());
        }
        let found = self.store.range(&RangeRequest::prefix(self.history_prefix(key))).await?;
        Ok(found.kvs.into_iter().map(|kv| Op::delete(kv.key)).collect())
    }

    /// Deletes the object at `key` if its last write was at `revision`, with its history.
    pub(crate) async fn delete_with_history(
        &self,
        resource: &Resource,
        key: &str,
        revision: Revision,
    ) -> Result<Outcome, RegistryError> {
        let mut ops = vec![Op::delete(key)];
        ops.extend(self.history_deletes(resource, key).await?);
        let txn = Txn { compares: vec![Compare::ModifiedAt(key.to_owned(), revision)], ops };
        Ok(Outcome::from(self.store.txn(txn).await?))
    }

    /// The object and the spec states its history keeps, oldest first: at most the registry's
    /// limit, each of this very object (its uid) and none newer than it.
    pub async fn history(
        &self,
        resource: &Resource,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<History, RegistryError> {
        if !resource.strategy.keeps_history() {
            return Err(no_history(resource));
        }
        let object = self.get(resource, namespace, name).await?;
        let key = self.key(resource, namespace, name);
        let found = self.store.range(&RangeRequest::prefix(self.history_prefix(&key))).await?;
        let uid = meta_str(&object, "uid");
        let generation = crate::path(&object, "metadata.generation").and_then(Value::as_i64).unwrap_or(0);
        let mut entries: Vec<HistoryEntry> = found
            .kvs
            .into_iter()
            .filter_map(|kv| {
                let stored: Stored = serde_json::from_slice(&kv.value).ok()?;
                (stored.uid == uid && stored.generation <= generation).then_some(HistoryEntry {
                    revision: kv.mod_revision,
                    generation: stored.generation,
                    time: stored.time,
                    user: stored.user,
                    change_cause: stored.change_cause,
                    state: stored.state,
                })
            })
            .collect();
        entries.sort_by_key(|entry| (entry.generation, entry.revision));
        let excess = entries.len().saturating_sub(self.history_limit);
        entries.drain(..excess);
        Ok(History { object, entries })
    }

    /// Writes again the spec state of revision `to` of the object's history (`None`: the most
    /// recent one whose spec differs from the current spec), as `options`' writer: the current
    /// status stays, fields only a door writes stay as they are, as does what the Kind keeps
    /// from the current object ([`Strategy::restored`](crate::Strategy::restored)); the
    /// `kubernetes.io/change-cause` annotation becomes the revision's. The write is an update
    /// in every other way (admission, validation, `generation`, a new history entry). A
    /// revision the history does not list is refused, naming `toRevision`.
    pub async fn rollback(
        &self,
        resource: &Resource,
        namespace: Option<&str>,
        name: &str,
        to: Option<Revision>,
        options: WriteOptions,
    ) -> Result<Object, RegistryError> {
        let History { object, entries } = self.history(resource, namespace, name).await?;
        let current = object::spec_of(&object);
        let doors = resource.strategy.doors();
        let without_doors = |state: &Map<String, Value>| {
            let mut state = Value::Object(state.clone());
            for door in doors {
                clear(&mut state, door.pointer);
            }
            state
        };
        let chosen = match to {
            Some(revision) => entries.iter().find(|entry| entry.revision == revision),
            None => {
                let now = without_doors(&current);
                entries.iter().rev().find(|entry| without_doors(&entry.state) != now)
            }
        };
        let Some(entry) = chosen.cloned() else {
            let why = match to {
                Some(_) => "the history of this object lists no such revision",
                None => "the history of this object holds no earlier spec to return to",
            };
            let value = to.map_or_else(|| "\"0\"".to_owned(), |revision| format!("\"{revision}\""));
            return Err(invalid(resource, &object, vec![FieldError::invalid("toRevision", value, why)]));
        };
        let uid = meta_str(&object, "uid").to_owned();
        let restore = |current: &Object| -> Result<Object, RegistryError> {
            if meta_str(current, "uid") != uid {
                return Err(RegistryError::Conflict {
                    resource: resource.qualified(),
                    name: name.to_owned(),
                    message: "the object was deleted and created again since its history was read".to_owned(),
                });
            }
            let mut restored: Object = current
                .iter()
                .filter(|(field, _)| matches!(field.as_str(), "apiVersion" | "kind" | "metadata" | "status"))
                .map(|(field, value)| (field.clone(), value.clone()))
                .collect();
            restored.extend(entry.state.clone());
            let mut document = Value::Object(restored);
            let now = Value::Object(current.clone());
            for door in doors {
                match now.pointer(door.pointer) {
                    Some(value) => set(&mut document, door.pointer, value.clone()),
                    None => clear(&mut document, door.pointer),
                }
            }
            let mut restored = match document {
                Value::Object(restored) => restored,
                _ => Object::new(),
            };
            resource.strategy.restored(current, &mut restored);
            let metadata = object::metadata_mut(&mut restored);
            let annotations = metadata.entry("annotations").or_insert_with(|| Value::Object(Map::new()));
            if let Some(annotations) = annotations.as_object_mut() {
                match &entry.change_cause {
                    Some(cause) => {
                        annotations.insert(CHANGE_CAUSE_ANNOTATION.into(), Value::String(cause.clone()))
                    }
                    None => annotations.remove(CHANGE_CAUSE_ANNOTATION),
                };
                if annotations.is_empty() {
                    metadata.remove("annotations");
                }
            }
            Ok(restored)
        };
        self.update_with(resource, namespace, name, None, options, restore).await
    }
}

/// The refusal of a history read or rollback of a Kind that keeps none.
fn no_history(resource: &Resource) -> RegistryError {
    RegistryError::BadRequest(format!("{} keep no history", resource.qualified()))
}

/// Sets the value at a JSON pointer, making the maps on the way.
fn set(document: &mut Value, pointer: &str, value: Value) {
    let mut at = document;
    let mut steps = pointer.trim_start_matches('/').split('/').peekable();
    while let Some(step) = steps.next() {
        let Some(map) = at.as_object_mut() else { return };
        if steps.peek().is_none() {
            map.insert(step.to_owned(), value);
            return;
        }
        at = map.entry(step).or_insert_with(|| Value::Object(Map::new()));
    }
}

/// Removes the value at a JSON pointer, if there is one.
fn clear(document: &mut Value, pointer: &str) {
    let Some((parent, last)) = pointer.rsplit_once('/') else { return };
    let parent = if parent.is_empty() { Some(document) } else { document.pointer_mut(parent) };
    if let Some(map) = parent.and_then(Value::as_object_mut) {
        map.remove(last);
    }
}

/// The refusals of a write that changes a field only a door writes, when the write does not
/// come through that door: on create, a door field may not be set at all.
pub(crate) fn door_causes(
    resource: &Resource,
    object: &Object,
    old: Option<&Object>,
    part: Part,
) -> Vec<FieldError> {
    let doors = resource.strategy.doors();
    if doors.is_empty() {
        return Vec::new();
    }
    let value = |object: &Object, pointer: &str| -> Value {
        let mut steps = pointer.trim_start_matches('/').split('/');
        let first = steps.next().and_then(|step| object.get(step));
        match steps.try_fold(first, |at, step| Some(at?.get(step))).flatten() {
            // Unset, null and false are one state: a flag that is not raised.
            None | Some(Value::Null | Value::Bool(false)) => Value::Null,
            Some(value) => value.clone(),
        }
    };
    doors
        .iter()
        .filter(|door| !matches!(part, Part::Door(through) if door.subresources.contains(&through)))
        .filter(|door| {
            let now = value(object, door.pointer);
            match old {
                Some(old) => now != value(old, door.pointer),
                None => !now.is_null(),
            }
        })
        .map(|door| {
            let doors =
                door.subresources.iter().map(|sub| format!("POST .../{}/<name>/{sub}", resource.plural));
            FieldError::forbidden(
                door.field,
                &format!(
                    "may only be changed through its subresources ({}), not by a write of the object",
                    doors.collect::<Vec<_>>().join(", ")
                ),
            )
        })
        .collect()
}
