//! Field errors, and the checks several Kinds share.

/// One problem with one field, as Kubernetes reports it in a `Status`'s causes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    /// The field's path, such as `spec.command[0]`.
    pub field: String,
    /// What is wrong, starting with Kubernetes' phrase (`Required value`, `Invalid value: ...`).
    pub message: String,
    /// `FieldValueRequired`, `FieldValueInvalid`, `FieldValueNotSupported`,
    /// `FieldValueDuplicate`, `FieldValueTooLong`, `FieldValueTooMany` or `FieldValueForbidden`.
    pub reason: &'static str,
}

impl FieldError {
    /// The field must be set.
    pub fn required(field: impl Into<String>) -> FieldError {
        FieldError { field: field.into(), message: "Required value".to_owned(), reason: "FieldValueRequired" }
    }

    /// The value is not acceptable.
    pub fn invalid(field: impl Into<String>, value: impl std::fmt::Display, why: &str) -> FieldError {
        FieldError {
            field: field.into(),
            message: format!("Invalid value: {value}: {why}"),
            reason: "FieldValueInvalid",
        }
    }

    /// The value is not one of those supported.
    pub fn not_supported(field: impl Into<String>, value: &str, supported: &[&str]) -> FieldError {
        let supported = supported.iter().map(|s| format!("\"{s}\"")).collect::<Vec<_>>().join(", ");
        FieldError {
            field: field.into(),
            message: format!("Unsupported value: \"{value}\": supported values: {supported}"),
            reason: "FieldValueNotSupported",
        }
    }

    /// The value repeats another.
    pub fn duplicate(field: impl Into<String>, value: &str) -> FieldError {
        FieldError {
            field: field.into(),
            message: format!("Duplicate value: \"{value}\""),
            reason: "FieldValueDuplicate",
        }
    }

    /// The field may not be set (or changed) here.
    pub fn forbidden(field: impl Into<String>, why: &str) -> FieldError {
        FieldError {
            field: field.into(),
            message: format!("Forbidden: {why}"),
            reason: "FieldValueForbidden",
        }
    }

    /// The value is longer than allowed, in bytes (Kubernetes' `Too long`).
    pub fn too_long(field: impl Into<String>, limit: usize) -> FieldError {
        FieldError {
            field: field.into(),
            message: format!("Too long: may not be more than {limit} bytes"),
            reason: "FieldValueTooLong",
        }
    }

    /// The list is longer than allowed.
    pub fn too_many(field: impl Into<String>, count: usize, limit: usize) -> FieldError {
        FieldError {
            field: field.into(),
            message: format!("Too many: {count}: must have at most {limit} items"),
            reason: "FieldValueTooMany",
        }
    }
}

/// Whether `name` is a DNS label: at most 63 lowercase alphanumerics or `-`, alphanumeric at
/// both ends.
pub fn is_dns_label(name: &str) -> bool {
    let bytes = name.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 63
        && bytes[0].is_ascii_alphanumeric()
        && bytes[bytes.len() - 1].is_ascii_alphanumeric()
        && bytes.iter().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
}

/// Whether `name` is a DNS subdomain: dot-separated DNS labels, at most 253 characters.
pub fn is_dns_subdomain(name: &str) -> bool {
    !name.is_empty() && name.len() <= 253 && name.split('.').all(is_dns_label)
}

/// Whether `path` is absolute and clean: starts with `/`, no empty, `.` or `..` segments, no
/// trailing slash (except the root itself).
pub fn is_clean_absolute_path(path: &str) -> bool {
    path == "/"
        || (path.starts_with('/')
            && !path.ends_with('/')
            && path[1..].split('/').all(|segment| !segment.is_empty() && segment != "." && segment != ".."))
}

/// Whether text holds a NUL, CR or LF, which no argv or environment entry may.
pub fn has_control_breaks(text: &str) -> bool {
    text.contains(['\0', '\r', '\n'])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_paths() {
        for (name, label, subdomain) in [
            ("web", true, true),
            ("a.b", false, true),
            ("-a", false, false),
            ("A", false, false),
            ("", false, false),
        ] {
            assert_eq!((is_dns_label(name), is_dns_subdomain(name)), (label, subdomain), "{name:?}");
        }
        for (path, clean) in [
            ("/", true),
            ("/srv/app", true),
            ("srv", false),
            ("/srv/", false),
            ("/a/../b", false),
            ("/a//b", false),
            ("/a/./b", false),
        ] {
            assert_eq!(is_clean_absolute_path(path), clean, "{path:?}");
        }
        assert!(has_control_breaks("a\nb") && !has_control_breaks("a b"));
    }
}
