//! The walks over a value and its type that everything else is made of: the paths a value sets
//! (what an applier owns), what changed between two values (what a writer takes over, and what
//! conflicts), the merge of an applied configuration onto the live object, and the removal of
//! what an applier stopped applying.
//!
//! A list of type map whose items repeat a key (several whole-Secret imports in one `env`,
//! each with an empty name) is handled whole, as an atomic list: its items cannot be told
//! apart, so they are owned and replaced together.

use std::collections::{HashMap, HashSet};

use serde_json::{Map, Value};

use crate::path::{PathElement, canonical};
use crate::schema::{ListKind, Schema, Type, TypeId, UNTYPED};
use crate::set::{EMPTY, FieldSet};

/// How a value of a type merges.
enum Shape<'v> {
    /// One leaf: a scalar, `null`, an atomic list or map, or a value whose shape is not its
    /// type's.
    Leaf,
    /// An object merged key by key.
    Map(&'v Map<String, Value>),
    /// A set: each distinct item on its own.
    Set(&'v [Value]),
    /// A list of type map: each item by its key, in order.
    Keyed(Vec<(PathElement, &'v Value)>),
}

fn shape<'v>(schema: &Schema, ty: TypeId, value: &'v Value) -> Shape<'v> {
    match (schema.get(ty), value) {
        (Type::Map(map), Value::Object(entries)) if !map.atomic => Shape::Map(entries),
        (Type::Untyped, Value::Object(entries)) => Shape::Map(entries),
        (Type::List(list), Value::Array(items)) => match &list.kind {
            ListKind::Atomic => Shape::Leaf,
            ListKind::Set => Shape::Set(items),
            ListKind::Map(keys) => match keyed(schema, list.items, keys, items) {
                Ok(keyed) => Shape::Keyed(keyed),
                Err(_) => Shape::Leaf,
            },
        },
        _ => Shape::Leaf,
    }
}

/// Why a list of type map cannot be merged by its keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum KeyError {
    /// An item is not an object.
    NotAnObject(usize),
    /// An item leaves out a key that has no default.
    Missing(usize, String),
    /// A key's value is not a string, number or boolean.
    NotScalar(usize, String),
    /// Two items have the same key.
    Duplicate(usize),
}

impl KeyError {
    /// What is wrong, in kube-apiserver's words.
    pub(crate) fn describe(&self) -> (usize, String) {
        match self {
            KeyError::NotAnObject(at) => {
                (*at, "associative list with keys has an element that is not a map".to_owned())
            }
            KeyError::Missing(at, key) => (
                *at,
                format!(
                    "associative list with keys has an element that omits key field {key:?} (and doesn't have default value)"
                ),
            ),
            KeyError::NotScalar(at, key) => {
                (*at, format!("key field {key:?} must be a string, number or boolean"))
            }
            KeyError::Duplicate(at) => (*at, "duplicate entries for key".to_owned()),
        }
    }
}

/// Each item of a list of type map with its key element, in order.
pub(crate) fn keyed<'v>(
    schema: &Schema,
    items_ty: TypeId,
    keys: &[String],
    items: &'v [Value],
) -> Result<Vec<(PathElement, &'v Value)>, KeyError> {
    let item_type = schema.map(items_ty);
    let mut seen = HashSet::with_capacity(items.len());
    let mut keyed = Vec::with_capacity(items.len());
    for (at, item) in items.iter().enumerate() {
        let Value::Object(fields) = item else { return Err(KeyError::NotAnObject(at)) };
        let mut key = Map::new();
        for name in keys {
            let value = match fields.get(name).filter(|value| !value.is_null()) {
                Some(value) => value,
                None => item_type
                    .and_then(|map| map.fields.get(name))
                    .and_then(|field| field.default.as_ref())
                    .ok_or_else(|| KeyError::Missing(at, name.clone()))?,
            };
            if !matches!(value, Value::String(_) | Value::Number(_) | Value::Bool(_)) {
                return Err(KeyError::NotScalar(at, name.clone()));
            }
            key.insert(name.clone(), value.clone());
        }
        let element = PathElement::Key(canonical(&Value::Object(key)));
        if !seen.insert(element.clone()) {
            return Err(KeyError::Duplicate(at));
        }
        keyed.push((element, item));
    }
    Ok(keyed)
}

/// Adds to `out` the paths `value` sets, as an applier owns them: every leaf; every item of a
/// set or list of type map (an item of the latter with its fields); every key of a map that is
/// not a declared field (a label); and every empty map or list.
pub(crate) fn field_set(
    schema: &Schema,
    ty: TypeId,
    value: &Value,
    path: &mut Vec<PathElement>,
    out: &mut FieldSet,
) {
    match shape(schema, ty, value) {
        Shape::Leaf => out.insert(path),
        Shape::Map(entries) if entries.is_empty() => out.insert(path),
        Shape::Map(entries) => {
            for (name, child) in entries {
                let (child_ty, declared) = schema.entry(ty, name);
                path.push(PathElement::Field(name.clone()));
                if !declared {
                    out.insert(path);
                }
                field_set(schema, child_ty, child, path, out);
                path.pop();
            }
        }
        Shape::Set([]) => out.insert(path),
        Shape::Keyed(items) if items.is_empty() => out.insert(path),
        Shape::Set(items) => {
            for item in items {
                path.push(PathElement::Value(canonical(item)));
                out.insert(path);
                path.pop();
            }
        }
        Shape::Keyed(items) => {
            let items_ty = list_items(schema, ty);
            for (element, item) in items {
                path.push(element);
                out.insert(path);
                field_set(schema, items_ty, item, path, out);
                path.pop();
            }
        }
    }
}

fn list_items(schema: &Schema, ty: TypeId) -> TypeId {
    match schema.get(ty) {
        Type::List(list) => list.items,
        _ => UNTYPED,
    }
}

/// What changed from one value to another: paths that appeared (with every container that did
/// not exist before), changed, or went (with everything under them).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Comparison {
    pub(crate) added: FieldSet,
    pub(crate) modified: FieldSet,
    pub(crate) removed: FieldSet,
}

impl Comparison {
    pub(crate) fn is_empty(&self) -> bool {
        self.added.is_empty() && self.modified.is_empty() && self.removed.is_empty()
    }

    /// What a writer takes from every other manager: what it added or changed.
    pub(crate) fn changed(&self) -> FieldSet {
        self.added.union(&self.modified)
    }
}

/// Adds to `comparison` what changed at `path` from `old` to `new` (either may be absent).
pub(crate) fn compare(
    schema: &Schema,
    ty: TypeId,
    old: Option<&Value>,
    new: Option<&Value>,
    path: &mut Vec<PathElement>,
    comparison: &mut Comparison,
) {
    if let (Some(old), Some(new)) = (old, new)
        && old == new
    {
        return;
    }
    let old_shape = old.map(|old| shape(schema, ty, old));
    let new_shape = new.map(|new| shape(schema, ty, new));
    match (old_shape, new_shape) {
        (None, None) => {}
        (Some(Shape::Map(old)), Some(Shape::Map(new))) => {
            for (name, child) in old {
                let (child_ty, _) = schema.entry(ty, name);
                path.push(PathElement::Field(name.clone()));
                compare(schema, child_ty, Some(child), new.get(name), path, comparison);
                path.pop();
            }
            for (name, child) in new.iter().filter(|(name, _)| !old.contains_key(*name)) {
                let (child_ty, _) = schema.entry(ty, name);
                path.push(PathElement::Field(name.clone()));
                compare(schema, child_ty, None, Some(child), path, comparison);
                path.pop();
            }
        }
        (Some(Shape::Set(old)), Some(Shape::Set(new))) => {
            let old: HashSet<String> = old.iter().map(canonical).collect();
            let new: HashSet<String> = new.iter().map(canonical).collect();
            for gone in old.difference(&new) {
                path.push(PathElement::Value(gone.clone()));
                comparison.removed.insert(path);
                path.pop();
            }
            for came in new.difference(&old) {
                path.push(PathElement::Value(came.clone()));
                comparison.added.insert(path);
                path.pop();
            }
        }
        (Some(Shape::Keyed(old)), Some(Shape::Keyed(new))) => {
            let items_ty = list_items(schema, ty);
            let new_items: HashMap<&PathElement, &Value> =
                new.iter().map(|(key, item)| (key, *item)).collect();
            let old_keys: HashSet<&PathElement> = old.iter().map(|(key, _)| key).collect();
            for (key, item) in &old {
                path.push(key.clone());
                compare(schema, items_ty, Some(item), new_items.get(key).copied(), path, comparison);
                path.pop();
            }
            for (key, item) in new.iter().filter(|(key, _)| !old_keys.contains(key)) {
                path.push(key.clone());
                compare(schema, items_ty, None, Some(item), path, comparison);
                path.pop();
            }
        }
        (old_shape, new_shape) => {
            let old_leaf = old_shape.as_ref().is_none_or(|shape| matches!(shape, Shape::Leaf));
            let new_leaf = new_shape.as_ref().is_none_or(|shape| matches!(shape, Shape::Leaf));
            match (old, new) {
                (None, Some(_)) => comparison.added.insert(path),
                (Some(_), None) => comparison.removed.insert(path),
                _ => comparison.modified.insert(path),
            }
            // A container that appears or goes brings or takes everything in it.
            if let (Some(old), false) = (old, old_leaf) {
                one_side(schema, ty, old, path, &mut comparison.removed);
            }
            if let (Some(new), false) = (new, new_leaf) {
                one_side(schema, ty, new, path, &mut comparison.added);
            }
        }
    }
}

/// Adds to `out` every path inside the container `value` (not the container itself): what a
/// container brings when it appears, or takes when it goes.
fn one_side(schema: &Schema, ty: TypeId, value: &Value, path: &mut Vec<PathElement>, out: &mut FieldSet) {
    match shape(schema, ty, value) {
        Shape::Leaf => {}
        Shape::Map(entries) => {
            for (name, child) in entries {
                let (child_ty, _) = schema.entry(ty, name);
                path.push(PathElement::Field(name.clone()));
                out.insert(path);
                one_side(schema, child_ty, child, path, out);
                path.pop();
            }
        }
        Shape::Set(items) => {
            for item in items {
                path.push(PathElement::Value(canonical(item)));
                out.insert(path);
                path.pop();
            }
        }
        Shape::Keyed(items) => {
            let items_ty = list_items(schema, ty);
            for (key, item) in items {
                path.push(key);
                out.insert(path);
                one_side(schema, items_ty, item, path, out);
                path.pop();
            }
        }
    }
}

/// `config` merged onto `live`: the configuration wins on leaves; maps merge key by key; sets
/// and lists of type map merge item by item, items of both following the configuration's
/// order and items only the live object has keeping their place; atomic values are replaced.
pub(crate) fn merge(schema: &Schema, ty: TypeId, live: Option<Value>, config: &Value) -> Value {
    match shape(schema, ty, config) {
        Shape::Leaf => config.clone(),
        Shape::Map(entries) => {
            let mut merged = match live {
                Some(Value::Object(live)) => live,
                _ => Map::new(),
            };
            for (name, child) in entries {
                let (child_ty, _) = schema.entry(ty, name);
                let value = merge(schema, child_ty, merged.remove(name), child);
                merged.insert(name.clone(), value);
            }
            Value::Object(merged)
        }
        Shape::Set(items) => {
            let live = match live {
                Some(Value::Array(live)) => live,
                _ => Vec::new(),
            };
            let live: Vec<(String, Value)> = live.into_iter().map(|item| (canonical(&item), item)).collect();
            let config: Vec<(String, &Value)> = items.iter().map(|item| (canonical(item), item)).collect();
            Value::Array(interleave(live, config, |_, config| (*config).clone()))
        }
        Shape::Keyed(items) => {
            let items_ty = list_items(schema, ty);
            let live_items = match live {
                Some(Value::Array(live)) => live,
                _ => Vec::new(),
            };
            let live = if live_items.is_empty() {
                Vec::new()
            } else {
                match keyed_owned(schema, ty, live_items) {
                    Some(live) => live,
                    // A live list that cannot be merged by its keys is replaced whole.
                    None => return config.clone(),
                }
            };
            Value::Array(interleave(live, items, |live, config| merge(schema, items_ty, live, config)))
        }
    }
}

/// The items of a live list of type map, each with its key; `None` when they cannot be keyed.
fn keyed_owned(schema: &Schema, ty: TypeId, items: Vec<Value>) -> Option<Vec<(PathElement, Value)>> {
    let Type::List(list) = schema.get(ty) else { return None };
    let ListKind::Map(keys) = &list.kind else { return None };
    let elements: Vec<PathElement> =
        keyed(schema, list.items, keys, &items).ok()?.into_iter().map(|(key, _)| key).collect();
    Some(elements.into_iter().zip(items).collect())
}

/// The items of a merged list: those of `config` in its order, each merged with its live
/// namesake by `merge_item`, and the live items the configuration does not have, each where
/// it was among them.
fn interleave<K: Eq + std::hash::Hash + Clone, C>(
    live: Vec<(K, Value)>,
    config: Vec<(K, C)>,
    merge_item: impl Fn(Option<Value>, &C) -> Value,
) -> Vec<Value> {
    let in_config: HashSet<K> = config.iter().map(|(key, _)| key.clone()).collect();
    let mut live_items: HashMap<K, Value> = HashMap::new();
    let mut live_order = Vec::with_capacity(live.len());
    for (key, item) in live {
        if in_config.contains(&key) {
            live_items.insert(key.clone(), item);
            live_order.push((key, None));
        } else {
            live_order.push((key, Some(item)));
        }
    }
    let mut merged = Vec::with_capacity(live_order.len() + config.len());
    let mut emitted = HashSet::with_capacity(config.len());
    let mut next = 0;
    let mut emit_until = |until: Option<&K>, merged: &mut Vec<Value>, live_items: &mut HashMap<K, Value>| {
        while next < config.len() {
            let (key, item) = &config[next];
            next += 1;
            if emitted.insert(key.clone()) {
                merged.push(merge_item(live_items.remove(key), item));
            }
            if until == Some(key) {
                break;
            }
        }
    };
    for (key, item) in live_order {
        match item {
            Some(item) => merged.push(item),
            None => emit_until(Some(&key), &mut merged, &mut live_items),
        }
    }
    emit_until(None, &mut merged, &mut live_items);
    merged
}

/// Removes from `value` what the applier applied last time (`last`) and nobody claims now
/// (`kept`: every manager's set, the applier's new one included): a field, map entry, set item
/// or list item goes whole, with everything under it, even when another manager owns something
/// below it. A declared field counts as claimed by a set holding anything under it.
pub(crate) fn prune(schema: &Schema, ty: TypeId, value: &mut Value, last: &FieldSet, kept: &FieldSet) {
    let claimed = |set: &FieldSet, element: &PathElement, declared: bool| {
        set.is_member(element) || (declared && set.child(element).is_some())
    };
    match value {
        Value::Object(entries) => {
            let granular = match schema.get(ty) {
                Type::Untyped => true,
                Type::Map(map) => !map.atomic,
                _ => false,
            };
            if !granular {
                return;
            }
            let names: Vec<String> = entries.keys().cloned().collect();
            for name in names {
                let (child_ty, declared) = schema.entry(ty, &name);
                let element = PathElement::Field(name.clone());
                if claimed(last, &element, declared) && !claimed(kept, &element, declared) {
                    entries.remove(&name);
                } else if let (Some(below), Some(child)) = (last.child(&element), entries.get_mut(&name)) {
                    prune(schema, child_ty, child, below, kept.child(&element).unwrap_or(&EMPTY));
                }
            }
        }
        Value::Array(items) => {
            let Type::List(list) = schema.get(ty) else { return };
            match &list.kind {
                ListKind::Atomic => {}
                ListKind::Set => items.retain(|item| {
                    let element = PathElement::Value(canonical(item));
                    !last.is_member(&element) || kept.is_member(&element)
                }),
                ListKind::Map(keys) => {
                    let Ok(elements) = keyed(schema, list.items, keys, items)
                        .map(|keyed| keyed.into_iter().map(|(key, _)| key).collect::<Vec<_>>())
                    else {
                        return;
                    };
                    let mut kept_items = Vec::with_capacity(items.len());
                    for (element, mut item) in elements.into_iter().zip(std::mem::take(items)) {
                        if last.is_member(&element) && !kept.is_member(&element) {
                            continue;
                        }
                        if let Some(below) = last.child(&element) {
                            prune(
                                schema,
                                list.items,
                                &mut item,
                                below,
                                kept.child(&element).unwrap_or(&EMPTY),
                            );
                        }
                        kept_items.push(item);
                    }
                    *items = kept_items;
                }
            }
        }
        _ => {}
    }
}

/// Removes from `value` the fields its type does not declare (what `fieldValidation` has
/// already warned of or refused), so that nobody owns them.
pub(crate) fn drop_undeclared(schema: &Schema, ty: TypeId, value: &mut Value) {
    match value {
        Value::Object(entries) => {
            entries.retain(|name, _| schema.declares(ty, name));
            for (name, child) in entries.iter_mut() {
                let (child_ty, _) = schema.entry(ty, name);
                drop_undeclared(schema, child_ty, child);
            }
        }
        Value::Array(items) => {
            let items_ty = list_items(schema, ty);
            for item in items {
                drop_undeclared(schema, items_ty, item);
            }
        }
        _ => {}
    }
}

/// Checks that an applied configuration can be merged: every item of a list of type map has
/// its keys, and no set holds an item twice. Answers the first problem, at its path.
pub(crate) fn check(
    schema: &Schema,
    ty: TypeId,
    value: &Value,
    path: &mut Vec<PathElement>,
) -> Result<(), (Vec<PathElement>, String)> {
    match (schema.get(ty), value) {
        (Type::List(list), Value::Array(items)) => {
            match &list.kind {
                ListKind::Atomic => return Ok(()),
                ListKind::Set => {
                    let mut seen = HashSet::with_capacity(items.len());
                    for (at, item) in items.iter().enumerate() {
                        if !seen.insert(canonical(item)) {
                            path.push(PathElement::Index(at));
                            return Err((
                                path.clone(),
                                format!("duplicate entries for value {}", canonical(item)),
                            ));
                        }
                    }
                }
                ListKind::Map(keys) => match keyed(schema, list.items, keys, items) {
                    // Repeated keys make the list atomic; missing ones make it unmergeable.
                    Ok(_) | Err(KeyError::Duplicate(_)) => {}
                    Err(error) => {
                        let (at, message) = error.describe();
                        path.push(PathElement::Index(at));
                        return Err((path.clone(), message));
                    }
                },
            }
            for (at, item) in items.iter().enumerate() {
                path.push(PathElement::Index(at));
                check(schema, list.items, item, path)?;
                path.pop();
            }
            Ok(())
        }
        (Type::Map(_) | Type::Untyped, Value::Object(entries)) => {
            for (name, child) in entries {
                let (child_ty, _) = schema.entry(ty, name);
                path.push(PathElement::Field(name.clone()));
                check(schema, child_ty, child, path)?;
                path.pop();
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests;
