//! Label selectors: the `labelSelector` grammar of Kubernetes, parsed, printed canonically and
//! matched against an object's labels.
//!
//! `k=v`, `k==v`, `k!=v`, `k in (a,b)`, `k notin (a,b)`, `k` (exists), `!k` (does not exist),
//! `k>1` and `k<1` (integer comparison); requirements are joined by commas and all must hold.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

/// A parsed label selector; the empty selector matches everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelector {
    requirements: Vec<Requirement>,
}

/// One condition on one label.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requirement {
    key: String,
    operator: Operator,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Operator {
    Equals(String),
    NotEquals(String),
    In(BTreeSet<String>),
    NotIn(BTreeSet<String>),
    Exists,
    DoesNotExist,
    GreaterThan(i64),
    LessThan(i64),
}

/// Why a selector could not be parsed; the message quotes the offending part.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unable to parse requirement: {0}")]
pub struct SelectorError(pub String);

impl LabelSelector {
    /// Parses the `labelSelector` query parameter.
    pub fn parse(text: &str) -> Result<LabelSelector, SelectorError> {
        let mut requirements = Vec::new();
        for part in split_requirements(text)? {
            let part = part.trim();
            if part.is_empty() {
                if text.trim().is_empty() {
                    continue;
                }
                return Err(SelectorError(format!("empty requirement in {text:?}")));
            }
            requirements.push(Requirement::parse(part)?);
        }
        Ok(LabelSelector { requirements })
    }

    /// Whether every requirement holds for these labels.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.requirements.iter().all(|requirement| requirement.matches(labels))
    }

    /// Whether the selector selects everything.
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }
}

/// Splits on the commas that are outside parentheses.
fn split_requirements(text: &str) -> Result<Vec<&str>, SelectorError> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0usize, 0);
    for (at, c) in text.char_indices() {
        match c {
            '(' if depth == 0 => depth = 1,
            '(' => return Err(SelectorError(format!("nested parentheses in {text:?}"))),
            ')' if depth == 1 => depth = 0,
            ')' => return Err(SelectorError(format!("unbalanced parentheses in {text:?}"))),
            ',' if depth == 0 => {
                parts.push(&text[start..at]);
                start = at + 1;
            }
            _ => {}
        }
    }
    if depth != 0 {
        return Err(SelectorError(format!("unbalanced parentheses in {text:?}")));
    }
    parts.push(&text[start..]);
    Ok(parts)
}

impl Requirement {
    fn parse(part: &str) -> Result<Requirement, SelectorError> {
        if let Some(key) = part.strip_prefix('!') {
            let key = validate_key(key.trim())?;
            return Ok(Requirement { key, operator: Operator::DoesNotExist });
        }
        for (token, build) in [
            ("==", Operator::Equals as fn(String) -> Operator),
            ("!=", Operator::NotEquals),
            ("=", Operator::Equals),
        ] {
            if let Some((key, value)) = part.split_once(token) {
                let key = validate_key(key.trim())?;
                let value = validate_value(value.trim())?;
                return Ok(Requirement { key, operator: build(value) });
            }
        }
        for (token, greater) in [(">", true), ("<", false)] {
            if let Some((key, value)) = part.split_once(token) {
                let key = validate_key(key.trim())?;
                let number = value
                    .trim()
                    .parse::<i64>()
                    .map_err(|_| SelectorError(format!("{part:?}: {:?} is not an integer", value.trim())))?;
                let operator =
                    if greater { Operator::GreaterThan(number) } else { Operator::LessThan(number) };
                return Ok(Requirement { key, operator });
            }
        }
        if let Some(open) = part.find('(') {
            let head = part[..open].trim();
            let close = part.rfind(')').filter(|close| *close > open && part[close + 1..].trim().is_empty());
            let close = close.ok_or_else(|| SelectorError(format!("{part:?}: expected a closing ')'")))?;
            let (key, word) = head
                .rsplit_once(char::is_whitespace)
                .ok_or_else(|| SelectorError(format!("{part:?}: expected 'in' or 'notin'")))?;
            let key = validate_key(key.trim())?;
            let values = part[open + 1..close]
                .split(',')
                .map(|value| validate_value(value.trim()))
                .collect::<Result<BTreeSet<_>, _>>()?;
            let operator = match word {
                "in" => Operator::In(values),
                "notin" => Operator::NotIn(values),
                other => return Err(SelectorError(format!("{part:?}: unknown operator {other:?}"))),
            };
            return Ok(Requirement { key, operator });
        }
        let key = validate_key(part)?;
        Ok(Requirement { key, operator: Operator::Exists })
    }

    fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        let value = labels.get(&self.key);
        match &self.operator {
            Operator::Equals(expected) => value == Some(expected),
            Operator::NotEquals(expected) => value != Some(expected),
            Operator::In(set) => value.is_some_and(|value| set.contains(value)),
            Operator::NotIn(set) => !value.is_some_and(|value| set.contains(value)),
            Operator::Exists => value.is_some(),
            Operator::DoesNotExist => value.is_none(),
            Operator::GreaterThan(bound) => {
                value.and_then(|v| v.parse::<i64>().ok()).is_some_and(|v| v > *bound)
            }
            Operator::LessThan(bound) => {
                value.and_then(|v| v.parse::<i64>().ok()).is_some_and(|v| v < *bound)
            }
        }
    }
}

/// A label key: an optional DNS-subdomain prefix and `/`, then a name of at most 63
/// characters, alphanumeric at both ends with `-`, `_` and `.` between.
pub fn validate_key(key: &str) -> Result<String, SelectorError> {
    let (prefix, name) = match key.split_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, key),
    };
    if let Some(prefix) = prefix
        && (prefix.is_empty()
            || prefix.len() > 253
            || !prefix.split('.').all(kayra_api::validation::is_dns_label))
    {
        return Err(SelectorError(format!("invalid label key {key:?}: the prefix must be a DNS subdomain")));
    }
    if name.is_empty() || !is_label_name(name) {
        return Err(SelectorError(format!(
            "invalid label key {key:?}: a name of at most 63 alphanumeric characters, '-', '_' or '.', starting and ending alphanumeric"
        )));
    }
    Ok(key.to_owned())
}

/// A label value: empty, or a name as in [`validate_key`].
pub fn validate_value(value: &str) -> Result<String, SelectorError> {
    if value.is_empty() || is_label_name(value) {
        Ok(value.to_owned())
    } else {
        Err(SelectorError(format!(
            "invalid label value {value:?}: at most 63 alphanumeric characters, '-', '_' or '.', starting and ending alphanumeric"
        )))
    }
}

fn is_label_name(name: &str) -> bool {
    let bytes = name.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 63
        && bytes[0].is_ascii_alphanumeric()
        && bytes[bytes.len() - 1].is_ascii_alphanumeric()
        && bytes.iter().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

impl fmt::Display for LabelSelector {
    /// The canonical form, which parses back to the same selector.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (n, requirement) in self.requirements.iter().enumerate() {
            if n > 0 {
                f.write_str(",")?;
            }
            write!(f, "{requirement}")?;
        }
        Ok(())
    }
}

impl fmt::Display for Requirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let set = |values: &BTreeSet<String>| values.iter().cloned().collect::<Vec<_>>().join(",");
        match &self.operator {
            Operator::Equals(value) => write!(f, "{}={value}", self.key),
            Operator::NotEquals(value) => write!(f, "{}!={value}", self.key),
            Operator::In(values) => write!(f, "{} in ({})", self.key, set(values)),
            Operator::NotIn(values) => write!(f, "{} notin ({})", self.key, set(values)),
            Operator::Exists => write!(f, "{}", self.key),
            Operator::DoesNotExist => write!(f, "!{}", self.key),
            Operator::GreaterThan(bound) => write!(f, "{}>{bound}", self.key),
            Operator::LessThan(bound) => write!(f, "{}<{bound}", self.key),
        }
    }
}

#[cfg(test)]
mod tests;
