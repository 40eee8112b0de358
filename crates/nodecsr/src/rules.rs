//! The signer's rules, with no IO: which requests are approved without a person, what a signed
//! certificate names and for how long, and when a request is collected.

use std::time::Duration;

use kayra_api::kinds::csr::{CLIENT_SIGNER, KUBELET_CLIENT_SIGNER};

use crate::ports::RequestedSubject;

/// The group bootstrap tokens authenticate in.
pub const BOOTSTRAPPERS: &str = "system:bootstrappers";

/// The group of node identities, and the only group a node certificate names.
pub const NODES: &str = "system:nodes";

/// The prefix of a node's user name.
pub const NODE_PREFIX: &str = "system:node:";

/// The reason on an approval made by rule, as Kubernetes writes it.
pub const AUTO_APPROVED: &str = "AutoApproved";

/// The longest a node certificate lives, unless the request asks for less.
pub const NODE_CERTIFICATE_TTL: Duration = Duration::from_secs(365 * 24 * 3600);

/// The shortest certificate signed, whatever the request asks.
pub const MIN_CERTIFICATE_TTL: Duration = Duration::from_secs(600);

/// How long a decided (approved, denied or failed) request is kept after it was made.
pub const DECIDED_KEPT: Duration = Duration::from_secs(3600);

/// How long a pending request is kept after it was made.
pub const PENDING_KEPT: Duration = Duration::from_secs(24 * 3600);

/// The usages a client certificate may carry.
const CLIENT_USAGES: &[&str] = &["digital signature", "key encipherment", "client auth"];

/// A request as the rules see it: the spec and what the request itself asks for.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    /// `spec.signerName`.
    pub signer_name: &'a str,
    /// `spec.usages`.
    pub usages: &'a [String],
    /// `spec.expirationSeconds`.
    pub expiration_seconds: Option<i32>,
    /// Who asked (`spec.username`, stamped by admission).
    pub username: &'a str,
    /// The requester's groups (`spec.groups`, stamped by admission).
    pub groups: &'a [String],
    /// The subject the PKCS#10 request names.
    pub subject: &'a RequestedSubject,
}

/// The node a request asks a node certificate for: `CN=system:node:<name>, O=system:nodes`
/// exactly, client usage only, from the kubelet client signer.
pub fn node_client_request<'a>(request: &Request<'a>) -> Option<&'a str> {
    let name = request.subject.common_name.strip_prefix(NODE_PREFIX).filter(|name| !name.is_empty())?;
    let usages_fit = request.usages.iter().any(|u| u == "client auth")
        && request.usages.iter().all(|u| CLIENT_USAGES.contains(&u.as_str()));
    (request.signer_name == KUBELET_CLIENT_SIGNER && request.subject.organizations == [NODES] && usages_fit)
        .then_some(name)
}

/// Why a request is approved without a person, or `None` when a person must decide: a node
/// client request made with a bootstrap token, or made by the node it names (renewal).
pub fn auto_approval(request: &Request<'_>) -> Option<&'static str> {
    let node = node_client_request(request)?;
    let in_group = |group: &str| request.groups.iter().any(|g| g == group);
    if in_group(BOOTSTRAPPERS) {
        return Some("Auto approving a node client certificate requested with a bootstrap token.");
    }
    let renewing = request.username.strip_prefix(NODE_PREFIX) == Some(node) && in_group(NODES);
    renewing.then_some("Auto approving a node's renewal of its own client certificate.")
}

/// What an approved request is signed as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signing {
    /// The subject the certificate names.
    pub subject: RequestedSubject,
    /// How long it is valid.
    pub ttl: Duration,
}

/// How an approved request is answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// Sign it so.
    Sign(Signing),
    /// It cannot be signed: the reason for its `Failed` condition.
    Fail(String),
    /// Another signer's request: left alone.
    NotOurs,
}

/// How an approved request is signed. The kubelet client signer signs only node subjects, and
/// names the group `system:nodes` whatever the request asked; the API client signer signs the
/// requested subject. Both sign client certificates only, for a year at most (less when the
/// request asks, never under ten minutes).
pub fn answer(request: &Request<'_>) -> Answer {
    let ttl = requested_ttl(request.expiration_seconds);
    let client_usages = request.usages.iter().any(|u| u == "client auth")
        && request.usages.iter().all(|u| CLIENT_USAGES.contains(&u.as_str()));
    match request.signer_name {
        KUBELET_CLIENT_SIGNER => {
            let Some(node) = request.subject.common_name.strip_prefix(NODE_PREFIX).filter(|n| !n.is_empty())
            else {
                return Answer::Fail(format!(
                    "the {KUBELET_CLIENT_SIGNER} signer signs only subjects CN={NODE_PREFIX}<name>, not CN={}",
                    request.subject.common_name
                ));
            };
            if !client_usages {
                return Answer::Fail(format!(
                    "a node client certificate may only have the usages {CLIENT_USAGES:?}, including client auth"
                ));
            }
            let subject = RequestedSubject {
                common_name: format!("{NODE_PREFIX}{node}"),
                organizations: vec![NODES.to_owned()],
            };
            Answer::Sign(Signing { subject, ttl })
        }
        CLIENT_SIGNER => {
            if !client_usages {
                return Answer::Fail(format!(
                    "a client certificate may only have the usages {CLIENT_USAGES:?}, including client auth"
                ));
            }
            if request.subject.common_name.is_empty() {
                return Answer::Fail("a client certificate must name a user (CN)".to_owned());
            }
            Answer::Sign(Signing { subject: request.subject.clone(), ttl })
        }
        _ => Answer::NotOurs,
    }
}

/// A year, or what the request asks for when that is shorter (never under ten minutes).
pub fn requested_ttl(expiration_seconds: Option<i32>) -> Duration {
    let asked = expiration_seconds.map(|seconds| Duration::from_secs(u64::try_from(seconds).unwrap_or(0)));
    asked.map_or(NODE_CERTIFICATE_TTL, |asked| asked.clamp(MIN_CERTIFICATE_TTL, NODE_CERTIFICATE_TTL))
}

/// How long after its creation a request is collected: an hour once decided (approved,
/// denied, failed or issued), a day while pending.
pub fn kept_for(decided: bool) -> Duration {
    if decided { DECIDED_KEPT } else { PENDING_KEPT }
}

#[cfg(test)]
mod tests;
