//! Decoding a JSON object into its Kind's shape: unknown fields found on the way (for
//! `fieldValidation`), and the normalised object (defaults applied, unknown fields dropped)
//! that is stored.

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// The outcome of decoding an object into a typed Kind.
#[derive(Debug)]
pub struct Decoded<T> {
    /// The typed object.
    pub object: T,
    /// Every field the Kind does not have, as a dotted path (`spec.bogus`).
    pub unknown: Vec<String>,
}

/// Decodes `value` into `T`, collecting the paths of fields `T` does not know. A value of the
/// wrong type is an error naming the field.
pub fn decode<T: DeserializeOwned>(value: &Value) -> Result<Decoded<T>, String> {
    let mut unknown = Vec::new();
    let object = serde_ignored::deserialize(value, |path| {
        let path = path.to_string();
        if !path.is_empty() {
            unknown.push(path);
        }
    })
    .map_err(|error| error.to_string())?;
    unknown.sort();
    Ok(Decoded { object, unknown })
}

/// The object as JSON again, with defaults filled in and unknown fields gone.
pub fn encode<T: Serialize>(object: &T) -> Value {
    serde_json::to_value(object).expect("Kinds serialise to JSON")
}
