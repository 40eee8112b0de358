//! The cluster's signing keys: one current ES256 (P-256) key that signs every new token, and
//! the keys it replaced, each kept with the time it was retired until every token it could
//! have signed has expired. A key's `kid` is its RFC 7638 JWK thumbprint, so every replica
//! derives the same one from the same key.
//!
//! [`StoredKeys`] is the form kept in the store (private keys as PKCS#8); [`KeySet`] the form
//! that signs and verifies. The JWKS carries the public halves only.

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use ring::rand::SystemRandom;
use ring::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::Error;
use crate::token::{CLOCK_SKEW_SECONDS, MAX_EXPIRATION_SECONDS};

/// One signing key as stored: its PKCS#8 document (base64) and, once replaced, when.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StoredKey {
    /// The private key, PKCS#8 v1 DER in standard base64.
    pub pkcs8: String,
    /// When the key stopped signing, in seconds since the epoch; absent for the current key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retired_at: Option<i64>,
}

/// The keys as stored: exactly one without a retirement time, the current one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredKeys {
    /// Every key still in the JWKS, the current one among them.
    pub keys: Vec<StoredKey>,
}

/// A signing key that can sign and whose public half verifies.
pub struct SigningKey {
    kid: String,
    pkcs8: Vec<u8>,
    pair: EcdsaKeyPair,
    retired_at: Option<i64>,
}

impl std::fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SigningKey").field("kid", &self.kid).field("retired_at", &self.retired_at).finish()
    }
}

impl SigningKey {
    /// A new random P-256 key.
    pub fn generate() -> Result<SigningKey, Error> {
        let rng = SystemRandom::new();
        let document = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng)
            .map_err(|_| Error::Crypto)?;
        SigningKey::from_pkcs8(document.as_ref(), None)
    }

    fn from_pkcs8(pkcs8: &[u8], retired_at: Option<i64>) -> Result<SigningKey, Error> {
        let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8, &SystemRandom::new())
            .map_err(|error| Error::Key(error.to_string()))?;
        let kid = thumbprint(pair.public_key().as_ref());
        Ok(SigningKey { kid, pkcs8: pkcs8.to_vec(), pair, retired_at })
    }

    /// The key's id: its RFC 7638 JWK thumbprint.
    pub fn kid(&self) -> &str {
        &self.kid
    }

    /// When the key stopped signing, if it has.
    pub fn retired_at(&self) -> Option<i64> {
        self.retired_at
    }

    /// The uncompressed public point (`04 || x || y`).
    pub fn public_key(&self) -> &[u8] {
        self.pair.public_key().as_ref()
    }

    /// The public half as a JWK.
    pub fn jwk(&self) -> Value {
        let (x, y) = coordinates(self.public_key());
        json!({"kty": "EC", "crv": "P-256", "x": x, "y": y, "kid": self.kid, "use": "sig", "alg": "ES256"})
    }

    /// The ES256 signature (`r || s`, 64 bytes) of `message`.
    pub(crate) fn sign(&self, message: &[u8]) -> Result<Vec<u8>, Error> {
        let signature = self.pair.sign(&SystemRandom::new(), message).map_err(|_| Error::Crypto)?;
        Ok(signature.as_ref().to_vec())
    }

    fn stored(&self) -> StoredKey {
        StoredKey { pkcs8: STANDARD.encode(&self.pkcs8), retired_at: self.retired_at }
    }
}

/// The current key and the retired ones still in the JWKS.
#[derive(Debug)]
pub struct KeySet {
    current: SigningKey,
    retired: Vec<SigningKey>,
}

impl KeySet {
    /// A set of one new key, for a cluster's first start.
    pub fn generate() -> Result<KeySet, Error> {
        Ok(KeySet { current: SigningKey::generate()?, retired: Vec::new() })
    }

    /// The set a stored form holds; exactly one key must be current.
    pub fn from_stored(stored: &StoredKeys) -> Result<KeySet, Error> {
        let mut current = None;
        let mut retired = Vec::new();
        for key in &stored.keys {
            let der = STANDARD.decode(&key.pkcs8).map_err(|error| Error::Key(error.to_string()))?;
            let key = SigningKey::from_pkcs8(&der, key.retired_at)?;
            match key.retired_at {
                Some(_) => retired.push(key),
                None if current.is_none() => current = Some(key),
                None => return Err(Error::Key("more than one key is current".to_owned())),
            }
        }
        let current = current.ok_or_else(|| Error::Key("no key is current".to_owned()))?;
        Ok(KeySet { current, retired })
    }

    /// The stored form of the set.
    pub fn stored(&self) -> StoredKeys {
        let mut keys: Vec<StoredKey> = self.retired.iter().map(SigningKey::stored).collect();
        keys.push(self.current.stored());
        StoredKeys { keys }
    }

    /// The key that signs new tokens.
    pub fn current(&self) -> &SigningKey {
        &self.current
    }

    /// Every key a token may be verified with, the current one first.
    pub fn keys(&self) -> impl Iterator<Item = &SigningKey> {
        std::iter::once(&self.current).chain(&self.retired)
    }

    /// The key whose id is `kid`.
    pub fn find(&self, kid: &str) -> Option<&SigningKey> {
        self.keys().find(|key| key.kid == kid)
    }

    /// Makes `next` the current key at `now`: the old one is retired then, and keys retired
    /// long enough ago that every token they signed has expired are dropped.
    pub fn rotate(&mut self, next: SigningKey, now: i64) {
        let mut old = std::mem::replace(&mut self.current, next);
        old.retired_at = Some(now);
        self.retired.push(old);
        self.prune(now);
    }

    /// Whether a retired key's every token has expired at `now`, so that [`KeySet::prune`]
    /// would drop it.
    pub fn outlived(&self, now: i64) -> bool {
        self.retired.iter().any(|key| key.retired_at.is_some_and(|at| !key_may_verify(at, now)))
    }

    /// Drops the retired keys whose every token has expired (with the clock skew allowed):
    /// a token lives at most [`MAX_EXPIRATION_SECONDS`] from its signing. Answers whether any
    /// key was dropped.
    pub fn prune(&mut self, now: i64) -> bool {
        let before = self.retired.len();
        self.retired.retain(|key| key.retired_at.is_none_or(|at| key_may_verify(at, now)));
        self.retired.len() != before
    }

    /// The JWKS: the public half of every key a token may be verified with.
    pub fn jwks(&self) -> Value {
        json!({"keys": self.keys().map(SigningKey::jwk).collect::<Vec<_>>()})
    }
}

/// Whether a token signed by a key retired at `retired_at` may still be valid at `now`.
fn key_may_verify(retired_at: i64, now: i64) -> bool {
    now <= retired_at + MAX_EXPIRATION_SECONDS + CLOCK_SKEW_SECONDS
}

/// The base64url x and y coordinates of an uncompressed P-256 point.
fn coordinates(point: &[u8]) -> (String, String) {
    let (x, y) = point[1..].split_at(32);
    (URL_SAFE_NO_PAD.encode(x), URL_SAFE_NO_PAD.encode(y))
}

/// The RFC 7638 thumbprint of a P-256 public key: the SHA-256 of its required JWK members in
/// lexicographic order with no whitespace, base64url.
fn thumbprint(point: &[u8]) -> String {
    let (x, y) = coordinates(point);
    let canonical = format!(r#"{{"crv":"P-256","kty":"EC","x":"{x}","y":"{y}"}}"#);
    URL_SAFE_NO_PAD.encode(ring::digest::digest(&ring::digest::SHA256, canonical.as_bytes()))
}

#[cfg(test)]
mod tests;
