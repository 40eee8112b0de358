//! `kayra-controller token create`: mints a bootstrap token for a node to join with. The
//! token is stored (as a Secret in `kayra-system` holding only its digest) through the running
//! controller's API, as the admin of the data directory; the store deletes it when it expires.

use std::time::Duration;

use anyhow::{Context, bail};
use kayra_api::kinds::secret::{BOOTSTRAP_TOKEN_NAMESPACE, BOOTSTRAP_TOKEN_TYPE, bootstrap_token_name};
use kayra_authn::bootstrap::Token;
use serde_json::{Value, json};

use crate::Config;

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

/// The Secret that stores `token`: its id, the digest of its secret half, and its expiry.
pub fn secret_for(
    domain: &str,
    token: &Token,
    expires: jiff::Timestamp,
    description: &str,
    groups: &[String],
) -> Value {
    use base64::Engine;
    let encode = |text: &str| Value::String(base64::engine::general_purpose::STANDARD.encode(text));
    let mut data = serde_json::Map::new();
    data.insert("token-id".into(), encode(&token.id));
    data.insert("token-secret-sha256".into(), encode(&token.secret_digest()));
    data.insert("expiration".into(), encode(&expires.to_string()));
    data.insert("usage-bootstrap-authentication".into(), encode("true"));
    if !description.is_empty() {
        data.insert("description".into(), encode(description));
    }
    if !groups.is_empty() {
        data.insert("auth-extra-groups".into(), encode(&groups.join(",")));
    }
    json!({
        "apiVersion": format!("fleet.{domain}/v1"),
        "kind": "Secret",
        "metadata": {"name": bootstrap_token_name(&token.id), "namespace": BOOTSTRAP_TOKEN_NAMESPACE},
        "type": BOOTSTRAP_TOKEN_TYPE,
        "data": data,
    })
}

/// Creates a bootstrap token through the running controller; answers the token.
pub async fn create(
    config: &Config,
    ttl: Duration,
    description: &str,
    groups: &[String],
) -> anyhow::Result<String> {
    for group in groups {
        if !group.starts_with("system:bootstrappers:") {
            bail!("--groups {group}: extra groups must start with system:bootstrappers:");
        }
    }
    let kubeconfig = config.data_dir.join("admin.kubeconfig");
    if !kubeconfig.exists() {
        bail!("cannot read {} (run `kayra-controller init` first)", kubeconfig.display());
    }
    // The admin kubeconfig, read as kubectl and kayra-cli read theirs.
    let client = kayra_client::Client::from_kubeconfig(&kubeconfig)?;
    let token = Token::generate();
    let expires = jiff::Timestamp::now()
        .checked_add(jiff::SignedDuration::try_from(ttl).context("the TTL is out of range")?)
        .context("the expiry is out of range")?;
    let secret = secret_for(&config.domain, &token, expires, description, groups);
    let path = format!("/apis/fleet.{}/v1/namespaces/{BOOTSTRAP_TOKEN_NAMESPACE}/secrets", config.domain);
    match client.send(reqwest::Method::POST, &path, Some(&secret)).await {
        Ok(_) => {}
        Err(kayra_client::ClientError::Status { code, message }) => {
            bail!("the controller refused the token ({code}): {message}")
        }
        Err(error) => {
            return Err(anyhow::Error::new(error)
                .context(format!("cannot reach the controller at {}; is it running?", client.server())));
        }
    }
    Ok(token.to_string())
}

/// The server a joining node dials: `server` when given (a URL, or a host with or without a
/// port), else the address the controller listens on, and when that is every address, one of
/// the host's own that is not loopback (127.0.0.1 when it has none).
pub fn join_server(config: &Config, server: Option<&str>) -> String {
    let port = config.listen.port();
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
    let ip = config.listen.ip();
    let ip =
        if ip.is_unspecified() { host_address().unwrap_or(std::net::Ipv4Addr::LOCALHOST.into()) } else { ip };
    format!("https://{}:{port}", bracketed(&ip.to_string()))
}

/// An IPv6 address in brackets, as a URL needs it.
fn bracketed(host: &str) -> String {
    if host.contains(':') && !host.starts_with('[') { format!("[{host}]") } else { host.to_owned() }
}

/// The host's address on its default route, when it has one that is not loopback. Connecting a
/// UDP socket sends nothing; it only asks the kernel which address it would send from.
pub fn host_address() -> Option<std::net::IpAddr> {
    let socket = std::net::UdpSocket::bind("0.0.0.0:0").ok()?;
    socket.connect("192.0.2.1:9").ok()?;
    let ip = socket.local_addr().ok()?.ip();
    (!ip.is_loopback() && !ip.is_unspecified()).then_some(ip)
}

/// The line an operator pastes on a new host, as `kubeadm token create --print-join-command`
/// prints it.
pub fn join_command(server: &str, token: &str, ca_cert_hash: &str) -> String {
    format!("kayra-agent join --server {server} --token {token} --ca-cert-hash {ca_cert_hash}")
}

/// The pin of the cluster's CA a joining node checks: `sha256:<hex>` of its public key.
pub fn ca_cert_hash(config: &Config) -> anyhow::Result<String> {
    let path = config.data_dir.join("pki").join("ca.crt");
    let pem = std::fs::read_to_string(&path)
        .with_context(|| format!("cannot read {} (run `kayra-controller init` first)", path.display()))?;
    Ok(kayra_pki::ca_cert_hash(&pem)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_join_command_names_the_server_token_and_ca_pin() {
        let listening = |listen: &str| Config { listen: listen.parse().unwrap(), ..Config::default() };
        let config = listening("10.1.2.3:6443");
        assert_eq!(join_server(&config, None), "https://10.1.2.3:6443");
        assert_eq!(
            join_server(&config, Some("https://kayra.example.com:443/")),
            "https://kayra.example.com:443"
        );
        assert_eq!(join_server(&config, Some("kayra.example.com")), "https://kayra.example.com:6443");
        assert_eq!(join_server(&config, Some("kayra.example.com:7443")), "https://kayra.example.com:7443");
        assert_eq!(join_server(&config, Some("fd00::1")), "https://[fd00::1]:6443");
        assert_eq!(join_server(&listening("[fd00::2]:6443"), None), "https://[fd00::2]:6443");
        let everywhere = join_server(&listening("0.0.0.0:6443"), None);
        let expected = host_address().map_or("127.0.0.1".to_owned(), |ip| bracketed(&ip.to_string()));
        assert_eq!(everywhere, format!("https://{expected}:6443"));
        assert!(!everywhere.contains("0.0.0.0"));
        assert_eq!(
            join_command("https://10.1.2.3:6443", "abcdef.0123456789abcdef", "sha256:00ff"),
            "kayra-agent join --server https://10.1.2.3:6443 --token abcdef.0123456789abcdef --ca-cert-hash sha256:00ff"
        );
    }

    #[test]
    fn ttls_are_durations_within_a_week() {
        assert_eq!(parse_ttl("24h"), Ok(Duration::from_secs(86_400)));
        assert_eq!(parse_ttl("1h30m"), Ok(Duration::from_secs(5_400)));
        assert!(parse_ttl("0s").is_err());
        assert!(parse_ttl("-1h").is_err());
        assert_eq!(parse_ttl("168h"), Ok(MAX_TTL));
        assert!(parse_ttl("169h").is_err());
        assert!(parse_ttl("soon").is_err());
    }
}
