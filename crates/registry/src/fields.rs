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
    ///
    /// An Event a node reported about an Application (`source.host` names the node) is also
    /// about the Pod the Application appears as on that node: its `involvedObject.uid` reads as
    /// the Application's uid and as that Pod's, so `kubectl describe pod`, which looks Events
    /// up by the Pod's uid, finds them as `kubectl describe application` does by the other.
    pub fn matches(&self, object: &Value) -> bool {
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
pub fn field_value(object: &Value, path: &str) -> String {
    let found = path.split('.').try_fold(object, |at, step| at.get(step));
    match found {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Number(number)) => number.to_string(),
        Some(Value::Bool(flag)) => flag.to_string(),
        _ => String::new(),
    }
}

/// The uid of the Pod an Event's Application appears as on the node that reported the Event.
fn placed_pod_uid(event: &Value) -> Option<String> {
    let text = |pointer: &str| event.pointer(pointer).and_then(Value::as_str).filter(|text| !text.is_empty());
    if text("/involvedObject/kind")? != "Application" {
        return None;
    }
    Some(kayra_api::view::placement_uid(text("/involvedObject/uid")?, text("/source/host")?))
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

    const SUPPORTED: &[&str] = &[
        "status.phase",
        "spec.placement.nodeName",
        "involvedObject.kind",
        "involvedObject.name",
        "involvedObject.namespace",
        "involvedObject.uid",
    ];

    fn check(selector: &str, object: &Value, expect: bool) {
        let parsed =
            FieldSelector::parse(selector, SUPPORTED).unwrap_or_else(|e| panic!("{selector:?}: {e}"));
        assert_eq!(parsed.matches(object), expect, "{selector:?}");
        assert_eq!(FieldSelector::parse(&parsed.to_string(), SUPPORTED).unwrap(), parsed);
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
    fn a_nodes_event_about_an_application_is_also_about_its_pod_there() {
        let pod_uid = kayra_api::view::placement_uid("app-uid", "n1");
        let event = |kind: &str, host: Option<&str>| {
            let mut event = json!({"metadata": {"name": "web.1", "namespace": "default"},
                                   "involvedObject": {"kind": kind, "name": "web", "namespace": "default", "uid": "app-uid"},
                                   "source": {"component": "kayra-agent"}});
            if let Some(host) = host {
                event["source"]["host"] = json!(host);
            }
            event
        };
        // kubectl describe pod: by name, namespace and the Pod's uid.
        let by_pod =
            format!("involvedObject.name=web,involvedObject.namespace=default,involvedObject.uid={pod_uid}");
        check(&by_pod, &event("Application", Some("n1")), true);
        check(&format!("involvedObject.uid!={pod_uid}"), &event("Application", Some("n1")), false);
        // kubectl describe application: by the Application's own uid, still.
        check(
            "involvedObject.kind=Application,involvedObject.uid=app-uid",
            &event("Application", Some("n1")),
            true,
        );
        // Not a Pod elsewhere, nor without a node, nor for another Kind.
        let elsewhere = kayra_api::view::placement_uid("app-uid", "n2");
        check(&format!("involvedObject.uid={elsewhere}"), &event("Application", Some("n1")), false);
        check(&by_pod, &event("Application", None), false);
        check(&by_pod, &event("Node", Some("n1")), false);
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
