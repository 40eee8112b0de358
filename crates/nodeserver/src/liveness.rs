//! Node liveness: a node whose heartbeat is older than the ready timeout is marked
//! `Ready=Unknown` (kubelet's node lifecycle controller), with an Event. A node's heartbeat is
//! the later of its Lease's `renewTime` (`kube-node-lease/<node>`, renewed by every report) and
//! its `Ready` condition's `lastHeartbeatTime` (written only when its status changes, or every
//! few minutes), as the lifecycle controller takes it. Elected: one replica judges every node
//! from the heartbeats in the store, whichever replica holds its session.

use std::sync::Arc;
use std::time::Duration;

use kayra_api::kinds::ConditionType;
use kayra_api::kinds::lease::NODE_LEASE_NAMESPACE;
use kayra_application::events::Severity;
use kayra_application::feed::ResourceFeed;
use kayra_loop::runtime::Loop;
use kayra_loop::{Action, Key, ReconcileError, Reconciler};
use kayra_registry::{RegistryError, meta_str};
use serde_json::{Value, json};

use crate::{Inner, NodeServer};

/// Marks silent nodes `Ready=Unknown`.
struct Liveness(Arc<Inner>);

/// What a node's Ready condition says about its liveness.
#[derive(Debug, PartialEq, Eq)]
enum Verdict {
    /// Never reported, or already Unknown: nothing to judge until it reports.
    Nothing,
    /// Heard from recently: look again when the timeout would pass.
    Alive(Duration),
    /// Silent for longer than the timeout.
    Silent,
}

fn verdict(
    ready: Option<&Value>,
    renewed: Option<jiff::Timestamp>,
    now: jiff::Timestamp,
    timeout: Duration,
) -> Verdict {
    let Some(ready) = ready else { return Verdict::Nothing };
    if ready.get("status").and_then(Value::as_str) == Some("Unknown") {
        return Verdict::Nothing;
    }
    let heartbeat = ready
        .get("lastHeartbeatTime")
        .and_then(Value::as_str)
        .and_then(|time| time.parse::<jiff::Timestamp>().ok());
    let Some(heartbeat) = heartbeat.max(renewed) else { return Verdict::Silent };
    let age = now.duration_since(heartbeat);
    let age = Duration::try_from(age).unwrap_or_default();
    if age > timeout { Verdict::Silent } else { Verdict::Alive(timeout - age + Duration::from_secs(1)) }
}

#[async_trait::async_trait]
impl Reconciler for Liveness {
    async fn reconcile(&self, key: &Key) -> Result<Action, ReconcileError> {
        let inner = &self.0;
        let name = key.name();
        let mut node = match inner.reader.get(&inner.nodes, None, name).await {
            Ok(node) => node,
            Err(RegistryError::NotFound { .. }) => return Ok(Action::AwaitChange),
            Err(error) => return Err(error.into()),
        };
        let conditions = node
            .get_mut("status")
            .and_then(|status| status.get_mut("conditions"))
            .and_then(Value::as_array_mut);
        let Some(conditions) = conditions else { return Ok(Action::AwaitChange) };
        let Some(ready) = conditions
            .iter_mut()
            .find(|c| c.get("type").and_then(Value::as_str) == Some(ConditionType::Ready.as_str()))
        else {
            return Ok(Action::AwaitChange);
        };
        let renewed = match inner.reader.get(&inner.leases, Some(NODE_LEASE_NAMESPACE), name).await {
            Ok(lease) => kayra_api::kinds::lease::renew_time(&Value::Object(lease)),
            Err(RegistryError::NotFound { .. }) => None,
            Err(error) => return Err(error.into()),
        };
        match verdict(Some(ready), renewed, jiff::Timestamp::now(), inner.config.ready_timeout) {
            Verdict::Nothing => return Ok(Action::AwaitChange),
            Verdict::Alive(again) => return Ok(Action::RequeueAfter(again)),
            Verdict::Silent => {}
        }
        ready["status"] = json!("Unknown");
        ready["reason"] = json!("NodeStatusUnknown");
        ready["message"] = json!("Kayra agent stopped posting node status.");
        ready["lastTransitionTime"] = json!(crate::status::now());
        inner.reader.update_status(&inner.nodes, None, name, &node).await?;
        tracing::warn!(node = name, "a node stopped posting its status; it is Ready=Unknown");
        let involved = crate::node_involved(name, meta_str(&node, "uid"));
        let message = format!("Node {name} status is now: NodeNotReady");
        if let Err(error) =
            inner.recorder.record(&involved, Severity::Warning, "NodeNotReady", &message).await
        {
            tracing::debug!(%error, node = name, "the NodeNotReady event was not recorded");
        }
        Ok(Action::AwaitChange)
    }
}

impl NodeServer {
    /// The liveness loop; run it elected, on one replica at a time.
    pub fn liveness_loop(&self) -> Loop {
        let inner = &self.inner;
        let source = ResourceFeed::objects(inner.reader.clone(), inner.nodes.clone());
        Loop::new("node-liveness", Liveness(inner.clone()))
            .source(source)
            .resync(inner.config.ready_timeout)
            .concurrency(2)
    }
}

#[cfg(test)]
mod tests;
