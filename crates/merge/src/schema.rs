//! The shape a merge follows: which values are leaves, which maps merge key by key, and which
//! lists merge item by item and by what key. It is read from an OpenAPI v3 schema with
//! Kubernetes' markers, the same document `kubectl explain` reads:
//!
//! - `x-kubernetes-list-type`: `atomic` (the default for a list that says nothing: replaced
//!   whole), `set` (scalar or atomic items, merged as a set) or `map` with
//!   `x-kubernetes-list-map-keys` (items merged by those keys; a key an item leaves out takes
//!   its schema `default`);
//! - `x-kubernetes-map-type`: `granular` (the default: merged key by key) or `atomic`;
//! - a schema that declares nothing (`{}`, or `x-kubernetes-preserve-unknown-fields`) is
//!   *untyped*: its maps merge key by key, its lists are atomic, as kube-apiserver deduces them.

use std::collections::{BTreeMap, HashMap};

use serde_json::{Map, Value};

use crate::error::MergeError;

/// The merge shape of every value of one Kind, from its root.
#[derive(Debug, Clone)]
pub struct Schema {
    types: Vec<Type>,
    root: TypeId,
}

/// A type of the schema, by its place in the schema's table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TypeId(usize);

/// Scalars and untyped values have one entry each, shared.
const SCALAR: TypeId = TypeId(0);
pub(crate) const UNTYPED: TypeId = TypeId(1);

/// What a value is, for merging.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Type {
    /// A string, number or boolean: a leaf.
    Scalar,
    /// Anything: maps merge key by key, lists are atomic, scalars are leaves.
    Untyped,
    /// An object: declared fields, and the type of any other key (a map such as `labels`).
    Map(MapType),
    /// A list and how its items merge.
    List(ListType),
}

/// An object type.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct MapType {
    /// The declared fields (a struct's).
    pub(crate) fields: BTreeMap<String, Field>,
    /// The type of keys that are not declared fields (`additionalProperties`); `None` when
    /// the object has no such keys.
    pub(crate) other: Option<TypeId>,
    /// Whether the object is one leaf, replaced whole.
    pub(crate) atomic: bool,
}

/// A declared field.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Field {
    /// Its type.
    pub(crate) ty: TypeId,
    /// Its schema default: what a list-map key an item leaves out stands for.
    pub(crate) default: Option<Value>,
}

/// A list type.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ListType {
    /// The items' type.
    pub(crate) items: TypeId,
    /// How the items merge.
    pub(crate) kind: ListKind,
}

/// How a list's items merge.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum ListKind {
    /// The list is one leaf, replaced whole.
    Atomic,
    /// Each distinct item is owned and merged on its own.
    Set,
    /// Items are merged by the values of these fields.
    Map(Vec<String>),
}

impl Schema {
    /// The schema of a value nothing is known about: every map merges key by key, every list
    /// is atomic.
    pub fn untyped() -> Schema {
        Schema { types: vec![Type::Scalar, Type::Untyped], root: UNTYPED }
    }

    /// The schema whose root is `root` (a schema object, usually a `$ref`), resolving
    /// references against `definitions` (`#/components/schemas/<name>` or
    /// `#/definitions/<name>`, by the last segment).
    pub fn from_openapi(definitions: &Map<String, Value>, root: &Value) -> Result<Schema, MergeError> {
        let mut builder =
            Builder { definitions, types: vec![Type::Scalar, Type::Untyped], named: HashMap::new() };
        let root = builder.node(root)?;
        Ok(Schema { types: builder.types, root })
    }

    pub(crate) fn root(&self) -> TypeId {
        self.root
    }

    pub(crate) fn get(&self, id: TypeId) -> &Type {
        &self.types[id.0]
    }

    /// The map type `id` is, when it is one.
    pub(crate) fn map(&self, id: TypeId) -> Option<&MapType> {
        match self.get(id) {
            Type::Map(map) => Some(map),
            _ => None,
        }
    }

    /// The type of the entry `name` of a map (or untyped) value of type `id`, and whether it
    /// is a declared field (a struct's) rather than a key of a map.
    pub(crate) fn entry(&self, id: TypeId, name: &str) -> (TypeId, bool) {
        match self.get(id) {
            Type::Map(map) => match map.fields.get(name) {
                Some(field) => (field.ty, true),
                None => (map.other.unwrap_or(UNTYPED), false),
            },
            _ => (UNTYPED, false),
        }
    }

    /// Whether `name` is a key an object of type `id` may hold: a declared field, or any key
    /// of a map or untyped object.
    pub(crate) fn declares(&self, id: TypeId, name: &str) -> bool {
        match self.get(id) {
            Type::Map(map) => map.fields.contains_key(name) || map.other.is_some(),
            _ => true,
        }
    }
}

/// Reads OpenAPI schema objects into the table, each `$ref` once.
struct Builder<'a> {
    definitions: &'a Map<String, Value>,
    types: Vec<Type>,
    named: HashMap<String, TypeId>,
}

impl Builder<'_> {
    /// The type of a schema object, added to the table.
    fn node(&mut self, schema: &Value) -> Result<TypeId, MergeError> {
        let Some(object) = schema.as_object() else { return Ok(UNTYPED) };
        if let Some(reference) = object.get("$ref").and_then(Value::as_str) {
            let id = self.reference(reference)?;
            return Ok(self.overridden(id, object));
        }
        if let Some(all) = object.get("allOf").and_then(Value::as_array)
            && let [only] = all.as_slice()
        {
            let id = self.node(only)?;
            return Ok(self.overridden(id, object));
        }
        for choice in ["anyOf", "oneOf"] {
            if let Some(variants) = object.get(choice).and_then(Value::as_array) {
                let typed: Vec<&Value> = variants.iter().filter(|variant| !only_null(variant)).collect();
                return match typed.as_slice() {
                    [only] => {
                        let id = self.node(only)?;
                        Ok(self.overridden(id, object))
                    }
                    _ => Ok(UNTYPED),
                };
            }
        }
        let ty = self.build(object)?;
        Ok(self.push(ty))
    }

    fn push(&mut self, ty: Type) -> TypeId {
        match ty {
            Type::Scalar => SCALAR,
            Type::Untyped => UNTYPED,
            other => {
                self.types.push(other);
                TypeId(self.types.len() - 1)
            }
        }
    }

    /// The type a definition names, built once (a reserved entry first, so that a type that
    /// refers to itself resolves).
    fn reference(&mut self, reference: &str) -> Result<TypeId, MergeError> {
        let name = reference.rsplit('/').next().unwrap_or(reference);
        if let Some(id) = self.named.get(name) {
            return Ok(*id);
        }
        let definition =
            self.definitions.get(name).ok_or_else(|| MergeError::MissingDefinition(reference.to_owned()))?;
        self.types.push(Type::Untyped);
        let id = TypeId(self.types.len() - 1);
        self.named.insert(name.to_owned(), id);
        let ty = match definition.as_object() {
            Some(object) if object.contains_key("$ref") || object.contains_key("allOf") => {
                let inner = self.node(definition)?;
                self.types[inner.0].clone()
            }
            Some(object) => self.build(object)?,
            None => Type::Untyped,
        };
        self.types[id.0] = ty;
        Ok(id)
    }

    /// `id` as the schema around a reference says: `x-kubernetes-map-type` there overrides the
    /// referenced object's.
    fn overridden(&mut self, id: TypeId, around: &Map<String, Value>) -> TypeId {
        let atomic = match around.get("x-kubernetes-map-type").and_then(Value::as_str) {
            Some("atomic") => true,
            Some("granular") => false,
            _ => return id,
        };
        match &self.types[id.0] {
            Type::Map(map) if map.atomic != atomic => {
                let changed = Type::Map(MapType { atomic, ..map.clone() });
                self.push(changed)
            }
            _ => id,
        }
    }

    fn build(&mut self, object: &Map<String, Value>) -> Result<Type, MergeError> {
        let preserve =
            object.get("x-kubernetes-preserve-unknown-fields").and_then(Value::as_bool).unwrap_or(false);
        let kind = match object.get("type") {
            Some(Value::String(kind)) => Some(kind.as_str()),
            Some(Value::Array(kinds)) => kinds.iter().filter_map(Value::as_str).find(|kind| *kind != "null"),
            _ => None,
        };
        let kind = kind.or_else(|| {
            if object.contains_key("properties") || object.contains_key("additionalProperties") {
                Some("object")
            } else if object.contains_key("items") {
                Some("array")
            } else {
                None
            }
        });
        match kind {
            Some("object") => self.object(object, preserve),
            Some("array") => {
                let items = match object.get("items") {
                    Some(items) => self.node(items)?,
                    None => UNTYPED,
                };
                let kind = match object.get("x-kubernetes-list-type").and_then(Value::as_str) {
                    Some("set") => ListKind::Set,
                    Some("map") => {
                        let keys: Vec<String> = object
                            .get("x-kubernetes-list-map-keys")
                            .and_then(Value::as_array)
                            .map(|keys| keys.iter().filter_map(Value::as_str).map(str::to_owned).collect())
                            .unwrap_or_default();
                        if keys.is_empty() {
                            return Err(MergeError::MapWithoutKeys);
                        }
                        ListKind::Map(keys)
                    }
                    _ => ListKind::Atomic,
                };
                Ok(Type::List(ListType { items, kind }))
            }
            Some("string" | "integer" | "number" | "boolean") => Ok(Type::Scalar),
            _ if object.get("x-kubernetes-int-or-string").and_then(Value::as_bool) == Some(true) => {
                Ok(Type::Scalar)
            }
            _ => Ok(Type::Untyped),
        }
    }

    fn object(&mut self, object: &Map<String, Value>, preserve: bool) -> Result<Type, MergeError> {
        let properties = object.get("properties").and_then(Value::as_object);
        let mut other = match object.get("additionalProperties") {
            Some(Value::Bool(true)) => Some(UNTYPED),
            Some(schema @ Value::Object(_)) => Some(self.node(schema)?),
            _ => None,
        };
        if preserve {
            other = Some(UNTYPED);
        }
        if properties.is_none_or(Map::is_empty) && other.is_none() {
            // An object that declares no field and no map of its own: anything may be in it.
            return Ok(Type::Untyped);
        }
        let mut fields = BTreeMap::new();
        for (name, schema) in properties.into_iter().flatten() {
            let ty = self.node(schema)?;
            fields.insert(name.clone(), Field { ty, default: schema.get("default").cloned() });
        }
        let atomic = object.get("x-kubernetes-map-type").and_then(Value::as_str) == Some("atomic");
        Ok(Type::Map(MapType { fields, other, atomic }))
    }
}

/// Whether a variant of `anyOf`/`oneOf` is only the `null` that makes a field optional.
fn only_null(variant: &Value) -> bool {
    let Some(object) = variant.as_object() else { return false };
    let null_enum =
        object.get("enum").and_then(Value::as_array).is_some_and(|values| values.iter().all(Value::is_null));
    null_enum || object.get("type").and_then(Value::as_str) == Some("null")
}

#[cfg(test)]
mod tests;
