//! The two ways a write changes who manages what.
//!
//! - [`apply`]: an applied configuration is merged onto the live object; the applier comes to
//!   own exactly what it applied; what it applied last time and no longer applies is removed
//!   unless another manager claims it; a field another manager owns whose value would change is
//!   a conflict, refused unless forced (then the applier takes it). The manager `kubectl`
//!   moving from client-side apply is eased as kube-apiserver eases it (see `last_applied`).
//! - [`record_update`]: any other write (create, update, patch, a subresource) is compared with
//!   the live object; the writer takes every field it added or changed from every other
//!   manager, and never conflicts.
//!
//! `apiVersion`, `kind` and the `metadata` the server keeps (name, uid, resourceVersion...)
//! are owned by nobody. A [`Scope`] leaves out what a write cannot change (`status` for the
//! object of a Kind whose status is a subresource, everything but `status` for that
//! subresource), so that it is never owned or conflicted on there.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::error::{Conflict, MergeError};
use crate::last_applied;
use crate::managed::{Entry, ManagedFields, Operation, asks_reset, metadata, updated_encoded};
use crate::path::{PathElement, display};
use crate::schema::Schema;
use crate::set::FieldSet;
use crate::typed::{self, Comparison};

/// Who writes: the manager an entry is recorded for.
#[derive(Debug, Clone, Copy)]
pub struct Writer<'a> {
    /// The manager's name (`fieldManager`, or what the client's user agent names).
    pub manager: &'a str,
    /// The subresource written through (`status`, `scale`), or empty.
    pub subresource: &'a str,
    /// The resource's `group/version`.
    pub api_version: &'a str,
    /// Now, in RFC 3339 to the second: the entry's time when the write changes the object.
    pub time: &'a str,
}

/// The part of an object a write may change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Everything.
    Whole,
    /// Everything but `status`: the object of a Kind whose status is a subresource.
    AllButStatus,
    /// Only `status` (and what names the object): its status subresource.
    OnlyStatus,
}

impl Scope {
    fn includes(self, field: &str) -> bool {
        match (self, field) {
            (_, "apiVersion" | "kind") => false,
            (Scope::AllButStatus, "status") => false,
            (Scope::OnlyStatus, other) => other == "status",
            _ => true,
        }
    }
}

/// The manager that owns an object's fields as they were before its first apply, when it had
/// no managers: changing them conflicts.
pub const BEFORE_FIRST_APPLY: &str = "before-first-apply";

/// The `metadata` fields the server keeps, which nobody owns.
const SERVER_METADATA: &[&str] = &[
    "name",
    "namespace",
    "creationTimestamp",
    "selfLink",
    "uid",
    "clusterName",
    "generation",
    "managedFields",
    "resourceVersion",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
];

/// Applies `config` (a configuration of one object, its `metadata.managedFields` unset) as
/// `writer` onto `live` (`None`: the object is created). Answers the merged object with its
/// `metadata.managedFields`, or the conflicts when `force` is not set.
pub fn apply(
    schema: &Schema,
    live: Option<&Map<String, Value>>,
    config: &Map<String, Value>,
    writer: &Writer<'_>,
    scope: Scope,
    force: bool,
) -> Result<Map<String, Value>, MergeError> {
    if metadata(config).and_then(|m| m.get("managedFields")).is_some_and(|fields| !fields.is_null()) {
        return Err(MergeError::ManagedFields("metadata.managedFields must be nil".to_owned()));
    }
    let (root, sent) = (schema.root(), config);
    let mut config = Value::Object(scoped(config, scope));
    typed::drop_undeclared(schema, root, &mut config);
    typed::check(schema, root, &config, &mut Vec::new())
        .map_err(|(path, message)| MergeError::Invalid { field: dotted(&path), message })?;
    let Value::Object(config) = config else { unreachable!("built as an object above") };

    let mut managers = match live {
        Some(live) => ManagedFields::decode(metadata(live).and_then(|m| m.get("managedFields")))
            .map_err(|error| MergeError::ManagedFields(format!("the stored object's {error}")))?,
        None => ManagedFields::new(),
    };
    if let (Some(live), true) = (live, managers.is_empty()) {
        let fields = owned_paths(schema, live, scope);
        if !fields.is_empty() {
            managers.entries_mut().push(Entry {
                manager: BEFORE_FIRST_APPLY.to_owned(),
                operation: Operation::Update,
                api_version: writer.api_version.to_owned(),
                time: None,
                subresource: String::new(),
                fields,
            });
        }
    }
    let applier = Entry {
        manager: writer.manager.to_owned(),
        operation: Operation::Apply,
        api_version: writer.api_version.to_owned(),
        time: None,
        subresource: writer.subresource.to_owned(),
        fields: owned_paths(schema, &config, scope),
    };
    let last = managers.find(&applier).cloned();

    let mut merged = typed::merge(schema, root, live.cloned().map(Value::Object), &Value::Object(config));
    if let Some(last) = &last {
        let mut kept = applier.fields.clone();
        for entry in managers.entries().iter().filter(|entry| !entry.same_manager(&applier)) {
            kept = kept.union(&entry.fields);
        }
        for path in [&["apiVersion"][..], &["kind"], &["metadata", "name"], &["metadata", "namespace"]] {
            kept.insert(
                &path.iter().map(|field| PathElement::Field((*field).to_owned())).collect::<Vec<_>>(),
            );
        }
        typed::prune(schema, root, &mut merged, &last.fields, &kept);
    }
    let Value::Object(mut merged) = merged else { unreachable!("an object merged onto an object") };

    let comparison = compare(schema, live, &merged, scope);
    let changed = comparison.changed();
    let taken: Vec<(usize, FieldSet)> = managers
        .entries()
        .iter()
        .enumerate()
        .filter(|(_, entry)| !entry.same_manager(&applier))
        .map(|(at, entry)| (at, entry.fields.intersection(&changed)))
        .filter(|(_, taken)| !taken.is_empty())
        .collect();
    if !taken.is_empty() && !force {
        // kubectl moving from client-side apply may take what it applied there and still holds.
        let allowed = match (writer.manager, live) {
            (last_applied::KUBECTL, Some(live)) => {
                last_applied::still_applied(schema, live, writer.api_version, scope)
            }
            _ => FieldSet::new(),
        };
        let conflicts: Vec<Conflict> = taken
            .iter()
            .flat_map(|(at, taken)| {
                let manager = managers.entries()[*at].describe();
                let paths = taken.difference(&allowed).paths();
                paths
                    .into_iter()
                    .map(move |path| Conflict { manager: manager.clone(), field: display(&path) })
            })
            .collect();
        if !conflicts.is_empty() {
            return Err(conflict_error(conflicts));
        }
    }
    let entries = managers.entries_mut();
    for (at, taken) in &taken {
        entries[*at].fields = entries[*at].fields.difference(taken);
    }
    for entry in entries.iter_mut().filter(|entry| !entry.same_manager(&applier)) {
        entry.fields = entry.fields.difference(&comparison.removed);
    }
    // The time says when the applier last changed the object: an apply that changes no value
    // keeps it.
    let time = match comparison.is_empty() {
        true => last.as_ref().and_then(|last| last.time.clone()),
        false => Some(writer.time.to_owned()),
    };
    managers.put(Entry { time, ..applier });
    managers.drop_empty();
    set_managed_fields(&mut merged, &managers);
    if let (last_applied::KUBECTL, Some(live)) = (writer.manager, live) {
        last_applied::rewrite(live, sent, &mut merged);
    }
    Ok(merged)
}

/// Records a write that is not an apply: `new` (the object to be stored, whose
/// `metadata.managedFields` are what the request sent or kept) gets the managers it will be
/// stored with. The writer takes every field it added or changed in `scope`, from every other
/// manager; fields it removed are nobody's.
///
/// What a request sends as `metadata.managedFields` replaces the live ones when it differs
/// from them and `honour_request` holds (a write of the object, not of a subresource): a valid
/// list is taken as it is, an empty one (`[]` or `[{}]`) clears them, an invalid one is
/// ignored. An existing object that has no managers is not tracked, as kube-apiserver leaves
/// objects written before managed fields were kept; a created one always is.
pub fn record_update(
    schema: &Schema,
    live: Option<&Map<String, Value>>,
    new: &mut Map<String, Value>,
    writer: &Writer<'_>,
    scope: Scope,
    honour_request: bool,
) {
    let live_fields = live.and_then(metadata).and_then(|m| m.get("managedFields"));
    let sent = metadata(new).and_then(|m| m.get("managedFields"));
    let sent_other = honour_request && live.is_some() && sent.is_some_and(|sent| Some(sent) != live_fields);
    if let (Some(live), false) = (live, sent_other) {
        // The stored managers, of which a write decodes only those it touches: most writes
        // change one manager's fields, or none.
        let Some(Value::Array(stored)) =
            live_fields.filter(|fields| fields.as_array().is_some_and(|a| !a.is_empty()))
        else {
            // Not tracked.
            set_managed_fields(new, &ManagedFields::new());
            return;
        };
        let entries = match take_managed_fields(new) {
            Some(Value::Array(sent)) if &sent == stored => sent,
            _ => stored.clone(),
        };
        let comparison = compare(schema, Some(live), new, scope);
        if comparison.is_empty() {
            put_managed_fields(new, Value::Array(entries));
            return;
        }
        let like = updater(writer);
        match updated_encoded(entries, &like, &comparison.changed(), &comparison.removed) {
            Some(updated) if updated.is_empty() => {}
            Some(updated) => put_managed_fields(new, Value::Array(updated)),
            None => {
                let managers = ManagedFields::decode(live_fields).unwrap_or_default();
                set_managed_fields(new, &update(managers, &comparison, like));
            }
        }
        return;
    }
    // A create, or managers the request sent in place of the stored ones.
    let managers = match (live, sent) {
        (None, _) => ManagedFields::new(),
        (Some(_), Some(sent)) if asks_reset(sent) => ManagedFields::new(),
        (Some(_), sent) => ManagedFields::decode(sent)
            .unwrap_or_else(|_| ManagedFields::decode(live_fields).unwrap_or_default()),
    };
    if live.is_some() && managers.is_empty() {
        // Cleared, or still not tracked.
        return set_managed_fields(new, &managers);
    }
    let comparison = compare(schema, live, new, scope);
    let managers = match comparison.is_empty() {
        true => managers,
        false => update(managers, &comparison, updater(writer)),
    };
    set_managed_fields(new, &managers);
}

/// The entry an update by `writer` is recorded in, without its fields.
fn updater(writer: &Writer<'_>) -> Entry {
    Entry {
        manager: writer.manager.to_owned(),
        operation: Operation::Update,
        api_version: writer.api_version.to_owned(),
        time: Some(writer.time.to_owned()),
        subresource: writer.subresource.to_owned(),
        fields: FieldSet::new(),
    }
}

/// The managers after a write by `like` that made `comparison`.
fn update(mut managers: ManagedFields, comparison: &Comparison, like: Entry) -> ManagedFields {
    let changed = comparison.changed();
    let taken = changed.union(&comparison.removed);
    for entry in managers.entries_mut().iter_mut().filter(|entry| !entry.same_manager(&like)) {
        entry.fields = entry.fields.difference(&taken);
    }
    let before = managers.find(&like).map(|entry| entry.fields.clone()).unwrap_or_default();
    let fields = before.union(&changed).difference(&comparison.removed);
    managers.put(Entry { fields, ..like });
    managers.drop_empty();
    managers.cap_updates();
    managers
}

/// What changed from `old` to `new` within `scope`, leaving out what the server keeps.
pub(crate) fn compare(
    schema: &Schema,
    old: Option<&Map<String, Value>>,
    new: &Map<String, Value>,
    scope: Scope,
) -> Comparison {
    let mut comparison = Comparison::default();
    let root = schema.root();
    let empty = Map::new();
    let old_map = old.unwrap_or(&empty);
    let mut path = Vec::new();
    for name in union_keys(old_map, new).into_iter().filter(|name| scope.includes(name)) {
        let (ty, _) = schema.entry(root, name);
        path.push(PathElement::Field(name.to_owned()));
        if name == "metadata" {
            let old_meta = old_map.get(name).and_then(Value::as_object).unwrap_or(&empty);
            let new_meta = new.get(name).and_then(Value::as_object).unwrap_or(&empty);
            for field in union_keys(old_meta, new_meta).into_iter().filter(|f| !SERVER_METADATA.contains(f)) {
                let (field_ty, _) = schema.entry(ty, field);
                path.push(PathElement::Field(field.to_owned()));
                typed::compare(
                    schema,
                    field_ty,
                    old_meta.get(field),
                    new_meta.get(field),
                    &mut path,
                    &mut comparison,
                );
                path.pop();
            }
        } else {
            typed::compare(schema, ty, old_map.get(name), new.get(name), &mut path, &mut comparison);
        }
        path.pop();
    }
    comparison
}

/// The paths `object` sets within `scope`, leaving out what the server keeps.
pub(crate) fn owned_paths(schema: &Schema, object: &Map<String, Value>, scope: Scope) -> FieldSet {
    let mut set = FieldSet::new();
    let root = schema.root();
    let mut path = Vec::new();
    for (name, value) in object.iter().filter(|(name, _)| scope.includes(name)) {
        let (ty, _) = schema.entry(root, name);
        path.push(PathElement::Field(name.clone()));
        match (name.as_str(), value) {
            ("metadata", Value::Object(fields)) => {
                for (field, value) in
                    fields.iter().filter(|(field, _)| !SERVER_METADATA.contains(&field.as_str()))
                {
                    let (field_ty, _) = schema.entry(ty, field);
                    path.push(PathElement::Field(field.clone()));
                    typed::field_set(schema, field_ty, value, &mut path, &mut set);
                    path.pop();
                }
            }
            ("metadata", _) => {}
            _ => typed::field_set(schema, ty, value, &mut path, &mut set),
        }
        path.pop();
    }
    set
}

/// `config` without what `scope` leaves out; a status configuration keeps of `metadata` only
/// what names the object and pins its version.
fn scoped(config: &Map<String, Value>, scope: Scope) -> Map<String, Value> {
    let mut scoped: Map<String, Value> = config
        .iter()
        .filter(|(name, _)| {
            matches!(name.as_str(), "apiVersion" | "kind" | "metadata") || scope.includes(name)
        })
        .map(|(name, value)| (name.clone(), value.clone()))
        .collect();
    if scope == Scope::OnlyStatus
        && let Some(Value::Object(metadata)) = scoped.get_mut("metadata")
    {
        metadata.retain(|field, _| matches!(field.as_str(), "name" | "namespace" | "resourceVersion"));
    }
    scoped
}

fn union_keys<'a>(a: &'a Map<String, Value>, b: &'a Map<String, Value>) -> Vec<&'a str> {
    let mut keys: Vec<&str> = a.keys().map(String::as_str).collect();
    keys.extend(b.keys().map(String::as_str).filter(|key| !a.contains_key(*key)));
    keys
}

fn take_managed_fields(object: &mut Map<String, Value>) -> Option<Value> {
    object
        .get_mut("metadata")
        .and_then(Value::as_object_mut)
        .and_then(|metadata| metadata.remove("managedFields"))
}

fn put_managed_fields(object: &mut Map<String, Value>, managers: Value) {
    if let Value::Object(metadata) = object.entry("metadata").or_insert_with(|| Value::Object(Map::new())) {
        metadata.insert("managedFields".to_owned(), managers);
    }
}

fn set_managed_fields(object: &mut Map<String, Value>, managers: &ManagedFields) {
    let metadata = object.entry("metadata").or_insert_with(|| Value::Object(Map::new()));
    let Value::Object(metadata) = metadata else { return };
    match managers.encode() {
        Some(encoded) => metadata.insert("managedFields".to_owned(), encoded),
        None => metadata.remove("managedFields"),
    };
}

/// A path as a field error names it: `spec.env[1]`.
fn dotted(path: &[PathElement]) -> String {
    display(path).trim_start_matches('.').to_owned()
}

/// The conflict error kube-apiserver answers: one line for one conflict, else the conflicts
/// grouped by manager.
fn conflict_error(conflicts: Vec<Conflict>) -> MergeError {
    let message = match conflicts.as_slice() {
        [only] => format!("Apply failed with 1 conflict: conflict with {}: {}", only.manager, only.field),
        _ => {
            let mut by_manager: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
            for conflict in &conflicts {
                by_manager.entry(&conflict.manager).or_default().push(&conflict.field);
            }
            let lines: Vec<String> = by_manager
                .iter()
                .flat_map(|(manager, fields)| {
                    std::iter::once(format!("conflicts with {manager}:"))
                        .chain(fields.iter().map(|field| format!("- {field}")))
                })
                .collect();
            format!("Apply failed with {} conflicts: {}", conflicts.len(), lines.join("\n"))
        }
    };
    MergeError::Conflicts { message, conflicts }
}

#[cfg(test)]
mod tests;
