//! Joining a cluster as a node, as kubeadm and kubelet do it: find the cluster's CA by a pin
//! the operator pasted (`--ca-cert-hash sha256:<hex>`, the hash of the CA's public key) before
//! any secret crosses the wire, ask for a client certificate with a bootstrap token, renew it
//! with the certificate itself before it expires, and keep key, certificate and CA in a private
//! directory.
//!
//! [`discover`] → [`request_certificate`] (or [`join`], both at once) → [`store`]; later
//! [`renewal_due`] and [`renew`].

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use base64::Engine;
use rustls::DigitallySignedStruct;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use serde_json::{Value, json};

/// The signer node client certificates are asked of.
pub const KUBELET_CLIENT_SIGNER: &str = "kubernetes.io/kube-apiserver-client-kubelet";

/// How long [`request_certificate`] waits for the signed certificate unless told otherwise.
pub const DEFAULT_CERTIFICATE_TIMEOUT: Duration = Duration::from_secs(300);

/// How often a pending request is looked at.
const POLL: Duration = Duration::from_millis(500);

/// How long connecting and each request may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// Why joining or renewing did not succeed.
#[derive(Debug, thiserror::Error)]
pub enum JoinError {
    /// The server's URL is not one a node can join through.
    #[error("the server {server:?} is not an https://host[:port] URL")]
    BadServer {
        /// The URL given.
        server: String,
    },
    /// The pin is not `sha256:` and 64 hex digits.
    #[error("the CA pin {pin:?} is not of the form sha256:<64 hex digits>")]
    BadPin {
        /// The pin given.
        pin: String,
    },
    /// The server could not be reached.
    #[error("cannot reach {server}: {reason}")]
    Unreachable {
        /// The server.
        server: String,
        /// What failed.
        reason: String,
    },
    /// The server presented no CA matching the pin, or a certificate that CA did not sign for
    /// the server's name. Nothing secret was sent.
    #[error("the server {server} does not prove it holds the pinned CA ({pin}): {reason}")]
    PinMismatch {
        /// The server.
        server: String,
        /// The pin.
        pin: String,
        /// What the handshake found.
        reason: String,
    },
    /// The server answered a request with an error.
    #[error("the server refused: {message} ({code})")]
    Refused {
        /// The HTTP status.
        code: u16,
        /// The Status message, or the body.
        message: String,
    },
    /// A person (or the signer's rules) denied the request.
    #[error("the certificate request {name} was denied: {message}")]
    Denied {
        /// The request's name.
        name: String,
        /// The reason and message of its Denied condition.
        message: String,
    },
    /// The signer could not sign the request.
    #[error("the certificate request {name} failed: {message}")]
    Failed {
        /// The request's name.
        name: String,
        /// The reason and message of its Failed condition.
        message: String,
    },
    /// No certificate came in time (a person may still have to approve it:
    /// `kubectl certificate approve <name>`).
    #[error(
        "no certificate for request {name} after {waited:?}; approve it with `kubectl certificate approve {name}` if it is held for a person"
    )]
    Timeout {
        /// The request's name.
        name: String,
        /// How long it was waited for.
        waited: Duration,
    },
    /// A key, request or certificate could not be made or read.
    #[error(transparent)]
    Pki(#[from] kayra_pki::PkiError),
    /// The TLS settings could not be built from the given PEM.
    #[error("unusable TLS material: {0}")]
    Tls(String),
    /// The credentials could not be written or read.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

impl JoinError {
    /// Whether trying again later may succeed (the server was away, or the answer is late).
    pub fn is_retryable(&self) -> bool {
        match self {
            JoinError::Unreachable { .. } | JoinError::Timeout { .. } => true,
            JoinError::Refused { code, .. } => *code >= 500 || *code == 429,
            _ => false,
        }
    }
}

/// A node's credentials: its key, its client certificate, and the cluster's CA, in PEM.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    /// The private key (PKCS#8).
    pub key_pem: String,
    /// The client certificate.
    pub cert_pem: String,
    /// The cluster's CA certificate.
    pub ca_pem: String,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials").field("cert_pem", &self.cert_pem).finish_non_exhaustive()
    }
}

/// Connects to `server_url` and completes a TLS handshake that succeeds only when the chain the
/// server presents holds a CA whose public key hashes to `ca_cert_hash` (`sha256:<hex>`) and
/// the server's certificate verifies against that CA for the server's name. Sends nothing but
/// the handshake; answers the CA in PEM.
pub async fn discover(server_url: &str, ca_cert_hash: &str) -> Result<String, JoinError> {
    let pin = normalize_pin(ca_cert_hash)?;
    let (host, port) = host_and_port(server_url)?;
    let provider = provider();
    let verifier =
        Arc::new(PinnedCa { pin: pin.clone(), provider: provider.clone(), found: Mutex::new(None) });
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|error| JoinError::Tls(error.to_string()))?
        .dangerous()
        .with_custom_certificate_verifier(verifier.clone())
        .with_no_client_auth();
    let name = ServerName::try_from(host.clone())
        .map_err(|_| JoinError::BadServer { server: server_url.to_owned() })?;
    let unreachable = |reason: String| JoinError::Unreachable { server: server_url.to_owned(), reason };
    let connect = async {
        let tcp = tokio::net::TcpStream::connect((host.as_str(), port))
            .await
            .map_err(|e| unreachable(e.to_string()))?;
        let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
        connector.connect(name, tcp).await.map_err(|error| {
            let reason = verifier.found.lock().map(|found| found.clone()).ok().flatten();
            match reason {
                Some(Err(reason)) => {
                    JoinError::PinMismatch { server: server_url.to_owned(), pin: pin.clone(), reason }
                }
                _ => unreachable(error.to_string()),
            }
        })
    };
    let stream = tokio::time::timeout(REQUEST_TIMEOUT, connect)
        .await
        .map_err(|_| unreachable("timed out".into()))??;
    drop(stream);
    let found = verifier.found.lock().map(|found| found.clone()).ok().flatten();
    match found {
        Some(Ok(der)) => Ok(to_pem("CERTIFICATE", &der)),
        Some(Err(reason)) => Err(JoinError::PinMismatch { server: server_url.to_owned(), pin, reason }),
        None => Err(unreachable("the handshake ended before the server presented a certificate".into())),
    }
}

/// Asks `server_url` (trusted through `ca_pem`) for a client certificate for node `node_name`,
/// authenticating with the bootstrap `token`: creates a CertificateSigningRequest
/// (`node-csr-…`) for `CN=system:node:<name>, O=system:nodes` signed with `key_pem`, and waits
/// up to `timeout` for the signed certificate.
pub async fn request_certificate(
    server_url: &str,
    ca_pem: &str,
    token: &str,
    node_name: &str,
    key_pem: &str,
    timeout: Duration,
) -> Result<String, JoinError> {
    let http = http_client(ca_pem, None)?;
    let api =
        Api { http, server: server_url.trim_end_matches('/').to_owned(), token: Some(token.to_owned()) };
    api.certificate_for(node_name, key_pem, timeout).await
}

/// [`discover`] then [`request_certificate`] with a new key: the node's first credentials. A
/// wrong pin fails before the token is sent.
pub async fn join(
    server_url: &str,
    ca_cert_hash: &str,
    token: &str,
    node_name: &str,
    timeout: Duration,
) -> Result<Credentials, JoinError> {
    let ca_pem = discover(server_url, ca_cert_hash).await?;
    let key_pem = kayra_pki::generate_key()?;
    let cert_pem = request_certificate(server_url, &ca_pem, token, node_name, &key_pem, timeout).await?;
    Ok(Credentials { key_pem, cert_pem, ca_pem })
}

/// Renews a node's certificate, authenticated by the current one: a new key, a request the
/// signer approves because the node asks for itself, and the new credentials.
pub async fn renew(
    server_url: &str,
    current: &Credentials,
    node_name: &str,
    timeout: Duration,
) -> Result<Credentials, JoinError> {
    let http = http_client(&current.ca_pem, Some((&current.cert_pem, &current.key_pem)))?;
    let api = Api { http, server: server_url.trim_end_matches('/').to_owned(), token: None };
    let key_pem = kayra_pki::generate_key()?;
    let cert_pem = api.certificate_for(node_name, &key_pem, timeout).await?;
    Ok(Credentials { key_pem, cert_pem, ca_pem: current.ca_pem.clone() })
}

/// When a certificate valid from `not_before` to `not_after` is renewed: at 70 % to 90 % of
/// its lifetime, as kubelet does, `jitter` (0 to 1, drawn once per certificate) choosing where.
pub fn renewal_due(not_before: SystemTime, not_after: SystemTime, jitter: f64) -> SystemTime {
    let lifetime = not_after.duration_since(not_before).unwrap_or_default();
    let fraction = 0.7 + 0.2 * jitter.clamp(0.0, 1.0);
    not_before + lifetime.mul_f64(fraction)
}

/// When `cert_pem` is due for renewal (see [`renewal_due`]).
pub fn certificate_renewal_due(cert_pem: &str, jitter: f64) -> Result<SystemTime, JoinError> {
    let (not_before, not_after) = kayra_pki::certificate_validity(cert_pem)?;
    Ok(renewal_due(not_before, not_after, jitter))
}

/// The files [`store`] writes under a data directory.
pub const KEY_FILE: &str = "node.key";
/// The client certificate's file.
pub const CERT_FILE: &str = "node.crt";
/// The CA's file.
pub const CA_FILE: &str = "ca.crt";

/// Keeps `credentials` in `dir` (created mode 0700, and made so if it exists): each file mode
/// 0600, written to a temporary file and renamed over the old one, so that a crash leaves
/// either the old file or the new one.
pub fn store(dir: &Path, credentials: &Credentials) -> Result<(), JoinError> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    let io = |path: &Path| {
        let path = path.display().to_string();
        move |source| JoinError::Io { path, source }
    };
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir).map_err(io(dir))?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).map_err(io(dir))?;
    for (name, contents) in
        [(KEY_FILE, &credentials.key_pem), (CERT_FILE, &credentials.cert_pem), (CA_FILE, &credentials.ca_pem)]
    {
        write_atomically(&dir.join(name), contents.as_bytes()).map_err(io(&dir.join(name)))?;
    }
    Ok(())
}

/// The credentials [`store`] kept in `dir`, or `None` when there are none yet.
pub fn load(dir: &Path) -> Result<Option<Credentials>, JoinError> {
    let read = |name: &str| {
        let path = dir.join(name);
        match std::fs::read_to_string(&path) {
            Ok(text) => Ok(Some(text)),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(source) => Err(JoinError::Io { path: path.display().to_string(), source }),
        }
    };
    match (read(KEY_FILE)?, read(CERT_FILE)?, read(CA_FILE)?) {
        (Some(key_pem), Some(cert_pem), Some(ca_pem)) => Ok(Some(Credentials { key_pem, cert_pem, ca_pem })),
        _ => Ok(None),
    }
}

fn write_atomically(path: &Path, contents: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let file_name = path.file_name().and_then(|n| n.to_str()).unwrap_or("credential");
    let temporary = path.with_file_name(format!(".{file_name}.{}.tmp", std::process::id()));
    let result = (|| {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&temporary)?;
        file.write_all(contents)?;
        file.sync_all()?;
        std::fs::rename(&temporary, path)?;
        if let Some(parent) = path.parent() {
            std::fs::File::open(parent)?.sync_all()?;
        }
        Ok(())
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&temporary);
    }
    result
}

/// The API as a joining node reaches it.
struct Api {
    http: reqwest::Client,
    server: String,
    token: Option<String>,
}

const REQUESTS: &str = "/apis/certificates.k8s.io/v1/certificatesigningrequests";

impl Api {
    async fn send(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<Value, JoinError> {
        let mut request =
            self.http.request(method, format!("{}{path}", self.server)).header("Accept", "application/json");
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        if let Some(body) = body {
            request = request.json(body);
        }
        let unreachable = |error: reqwest::Error| JoinError::Unreachable {
            server: self.server.clone(),
            reason: error.without_url().to_string(),
        };
        let response = request.timeout(REQUEST_TIMEOUT).send().await.map_err(unreachable)?;
        let code = response.status().as_u16();
        let text = response.text().await.map_err(unreachable)?;
        let value: Value = serde_json::from_str(&text).unwrap_or(Value::String(text.clone()));
        if !(200..300).contains(&code) {
            let message = value.get("message").and_then(Value::as_str).map(str::to_owned).unwrap_or(text);
            return Err(JoinError::Refused { code, message });
        }
        Ok(value)
    }

    /// Creates a request for `node_name`'s certificate and waits for the answer.
    async fn certificate_for(
        &self,
        node_name: &str,
        key_pem: &str,
        timeout: Duration,
    ) -> Result<String, JoinError> {
        let subject = kayra_pki::Subject {
            common_name: format!("system:node:{node_name}"),
            organizations: vec!["system:nodes".to_owned()],
        };
        let csr = kayra_pki::certificate_request(key_pem, &subject)?;
        let body = json!({
            "apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
            "metadata": {"generateName": "node-csr-"},
            "spec": {
                "request": base64::engine::general_purpose::STANDARD.encode(csr),
                "signerName": KUBELET_CLIENT_SIGNER,
                "usages": ["digital signature", "client auth"],
            },
        });
        let created = self.send(reqwest::Method::POST, REQUESTS, Some(&body)).await?;
        let name = created.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default().to_owned();
        let deadline = tokio::time::Instant::now() + timeout;
        let mut current = created;
        loop {
            if let Some(answer) = answer(&name, &current)? {
                return Ok(answer);
            }
            if tokio::time::Instant::now() + POLL > deadline {
                return Err(JoinError::Timeout { name, waited: timeout });
            }
            tokio::time::sleep(POLL).await;
            current = self.send(reqwest::Method::GET, &format!("{REQUESTS}/{name}"), None).await?;
        }
    }
}

/// The certificate of a request that has one, an error for one denied or failed, `None` while
/// it is pending.
fn answer(name: &str, csr: &Value) -> Result<Option<String>, JoinError> {
    let conditions = csr.pointer("/status/conditions").and_then(Value::as_array).cloned().unwrap_or_default();
    let condition = |type_: &str| {
        conditions.iter().find(|c| c["type"] == type_ && c["status"] == "True").map(|c| {
            let text = |field: &str| c.get(field).and_then(Value::as_str).unwrap_or_default().to_owned();
            format!("{}: {}", text("reason"), text("message"))
        })
    };
    if let Some(message) = condition("Denied") {
        return Err(JoinError::Denied { name: name.to_owned(), message });
    }
    if let Some(message) = condition("Failed") {
        return Err(JoinError::Failed { name: name.to_owned(), message });
    }
    let Some(encoded) = csr.pointer("/status/certificate").and_then(Value::as_str).filter(|c| !c.is_empty())
    else {
        return Ok(None);
    };
    let pem = base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .ok()
        .and_then(|bytes| String::from_utf8(bytes).ok())
        .ok_or_else(|| JoinError::Failed {
            name: name.to_owned(),
            message: "the issued certificate is not base64 PEM".into(),
        })?;
    Ok(Some(pem))
}

/// An HTTPS client trusting only `ca_pem`, presenting `identity` (certificate, key) if given.
fn http_client(ca_pem: &str, identity: Option<(&str, &str)>) -> Result<reqwest::Client, JoinError> {
    let tls = |error: String| JoinError::Tls(error);
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(cert.map_err(|e| tls(format!("the CA: {e}")))?).map_err(|e| tls(format!("the CA: {e}")))?;
    }
    let builder = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| tls(e.to_string()))?
        .with_root_certificates(roots);
    let config = match identity {
        None => builder.with_no_client_auth(),
        Some((cert_pem, key_pem)) => {
            let chain = CertificateDer::pem_slice_iter(cert_pem.as_bytes())
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| tls(format!("the certificate: {e}")))?;
            let key = PrivateKeyDer::from_pem_slice(key_pem.as_bytes())
                .map_err(|e| tls(format!("the key: {e}")))?;
            builder
                .with_client_auth_cert(chain, key)
                .map_err(|e| tls(format!("the certificate and key: {e}")))?
        }
    };
    reqwest::Client::builder()
        .tls_backend_preconfigured(config)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| tls(e.to_string()))
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// `sha256:` and 64 lowercase hex digits.
fn normalize_pin(pin: &str) -> Result<String, JoinError> {
    let bad = || JoinError::BadPin { pin: pin.to_owned() };
    let hex = pin.strip_prefix("sha256:").ok_or_else(bad)?;
    if hex.len() != 64 || !hex.chars().all(|c| c.is_ascii_hexdigit()) {
        return Err(bad());
    }
    Ok(format!("sha256:{}", hex.to_ascii_lowercase()))
}

/// Checks that `server_url` is one a node can join through: `https://host[:port]`.
pub fn check_server(server_url: &str) -> Result<(), JoinError> {
    host_and_port(server_url).map(|_| ())
}

/// The host and port of an `https://` URL (port 443 when it names none).
fn host_and_port(server_url: &str) -> Result<(String, u16), JoinError> {
    let bad = || JoinError::BadServer { server: server_url.to_owned() };
    let url = reqwest::Url::parse(server_url).map_err(|_| bad())?;
    if url.scheme() != "https" {
        return Err(bad());
    }
    let host = url.host_str().ok_or_else(bad)?;
    let host = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')).unwrap_or(host).to_owned();
    Ok((host, url.port().unwrap_or(443)))
}

fn to_pem(label: &str, der: &[u8]) -> String {
    let encoded = base64::engine::general_purpose::STANDARD.encode(der);
    let mut pem = format!("-----BEGIN {label}-----\n");
    for line in encoded.as_bytes().chunks(64) {
        pem.push_str(std::str::from_utf8(line).expect("base64 is ASCII"));
        pem.push('\n');
    }
    pem.push_str(&format!("-----END {label}-----\n"));
    pem
}

/// Accepts a server only through the CA the pin names: the CA must be among the certificates
/// the server presents, and the server's own certificate must verify against it (and only it)
/// for the name dialled. Records the CA found, or why none was.
#[derive(Debug)]
struct PinnedCa {
    pin: String,
    provider: Arc<CryptoProvider>,
    found: Mutex<Option<Result<Vec<u8>, String>>>,
}

impl PinnedCa {
    fn check(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        now: UnixTime,
    ) -> Result<Vec<u8>, String> {
        let ca = intermediates
            .iter()
            .chain(std::iter::once(end_entity))
            .find(|cert| kayra_pki::ca_cert_hash_der(cert).is_ok_and(|hash| hash == self.pin))
            .ok_or_else(|| "no certificate the server presented has the pinned public key".to_owned())?;
        let mut roots = rustls::RootCertStore::empty();
        roots.add(ca.clone().into_owned()).map_err(|e| format!("the pinned certificate is no CA: {e}"))?;
        let verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(
            Arc::new(roots),
            self.provider.clone(),
        )
        .build()
        .map_err(|e| e.to_string())?;
        verifier
            .verify_server_cert(end_entity, intermediates, server_name, &[], now)
            .map_err(|e| format!("the server's certificate does not verify against the pinned CA: {e}"))?;
        Ok(ca.to_vec())
    }
}

impl ServerCertVerifier for PinnedCa {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let result = self.check(end_entity, intermediates, server_name, now);
        let verdict = match &result {
            Ok(_) => Ok(ServerCertVerified::assertion()),
            Err(reason) => Err(rustls::Error::General(reason.clone())),
        };
        if let Ok(mut found) = self.found.lock() {
            *found = Some(result);
        }
        verdict
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.provider.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests;
