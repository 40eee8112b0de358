//! Service-account tokens in the shape of Kubernetes' projected tokens: a JWS signed with the
//! current ES256 key, whose claims name the issuer, the audiences, the Application the token
//! stands for (namespace, name, uid) and the node it is bound to.
//!
//! Verification accepts only what this issuer could have minted: at most [`MAX_TOKEN_BYTES`],
//! compact JWS of exactly three parts, `alg` `ES256` (never `none`, never a MAC whose secret
//! an attacker could take from the JWKS), a `kid` of a key in the set, a valid signature, this
//! issuer, and a validity window that holds at the time of asking with
//! [`CLOCK_SKEW_SECONDS`] of leeway either side, as Kubernetes allows. Audiences are the
//! caller's to check ([`Claims::audiences_within`]); whether the Application still exists
//! under the same uid is the application layer's.

use std::collections::BTreeMap;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use kayra_authn::Identity;
use ring::signature::{ECDSA_P256_SHA256_FIXED, UnparsedPublicKey};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Value, json};

use crate::Error;
use crate::keys::KeySet;

/// The shortest life a token may be asked for: ten minutes, as Kubernetes.
pub const MIN_EXPIRATION_SECONDS: i64 = 600;
/// The longest life a token may be asked for: 48 hours.
pub const MAX_EXPIRATION_SECONDS: i64 = 172_800;
/// A token's life when none is asked for: one hour.
pub const DEFAULT_EXPIRATION_SECONDS: i64 = 3_600;
/// How far the clocks of the issuer and the verifier may disagree.
pub const CLOCK_SKEW_SECONDS: i64 = 60;
/// The largest token verification reads; a larger one is refused unread.
pub const MAX_TOKEN_BYTES: usize = 16 * 1024;
/// The most audiences one token may carry.
pub const MAX_AUDIENCES: usize = 16;

/// The group every service account is in.
pub const SERVICE_ACCOUNTS_GROUP: &str = "system:serviceaccounts";

/// Why a token is not accepted. None of these quotes the token.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Invalid {
    /// Larger than [`MAX_TOKEN_BYTES`].
    #[error("the token is larger than {MAX_TOKEN_BYTES} bytes")]
    TooLarge,
    /// Not a compact JWS with a JSON header and claims of the expected shape.
    #[error("the token is malformed")]
    Malformed,
    /// Signed with an algorithm other than ES256 (`none` and MACs included).
    #[error("the token's algorithm is not ES256")]
    Algorithm,
    /// Its `kid` names no key of the issuer (an unknown key, or one removed after rotation).
    #[error("the token's signing key is not one of the issuer's")]
    UnknownKey,
    /// The signature does not verify.
    #[error("the token's signature is invalid")]
    Signature,
    /// Issued by someone else.
    #[error("the token's issuer is not this cluster's")]
    Issuer,
    /// Past its expiry.
    #[error("the token has expired")]
    Expired,
    /// Before its `nbf` or `iat`.
    #[error("the token is not valid yet")]
    NotYetValid,
    /// Its subject and its `kubernetes.io` claims disagree.
    #[error("the token's subject does not match its service account")]
    Subject,
}

/// The Application a token is minted for, and the node it is bound to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subject {
    /// The Application's namespace.
    pub namespace: String,
    /// The Application's name.
    pub name: String,
    /// The Application's uid: a recreated Application under the same name has another.
    pub uid: String,
    /// The node the Application is bound to, when it is: its name and uid.
    pub node: Option<Reference>,
}

/// An object a token names: its name and uid.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reference {
    /// The name.
    pub name: String,
    /// The uid.
    pub uid: String,
}

/// The `kubernetes.io` claim.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KubernetesClaims {
    /// The Application's namespace.
    pub namespace: String,
    /// The Application, as the service account the token stands for.
    pub serviceaccount: Reference,
    /// The node the Application was bound to when the token was minted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<Reference>,
}

/// The claims of a service-account token.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claims {
    /// The issuer.
    pub iss: String,
    /// `system:serviceaccount:<namespace>:<application>`.
    pub sub: String,
    /// The audiences (one string or a list on the wire).
    #[serde(deserialize_with = "one_or_many")]
    pub aud: Vec<String>,
    /// Issued at, seconds since the epoch.
    pub iat: i64,
    /// Not before.
    pub nbf: i64,
    /// Expires at.
    pub exp: i64,
    /// The token's own id.
    pub jti: String,
    /// Who the token stands for.
    #[serde(rename = "kubernetes.io")]
    pub kubernetes: KubernetesClaims,
}

impl Claims {
    /// The audiences of the token that are among `wanted`.
    pub fn audiences_within(&self, wanted: &[String]) -> Vec<String> {
        self.aud.iter().filter(|audience| wanted.contains(audience)).cloned().collect()
    }

    /// The identity the token proves: the service account's user name, the Application's uid,
    /// and the service-account groups.
    pub fn identity(&self) -> Identity {
        let namespace = &self.kubernetes.namespace;
        Identity::new(
            self.sub.clone(),
            self.kubernetes.serviceaccount.uid.clone(),
            vec![SERVICE_ACCOUNTS_GROUP.to_owned(), format!("{SERVICE_ACCOUNTS_GROUP}:{namespace}")],
        )
    }

    /// What Kubernetes puts in a TokenReview's `user.extra` for such a token.
    pub fn extra(&self) -> BTreeMap<String, Vec<String>> {
        let mut extra = BTreeMap::new();
        extra.insert(
            "authentication.kubernetes.io/credential-id".to_owned(),
            vec![format!("JTI={}", self.jti)],
        );
        if let Some(node) = &self.kubernetes.node {
            extra.insert("authentication.kubernetes.io/node-name".to_owned(), vec![node.name.clone()]);
            extra.insert("authentication.kubernetes.io/node-uid".to_owned(), vec![node.uid.clone()]);
        }
        extra
    }
}

/// The user name of the service account an Application is.
pub fn service_account_user(namespace: &str, name: &str) -> String {
    format!("system:serviceaccount:{namespace}:{name}")
}

/// A minted token and when it expires.
#[derive(Clone, PartialEq, Eq)]
pub struct Minted {
    /// The compact JWS.
    pub token: String,
    /// Its expiry, seconds since the epoch.
    pub expires_at: i64,
}

impl std::fmt::Debug for Minted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Minted").field("expires_at", &self.expires_at).finish_non_exhaustive()
    }
}

/// The life a token asked for `expiration_seconds` gets: the default when absent, else the
/// value when within bounds.
pub fn expiration(expiration_seconds: Option<i64>) -> Result<i64, Error> {
    match expiration_seconds {
        None => Ok(DEFAULT_EXPIRATION_SECONDS),
        Some(seconds) if (MIN_EXPIRATION_SECONDS..=MAX_EXPIRATION_SECONDS).contains(&seconds) => Ok(seconds),
        Some(seconds) => Err(Error::Expiration(seconds)),
    }
}

/// Mints a token for `subject`, valid for `audiences` from `now` for `expiration_seconds`
/// (the default when absent), signed by the set's current key.
pub fn mint(
    keys: &KeySet,
    issuer: &str,
    subject: &Subject,
    audiences: &[String],
    expiration_seconds: Option<i64>,
    now: i64,
) -> Result<Minted, Error> {
    let life = expiration(expiration_seconds)?;
    if audiences.is_empty() {
        return Err(Error::Audiences("at least one audience is required".to_owned()));
    }
    if audiences.len() > MAX_AUDIENCES {
        return Err(Error::Audiences(format!("at most {MAX_AUDIENCES} audiences")));
    }
    if let Some(at) = audiences.iter().position(String::is_empty) {
        return Err(Error::Audiences(format!("audience {at} is empty")));
    }
    let claims = Claims {
        iss: issuer.to_owned(),
        sub: service_account_user(&subject.namespace, &subject.name),
        aud: audiences.to_vec(),
        iat: now,
        nbf: now,
        exp: now + life,
        jti: uuid::Uuid::new_v4().to_string(),
        kubernetes: KubernetesClaims {
            namespace: subject.namespace.clone(),
            serviceaccount: Reference { name: subject.name.clone(), uid: subject.uid.clone() },
            node: subject.node.clone(),
        },
    };
    let key = keys.current();
    let header = json!({"alg": "ES256", "kid": key.kid(), "typ": "JWT"});
    let signing_input =
        format!("{}.{}", encode(&header), encode(&serde_json::to_value(&claims).expect("claims serialize")));
    let signature = key.sign(signing_input.as_bytes())?;
    Ok(Minted {
        token: format!("{signing_input}.{}", URL_SAFE_NO_PAD.encode(signature)),
        expires_at: claims.exp,
    })
}

/// The `kid` a token's header names, read without verifying anything: which key set to
/// verify it with. `None` for what is not a compact JWS of bounded size naming one.
pub fn key_id(token: &str) -> Option<String> {
    if token.len() > MAX_TOKEN_BYTES {
        return None;
    }
    let header: Value = decode(token.split('.').next()?).ok()?;
    header.get("kid").and_then(Value::as_str).map(str::to_owned)
}

/// The claims of `token` when `keys` and `issuer` vouch for it at `now`.
pub fn verify(keys: &KeySet, issuer: &str, token: &str, now: i64) -> Result<Claims, Invalid> {
    if token.len() > MAX_TOKEN_BYTES {
        return Err(Invalid::TooLarge);
    }
    let mut parts = token.split('.');
    let (Some(header), Some(payload), Some(signature), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(Invalid::Malformed);
    };
    let header: Value = decode(header)?;
    if header.get("crit").is_some() {
        return Err(Invalid::Malformed);
    }
    if header.get("alg").and_then(Value::as_str) != Some("ES256") {
        return Err(Invalid::Algorithm);
    }
    let kid = header.get("kid").and_then(Value::as_str).ok_or(Invalid::UnknownKey)?;
    let key = keys.find(kid).ok_or(Invalid::UnknownKey)?;
    let signature = URL_SAFE_NO_PAD.decode(signature).map_err(|_| Invalid::Malformed)?;
    let signing_input = &token[..header_and_payload_length(token)];
    UnparsedPublicKey::new(&ECDSA_P256_SHA256_FIXED, key.public_key())
        .verify(signing_input.as_bytes(), &signature)
        .map_err(|_| Invalid::Signature)?;
    let claims: Claims = decode(payload)?;
    if claims.iss != issuer {
        return Err(Invalid::Issuer);
    }
    if now > claims.exp + CLOCK_SKEW_SECONDS {
        return Err(Invalid::Expired);
    }
    if claims.nbf > now + CLOCK_SKEW_SECONDS || claims.iat > now + CLOCK_SKEW_SECONDS {
        return Err(Invalid::NotYetValid);
    }
    let account = &claims.kubernetes;
    if claims.sub != service_account_user(&account.namespace, &account.serviceaccount.name)
        || account.serviceaccount.uid.is_empty()
    {
        return Err(Invalid::Subject);
    }
    Ok(claims)
}

/// The length of `header.payload`, the part a JWS signs.
fn header_and_payload_length(token: &str) -> usize {
    token.rfind('.').expect("a token of three parts has a last dot")
}

fn encode(value: &Value) -> String {
    URL_SAFE_NO_PAD.encode(value.to_string())
}

fn decode<T: for<'de> Deserialize<'de>>(part: &str) -> Result<T, Invalid> {
    let bytes = URL_SAFE_NO_PAD.decode(part).map_err(|_| Invalid::Malformed)?;
    serde_json::from_slice(&bytes).map_err(|_| Invalid::Malformed)
}

fn one_or_many<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum OneOrMany {
        One(String),
        Many(Vec<String>),
    }
    Ok(match OneOrMany::deserialize(deserializer)? {
        OneOrMany::One(one) => vec![one],
        OneOrMany::Many(many) => many,
    })
}

#[cfg(test)]
mod tests;
