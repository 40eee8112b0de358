//! What the signer needs from outside: a CA that reads and signs PKCS#10 requests (its clock is
//! `kayra_api::clock::Clock`).

use std::time::Duration;

use crate::NodeCsrError;

/// The subject a request asks for, once its signature has been checked.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequestedSubject {
    /// The common name: the user the certificate would name.
    pub common_name: String,
    /// The organizations: the groups it would name.
    pub organizations: Vec<String>,
}

/// The cluster's CA, as the signer uses it.
pub trait Signer: Send + Sync {
    /// What the PEM request asks for, or why it is unusable (it does not parse, or its
    /// signature does not verify: [`NodeCsrError::UnreadableRequest`]).
    fn read_request(&self, request_pem: &str) -> Result<RequestedSubject, NodeCsrError>;

    /// A PEM client certificate for the request's key, naming `subject` (whatever the request
    /// asked), valid for `ttl`; [`NodeCsrError::Signing`] when the CA cannot make it.
    fn sign_client(
        &self,
        request_pem: &str,
        subject: &RequestedSubject,
        ttl: Duration,
    ) -> Result<String, NodeCsrError>;
}
