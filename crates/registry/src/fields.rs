//! Field selectors: `field=value`, `field==value` and `field!=value` joined by commas, over the
//! fields a Kind declares selectable (`metadata.name` and `metadata.namespace` for every Kind).
//! A backslash escapes `,`, `=`, `!` and itself inside a value.

use std::fmt;

use serde_json::{Map, Value};

/// A parsed field selector; the empty selector matches everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSelector {
    terms: Vec<Term>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Term {
    field: String,
    value: String,
    equal: bool,
}

/// Why a field selector was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FieldSelectorError {
    /// The text is not a field selector.
    #[error("invalid field selector: {0}")]
    Malformed(String),
    /// The field cannot be selected on for this Kind.
    #[error("field label not supported: {0}")]
    Unsupported(String),
}

impl FieldSelector {
    /// Parses the `fieldSelector` query parameter, accepting only `metadata.name`,
    /// `metadata.namespace` and the `supported` fields.
    pub fn parse(text: &str, supported: &[&str]) -> Result<FieldSelector, FieldSelectorError> {
        let mut terms = Vec::new();
        if text.trim().is_empty() {
            return Ok(FieldSelector { terms });
        }
        for part in split_unescaped(text, ',') {
            let (field, value, equal) = if let Some(at) = find_unescaped(&part, "!=") {
                (&part[..at], &part[at + 2..], false)
            } else if let Some(at) = find_unescaped(&part, "==") {
                (&part[..at], &part[at + 2..], true)
            } else if let Some(at) = find_unescaped(&part, "=") {
                (&part[..at], &part[at + 1..], true)
            } else {
                return Err(FieldSelectorError::Malformed(format!("{part:?} has no operator")));
            };
            let field = field.trim();
            if field.is_empty() {
                return Err(FieldSelectorError::Malformed(format!("{part:?} names no field")));
            }
            if !matches!(field, "metadata.name" | "metadata.namespace") && !supported.contains(&field) {
                return Err(FieldSelectorError::Unsupported(field.to_owned()));
            }
            terms.push(Term { field: field.to_owned(), value: unescape(value.trim()), equal });
        }
        Ok(FieldSelector { terms })
    }

    /// Whether every term holds for the object. A field the object lacks reads as empty.
    ///
    /// An Event a node reported about an Application (`source.host` names the node) is also
    /// about the Pod the Application appears as on that node: its `involvedObject.uid` reads as
    /// the Application's uid and as that Pod's, so `kubectl describe pod`, which looks Events
    /// up by the Pod's uid, finds them as `kubectl describe application` does by the other.
    pub fn matches(&self, object: &Map<String, Value>) -> bool {
        self.terms.iter().all(|term| {
            let found = field_value(object, &term.field) == term.value
                || (term.field == "involvedObject.uid"
                    && placed_pod_uid(object).is_some_and(|uid| uid == term.value));
            found == term.equal
        })
    }

    /// The name this selector pins with `metadata.name=...`, if any: lists and watches by one
    /// name (`kubectl wait`, `get NAME -w`) can then read one key instead of all of them.
    pub fn exact_name(&self) -> Option<&str> {
        self.terms
            .iter()
            .find(|term| term.equal && term.field == "metadata.name")
            .map(|term| term.value.as_str())
    }

    /// Whether the selector selects everything.
    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }
}

/// A field's value as a selector compares it: strings as they are, numbers and booleans as
/// printed, anything missing or structured as empty.
pub fn field_value(object: &Map<String, Value>, path: &str) -> String {
    let mut steps = path.split('.');
    let found = steps
        .next()
        .and_then(|first| object.get(first))
        .and_then(|top| steps.try_fold(top, |at, step| at.get(step)));
    match found {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Number(number)) => number.to_string(),
        Some(Value::Bool(flag)) => flag.to_string(),
        _ => String::new(),
    }
}

/// The uid of the Pod an Event's Application appears as on the node that reported the Event.
fn placed_pod_uid(event: &Map<String, Value>) -> Option<String> {
    let text = |outer: &str, inner: &str| {
        event.get(outer)?.get(inner).and_then(Value::as_str).filter(|text| !text.is_empty())
    };
    if text("involvedObject", "kind")? != "Application" {
        return None;
    }
    Some(kayra_api::view::placement_uid(text("involvedObject", "uid")?, text("source", "host")?))
}

fn split_unescaped(text: &str, separator: char) -> Vec<String> {
    let mut parts = vec![String::new()];
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                let last = parts.last_mut().expect("one part at least");
                last.push('\\');
                last.extend(chars.next());
            }
            c if c == separator => parts.push(String::new()),
            c => parts.last_mut().expect("one part at least").push(c),
        }
    }
    parts
}

fn find_unescaped(text: &str, needle: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    let mut at = 0;
    while at < bytes.len() {
        if bytes[at] == b'\\' {
            at += 2;
            continue;
        }
        if bytes[at..].starts_with(needle.as_bytes()) {
            return Some(at);
        }
        at += 1;
    }
    None
}

fn unescape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    let mut chars = value.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            out.extend(chars.next());
        } else {
            out.push(c);
        }
    }
    out
}

impl fmt::Display for FieldSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (n, term) in self.terms.iter().enumerate() {
            if n > 0 {
                f.write_str(",")?;
            }
            let value: String = term
                .value
                .chars()
                .flat_map(|c| match c {
                    '\\' | ',' | '=' | '!' => vec!['\\', c],
                    c => vec![c],
                })
                .collect();
            write!(f, "{}{}{value}", term.field, if term.equal { "=" } else { "!=" })?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
