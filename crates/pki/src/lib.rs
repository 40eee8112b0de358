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
}

#[cfg(test)]
mod tests {
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
}
