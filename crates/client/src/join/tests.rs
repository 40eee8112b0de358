//! Joining, against a TLS server that records what reaches it.

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::*;

/// A TLS server on 127.0.0.1 presenting `chain`, recording every byte of application data it
/// receives and answering each request 403.
struct Recorder {
    url: String,
    received: Arc<Mutex<Vec<u8>>>,
}

async fn recorder(chain_pem: &str, key_pem: &str) -> Recorder {
    let chain = CertificateDer::pem_slice_iter(chain_pem.as_bytes()).collect::<Result<Vec<_>, _>>().unwrap();
    let key = PrivateKeyDer::from_pem_slice(key_pem.as_bytes()).unwrap();
    let config = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("https://127.0.0.1:{}", listener.local_addr().unwrap().port());
    let received = Arc::new(Mutex::new(Vec::new()));
    let record = received.clone();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let (acceptor, record) = (acceptor.clone(), record.clone());
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(tcp).await else { return };
                let mut buffer = [0u8; 4096];
                let mut request = Vec::new();
                while let Ok(read) = tls.read(&mut buffer).await {
                    if read == 0 {
                        break;
                    }
                    request.extend_from_slice(&buffer[..read]);
                    record.lock().unwrap().extend_from_slice(&buffer[..read]);
                    if request.windows(4).any(|w| w == b"\r\n\r\n") {
                        let body = r#"{"kind":"Status","status":"Failure","message":"recorded","code":403}"#;
                        let answer = format!(
                            "HTTP/1.1 403 Forbidden\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                            body.len()
                        );
                        let _ = tls.write_all(answer.as_bytes()).await;
                        let _ = tls.shutdown().await;
                        break;
                    }
                }
            });
        }
    });
    Recorder { url, received }
}

struct Cluster {
    ca: kayra_pki::Ca,
    server: kayra_pki::Issued,
}

fn cluster() -> Cluster {
    let ca = kayra_pki::Ca::generate("test-ca").unwrap();
    let server = ca.issue(kayra_pki::Usage::Server, "server", None, &["127.0.0.1".into()]).unwrap();
    Cluster { ca, server }
}

const TOKEN: &str = "abcdef.0123456789abcdef";

#[tokio::test]
async fn a_wrong_pin_fails_before_the_token_is_sent() {
    let cluster = cluster();
    let chain = format!("{}{}", cluster.server.cert_pem, cluster.ca.cert_pem());
    let server = recorder(&chain, &cluster.server.key_pem).await;
    let other_ca = kayra_pki::Ca::generate("other").unwrap();
    let wrong = kayra_pki::ca_cert_hash(other_ca.cert_pem()).unwrap();
    match join(&server.url, &wrong, TOKEN, "n1", Duration::from_secs(5)).await {
        Err(JoinError::PinMismatch { reason, .. }) => {
            assert!(reason.contains("pinned public key"), "{reason}")
        }
        other => panic!("expected a pin mismatch, got {other:?}"),
    }
    assert!(server.received.lock().unwrap().is_empty(), "not one byte of a request reached the server");
    // With the right pin the same server sees the token: the recorder would have caught it.
    let right = kayra_pki::ca_cert_hash(cluster.ca.cert_pem()).unwrap();
    assert_eq!(discover(&server.url, &right).await.unwrap(), cluster.ca.cert_pem());
    assert!(server.received.lock().unwrap().is_empty(), "discovery sends nothing but the handshake");
    match join(&server.url, &right, TOKEN, "n1", Duration::from_secs(5)).await {
        Err(JoinError::Refused { code: 403, message }) => assert_eq!(message, "recorded"),
        other => panic!("expected the recorder's refusal, got {other:?}"),
    }
    let received = String::from_utf8_lossy(&server.received.lock().unwrap()).to_lowercase();
    assert!(received.contains(&format!("authorization: bearer {TOKEN}")), "{received}");
    assert!(
        received.starts_with("post /apis/certificates.k8s.io/v1/certificatesigningrequests"),
        "{received}"
    );
}

#[tokio::test]
async fn the_pinned_ca_must_be_presented_and_must_have_signed_the_server() {
    let cluster = cluster();
    let pin = kayra_pki::ca_cert_hash(cluster.ca.cert_pem()).unwrap();
    // The server's certificate alone: the CA is not in the chain.
    let alone = recorder(&cluster.server.cert_pem, &cluster.server.key_pem).await;
    assert!(matches!(discover(&alone.url, &pin).await, Err(JoinError::PinMismatch { .. })));
    // The pinned CA presented, but beside a certificate another CA signed.
    let impostor = kayra_pki::Ca::generate("impostor").unwrap();
    let forged = impostor.issue(kayra_pki::Usage::Server, "server", None, &["127.0.0.1".into()]).unwrap();
    let mixed = recorder(&format!("{}{}", forged.cert_pem, cluster.ca.cert_pem()), &forged.key_pem).await;
    match discover(&mixed.url, &pin).await {
        Err(JoinError::PinMismatch { reason, .. }) => assert!(reason.contains("does not verify"), "{reason}"),
        other => panic!("expected a mismatch, got {other:?}"),
    }
    // The right CA, but a certificate for another name than the one dialled.
    let elsewhere =
        cluster.ca.issue(kayra_pki::Usage::Server, "server", None, &["example.com".into()]).unwrap();
    let named =
        recorder(&format!("{}{}", elsewhere.cert_pem, cluster.ca.cert_pem()), &elsewhere.key_pem).await;
    assert!(matches!(discover(&named.url, &pin).await, Err(JoinError::PinMismatch { .. })));
    for server in [alone, mixed, named] {
        assert!(server.received.lock().unwrap().is_empty());
    }
}

#[test]
fn pins_and_servers_are_checked_before_anything_is_dialled() {
    let hex = "AB".repeat(32);
    assert_eq!(normalize_pin(&format!("sha256:{hex}")).unwrap(), format!("sha256:{}", hex.to_lowercase()));
    for bad in [
        "",
        "sha256:",
        "sha1:00",
        &format!("sha256:{}", "0".repeat(63)),
        &format!("sha256:{}", "g".repeat(64)),
    ] {
        assert!(matches!(normalize_pin(bad), Err(JoinError::BadPin { .. })), "{bad}");
    }
    assert_eq!(host_and_port("https://10.0.0.1:6443").unwrap(), ("10.0.0.1".to_owned(), 6443));
    assert_eq!(host_and_port("https://[fd00::1]:6443/").unwrap(), ("fd00::1".to_owned(), 6443));
    assert_eq!(host_and_port("https://kayra.example.com").unwrap(), ("kayra.example.com".to_owned(), 443));
    assert!(host_and_port("http://10.0.0.1:6443").is_err());
    assert!(host_and_port("10.0.0.1:6443").is_err());
}

#[test]
fn a_certificate_is_renewed_between_70_and_90_percent_of_its_life() {
    let start = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
    let end = start + Duration::from_secs(1000);
    let cases = [(0.0, 700), (0.5, 800), (1.0, 900), (-3.0, 700), (7.0, 900)];
    for (jitter, after) in cases {
        assert_eq!(renewal_due(start, end, jitter), start + Duration::from_secs(after), "jitter {jitter}");
    }
    // An expired or backwards certificate is due at once.
    assert_eq!(renewal_due(end, start, 0.5), end);
    let cluster = cluster();
    let due = certificate_renewal_due(&cluster.server.cert_pem, 0.0).unwrap();
    let (from, to) = kayra_pki::certificate_validity(&cluster.server.cert_pem).unwrap();
    assert!(due > from && due < to);
}

#[test]
fn credentials_are_kept_private_and_replaced_whole() {
    use std::os::unix::fs::PermissionsExt;
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path().join("data");
    assert_eq!(load(&dir).unwrap(), None);
    let first = Credentials { key_pem: "key-1".into(), cert_pem: "cert-1".into(), ca_pem: "ca".into() };
    store(&dir, &first).unwrap();
    let mode = |path: &Path| std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&dir), 0o700);
    for name in [KEY_FILE, CERT_FILE, CA_FILE] {
        assert_eq!(mode(&dir.join(name)), 0o600, "{name}");
    }
    assert_eq!(load(&dir).unwrap(), Some(first));
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let second = Credentials { key_pem: "key-2".into(), cert_pem: "cert-2".into(), ca_pem: "ca".into() };
    store(&dir, &second).unwrap();
    assert_eq!(mode(&dir), 0o700, "a directory made too open is closed again");
    assert_eq!(load(&dir).unwrap(), Some(second));
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, [CA_FILE, CERT_FILE, KEY_FILE], "no temporary file is left behind");
}
