//! The signer's loop: one key per certificate request, woken by every change to one, and
//! again when a request is due to be collected.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::api::certificates::v1::{
    CertificateSigningRequest, CertificateSigningRequestCondition, CertificateSigningRequestStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kayra_api::clock::{Clock, SystemClock};
use kayra_api::kinds::csr::{certificate, has_condition};
use kayra_application::client::Client;
use kayra_application::events::{Involved, Recorder, Severity};
use kayra_application::feed::ResourceFeed;
use kayra_application::options::DeleteRequest;
use kayra_loop::runtime::Loop;
use kayra_loop::{Action, Key, ReconcileError, Reconciler};
use kayra_registry::{RegistryError, Resource};

use crate::NodeCsrError;
use crate::ports::Signer;
use crate::rules::{self, AUTO_APPROVED, Answer, Request};

/// How often every request is looked at with nothing changed.
const RESYNC: Duration = Duration::from_secs(600);

/// Approves node requests by rule, signs approved ones, and collects old ones.
pub struct NodeCsrReconciler {
    client: Client,
    requests: Resource,
    signer: Arc<dyn Signer>,
    clock: Arc<dyn Clock>,
    events: Recorder,
}

impl std::fmt::Debug for NodeCsrReconciler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeCsrReconciler").finish_non_exhaustive()
    }
}

impl NodeCsrReconciler {
    /// The signer, acting as `client` (which must approve, sign and delete certificate
    /// requests and write Events), signing through `signer`.
    pub fn new(client: Client, signer: Arc<dyn Signer>) -> Result<NodeCsrReconciler, NodeCsrError> {
        let requests =
            client.resource("certificates.k8s.io", "certificatesigningrequests").map_err(|source| {
                NodeCsrError::Registry { what: "finding the certificate requests".to_owned(), source }
            })?;
        let events = Recorder::new(client.clone(), "kayra-runtime-csr-signer");
        Ok(NodeCsrReconciler { client, requests, signer, clock: Arc::new(SystemClock), events })
    }

    /// The same signer reading the time from `clock`.
    pub fn with_clock(self, clock: Arc<dyn Clock>) -> NodeCsrReconciler {
        NodeCsrReconciler { clock, ..self }
    }

    /// The loop: one key per request, woken by changes to requests.
    pub fn into_loop(self) -> Loop {
        let source = ResourceFeed::objects(self.client.clone(), self.requests.clone());
        Loop::new("node-csr-signer", self).source(source).resync(RESYNC)
    }

    async fn event(&self, name: &str, severity: Severity, reason: &str, message: &str) {
        let involved = Involved {
            api_version: "certificates.k8s.io/v1".to_owned(),
            kind: "CertificateSigningRequest".to_owned(),
            namespace: String::new(),
            name: name.to_owned(),
            uid: String::new(),
        };
        if let Err(error) = self.events.record(&involved, severity, reason, message).await {
            tracing::warn!(%error, request = name, reason, "cannot record an event");
        }
    }

    /// Adds a `Failed` condition through the status subresource.
    /// The time on the signer's clock.
    fn now(&self) -> jiff::Timestamp {
        jiff::Timestamp::try_from(self.clock.now())
            .expect("a clock reads a time between the years -9999 and 9999")
    }

    async fn fail(
        &self,
        mut csr: CertificateSigningRequest,
        reason: &str,
        message: &str,
    ) -> Result<CertificateSigningRequest, ReconcileError> {
        let name = csr.metadata.name.clone().unwrap_or_default();
        push_condition(&mut csr, "Failed", reason, message, self.now());
        let written = self.client.update_status(&self.requests, None, &name, &csr).await?;
        self.event(&name, Severity::Warning, reason, message).await;
        decode(written)
    }

    /// Deletes the request when it is due; otherwise answers when it will be.
    async fn collect(
        &self,
        csr: &CertificateSigningRequest,
        name: &str,
    ) -> Result<Option<Duration>, ReconcileError> {
        let decided = ["Approved", "Denied", "Failed"].iter().any(|c| has_condition(csr, c))
            || certificate(csr).is_some();
        let created = csr.metadata.creation_timestamp.as_ref().map_or(self.now(), |t| t.0);
        let due = created
            .checked_add(
                jiff::SignedDuration::try_from(rules::kept_for(decided)).unwrap_or(jiff::SignedDuration::MAX),
            )
            .unwrap_or(jiff::Timestamp::MAX);
        let left = self.now().duration_until(due);
        if left.is_positive() {
            return Ok(Some(left.unsigned_abs().max(Duration::from_secs(1))));
        }
        match self.client.delete(&self.requests, None, name, &DeleteRequest::default()).await {
            Ok(_) | Err(RegistryError::NotFound { .. }) => Ok(None),
            Err(error) => Err(error.into()),
        }
    }
}

#[async_trait::async_trait]
impl Reconciler for NodeCsrReconciler {
    async fn reconcile(&self, key: &Key) -> Result<Action, ReconcileError> {
        let name = key.name();
        let mut csr: CertificateSigningRequest = match self.client.get_as(&self.requests, None, name).await {
            Ok(csr) => csr,
            Err(RegistryError::NotFound { .. }) => return Ok(Action::AwaitChange),
            Err(error) => return Err(error.into()),
        };
        let Some(left) = self.collect(&csr, name).await? else {
            tracing::info!(request = name, "collected an old certificate request");
            return Ok(Action::AwaitChange);
        };
        let settled =
            has_condition(&csr, "Denied") || has_condition(&csr, "Failed") || certificate(&csr).is_some();
        if settled {
            return Ok(Action::RequeueAfter(left));
        }
        let pem = String::from_utf8_lossy(&csr.spec.request.0).into_owned();
        let subject = match self.signer.read_request(&pem) {
            Ok(subject) => subject,
            Err(problem) => {
                self.fail(csr, "InvalidRequest", &format!("the request cannot be read: {problem}")).await?;
                return Ok(Action::AwaitChange);
            }
        };
        let spec = csr.spec.clone();
        let request = Request {
            signer_name: &spec.signer_name,
            usages: spec.usages.as_deref().unwrap_or_default(),
            expiration_seconds: spec.expiration_seconds,
            username: spec.username.as_deref().unwrap_or_default(),
            groups: spec.groups.as_deref().unwrap_or_default(),
            subject: &subject,
        };
        if !has_condition(&csr, "Approved") {
            let Some(message) = rules::auto_approval(&request) else {
                // A person decides; the request waits until then, or until it is collected.
                return Ok(Action::RequeueAfter(left));
            };
            push_condition(&mut csr, "Approved", AUTO_APPROVED, message, self.now());
            csr = decode(self.client.update_approval(&self.requests, name, &csr).await?)?;
            let approved = format!("Approved {} for {}", subject.common_name, request.username);
            self.event(name, Severity::Normal, AUTO_APPROVED, &approved).await;
        }
        match rules::answer(&request) {
            Answer::NotOurs => Ok(Action::RequeueAfter(left)),
            Answer::Fail(reason) => {
                self.fail(csr, "SignerValidationFailure", &reason).await?;
                Ok(Action::AwaitChange)
            }
            Answer::Sign(signing) => {
                let signed = self.signer.sign_client(&pem, &signing.subject, signing.ttl)?;
                csr.status.get_or_insert_with(CertificateSigningRequestStatus::default).certificate =
                    Some(ByteString(signed.into_bytes()));
                self.client.update_status(&self.requests, None, name, &csr).await?;
                let message = format!(
                    "Signed a client certificate for {} in {:?}, valid {}s",
                    signing.subject.common_name,
                    signing.subject.organizations,
                    signing.ttl.as_secs()
                );
                tracing::info!(request = name, user = %signing.subject.common_name, "signed a certificate request");
                self.event(name, Severity::Normal, "Signed", &message).await;
                Ok(Action::AwaitChange)
            }
        }
    }
}

/// Adds condition `type_` (status `True`) unless the request carries it already.
fn push_condition(
    csr: &mut CertificateSigningRequest,
    type_: &str,
    reason: &str,
    message: &str,
    now: jiff::Timestamp,
) {
    let conditions = csr
        .status
        .get_or_insert_with(CertificateSigningRequestStatus::default)
        .conditions
        .get_or_insert_with(Vec::new);
    if conditions.iter().any(|c| c.type_ == type_) {
        return;
    }
    conditions.push(CertificateSigningRequestCondition {
        type_: type_.to_owned(),
        status: "True".to_owned(),
        reason: Some(reason.to_owned()),
        message: Some(message.to_owned()),
        last_transition_time: Some(Time(now)),
        last_update_time: Some(Time(now)),
    });
}

fn decode(object: kayra_registry::Object) -> Result<CertificateSigningRequest, ReconcileError> {
    Ok(serde_json::from_value(serde_json::Value::Object(object))?)
}

#[cfg(test)]
mod tests;
