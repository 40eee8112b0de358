//! Certificates name their user and groups, the CA pin is kubeadm's, and certificate requests
//! are signed only as the signer allows.

use super::*;

#[test]
fn a_client_certificate_names_its_user_and_group() {
    let ca = Ca::generate("kayra").unwrap();
    let admin = ca.issue(Usage::Client, "admin", Some("system:masters"), &[]).unwrap();
    let (_, pem) = x509_parser::pem::parse_x509_pem(admin.cert_pem.as_bytes()).unwrap();
    let cert = pem.parse_x509().unwrap();
    assert_eq!(cert.subject().iter_common_name().next().unwrap().as_str().unwrap(), "admin");
    assert_eq!(cert.subject().iter_organization().next().unwrap().as_str().unwrap(), "system:masters");
    assert!(cert.issuer().to_string().contains("kayra"));
    let reread = Ca::from_pem(ca.cert_pem(), &ca.issued().key_pem).unwrap();
    let server =
        reread.issue(Usage::Server, "kayra", None, &["127.0.0.1".into(), "localhost".into()]).unwrap();
    assert!(server.cert_pem.starts_with("-----BEGIN CERTIFICATE-----"));
    assert!(Ca::from_pem("garbage", "garbage").is_err());
}

#[test]
fn the_ca_hash_is_kubeadms_sha256_of_the_public_key_info() {
    let ca = Ca::generate("kayra").unwrap();
    let hash = ca_cert_hash(ca.cert_pem()).unwrap();
    assert!(hash.starts_with("sha256:") && hash.len() == 7 + 64, "{hash}");
    // The hash is over the key, not the certificate: a CA re-issued over the same key pins
    // the same, a different CA does not.
    let (_, pem) = x509_parser::pem::parse_x509_pem(ca.cert_pem().as_bytes()).unwrap();
    assert_eq!(ca_cert_hash_der(&pem.contents).unwrap(), hash);
    assert_ne!(ca_cert_hash(Ca::generate("kayra").unwrap().cert_pem()).unwrap(), hash);
    assert!(ca_cert_hash("not a certificate").is_err());
}

#[test]
fn a_request_is_signed_with_the_subject_the_signer_allows() {
    let ca = Ca::generate("kayra").unwrap();
    let key = generate_key().unwrap();
    let asked = Subject { common_name: "system:node:a".into(), organizations: vec!["system:masters".into()] };
    let csr = certificate_request(&key, &asked).unwrap();
    let read = read_certificate_request(&csr).unwrap();
    assert_eq!(read.subject, asked);
    assert!(!read.has_alt_names && !read.asks_for_ca);
    let allowed = Subject { common_name: "system:node:a".into(), organizations: vec!["system:nodes".into()] };
    let ttl = std::time::Duration::from_secs(3600);
    let pem = ca.sign_request(&csr, &allowed, Usage::Client, ttl).unwrap();
    let (_, block) = x509_parser::pem::parse_x509_pem(pem.as_bytes()).unwrap();
    let cert = block.parse_x509().unwrap();
    let organizations: Vec<&str> = cert.subject().iter_organization().map(|o| o.as_str().unwrap()).collect();
    assert_eq!(organizations, ["system:nodes"]);
    assert_eq!(cert.subject().iter_common_name().next().unwrap().as_str().unwrap(), "system:node:a");
    let lifetime = cert.validity().not_after.timestamp() - cert.validity().not_before.timestamp();
    assert_eq!(lifetime, 3600 + 300);
    let (from, to) = certificate_validity(&pem).unwrap();
    assert_eq!(to.duration_since(from).unwrap(), std::time::Duration::from_secs(3900));
    assert!(certificate_validity("garbage").is_err());
    let eku = cert.extended_key_usage().unwrap().unwrap().value;
    assert!(eku.client_auth && !eku.server_auth);
    // The certificate carries the request's key.
    assert_eq!(cert.public_key().raw, read.public_key_der.as_slice());
}

#[test]
fn unreadable_requests_are_refused() {
    assert!(read_certificate_request("garbage").is_err());
    let ca = Ca::generate("kayra").unwrap();
    assert!(read_certificate_request(ca.cert_pem()).is_err(), "a certificate is no request");
    let key = generate_key().unwrap();
    let csr = certificate_request(&key, &Subject { common_name: "x".into(), organizations: vec![] }).unwrap();
    // One flipped byte in the signed part breaks the signature.
    let (_, block) = x509_parser::pem::parse_x509_pem(csr.as_bytes()).unwrap();
    let mut der = block.contents.clone();
    let at = der.len() / 2;
    der[at] ^= 1;
    let tampered = format!(
        "-----BEGIN CERTIFICATE REQUEST-----\n{}\n-----END CERTIFICATE REQUEST-----\n",
        pem_body(&der)
    );
    assert!(read_certificate_request(&tampered).is_err());
    assert!(
        ca.sign_request(&tampered, &Subject::default(), Usage::Client, std::time::Duration::from_secs(600))
            .is_err()
    );
}

fn pem_body(der: &[u8]) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in der.chunks(3) {
        let b = [chunk[0], *chunk.get(1).unwrap_or(&0), *chunk.get(2).unwrap_or(&0)];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}
