//! Paths into an object, one element per step, as `metadata.managedFields` names them: a field
//! or map key (`f:name`), a list item by its key fields (`k:{"name":"web"}`), a set item by its
//! value (`v:"example.com/f"`), or a list index (`i:3`, read but never written). A path prints
//! as kube-apiserver prints it in a conflict: `.spec.ports[port=80,protocol="TCP"].name`.

use std::fmt::Write;

use serde_json::Value;

/// One step of a path.
///
/// The order (fields, keys, values, indices; then by name or value) is the order in which
/// they are written.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PathElement {
    /// A struct field or a map key.
    Field(String),
    /// A list item, by the canonical JSON of its key fields (an object, keys sorted).
    Key(String),
    /// A set item, by its canonical JSON.
    Value(String),
    /// A list item by position.
    Index(usize),
}

impl PathElement {
    /// The element as a `FieldsV1` key.
    pub fn encode(&self) -> String {
        match self {
            PathElement::Field(name) => format!("f:{name}"),
            PathElement::Key(key) => format!("k:{key}"),
            PathElement::Value(value) => format!("v:{value}"),
            PathElement::Index(index) => format!("i:{index}"),
        }
    }

    /// The element a `FieldsV1` key names; `None` for a prefix this server does not know,
    /// which readers skip. `Err` for a known prefix whose value does not parse.
    pub fn decode(text: &str) -> Result<Option<PathElement>, String> {
        let Some((prefix, rest)) = text.split_once(':') else { return Ok(None) };
        let json = |rest: &str| -> Result<Value, String> {
            serde_json::from_str(rest).map_err(|error| format!("{text:?} does not hold JSON: {error}"))
        };
        Ok(match prefix {
            "f" => Some(PathElement::Field(rest.to_owned())),
            "k" => match json(rest)? {
                key @ Value::Object(_) => Some(PathElement::Key(canonical(&key))),
                _ => return Err(format!("{text:?} is not a key: its JSON is not an object")),
            },
            "v" => Some(PathElement::Value(canonical(&json(rest)?))),
            "i" => {
                Some(PathElement::Index(rest.parse().map_err(|_| format!("{text:?} is not a list index"))?))
            }
            _ => None,
        })
    }
}

/// A path printed as kube-apiserver prints it: `.spec.replicas`,
/// `.spec.env[name="GREETING"].value`, `.metadata.finalizers[="example.com/f"]`, `.args[3]`.
pub fn display(path: &[PathElement]) -> String {
    let mut text = String::new();
    for element in path {
        match element {
            PathElement::Field(name) => {
                text.push('.');
                text.push_str(name);
            }
            PathElement::Key(key) => {
                let fields = serde_json::from_str::<serde_json::Map<String, Value>>(key).unwrap_or_default();
                let shown: Vec<String> =
                    fields.iter().map(|(name, value)| format!("{name}={value}")).collect();
                let _ = write!(text, "[{}]", shown.join(","));
            }
            PathElement::Value(value) => {
                let _ = write!(text, "[={value}]");
            }
            PathElement::Index(index) => {
                let _ = write!(text, "[{index}]");
            }
        }
    }
    text
}

/// The canonical JSON of a value: compact, object keys sorted, and `<`, `>` and `&` escaped
/// as Go's encoder escapes them, so that the same value always has the same text, here and in
/// what kube-apiserver writes.
pub fn canonical(value: &Value) -> String {
    let mut text = String::new();
    write_canonical(value, &mut text);
    text
}

fn write_canonical(value: &Value, text: &mut String) {
    match value {
        Value::Object(map) => {
            // serde_json's maps keep their keys sorted.
            text.push('{');
            for (at, (key, value)) in map.iter().enumerate() {
                if at > 0 {
                    text.push(',');
                }
                write_string(key, text);
                text.push(':');
                write_canonical(value, text);
            }
            text.push('}');
        }
        Value::Array(items) => {
            text.push('[');
            for (at, item) in items.iter().enumerate() {
                if at > 0 {
                    text.push(',');
                }
                write_canonical(item, text);
            }
            text.push(']');
        }
        Value::String(string) => write_string(string, text),
        other => text.push_str(&other.to_string()),
    }
}

fn write_string(string: &str, text: &mut String) {
    let encoded = Value::String(string.to_owned()).to_string();
    for c in encoded.chars() {
        match c {
            '<' => text.push_str("\\u003c"),
            '>' => text.push_str("\\u003e"),
            '&' => text.push_str("\\u0026"),
            c => text.push(c),
        }
    }
}
