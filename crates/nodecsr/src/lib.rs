//! The node certificate signer: the loop that answers `certificates.k8s.io`
//! CertificateSigningRequests, as kube-controller-manager's csrapproving, csrsigning and
//! csrcleaner controllers do together.
//!
//! A request a bootstrap token makes for `CN=system:node:<name>, O=system:nodes` with client
//! usage, and a node's request to renew its own certificate, are approved by rule and signed;
//! any other request waits for a person (`kubectl certificate approve|deny`), and is signed once
//! approved. A node certificate's groups come from the signer (`system:nodes`), never from the
//! request. Decided requests go an hour after they were made, pending ones after a day.
//!
//! Start at [`rules`] (what is approved and how it is signed: pure, table-tested), then
//! [`reconciler`] (the loop). The CA is reached through [`ports::Signer`]; this crate knows no
//! key, no file and no HTTP.

mod error;
pub mod ports;
pub mod reconciler;
pub mod rules;

pub use error::{CaError, NodeCsrError};
