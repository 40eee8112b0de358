//! A set of paths, as a trie, and its `FieldsV1` form: one JSON object whose keys are path
//! elements (`f:spec`), whose values are the elements below, and where `".": {}` marks a
//! node that is itself in the set beside its children (`{}` alone: the node, no children).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value};

use crate::path::PathElement;

/// A set of paths.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSet {
    /// The elements below this node that end a path of the set.
    members: BTreeSet<PathElement>,
    /// The elements below this node that paths of the set go through, each never empty.
    children: BTreeMap<PathElement, FieldSet>,
}

/// The empty set, to stand for a child that is not there.
pub(crate) static EMPTY: FieldSet = FieldSet { members: BTreeSet::new(), children: BTreeMap::new() };

impl FieldSet {
    /// The empty set.
    pub fn new() -> FieldSet {
        FieldSet::default()
    }

    /// Whether the set holds no path.
    pub fn is_empty(&self) -> bool {
        self.members.is_empty() && self.children.is_empty()
    }

    /// Adds `path` (the empty path is no path, and adds nothing).
    pub fn insert(&mut self, path: &[PathElement]) {
        match path {
            [] => {}
            [last] => {
                self.members.insert(last.clone());
            }
            [first, rest @ ..] => self.children.entry(first.clone()).or_default().insert(rest),
        }
    }

    /// Whether `path` is in the set.
    pub fn has(&self, path: &[PathElement]) -> bool {
        match path {
            [] => false,
            [last] => self.members.contains(last),
            [first, rest @ ..] => self.children.get(first).is_some_and(|child| child.has(rest)),
        }
    }

    /// Whether the path of one element `element` below this node is in the set.
    pub(crate) fn is_member(&self, element: &PathElement) -> bool {
        self.members.contains(element)
    }

    /// The paths below `element`, when any of the set's paths go through it.
    pub(crate) fn child(&self, element: &PathElement) -> Option<&FieldSet> {
        self.children.get(element)
    }

    /// Every path of either set.
    pub fn union(&self, other: &FieldSet) -> FieldSet {
        let mut union = self.clone();
        union.members.extend(other.members.iter().cloned());
        for (element, child) in &other.children {
            let merged = match union.children.get(element) {
                Some(mine) => mine.union(child),
                None => child.clone(),
            };
            union.children.insert(element.clone(), merged);
        }
        union
    }

    /// The paths of this set that are not in `other`.
    pub fn difference(&self, other: &FieldSet) -> FieldSet {
        let members = self.members.difference(&other.members).cloned().collect();
        let children = self
            .children
            .iter()
            .filter_map(|(element, child)| {
                let left = match other.children.get(element) {
                    Some(theirs) => child.difference(theirs),
                    None => child.clone(),
                };
                (!left.is_empty()).then(|| (element.clone(), left))
            })
            .collect();
        FieldSet { members, children }
    }

    /// The paths in both sets.
    pub fn intersection(&self, other: &FieldSet) -> FieldSet {
        let members = self.members.intersection(&other.members).cloned().collect();
        let children = self
            .children
            .iter()
            .filter_map(|(element, child)| {
                let both = child.intersection(other.children.get(element)?);
                (!both.is_empty()).then(|| (element.clone(), both))
            })
            .collect();
        FieldSet { members, children }
    }

    /// Every path of the set, in order.
    pub fn paths(&self) -> Vec<Vec<PathElement>> {
        let mut paths = Vec::new();
        self.collect(&mut Vec::new(), &mut paths);
        paths
    }

    fn collect(&self, prefix: &mut Vec<PathElement>, paths: &mut Vec<Vec<PathElement>>) {
        let elements: BTreeSet<&PathElement> = self.members.iter().chain(self.children.keys()).collect();
        for element in elements {
            prefix.push(element.clone());
            if self.members.contains(element) {
                paths.push(prefix.clone());
            }
            if let Some(child) = self.children.get(element) {
                child.collect(prefix, paths);
            }
            prefix.pop();
        }
    }

    /// Whether the set and the set `fields_v1` encodes (as this server writes it: keys in
    /// canonical form) share a path, found without decoding `fields_v1`.
    pub(crate) fn meets_fields_v1(&self, fields_v1: &Map<String, Value>) -> bool {
        let member = |below: &Map<String, Value>| below.is_empty() || below.contains_key(".");
        self.members.iter().any(|element| {
            matches!(fields_v1.get(&element.encode()), Some(Value::Object(below)) if member(below))
        }) || self.children.iter().any(|(element, child)| {
            matches!(fields_v1.get(&element.encode()), Some(Value::Object(below)) if child.meets_fields_v1(below))
        })
    }

    /// Whether every path of the set is in the set `fields_v1` encodes (as this server writes
    /// it), found without decoding `fields_v1`.
    pub(crate) fn within_fields_v1(&self, fields_v1: &Map<String, Value>) -> bool {
        let member = |below: &Map<String, Value>| below.is_empty() || below.contains_key(".");
        self.members.iter().all(|element| {
            matches!(fields_v1.get(&element.encode()), Some(Value::Object(below)) if member(below))
        }) && self.children.iter().all(|(element, child)| {
            matches!(fields_v1.get(&element.encode()), Some(Value::Object(below)) if child.within_fields_v1(below))
        })
    }

    /// The set in the `FieldsV1` form.
    pub fn to_fields_v1(&self) -> Value {
        let mut object = Map::new();
        for element in &self.members {
            if !self.children.contains_key(element) {
                object.insert(element.encode(), Value::Object(Map::new()));
            }
        }
        for (element, child) in &self.children {
            let mut encoded = match child.to_fields_v1() {
                Value::Object(map) => map,
                _ => Map::new(),
            };
            if self.members.contains(element) {
                encoded.insert(".".to_owned(), Value::Object(Map::new()));
            }
            object.insert(element.encode(), Value::Object(encoded));
        }
        Value::Object(object)
    }

    /// The set a `FieldsV1` value holds. Keys of a kind this server does not know are skipped,
    /// as kube-apiserver skips them; anything else malformed is refused, saying what.
    pub fn from_fields_v1(value: &Value) -> Result<FieldSet, String> {
        let Value::Object(object) = value else {
            return Err("fieldsV1 must be a JSON object".to_owned());
        };
        let mut set = FieldSet::new();
        for (key, inner) in object {
            if key == "." {
                continue;
            }
            let Some(element) = PathElement::decode(key)? else { continue };
            let Value::Object(below) = inner else {
                return Err(format!("fieldsV1: the value of {key:?} must be a JSON object"));
            };
            if below.is_empty() || below.contains_key(".") {
                set.members.insert(element.clone());
            }
            let child = FieldSet::from_fields_v1(inner)?;
            if !child.is_empty() {
                set.children.insert(element, child);
            }
        }
        Ok(set)
    }
}

#[cfg(test)]
mod tests;
