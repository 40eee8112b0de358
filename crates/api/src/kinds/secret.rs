//! Secret: named sensitive values that Applications import into their environment.

use std::collections::BTreeMap;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::Kind;
use crate::scheme::{KindInfo, NameRule, typed};
use crate::table::{Column, text};
use crate::validation::FieldError;

/// The most a Secret may hold, all values together.
pub const MAX_SECRET_BYTES: usize = 1024 * 1024;

/// The `type` of a Secret that holds a bootstrap token: named `bootstrap-token-<id>`, with
/// `token-id`, `token-secret-sha256` (the hex SHA-256 of the token's secret half, never the
/// secret itself), `expiration` (RFC 3339) and optionally `description` and
/// `auth-extra-groups`. The store deletes it when it expires.
pub const BOOTSTRAP_TOKEN_TYPE: &str = "bootstrap.kayra.io/token";

/// The namespace bootstrap tokens are read from.
pub const BOOTSTRAP_TOKEN_NAMESPACE: &str = "kayra-system";

/// The name of the Secret holding the bootstrap token `id`.
pub fn bootstrap_token_name(id: &str) -> String {
    format!("bootstrap-token-{id}")
}

/// Secret holds sensitive values by key. Its values are never logged, never put in an error
/// message and never put in an event.
#[derive(Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Secret {
    /// APIVersion defines the versioned schema of this representation of an object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    /// Kind is a string value representing the REST resource this object represents.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Standard object's metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// What the Secret is for; `Opaque` by default.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub type_: Option<String>,
    /// The values, base64-encoded, by key. Keys are single clean path components.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub data: BTreeMap<String, String>,
    /// Values as plain text, folded into `data` on write; never read back.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub string_data: BTreeMap<String, String>,
    /// Once true, `data` can no longer change.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub immutable: Option<bool>,
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Secret")
            .field("metadata", &self.metadata.name)
            .field("keys", &self.data.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

fn is_key(key: &str) -> bool {
    !key.is_empty()
        && key.len() <= 253
        && key != "."
        && key != ".."
        && key.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

impl Secret {
    /// The decoded value of `key`, when it is present and base64.
    pub fn value(&self, key: &str) -> Option<Vec<u8>> {
        STANDARD.decode(self.data.get(key)?).ok()
    }

    /// The decoded value of `key` as text.
    pub fn text(&self, key: &str) -> Option<String> {
        String::from_utf8(self.value(key)?).ok()
    }

    fn is_bootstrap_token(&self) -> bool {
        self.type_.as_deref() == Some(BOOTSTRAP_TOKEN_TYPE)
    }

    fn bootstrap_token_errors(&self) -> Vec<FieldError> {
        let mut errors = Vec::new();
        let id = self.text("token-id").unwrap_or_default();
        let id_ok = id.len() == 6 && id.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
        if !id_ok {
            errors.push(FieldError::invalid(
                "data[token-id]",
                format!("\"{id}\""),
                "a bootstrap token id is 6 characters of [a-z0-9]",
            ));
        } else if self.metadata.name.as_deref() != Some(bootstrap_token_name(&id).as_str()) {
            errors.push(FieldError::invalid(
                "metadata.name",
                format!("\"{}\"", self.metadata.name.as_deref().unwrap_or_default()),
                &format!("a bootstrap token Secret is named {}", bootstrap_token_name(&id)),
            ));
        }
        let digest = self.text("token-secret-sha256").unwrap_or_default();
        if digest.len() != 64 || !digest.bytes().all(|b| b.is_ascii_hexdigit()) {
            errors.push(FieldError::invalid(
                "data[token-secret-sha256]",
                "<value omitted>",
                "the hex SHA-256 of the token's secret half",
            ));
        }
        if self.expires_at().is_none() {
            errors.push(FieldError::invalid(
                "data[expiration]",
                format!("\"{}\"", self.text("expiration").unwrap_or_default()),
                "an RFC 3339 time is required: a bootstrap token must expire",
            ));
        }
        let extra = self.text("auth-extra-groups").unwrap_or_default();
        for group in extra.split(',').filter(|g| !g.is_empty()) {
            if !group.starts_with("system:bootstrappers:") {
                errors.push(FieldError::invalid(
                    "data[auth-extra-groups]",
                    format!("\"{group}\""),
                    "extra groups of a bootstrap token must start with system:bootstrappers:",
                ));
            }
        }
        errors
    }
}

impl Kind for Secret {
    const MAY_EXPIRE: bool = true;

    fn expires_at(&self) -> Option<jiff::Timestamp> {
        if !self.is_bootstrap_token() {
            return None;
        }
        self.text("expiration")?.parse().ok()
    }

    fn default_fields(&mut self) {
        self.type_.get_or_insert_with(|| "Opaque".to_owned());
        for (key, value) in std::mem::take(&mut self.string_data) {
            self.data.insert(key, STANDARD.encode(value));
        }
    }

    fn validate(&self, old: Option<&Self>) -> Vec<FieldError> {
        let mut errors = Vec::new();
        let mut total = 0;
        for (key, value) in &self.data {
            if !is_key(key) {
                errors.push(FieldError::invalid(
                    format!("data[{key}]"),
                    format!("\"{key}\""),
                    "a key must consist of alphanumeric characters, '-', '_' or '.'",
                ));
            }
            match STANDARD.decode(value) {
                Ok(bytes) => total += bytes.len(),
                Err(_) => errors.push(FieldError::invalid(
                    format!("data[{key}]"),
                    "<value omitted>",
                    "must be base64-encoded",
                )),
            }
        }
        if total > MAX_SECRET_BYTES {
            errors.push(FieldError::invalid(
                "data",
                format!("{total} bytes"),
                "a Secret may hold at most 1 MiB",
            ));
        }
        if self.is_bootstrap_token() {
            errors.extend(self.bootstrap_token_errors());
        }
        if let Some(old) = old
            && old.type_ != self.type_
        {
            errors.push(FieldError::forbidden("type", "field is immutable"));
        }
        if let Some(old) = old
            && old.immutable == Some(true)
        {
            if old.data != self.data {
                errors.push(FieldError::forbidden("data", "field is immutable when `immutable` is set"));
            }
            if self.immutable != Some(true) {
                errors.push(FieldError::forbidden("immutable", "field is immutable when `immutable` is set"));
            }
        }
        errors
    }
}

/// Secrets as served in `fleet`, selectable by `type`.
pub(crate) fn kind_info(fleet: &str) -> KindInfo {
    KindInfo {
        field_labels: &["type"],
        columns: &[
            Column {
                name: "Type",
                type_: "string",
                format: "",
                description: "The type of the Secret",
                priority: 0,
                cell: |o, _| Value::String(text(o, "type")),
            },
            Column {
                name: "Data",
                type_: "integer",
                format: "",
                description: "How many keys the Secret holds",
                priority: 0,
                cell: |o, _| Value::from(o.get("data").and_then(Value::as_object).map_or(0, |d| d.len())),
            },
        ],
        ..KindInfo::v1(fleet, "Secret", "secrets", "secret", true, NameRule::Subdomain, typed::<Secret>())
    }
}

#[cfg(test)]
mod tests;
