//! The cluster's certificates: a self-signed CA, serving certificates with the names clients
//! dial, and client certificates whose CN is the user and O the group, all ECDSA P-256.
//!
//! Start at [`Ca`]. This crate knows nothing of files or of who asks: callers decide where PEM
//! goes.

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer,
    KeyPair, KeyUsagePurpose,
};

/// What went wrong making or reading a certificate.
#[derive(Debug, thiserror::Error)]
pub enum PkiError {
    /// The certificate library refused the request.
    #[error("cannot {action}: {source}")]
    Certificate {
        /// What was being done.
        action: &'static str,
        /// The library's error.
        #[source]
        source: rcgen::Error,
    },
    /// A certificate or request could not be read.
    #[error("cannot read {what}: {reason}")]
    Unreadable {
        /// What was being read.
        what: &'static str,
        /// Why it could not be.
        reason: String,
    },
}

impl PkiError {
    /// Whether trying again unchanged may succeed: never, a certificate or request that is
    /// refused or unreadable stays so.
    pub fn is_retryable(&self) -> bool {
        false
    }
}

fn failed(action: &'static str) -> impl FnOnce(rcgen::Error) -> PkiError {
    move |source| PkiError::Certificate { action, source }
}

/// A certificate and its private key, in PEM.
#[derive(Clone)]
pub struct Issued {
    /// The certificate.
    pub cert_pem: String,
    /// The private key (PKCS#8).
    pub key_pem: String,
}

impl std::fmt::Debug for Issued {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Issued").field("cert_pem", &self.cert_pem).finish_non_exhaustive()
    }
}

/// What a leaf certificate is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Usage {
    /// A server's certificate, for the names in its SANs.
    Server,
    /// A client's certificate: CN is the user, O the group.
    Client,
}

/// The cluster's certificate authority.
#[derive(Debug, Clone)]
pub struct Ca {
    issued: Issued,
}

const CA_DAYS: i64 = 3650;
const LEAF_DAYS: i64 = 365;

fn validity(params: &mut CertificateParams, days: i64) {
    let now = time::OffsetDateTime::now_utc();
    params.not_before = now - time::Duration::minutes(5);
    params.not_after = now + time::Duration::days(days);
}

impl Ca {
    /// A new self-signed CA named `common_name`, valid ten years.
    pub fn generate(common_name: &str) -> Result<Ca, PkiError> {
        let key = KeyPair::generate().map_err(failed("generate the CA key"))?;
        let mut params = CertificateParams::new(Vec::<String>::new()).map_err(failed("describe the CA"))?;
        let mut name = DistinguishedName::new();
        name.push(DnType::CommonName, common_name);
        params.distinguished_name = name;
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages =
            vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
        validity(&mut params, CA_DAYS);
        let cert = params.self_signed(&key).map_err(failed("sign the CA"))?;
        Ok(Ca { issued: Issued { cert_pem: cert.pem(), key_pem: key.serialize_pem() } })
    }

    /// The CA kept in PEM.
    pub fn from_pem(cert_pem: &str, key_pem: &str) -> Result<Ca, PkiError> {
        let key = KeyPair::from_pem(key_pem).map_err(failed("read the CA key"))?;
        Issuer::from_ca_cert_pem(cert_pem, key).map_err(failed("read the CA certificate"))?;
        Ok(Ca { issued: Issued { cert_pem: cert_pem.to_owned(), key_pem: key_pem.to_owned() } })
    }

    /// The CA's certificate, to trust.
    pub fn cert_pem(&self) -> &str {
        &self.issued.cert_pem
    }

    /// The CA's certificate and key, to keep.
    pub fn issued(&self) -> &Issued {
        &self.issued
    }

    /// Issues a certificate valid one year: for a server, `names` are its DNS names and IP
    /// addresses; for a client, `common_name` is the user and `organization` its group.
    pub fn issue(
        &self,
        usage: Usage,
        common_name: &str,
        organization: Option<&str>,
        names: &[String],
    ) -> Result<Issued, PkiError> {
        let ca_key = KeyPair::from_pem(&self.issued.key_pem).map_err(failed("read the CA key"))?;
        let issuer = Issuer::from_ca_cert_pem(&self.issued.cert_pem, ca_key)
            .map_err(failed("read the CA certificate"))?;
        let key = KeyPair::generate().map_err(failed("generate a key"))?;
        let mut params =
            CertificateParams::new(names.to_vec()).map_err(failed("describe the certificate"))?;
        let mut name = DistinguishedName::new();
        name.push(DnType::CommonName, common_name);
        if let Some(organization) = organization {
            name.push(DnType::OrganizationName, organization);
        }
        params.distinguished_name = name;
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment];
        params.extended_key_usages = vec![match usage {
            Usage::Server => ExtendedKeyUsagePurpose::ServerAuth,
            Usage::Client => ExtendedKeyUsagePurpose::ClientAuth,
        }];
        params.use_authority_key_identifier_extension = true;
        validity(&mut params, LEAF_DAYS);
        let cert = params.signed_by(&key, &issuer).map_err(failed("sign the certificate"))?;
        Ok(Issued { cert_pem: cert.pem(), key_pem: key.serialize_pem() })
    }

    /// Signs the request in `csr_pem` as a certificate for `usage`, valid `ttl` from now (a
    /// few minutes back-dated against clock skew), whose subject is `subject` whatever the
    /// request asked: the signer decides who the certificate names. Only the request's public
    /// key is taken from it.
    pub fn sign_request(
        &self,
        csr_pem: &str,
        subject: &Subject,
        usage: Usage,
        ttl: std::time::Duration,
    ) -> Result<String, PkiError> {
        let request = read_certificate_request(csr_pem)?;
        let public_key = rcgen::SubjectPublicKeyInfo::from_der(&request.public_key_der)
            .map_err(failed("read the request's public key"))?;
        let ca_key = KeyPair::from_pem(&self.issued.key_pem).map_err(failed("read the CA key"))?;
        let issuer = Issuer::from_ca_cert_pem(&self.issued.cert_pem, ca_key)
            .map_err(failed("read the CA certificate"))?;
        let mut params = CertificateParams::default();
        params.distinguished_name = subject.distinguished_name();
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment];
        params.extended_key_usages = vec![match usage {
            Usage::Server => ExtendedKeyUsagePurpose::ServerAuth,
            Usage::Client => ExtendedKeyUsagePurpose::ClientAuth,
        }];
        params.use_authority_key_identifier_extension = true;
        let now = time::OffsetDateTime::now_utc();
        params.not_before = now - time::Duration::minutes(5);
        params.not_after = now + time::Duration::try_from(ttl).unwrap_or(time::Duration::days(LEAF_DAYS));
        params.serial_number = Some(random_serial());
        Ok(params.signed_by(&public_key, &issuer).map_err(failed("sign the request"))?.pem())
    }
}

/// Kubeadm's pin of a CA (`--discovery-token-ca-cert-hash`): `sha256:<hex>` over the DER
/// SubjectPublicKeyInfo of the CA certificate in `ca_pem` (the first certificate there).
pub fn ca_cert_hash(ca_pem: &str) -> Result<String, PkiError> {
    let (_, pem) = x509_parser::pem::parse_x509_pem(ca_pem.as_bytes())
        .map_err(|error| PkiError::Unreadable { what: "the CA certificate", reason: error.to_string() })?;
    ca_cert_hash_der(&pem.contents)
}

/// [`ca_cert_hash`] of a DER certificate, as a TLS handshake presents it.
pub fn ca_cert_hash_der(der: &[u8]) -> Result<String, PkiError> {
    use x509_parser::prelude::FromDer;
    let (_, cert) = x509_parser::certificate::X509Certificate::from_der(der)
        .map_err(|error| PkiError::Unreadable { what: "a certificate", reason: error.to_string() })?;
    let digest = ring::digest::digest(&ring::digest::SHA256, cert.tbs_certificate.subject_pki.raw);
    Ok(format!("sha256:{}", digest.as_ref().iter().map(|b| format!("{b:02x}")).collect::<String>()))
}

/// When the first certificate in `cert_pem` starts and stops being valid.
pub fn certificate_validity(
    cert_pem: &str,
) -> Result<(std::time::SystemTime, std::time::SystemTime), PkiError> {
    let unreadable = |reason: String| PkiError::Unreadable { what: "the certificate", reason };
    let (_, pem) =
        x509_parser::pem::parse_x509_pem(cert_pem.as_bytes()).map_err(|e| unreadable(e.to_string()))?;
    let cert = pem.parse_x509().map_err(|e| unreadable(e.to_string()))?;
    let at = |seconds: i64| {
        let since = std::time::Duration::from_secs(seconds.unsigned_abs());
        if seconds >= 0 { std::time::UNIX_EPOCH + since } else { std::time::UNIX_EPOCH - since }
    };
    Ok((at(cert.validity().not_before.timestamp()), at(cert.validity().not_after.timestamp())))
}

/// A positive random serial number, so that no two certificates the CA signs share one.
fn random_serial() -> rcgen::SerialNumber {
    use ring::rand::SecureRandom;
    let mut bytes = [0u8; 16];
    ring::rand::SystemRandom::new().fill(&mut bytes).expect("the system has randomness");
    bytes[0] &= 0x7f;
    rcgen::SerialNumber::from_slice(&bytes)
}

/// A new private key (ECDSA P-256, PKCS#8 PEM) for a certificate request.
pub fn generate_key() -> Result<String, PkiError> {
    Ok(KeyPair::generate().map_err(failed("generate a key"))?.serialize_pem())
}

/// A PEM PKCS#10 request, signed with `key_pem`, for a certificate whose subject is
/// `subject`. It asks for no extensions: the signer decides the usages.
pub fn certificate_request(key_pem: &str, subject: &Subject) -> Result<String, PkiError> {
    let key = KeyPair::from_pem(key_pem).map_err(failed("read the key"))?;
    let mut params = CertificateParams::default();
    params.distinguished_name = subject.distinguished_name();
    params
        .serialize_request(&key)
        .map_err(failed("make the request"))?
        .pem()
        .map_err(failed("encode the request"))
}

/// The subject of a certificate: CN the user, each O a group.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Subject {
    /// The common name.
    pub common_name: String,
    /// The organizations, in order.
    pub organizations: Vec<String>,
}

impl Subject {
    fn distinguished_name(&self) -> DistinguishedName {
        let mut name = DistinguishedName::new();
        name.push(DnType::CommonName, self.common_name.as_str());
        for organization in &self.organizations {
            name.push(DnType::OrganizationName, organization.as_str());
        }
        name
    }
}

/// What a PKCS#10 request asks for, once its signature has been checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestedCertificate {
    /// The requested subject.
    pub subject: Subject,
    /// Whether the request names subject alternative names (a client certificate has none).
    pub has_alt_names: bool,
    /// Whether the request asks to be a CA.
    pub asks_for_ca: bool,
    /// The requested key, as a DER SubjectPublicKeyInfo.
    pub public_key_der: Vec<u8>,
}

/// Reads a PEM PKCS#10 request and checks its signature: what it asks for, or why it is
/// unusable.
pub fn read_certificate_request(csr_pem: &str) -> Result<RequestedCertificate, PkiError> {
    use x509_parser::prelude::FromDer;
    let (_, pem) = x509_parser::pem::parse_x509_pem(csr_pem.as_bytes())
        .map_err(|error| PkiError::Unreadable { what: "the request", reason: error.to_string() })?;
    if pem.label != "CERTIFICATE REQUEST" && pem.label != "NEW CERTIFICATE REQUEST" {
        return Err(PkiError::Unreadable {
            what: "the request",
            reason: format!("PEM block {:?} is not a CERTIFICATE REQUEST", pem.label),
        });
    }
    let (_, request) = x509_parser::certification_request::X509CertificationRequest::from_der(&pem.contents)
        .map_err(|error| PkiError::Unreadable { what: "the request", reason: error.to_string() })?;
    request.verify_signature().map_err(|error| PkiError::Unreadable {
        what: "the request",
        reason: format!("its signature does not verify: {error}"),
    })?;
    let info = &request.certification_request_info;
    let text = |attribute: &x509_parser::x509::AttributeTypeAndValue<'_>| {
        attribute.as_str().map(str::to_owned).map_err(|error| PkiError::Unreadable {
            what: "the request's subject",
            reason: error.to_string(),
        })
    };
    let common_name = match info.subject.iter_common_name().next() {
        Some(attribute) => text(attribute)?,
        None => String::new(),
    };
    let organizations = info.subject.iter_organization().map(text).collect::<Result<Vec<_>, _>>()?;
    let mut has_alt_names = false;
    let mut asks_for_ca = false;
    for extension in request.requested_extensions().into_iter().flatten() {
        match extension {
            x509_parser::extensions::ParsedExtension::SubjectAlternativeName(names) => {
                has_alt_names |= !names.general_names.is_empty();
            }
            x509_parser::extensions::ParsedExtension::BasicConstraints(constraints) => {
                asks_for_ca |= constraints.ca;
            }
            _ => {}
        }
    }
    Ok(RequestedCertificate {
        subject: Subject { common_name, organizations },
        has_alt_names,
        asks_for_ca,
        public_key_der: info.subject_pki.raw.to_vec(),
    })
}

#[cfg(test)]
mod tests;
