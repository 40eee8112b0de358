//! `spec.identity`: the service-account tokens the node agent keeps in an Application's
//! identity directory (mounted at [`MOUNT_PATH`] where the agent can), so that the workload
//! can prove who it is to the API and to any verifier that reads the cluster's JWKS.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::validation::FieldError;

/// Where in-cluster clients look for their credentials, as in Kubernetes.
pub const MOUNT_PATH: &str = "/var/run/secrets/kubernetes.io/serviceaccount";
/// The file the automounted token is written to.
pub const AUTOMOUNT_PATH: &str = "token";
/// The shortest life a token may ask for (10 minutes).
pub const MIN_EXPIRATION_SECONDS: i64 = 600;
/// The longest life a token may ask for (48 hours).
pub const MAX_EXPIRATION_SECONDS: i64 = 48 * 3600;
/// The life of a token that asks for none (1 hour).
pub const DEFAULT_EXPIRATION_SECONDS: i64 = 3600;
/// The files the agent writes beside the tokens, which no token may take.
const RESERVED_PATHS: &[&str] = &["ca.crt", "namespace"];
/// The most tokens one Application may ask for.
const MAX_TOKENS: usize = 16;

/// The tokens an Application's process is given.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadIdentity {
    /// Whether the process gets a token for the API's own audience at `token` (default true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub automount: Option<bool>,
    /// Further tokens, each for its own audience.
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["path"]))]
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tokens: Vec<TokenProjection>,
}

/// One token the agent keeps fresh in the identity directory.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TokenProjection {
    /// The audience the token is for (its `aud`). Required.
    #[serde(default)]
    pub audience: String,
    /// The file, relative to the identity directory: one plain name. Required.
    #[serde(default)]
    pub path: String,
    /// How long each token lives: 600 to 172800 seconds, 3600 when unset. The agent is handed
    /// a fresh one at 80 % of that life.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expiration_seconds: Option<i64>,
}

/// One token the node is to write: what [`WorkloadIdentity`] asks for, resolved.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Projection {
    /// The audience; `None` is the API's own.
    pub audience: Option<String>,
    /// The file name.
    pub path: String,
    /// The token's life.
    pub expiration_seconds: i64,
}

impl WorkloadIdentity {
    /// Every token this identity asks for, the automounted one first.
    pub fn projections(identity: Option<&WorkloadIdentity>) -> Vec<Projection> {
        let automount = identity.and_then(|identity| identity.automount).unwrap_or(true);
        let mut projections = Vec::new();
        if automount {
            projections.push(Projection {
                audience: None,
                path: AUTOMOUNT_PATH.to_owned(),
                expiration_seconds: DEFAULT_EXPIRATION_SECONDS,
            });
        }
        for token in identity.map(|identity| identity.tokens.as_slice()).unwrap_or_default() {
            projections.push(Projection {
                audience: Some(token.audience.clone()),
                path: token.path.clone(),
                expiration_seconds: token.expiration_seconds.unwrap_or(DEFAULT_EXPIRATION_SECONDS),
            });
        }
        projections
    }

    /// Every problem with the identity, each naming its field under `spec.identity`.
    pub fn validate(&self) -> Vec<FieldError> {
        let mut errors = Vec::new();
        if self.tokens.len() > MAX_TOKENS {
            errors.push(FieldError::invalid(
                "spec.identity.tokens",
                self.tokens.len(),
                &format!("must hold at most {MAX_TOKENS} tokens"),
            ));
        }
        let mut taken: Vec<&str> = Vec::new();
        if self.automount.unwrap_or(true) {
            taken.push(AUTOMOUNT_PATH);
        }
        for (at, token) in self.tokens.iter().enumerate() {
            let field = |name: &str| format!("spec.identity.tokens[{at}].{name}");
            if token.audience.is_empty() {
                errors.push(FieldError::required(field("audience")));
            } else if token.audience.len() > 253 || token.audience.chars().any(char::is_control) {
                errors.push(FieldError::invalid(
                    field("audience"),
                    format!("{:?}", token.audience),
                    "must be at most 253 characters with no control characters",
                ));
            }
            if token.path.is_empty() {
                errors.push(FieldError::required(field("path")));
            } else if !is_file_name(&token.path) {
                errors.push(FieldError::invalid(
                    field("path"),
                    format!("{:?}", token.path),
                    "must be one file name of letters, digits, '.', '_' or '-', not starting with '.'",
                ));
            } else if RESERVED_PATHS.contains(&token.path.as_str()) {
                errors.push(FieldError::invalid(
                    field("path"),
                    format!("{:?}", token.path),
                    "is written by the node agent itself (ca.crt, namespace)",
                ));
            } else if taken.contains(&token.path.as_str()) {
                errors.push(FieldError::duplicate(field("path"), &token.path));
            } else {
                taken.push(&token.path);
            }
            if let Some(seconds) = token
                .expiration_seconds
                .filter(|seconds| !(MIN_EXPIRATION_SECONDS..=MAX_EXPIRATION_SECONDS).contains(seconds))
            {
                errors.push(FieldError::invalid(
                    field("expirationSeconds"),
                    seconds,
                    "must be between 600 and 172800 seconds (10 minutes to 48 hours), inclusive",
                ));
            }
        }
        errors
    }
}

/// Whether `path` is a plain file name the agent may write in the identity directory.
fn is_file_name(path: &str) -> bool {
    path.len() <= 253
        && !path.starts_with('.')
        && path.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token(audience: &str, path: &str, expiration_seconds: Option<i64>) -> TokenProjection {
        TokenProjection { audience: audience.to_owned(), path: path.to_owned(), expiration_seconds }
    }

    #[test]
    fn an_application_without_an_identity_gets_the_api_token_alone() {
        let projections = WorkloadIdentity::projections(None);
        assert_eq!(
            projections,
            vec![Projection { audience: None, path: "token".to_owned(), expiration_seconds: 3600 }]
        );
        let off =
            WorkloadIdentity { automount: Some(false), tokens: vec![token("vault", "vault", Some(600))] };
        assert_eq!(
            WorkloadIdentity::projections(Some(&off)),
            vec![Projection {
                audience: Some("vault".to_owned()),
                path: "vault".to_owned(),
                expiration_seconds: 600
            }]
        );
    }

    #[test]
    fn each_bad_token_is_named_by_its_field() {
        let identity = WorkloadIdentity {
            automount: None,
            tokens: vec![
                token("", "a", None),
                token("vault", "../etc/passwd", None),
                token("vault", "token", None),
                token("vault", "ca.crt", None),
                token("vault", "b", Some(599)),
                token("vault", "c", Some(172_801)),
                token("vault", "d", Some(172_800)),
            ],
        };
        let fields: Vec<String> = identity.validate().into_iter().map(|error| error.field).collect();
        assert_eq!(
            fields,
            [
                "spec.identity.tokens[0].audience",
                "spec.identity.tokens[1].path",
                "spec.identity.tokens[2].path",
                "spec.identity.tokens[3].path",
                "spec.identity.tokens[4].expirationSeconds",
                "spec.identity.tokens[5].expirationSeconds",
            ]
        );
        let unmounted =
            WorkloadIdentity { automount: Some(false), tokens: vec![token("vault", "token", None)] };
        assert!(unmounted.validate().is_empty(), "without automount, `token` is free");
    }
}
