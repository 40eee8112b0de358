//! The bootstrap-token Secret: how a token's record ([`Stored`]) is written as a Kayra Secret
//! and read back. Both directions live here, so that what the controller stores when it mints
//! a token and what the API reads when the token is presented cannot drift apart.
//!
//! The Secret is `bootstrap-token-<id>` in `kayra-system`, of type
//! `bootstrap.kayra.io/token`, with `token-id`, `token-secret-sha256`, `expiration` (RFC 3339),
//! `usage-bootstrap-authentication: "true"` and, when present, `description` and
//! `auth-extra-groups` (comma-separated).

use std::collections::BTreeMap;
use std::time::SystemTime;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kayra_api::kinds::secret::{
    BOOTSTRAP_TOKEN_NAMESPACE, BOOTSTRAP_TOKEN_TYPE, Secret, bootstrap_token_name,
};

use super::Stored;

/// The key saying the token may authenticate a caller.
const USAGE_AUTHENTICATION: &str = "usage-bootstrap-authentication";

/// The Secret that stores `stored`, in the API group `fleet.<domain>`; `description` (what the
/// token is for) is kept when it is not empty.
pub fn encode(domain: &str, stored: &Stored, description: &str) -> Secret {
    let expires = jiff::Timestamp::try_from(stored.expires)
        .expect("a token's expiry lies within the years a timestamp can name");
    let mut data = BTreeMap::new();
    let mut put = |key: &str, text: &str| {
        data.insert(key.to_owned(), STANDARD.encode(text));
    };
    put("token-id", &stored.id);
    put("token-secret-sha256", &stored.secret_digest);
    put("expiration", &expires.to_string());
    put(USAGE_AUTHENTICATION, "true");
    if !description.is_empty() {
        put("description", description);
    }
    if !stored.extra_groups.is_empty() {
        put("auth-extra-groups", &stored.extra_groups.join(","));
    }
    Secret {
        api_version: Some(format!("fleet.{domain}/v1")),
        kind: Some("Secret".to_owned()),
        metadata: ObjectMeta {
            name: Some(bootstrap_token_name(&stored.id)),
            namespace: Some(BOOTSTRAP_TOKEN_NAMESPACE.to_owned()),
            ..ObjectMeta::default()
        },
        type_: Some(BOOTSTRAP_TOKEN_TYPE.to_owned()),
        data,
        ..Secret::default()
    }
}

/// The record `secret` stores; `None` for a Secret that is not a bootstrap token meant for
/// authentication, or lacks its id, its digest or a readable expiry.
pub fn decode(secret: &Secret) -> Option<Stored> {
    let for_authentication = secret.text(USAGE_AUTHENTICATION).as_deref() == Some("true");
    if secret.type_.as_deref() != Some(BOOTSTRAP_TOKEN_TYPE) || !for_authentication {
        return None;
    }
    let expires: jiff::Timestamp = secret.text("expiration")?.parse().ok()?;
    Some(Stored {
        id: secret.text("token-id")?,
        secret_digest: secret.text("token-secret-sha256")?,
        expires: SystemTime::from(expires),
        extra_groups: secret
            .text("auth-extra-groups")
            .unwrap_or_default()
            .split(',')
            .filter(|group| !group.is_empty())
            .map(str::to_owned)
            .collect(),
    })
}

#[cfg(test)]
mod tests;
