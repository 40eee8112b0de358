//! What a registration may hold: a DNS name of two labels or more, a one-label short name, and
//! well-formed dependencies.

pub use kayra_api::kinds::catalog::{ApiRegistration, DependencyRef};

/// What is wrong with a registration a client sent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Problem {
    /// A field's value is not acceptable (400).
    #[error("{field}: {message}")]
    Invalid {
        /// The field, as the client spelled it.
        field: String,
        /// Why.
        message: String,
    },
}

/// Checks what a client may send: the name, the short name, and each dependency's shape
/// (whether dependencies exist is the caller's to check, since they may live elsewhere).
pub fn validate(registration: &ApiRegistration) -> Vec<Problem> {
    let mut problems = Vec::new();
    let invalid = |field: &str, message: String| Problem::Invalid { field: field.to_owned(), message };
    if !is_api_name(&registration.name) {
        problems.push(invalid(
            "name",
            format!(
                "{:?} is not a lowercase DNS name of at least two labels, such as compute.example.com",
                registration.name
            ),
        ));
    }
    if !registration.short_name.is_empty() && !is_short_name(&registration.short_name) {
        problems.push(invalid(
            "short_name",
            format!("{:?} is not a single lowercase DNS label, such as compute", registration.short_name),
        ));
    }
    for (at, dependency) in registration.depends_on.iter().enumerate() {
        if !is_api_name(&dependency.name) {
            problems.push(invalid(
                &format!("depends_on[{at}].name"),
                format!("{:?} is not an API name", dependency.name),
            ));
        }
        for (field, value) in [("platform", &dependency.platform), ("region", &dependency.region)] {
            if value.is_empty() {
                problems.push(invalid(&format!("depends_on[{at}].{field}"), "is required".to_owned()));
            }
        }
        if *dependency == registration.reference() {
            problems.push(invalid(
                &format!("depends_on[{at}]"),
                "a registration cannot depend on itself".to_owned(),
            ));
        }
    }
    problems
}

/// A lowercase RFC 1123 label: `[a-z0-9]([-a-z0-9]*[a-z0-9])?`, at most 63 characters.
fn is_label(label: &str) -> bool {
    let bytes = label.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 63
        && bytes.iter().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
        && bytes[0] != b'-'
        && bytes[bytes.len() - 1] != b'-'
}

/// An API's name: a lowercase DNS name of at least two labels, at most 253 characters.
pub fn is_api_name(name: &str) -> bool {
    name.len() <= 253 && name.split('.').count() >= 2 && name.split('.').all(is_label)
}

/// A short name: one lowercase DNS label.
pub fn is_short_name(name: &str) -> bool {
    is_label(name)
}

#[cfg(test)]
mod tests;
