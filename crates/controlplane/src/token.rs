//! `kayra-controller token create`: mints a bootstrap token for a node to join with. The
//! token is stored (as a Secret in `kayra-system` holding only its digest) through the running
//! controller's API, as the admin of the data directory; the store deletes it when it expires.

use std::time::{Duration, SystemTime};

use kayra_api::kinds::secret::BOOTSTRAP_TOKEN_NAMESPACE;
use kayra_authn::bootstrap::{Stored, Token};

use crate::ControlPlaneError;
use crate::address::{bracketed, recorded_serving_url, serving_host, serving_url, url_port};
use crate::config::Config;
use crate::pki::pki_dir;

/// The longest a bootstrap token may live.
pub const MAX_TTL: Duration = Duration::from_secs(7 * 24 * 3600);

/// Parses a TTL such as `24h`, `90m` or `1h30m`.
pub fn parse_ttl(text: &str) -> Result<Duration, String> {
    let parsed: jiff::SignedDuration = text
        .parse()
        .map_err(|error| format!("--ttl {text:?}: expected a duration such as 24h or 90m ({error})"))?;
    let ttl = parsed.unsigned_abs();
    if parsed.is_negative() || ttl < Duration::from_secs(1) {
        return Err(format!("--ttl {text}: a token must live at least one second"));
    }
    if ttl > MAX_TTL {
        return Err(format!("--ttl {text}: a bootstrap token may live at most 7 days"));
    }
    Ok(ttl)
}

/// Creates a bootstrap token through the running controller; answers the token.
pub async fn create(
    config: &Config,
    ttl: Duration,
    description: &str,
    groups: &[String],
) -> Result<String, ControlPlaneError> {
    for group in groups {
        if !group.starts_with("system:bootstrappers:") {
            return Err(ControlPlaneError::Invalid(format!(
                "--groups {group}: extra groups must start with system:bootstrappers:"
            )));
        }
    }
    let client = crate::pki::admin_client(&config.data_dir)?;
    let token = Token::generate();
    let stored = Stored {
        id: token.id.clone(),
        secret_digest: token.secret_digest(),
        expires: SystemTime::now()
            .checked_add(ttl)
            .ok_or_else(|| ControlPlaneError::Invalid(format!("a TTL of {ttl:?} is out of range")))?,
        extra_groups: groups.to_vec(),
    };
    let secret =
        serde_json::to_value(kayra_authn::bootstrap::secret::encode(&config.domain, &stored, description))
            .expect("a Secret is JSON");
    let path = format!("/apis/fleet.{}/v1/namespaces/{BOOTSTRAP_TOKEN_NAMESPACE}/secrets", config.domain);
    match client.send(reqwest::Method::POST, &path, Some(&secret)).await {
        Ok(_) => {}
        Err(source @ kayra_client::ClientError::Status { .. }) => {
            return Err(ControlPlaneError::Client {
                what: "the controller refused the token".into(),
                source,
            });
        }
        Err(source) => {
            return Err(ControlPlaneError::Client {
                what: format!("cannot reach the controller at {}; is it running?", client.server()),
                source,
            });
        }
    }
    Ok(token.to_string())
}

/// The server a joining node dials: `server` when given (a URL, or a host with or without a
/// port, the port then being the one served on), else the URL the serving controller recorded,
/// else the address the configuration listens on (when that is every address, one of the
/// host's own that is not loopback, 127.0.0.1 when it has none).
pub fn join_server(config: &Config, server: Option<&str>) -> String {
    let recorded = recorded_serving_url(&config.data_dir);
    let port = recorded.as_deref().and_then(url_port).unwrap_or(config.listen.port());
    if let Some(server) = server {
        let server = server.trim_end_matches('/');
        if server.starts_with("https://") {
            return server.to_owned();
        }
        let has_port = server.parse::<std::net::SocketAddr>().is_ok()
            || (!server.contains(']') && server.matches(':').count() == 1);
        return if has_port {
            format!("https://{server}")
        } else {
            format!("https://{}:{port}", bracketed(server))
        };
    }
    recorded.unwrap_or_else(|| serving_url(serving_host(config.listen.ip()), port))
}

/// The line an operator pastes on a new host, as `kubeadm token create --print-join-command`
/// prints it.
pub fn join_command(server: &str, token: &str, ca_cert_hash: &str) -> String {
    format!("kayra-agent join --server {server} --token {token} --ca-cert-hash {ca_cert_hash}")
}

/// The pin of the cluster's CA a joining node checks: `sha256:<hex>` of its public key.
pub fn ca_cert_hash(config: &Config) -> Result<String, ControlPlaneError> {
    let path = pki_dir(&config.data_dir).join("ca.crt");
    let pem = std::fs::read_to_string(&path)
        .map_err(|source| ControlPlaneError::NotInitialised { path: path.clone(), source })?;
    kayra_pki::ca_cert_hash(&pem).map_err(ControlPlaneError::pki(format!("cannot read {}", path.display())))
}

#[cfg(test)]
mod tests;
