//! The workload-identity issuer: the cluster's ES256 signing keys ([`keys`]), the OIDC
//! discovery document and JWKS a verifier elsewhere fetches, and the service-account tokens an
//! Application proves itself with, minted and verified ([`token`]) in the shape of Kubernetes'
//! projected service-account tokens.
//!
//! This crate does no IO and reads no clock: the keys come in as their stored form and go out
//! the same way, and every operation takes the time it runs at. It never knows where the keys
//! are kept or whether an Application still exists; the application layer checks a verified
//! token's uid against the Application it names. Start reading at [`keys::KeySet`], then
//! [`token::mint`] and [`token::verify`].

pub mod keys;
pub mod token;

use serde_json::{Value, json};

/// The path of the OIDC discovery document, as Kubernetes serves it.
pub const DISCOVERY_PATH: &str = "/.well-known/openid-configuration";

/// The path of the JWKS, as Kubernetes serves it.
pub const JWKS_PATH: &str = "/openid/v1/jwks";

/// What went wrong with a key or a token. No variant carries a token or any part of one.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A stored key could not be read (the stored form is damaged or not a P-256 key).
    #[error("the stored signing key is unusable: {0}")]
    Key(String),
    /// A key could not be generated or a token could not be signed.
    #[error("the signing operation failed")]
    Crypto,
    /// A requested expiration is outside what tokens may live.
    #[error("spec.expirationSeconds: Invalid value: {0}: must be between {min} and {max} seconds", min = token::MIN_EXPIRATION_SECONDS, max = token::MAX_EXPIRATION_SECONDS)]
    Expiration(i64),
    /// A requested audience is empty or too many were asked for.
    #[error("spec.audiences: Invalid value: {0}")]
    Audiences(String),
    /// The token is not one this issuer accepts; the reason never quotes the token.
    #[error("invalid bearer token: {0}")]
    Invalid(token::Invalid),
}

impl Error {
    /// Whether trying again may succeed: only a failed signing operation may.
    pub fn is_retryable(&self) -> bool {
        matches!(self, Error::Crypto)
    }
}

/// The OIDC discovery document of `issuer`: where its keys are and what it signs with.
pub fn discovery_document(issuer: &str) -> Value {
    json!({
        "issuer": issuer,
        "jwks_uri": format!("{}{JWKS_PATH}", issuer.trim_end_matches('/')),
        "response_types_supported": ["id_token"],
        "subject_types_supported": ["public"],
        "id_token_signing_alg_values_supported": ["ES256"],
    })
}
