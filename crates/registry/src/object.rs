//! Reading and writing the parts of an object the registry owns, on its JSON form: every Kind
//! shares `apiVersion`, `kind` and `metadata`, and the registry needs nothing else.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use kayra_api::validation::FieldError;

/// An object as JSON: a map with `apiVersion`, `kind`, `metadata` and the Kind's own fields.
pub type Object = Map<String, Value>;

/// An object as the store keeps it, with `metadata.resourceVersion` set to the revision of the
/// write that stored it (the store itself keeps no resourceVersion).
pub(crate) fn decode_stored(key: &str, value: &[u8], revision: u64) -> Result<Object, crate::RegistryError> {
    let mut object: Object = serde_json::from_slice(value)
        .map_err(|error| crate::RegistryError::Corrupt { key: key.to_owned(), message: error.to_string() })?;
    metadata_mut(&mut object).insert("resourceVersion".into(), Value::String(revision.to_string()));
    Ok(object)
}

/// An object as the store keeps it: without `metadata.resourceVersion`, which the store's own
/// revision of the write stands for. Serialises the object where it lies, with no copy.
pub(crate) struct Stored<'a>(pub(crate) &'a Object);

impl serde::Serialize for Stored<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (field, value) in self.0 {
            match value {
                Value::Object(metadata) if field == "metadata" => {
                    map.serialize_entry(field, &WithoutVersion(metadata))?
                }
                _ if field == "metadata" => map.serialize_entry(field, &Map::new())?,
                _ => map.serialize_entry(field, value)?,
            }
        }
        map.end()
    }
}

struct WithoutVersion<'a>(&'a Map<String, Value>);

impl serde::Serialize for WithoutVersion<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let fields = self.0.iter().filter(|(field, _)| *field != "resourceVersion");
        let mut map = serializer.serialize_map(Some(fields.clone().count()))?;
        for (field, value) in fields {
            map.serialize_entry(field, value)?;
        }
        map.end()
    }
}

/// The object's `metadata`, created empty if missing or not a map.
pub(crate) fn metadata_mut(object: &mut Object) -> &mut Map<String, Value> {
    let metadata = object.entry("metadata").or_insert_with(|| Value::Object(Map::new()));
    if !metadata.is_object() {
        *metadata = Value::Object(Map::new());
    }
    metadata.as_object_mut().expect("made a map above")
}

/// A string field of `metadata`; empty when missing.
pub fn meta_str<'a>(object: &'a Object, field: &str) -> &'a str {
    object.get("metadata").and_then(|m| m.get(field)).and_then(Value::as_str).unwrap_or_default()
}

/// The object's labels.
pub fn labels(object: &Object) -> BTreeMap<String, String> {
    object
        .get("metadata")
        .and_then(|m| m.get("labels"))
        .and_then(Value::as_object)
        .map(|labels| {
            labels.iter().filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_owned()))).collect()
        })
        .unwrap_or_default()
}

/// The object's finalizers.
pub fn finalizers(object: &Object) -> Vec<String> {
    object
        .get("metadata")
        .and_then(|m| m.get("finalizers"))
        .and_then(Value::as_array)
        .map(|list| list.iter().filter_map(Value::as_str).map(str::to_owned).collect())
        .unwrap_or_default()
}

/// Everything the Kind's spec is made of: the object without `apiVersion`, `kind`,
/// `metadata` and `status`. A change here bumps `metadata.generation`.
pub(crate) fn spec_of(object: &Object) -> Map<String, Value> {
    object
        .iter()
        .filter(|(key, _)| !matches!(key.as_str(), "apiVersion" | "kind" | "metadata" | "status"))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// Checks the shape of `metadata` fields clients may write: strings where strings belong,
/// string-to-string maps for labels and annotations, label keys and values well formed.
pub(crate) fn check_metadata(object: &Object) -> Vec<FieldError> {
    let mut causes = Vec::new();
    let Some(metadata) = object.get("metadata") else { return causes };
    let Some(metadata) = metadata.as_object() else {
        causes.push(FieldError::invalid("metadata", metadata, "must be an object"));
        return causes;
    };
    for field in ["name", "generateName", "namespace", "resourceVersion", "uid"] {
        if let Some(value) = metadata.get(field).filter(|v| !v.is_string() && !v.is_null()) {
            causes.push(FieldError::invalid(format!("metadata.{field}"), value, "must be a string"));
        }
    }
    for field in ["labels", "annotations"] {
        match metadata.get(field) {
            None | Some(Value::Null) => {}
            Some(Value::Object(map)) => {
                for (key, value) in map {
                    if !value.is_string() {
                        causes.push(FieldError::invalid(
                            format!("metadata.{field}.{key}"),
                            value,
                            "must be a string",
                        ));
                    } else if field == "labels" {
                        if let Err(error) = crate::labels::validate_key(key) {
                            causes.push(FieldError::invalid(
                                format!("metadata.labels.{key}"),
                                format!("\"{key}\""),
                                &error.0,
                            ));
                        } else if let Err(error) =
                            crate::labels::validate_value(value.as_str().unwrap_or_default())
                        {
                            causes.push(FieldError::invalid(
                                format!("metadata.labels.{key}"),
                                value,
                                &error.0,
                            ));
                        }
                    }
                }
            }
            Some(other) => causes.push(FieldError::invalid(
                format!("metadata.{field}"),
                other,
                "must be a map of strings",
            )),
        }
    }
    match metadata.get("finalizers") {
        None | Some(Value::Null) => {}
        Some(Value::Array(items)) if items.iter().all(Value::is_string) => {}
        Some(other) => {
            causes.push(FieldError::invalid("metadata.finalizers", other, "must be a list of strings"))
        }
    }
    causes
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_stored_form_is_the_object_without_its_resource_version_and_nothing_else() {
        for object in [
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "a", "resourceVersion": "7", "uid": "u"}, "data": {"k": "dg=="}}),
            json!({"kind": "Secret", "metadata": {"name": "a"}, "zeta": [1, {"resourceVersion": "kept"}]}),
            json!({"kind": "Secret", "metadata": {"resourceVersion": "1"}}),
            json!({"kind": "Secret", "metadata": "not a map"}),
        ] {
            let object = object.as_object().unwrap().clone();
            let mut expected = object.clone();
            metadata_mut(&mut expected).remove("resourceVersion");
            let stored = serde_json::to_vec(&Stored(&object)).unwrap();
            assert_eq!(String::from_utf8(stored).unwrap(), serde_json::to_string(&expected).unwrap());
        }
    }
}
