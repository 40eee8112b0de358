//! Workload identity: the cluster's service-account issuer over the store. The signing keys
//! are one Secret, `kayra-system/service-account-signing-keys`, created at first use by
//! whichever replica gets there first (a create that loses the race reads the winner's), so
//! that every replica signs with the same key and verifies with the same set.
//!
//! What this module decides beyond [`kayra_oidc`]'s signature and window checks: a token
//! authenticates only while the Application it names exists with the uid it was minted for
//! (deleted or recreated under the same name, it stops), and as a bearer token only when one
//! of its audiences is the API's own, the issuer URL.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use kayra_api::kinds::secret::BOOTSTRAP_TOKEN_NAMESPACE;
use kayra_authn::Identity;
use kayra_oidc::keys::{KeySet, StoredKeys};
use kayra_oidc::token::{Claims, Invalid, Subject};
use kayra_registry::{RegistryError, Resource};
use serde_json::{Value, json};
use tokio::time::Instant;

use crate::ApplicationLayer;

/// The namespace of the Secret holding the signing keys.
pub const SIGNING_KEYS_NAMESPACE: &str = BOOTSTRAP_TOKEN_NAMESPACE;
/// The Secret holding the signing keys.
pub const SIGNING_KEYS_SECRET: &str = "service-account-signing-keys";
/// The `type` of that Secret.
pub const SIGNING_KEYS_TYPE: &str = "kayra.io/service-account-signing-keys";
/// The key of that Secret's data holding the keys' stored form (JSON).
pub const SIGNING_KEYS_FIELD: &str = "keys.json";

/// How long a verification trusts the key set last read without reading the Secret again:
/// a key removed from the Secret stops verifying within this time on every replica.
const KEYS_FRESH: Duration = Duration::from_secs(5);

/// How soon after reading the keys a token naming a key they lack has them read again: a key
/// made current by another replica is found within this time, while tokens naming keys that
/// do not exist cost the store at most one read per this time.
const UNKNOWN_KEY_REREAD: Duration = Duration::from_millis(100);

/// The issuer: its URL, and the key set last read with the Secret's resourceVersion.
#[derive(Debug)]
pub struct Issuer {
    url: String,
    cached: Mutex<Option<CachedKeys>>,
}

/// The key set as last read from its Secret.
#[derive(Debug)]
struct CachedKeys {
    version: String,
    keys: Arc<KeySet>,
    read_at: Instant,
}

/// Why a token does not authenticate; what a TokenReview's `error` says. Never quotes it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// The token itself is not one this issuer accepts.
    #[error("invalid bearer token: {0}")]
    Invalid(Invalid),
    /// The Application it names is gone, or was recreated under the same name.
    #[error("invalid bearer token: the Application the token was issued for no longer exists")]
    Gone,
    /// None of its audiences is among those the verifier accepts.
    #[error("invalid bearer token: the token's audiences are not among those asked for")]
    Audience,
    /// The issuer's keys could not be read.
    #[error("the service-account issuer's keys cannot be read")]
    Unavailable,
}

/// The current time, in seconds since the epoch.
pub fn now() -> i64 {
    jiff::Timestamp::now().as_second()
}

/// The Secret (of `fleet.<domain>`) holding `keys`, in its stored form.
pub fn signing_keys_secret(domain: &str, keys: &StoredKeys) -> Value {
    let text = serde_json::to_vec(keys).expect("stored keys serialize");
    json!({
        "apiVersion": format!("fleet.{domain}/v1"), "kind": "Secret",
        "metadata": {"name": SIGNING_KEYS_SECRET, "namespace": SIGNING_KEYS_NAMESPACE},
        "type": SIGNING_KEYS_TYPE,
        "data": {SIGNING_KEYS_FIELD: STANDARD.encode(text)},
    })
}

/// The stored keys a signing-keys Secret holds.
pub fn stored_keys(secret: &Value) -> Result<StoredKeys, String> {
    let data = secret
        .pointer(&format!("/data/{}", SIGNING_KEYS_FIELD.replace('~', "~0").replace('/', "~1")))
        .and_then(Value::as_str)
        .ok_or_else(|| format!("the Secret has no {SIGNING_KEYS_FIELD}"))?;
    let text = STANDARD.decode(data).map_err(|error| error.to_string())?;
    serde_json::from_slice(&text).map_err(|error| error.to_string())
}

impl ApplicationLayer {
    /// Issues and verifies service-account tokens as `url` (the issuer named in their `iss`
    /// and the API's audience). Set once, at assembly; later calls change nothing.
    pub fn set_issuer(&self, url: String) {
        let _ = self.issuer.set(Issuer { url, cached: Mutex::new(None) });
    }

    /// The issuer URL, once set.
    pub fn issuer_url(&self) -> Option<&str> {
        self.issuer.get().map(|issuer| issuer.url.as_str())
    }

    fn issuer_or_refuse(&self) -> Result<&Issuer, RegistryError> {
        self.issuer.get().ok_or_else(|| {
            RegistryError::BadRequest("this server issues no service-account tokens".to_owned())
        })
    }

    fn secrets(&self) -> Result<&Resource, RegistryError> {
        let fleet = format!("fleet.{}", self.scheme.domain());
        self.resource_named(&fleet, "secrets")
            .ok_or_else(|| RegistryError::BadRequest("the server serves no Secrets".to_owned()))
    }

    /// The signing keys, created when there are none yet. Every replica races to create the
    /// same Secret; the one whose create loses reads the winner's.
    pub async fn signing_keys(&self) -> Result<Arc<KeySet>, RegistryError> {
        let issuer = self.issuer_or_refuse()?;
        let secrets = self.secrets()?;
        let stored = match self.registry.get(secrets, Some(SIGNING_KEYS_NAMESPACE), SIGNING_KEYS_SECRET).await
        {
            Ok(object) => Value::Object(object),
            Err(RegistryError::NotFound { .. }) => {
                let keys =
                    KeySet::generate().map_err(|error| RegistryError::BadRequest(error.to_string()))?;
                let options =
                    self.admitted(&crate::controller_identity("issuer"), kayra_registry::Part::Main, false);
                match self
                    .registry
                    .create(
                        secrets,
                        Some(SIGNING_KEYS_NAMESPACE),
                        signing_keys_secret(self.scheme.domain(), &keys.stored()),
                        options,
                    )
                    .await
                {
                    Ok(object) => Value::Object(object),
                    Err(RegistryError::AlreadyExists { .. }) => Value::Object(
                        self.registry.get(secrets, Some(SIGNING_KEYS_NAMESPACE), SIGNING_KEYS_SECRET).await?,
                    ),
                    Err(error) => return Err(error),
                }
            }
            Err(error) => return Err(error),
        };
        let version = stored.pointer("/metadata/resourceVersion").and_then(Value::as_str).unwrap_or_default();
        let mut cached = issuer.cached.lock().expect("the key cache's lock is never held across a panic");
        let now = now();
        if let Some(seen) = cached.as_mut()
            && seen.version == version
            && !seen.keys.outlived(now)
        {
            seen.read_at = Instant::now();
            return Ok(seen.keys.clone());
        }
        let corrupt = |message: String| RegistryError::Corrupt {
            key: format!("{SIGNING_KEYS_NAMESPACE}/{SIGNING_KEYS_SECRET}"),
            message,
        };
        let keys = stored_keys(&stored).map_err(corrupt)?;
        let mut keys = KeySet::from_stored(&keys).map_err(|error| corrupt(error.to_string()))?;
        // A retired key whose every token has expired leaves the JWKS now, not at the next rotation.
        keys.prune(now);
        let keys = Arc::new(keys);
        *cached =
            Some(CachedKeys { version: version.to_owned(), keys: keys.clone(), read_at: Instant::now() });
        Ok(keys)
    }

    /// The key set a token signed with `kid` verifies with: the one last read while it is
    /// fresh and holds that key (or was read too recently to look again), else the Secret as
    /// it is now. So requests bearing tokens read the store at most once per [`KEYS_FRESH`],
    /// and a key made current elsewhere is found within [`UNKNOWN_KEY_REREAD`].
    async fn verifying_keys(&self, kid: Option<&str>) -> Result<Arc<KeySet>, RegistryError> {
        let issuer = self.issuer_or_refuse()?;
        {
            let cached = issuer.cached.lock().expect("the key cache's lock is never held across a panic");
            if let Some(seen) = cached.as_ref()
                && seen.read_at.elapsed() < KEYS_FRESH
                && !seen.keys.outlived(now())
                && (kid.is_some_and(|kid| seen.keys.find(kid).is_some())
                    || seen.read_at.elapsed() < UNKNOWN_KEY_REREAD)
            {
                return Ok(seen.keys.clone());
            }
        }
        self.signing_keys().await
    }

    /// The OIDC discovery document, once an issuer is set.
    pub fn discovery_document(&self) -> Option<Value> {
        self.issuer_url().map(kayra_oidc::discovery_document)
    }

    /// The JWKS: the public halves of the keys tokens verify with.
    pub async fn jwks(&self) -> Result<Value, RegistryError> {
        Ok(self.signing_keys().await?.jwks())
    }

    /// Mints a token for the Application `namespace`/`name` for `audiences` (the API's when
    /// empty), living `expiration_seconds` (one hour when absent). Answers the token and its
    /// expiry.
    pub async fn mint_token(
        &self,
        application: &Value,
        audiences: &[String],
        expiration_seconds: Option<i64>,
    ) -> Result<kayra_oidc::token::Minted, RegistryError> {
        let issuer = self.issuer_or_refuse()?;
        let text = |pointer: &str| {
            application.pointer(pointer).and_then(Value::as_str).unwrap_or_default().to_owned()
        };
        let node_name = text("/spec/placement/nodeName");
        let node = match self.resource_named("", "nodes") {
            Some(nodes) if !node_name.is_empty() => {
                self.registry.get(nodes, None, &node_name).await.ok().map(|node| {
                    kayra_oidc::token::Reference {
                        name: node_name.clone(),
                        uid: node
                            .get("metadata")
                            .and_then(|m| m.get("uid"))
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                            .to_owned(),
                    }
                })
            }
            _ => None,
        };
        let subject = Subject {
            namespace: text("/metadata/namespace"),
            name: text("/metadata/name"),
            uid: text("/metadata/uid"),
            node,
        };
        let audiences = if audiences.is_empty() { vec![issuer.url.clone()] } else { audiences.to_vec() };
        let keys = self.signing_keys().await?;
        kayra_oidc::token::mint(&keys, &issuer.url, &subject, &audiences, expiration_seconds, now())
            .map_err(|error| invalid_token_request(&error))
    }

    /// The claims of `token` when it verifies and the Application it names still exists with
    /// its uid.
    pub async fn verify_token(&self, token: &str) -> Result<Claims, Refusal> {
        let issuer = self.issuer.get().ok_or(Refusal::Unavailable)?;
        let kid = kayra_oidc::token::key_id(token);
        let keys = self.verifying_keys(kid.as_deref()).await.map_err(|_| Refusal::Unavailable)?;
        let claims = kayra_oidc::token::verify(&keys, &issuer.url, token, now()).map_err(Refusal::Invalid)?;
        let fleet = format!("fleet.{}", self.scheme.domain());
        let applications = self.resource_named(&fleet, "applications").ok_or(Refusal::Unavailable)?;
        let account = &claims.kubernetes;
        // Read from the store, not a cache, so that a token stops authenticating as soon as
        // its Application's delete is acknowledged.
        match self.registry.get(applications, Some(&account.namespace), &account.serviceaccount.name).await {
            Ok(object)
                if object.get("metadata").and_then(|m| m.get("uid")).and_then(Value::as_str)
                    == Some(account.serviceaccount.uid.as_str()) =>
            {
                Ok(claims)
            }
            Ok(_) | Err(RegistryError::NotFound { .. }) => Err(Refusal::Gone),
            Err(_) => Err(Refusal::Unavailable),
        }
    }

    /// The identity a service-account bearer token proves to the API: one of its audiences
    /// must be the API's own.
    pub async fn service_account_identity(&self, token: &str) -> Option<Identity> {
        let api = self.issuer_url()?.to_owned();
        let claims = self.verify_token(token).await.ok()?;
        (!claims.audiences_within(&[api]).is_empty()).then(|| claims.identity())
    }

    /// A TokenReview's status for `token` reviewed for `audiences` (the API's when empty).
    pub async fn token_review_status(&self, token: &str, audiences: &[String]) -> Value {
        let wanted = match (audiences.is_empty(), self.issuer_url()) {
            (false, _) => audiences.to_vec(),
            (true, Some(api)) => vec![api.to_owned()],
            (true, None) => Vec::new(),
        };
        let refused = |refusal: Refusal| json!({"authenticated": false, "error": refusal.to_string()});
        let claims = match self.verify_token(token).await {
            Ok(claims) => claims,
            Err(refusal) => return refused(refusal),
        };
        let within = claims.audiences_within(&wanted);
        if within.is_empty() {
            return refused(Refusal::Audience);
        }
        let identity = claims.identity();
        json!({
            "authenticated": true,
            "user": {"username": identity.user, "uid": identity.uid, "groups": identity.groups, "extra": claims.extra()},
            "audiences": within,
        })
    }
}

/// A refused TokenRequest, naming the field.
fn invalid_token_request(error: &kayra_oidc::Error) -> RegistryError {
    use kayra_api::validation::FieldError;
    let cause = match error {
        kayra_oidc::Error::Expiration(seconds) => FieldError::invalid(
            "spec.expirationSeconds",
            seconds,
            &format!(
                "must be between {} and {} seconds",
                kayra_oidc::token::MIN_EXPIRATION_SECONDS,
                kayra_oidc::token::MAX_EXPIRATION_SECONDS
            ),
        ),
        kayra_oidc::Error::Audiences(why) => FieldError::invalid("spec.audiences", "[...]", why),
        other => return RegistryError::BadRequest(other.to_string()),
    };
    RegistryError::Invalid { kind: "TokenRequest".to_owned(), name: String::new(), causes: vec![cause] }
}

#[cfg(test)]
mod tests;
