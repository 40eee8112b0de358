//! Field selectors: `field=value`, `field==value` and `field!=value` joined by commas, over the
//! fields a Kind declares selectable (`metadata.name` and `metadata.namespace` for every Kind).
//! A backslash escapes `,`, `=`, `!` and itself inside a value.

use std::fmt;

use serde_json::Value;

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
    pub fn matches(&self, object: &Value) -> bool {
        self.terms.iter().all(|term| (field_value(object, &term.field) == term.value) == term.equal)
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
pub fn field_value(object: &Value, path: &str) -> String {
    let found = path.split('.').try_fold(object, |at, step| at.get(step));
    match found {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Number(number)) => number.to_string(),
        Some(Value::Bool(flag)) => flag.to_string(),
        _ => String::new(),
    }
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
mod tests {
    use serde_json::json;

    use super::*;

    fn check(selector: &str, object: &Value, expect: bool) {
        let parsed = FieldSelector::parse(
            selector,
            &["status.phase", "spec.placement.nodeName", "involvedObject.uid"],
        )
        .unwrap_or_else(|e| panic!("{selector:?}: {e}"));
        assert_eq!(parsed.matches(object), expect, "{selector:?}");
        assert_eq!(
            FieldSelector::parse(
                &parsed.to_string(),
                &["status.phase", "spec.placement.nodeName", "involvedObject.uid"]
            )
            .unwrap(),
            parsed
        );
    }

    #[test]
    fn selectors_kubectl_sends_match() {
        let app = json!({"metadata": {"name": "app1", "namespace": "default"}, "status": {"phase": "Running"},
                         "spec": {"placement": {"nodeName": "n1"}}, "involvedObject": {"uid": "u-1"}});
        check("metadata.name=app1", &app, true);
        check("metadata.name==app1", &app, true);
        check("metadata.name!=app1", &app, false);
        check("metadata.namespace=default,metadata.name=app1", &app, true);
        check("spec.placement.nodeName=n1,status.phase!=Succeeded,status.phase!=Failed", &app, true);
        check("status.phase=Pending", &app, false);
        check("involvedObject.uid=u-1", &app, true);
        check("spec.placement.nodeName=", &json!({"metadata": {"name": "x"}}), true);
        check("metadata.name=a\\,b", &json!({"metadata": {"name": "a,b"}}), true);
        check("", &app, true);
        check("metadata.name=é", &json!({"metadata": {"name": "é"}}), true);
        check("metadata.name!=\\é", &json!({"metadata": {"name": "x"}}), true);
    }

    #[test]
    fn unsupported_fields_are_named() {
        let error = FieldSelector::parse("status.bogus=x", &["status.phase"]).unwrap_err();
        assert_eq!(error.to_string(), "field label not supported: status.bogus");
        assert!(matches!(FieldSelector::parse("metadata.name", &[]), Err(FieldSelectorError::Malformed(_))));
        assert!(matches!(FieldSelector::parse("=x", &[]), Err(FieldSelectorError::Malformed(_))));
    }

    #[test]
    fn an_exact_name_is_recognised() {
        let selector = FieldSelector::parse("metadata.name=web", &[]).unwrap();
        assert_eq!(selector.exact_name(), Some("web"));
        assert_eq!(FieldSelector::parse("metadata.name!=web", &[]).unwrap().exact_name(), None);
    }
}
