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
mod tests {
    use super::*;

    #[test]
    fn names_are_dns_names_of_two_labels_or_more() {
        for good in ["compute.example.com", "a.b", "telemetry.giservices.io", "x-1.y2"] {
            assert!(is_api_name(good), "{good}");
        }
        for bad in
            ["compute", "", "Compute.example.com", "a..b", "-a.b", "a-.b", "a.b.", ".a.b", "a_b.c", "a.b/c"]
        {
            assert!(!is_api_name(bad), "{bad}");
        }
        assert!(!is_api_name(&format!("{}.com", "a".repeat(64))), "a label over 63");
        assert!(is_short_name("compute") && !is_short_name("compute.io") && !is_short_name(""));
    }

    #[test]
    fn a_registration_names_what_is_wrong_with_it() {
        let mut registration = ApiRegistration {
            name: "compute".into(),
            short_name: "Compute".into(),
            platform: "p".into(),
            region: "r".into(),
            depends_on: vec![DependencyRef { platform: String::new(), region: "r".into(), name: "x".into() }],
            ..ApiRegistration::default()
        };
        let fields: Vec<String> =
            validate(&registration).into_iter().map(|Problem::Invalid { field, .. }| field).collect();
        assert_eq!(fields, ["name", "short_name", "depends_on[0].name", "depends_on[0].platform"]);
        registration.name = "compute.example.com".into();
        registration.short_name = "compute".into();
        registration.depends_on = vec![registration.reference()];
        let problems = validate(&registration);
        assert_eq!(problems.len(), 1);
        assert!(problems[0].to_string().contains("itself"));
    }

    #[test]
    fn registrations_read_and_write_the_documented_json() {
        let body = r#"{"name": "compute.example.com", "short_name": "compute", "active": true, "owner": "sre-a",
                       "depends_on": [{"platform": "sandbox", "region": "eu-west-1", "name": "vault.example.com"}]}"#;
        let registration: ApiRegistration = serde_json::from_str(body).unwrap();
        assert_eq!(registration.short_name, "compute");
        assert_eq!(registration.depends_on[0].region, "eu-west-1");
        let written = serde_json::to_value(&registration).unwrap();
        assert_eq!(written["owner"], "sre-a");
        assert!(written.get("canary_namespaces").is_none(), "no rollout pending, no field");
    }
}
