//! `kayra-controller identity rotate-key`: makes a new service-account signing key current.
//! The keys' Secret is read and replaced through the running controller's API as the admin of
//! the data directory, conditional on the resourceVersion read (a concurrent rotation makes
//! it try again), so every replica signs with the new key from its next read. The old key
//! stays in the JWKS, retired now, until every token it signed has expired; keys retired
//! longer ago than that are dropped in the same write.

use kayra_application::identity::{
    SIGNING_KEYS_NAMESPACE, SIGNING_KEYS_SECRET, signing_keys_secret, stored_keys,
};
use kayra_oidc::keys::{KeySet, SigningKey};

use crate::ControlPlaneError;
use crate::config::Config;
use crate::pki::admin_client;

/// What a rotation did: the new current key's id and the ids still published.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rotation {
    /// The key that signs from now on.
    pub current: String,
    /// Every key in the JWKS after the rotation, the current one first.
    pub published: Vec<String>,
}

/// Rotates the signing key through the running controller.
pub async fn rotate_key(config: &Config) -> Result<Rotation, ControlPlaneError> {
    let client = admin_client(&config.data_dir)?;
    let path = format!(
        "/apis/fleet.{}/v1/namespaces/{SIGNING_KEYS_NAMESPACE}/secrets/{SIGNING_KEYS_SECRET}",
        config.domain
    );
    let mut attempts = 0;
    loop {
        attempts += 1;
        let secret = client.send(reqwest::Method::GET, &path, None).await.map_err(|source| {
            ControlPlaneError::Client { what: "cannot read the signing keys".into(), source }
        })?;
        let stored = stored_keys(&secret).map_err(ControlPlaneError::Invalid)?;
        let mut keys =
            KeySet::from_stored(&stored).map_err(|error| ControlPlaneError::Invalid(error.to_string()))?;
        let next = SigningKey::generate().map_err(|error| ControlPlaneError::Invalid(error.to_string()))?;
        keys.rotate(next, kayra_application::identity::now());
        let mut replaced = signing_keys_secret(&config.domain, &keys.stored());
        replaced["metadata"]["resourceVersion"] = secret["metadata"]["resourceVersion"].clone();
        match client.send(reqwest::Method::PUT, &path, Some(&replaced)).await {
            Ok(_) => {
                return Ok(Rotation {
                    current: keys.current().kid().to_owned(),
                    published: keys.keys().map(|key| key.kid().to_owned()).collect(),
                });
            }
            Err(kayra_client::ClientError::Status { code: 409, .. }) if attempts < 5 => continue,
            Err(source) => {
                return Err(ControlPlaneError::Client {
                    what: "cannot write the signing keys".into(),
                    source,
                });
            }
        }
    }
}
