//! Node loss: a node `Ready=Unknown` for longer than the lost timeout (`nodeLostTimeoutSeconds`,
//! default 5 min) is lost. Its scheduler-placed Applications are unbound so the scheduler places
//! them elsewhere (an Event `NodeLost` on each, as Kubernetes' taint manager records
//! `TaintManagerEviction`); the ones their authors pinned stay, with condition `NodeLost=True`
//! saying so, removed when the node reports again. A lost node that comes back finds in its
//! desired state only what is still bound to it, and its agent stops the rest.
//!
//! Elected, beside the liveness loop that marks a silent node `Ready=Unknown`. Which nodes this
//! replica found lost is kept in memory, to clear their pinned Applications' condition when they
//! return; a condition left by a previous leader is cleared by the node's own status reports.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kayra_api::kinds::ConditionType;
use kayra_api::kinds::application::NODE_NAME_FIELD;
use kayra_application::client::Client;
use kayra_application::controller_identity;
use kayra_application::events::{Recorder, Severity};
use kayra_application::eviction::{Unbinding, involved, unbind};
use kayra_application::feed::ResourceFeed;
use kayra_loop::runtime::Loop;
use kayra_loop::{Action, Key, ReconcileError, Reconciler};
use kayra_registry::{ListOptions, Object, RegistryError, meta_str};
use serde_json::{Value, json};

use crate::{Inner, NodeServer};

/// The condition a pinned Application of a lost node carries.
const NODE_LOST: &str = ConditionType::NodeLost.as_str();

/// Moves what can move off lost nodes.
struct Loss {
    inner: Arc<Inner>,
    client: Client,
    recorder: Recorder,
    lost: Mutex<HashSet<String>>,
}

/// What a node's Ready condition says about loss.
#[derive(Debug, PartialEq, Eq)]
enum Verdict {
    /// Ready, or not heard from at all: nothing is lost.
    Present,
    /// `Unknown` for less than the timeout: look again when it would pass.
    Silent(Duration),
    /// `Unknown` for longer than the timeout.
    Lost,
}

fn verdict(ready: Option<&Value>, now: jiff::Timestamp, timeout: Duration) -> Verdict {
    let Some(ready) = ready else { return Verdict::Present };
    if ready.get("status").and_then(Value::as_str) != Some("Unknown") {
        return Verdict::Present;
    }
    let since = ready
        .get("lastTransitionTime")
        .and_then(Value::as_str)
        .and_then(|time| time.parse::<jiff::Timestamp>().ok());
    let Some(since) = since else { return Verdict::Lost };
    let age = Duration::try_from(now.duration_since(since)).unwrap_or_default();
    if age >= timeout { Verdict::Lost } else { Verdict::Silent(timeout - age + Duration::from_secs(1)) }
}

impl Loss {
    async fn bound_to(&self, node: &str) -> Result<Vec<Object>, RegistryError> {
        let options = ListOptions {
            field_selector: Some(format!("{NODE_NAME_FIELD}={node}")),
            ..ListOptions::default()
        };
        Ok(self.client.list(&self.inner.applications, None, &options).await?.items)
    }

    /// Sets (or, with `message` `None`, removes) a pinned Application's `NodeLost` condition;
    /// writes only a change.
    async fn condition(&self, mut application: Object, message: Option<&str>) -> Result<(), RegistryError> {
        let (namespace, name) =
            (meta_str(&application, "namespace").to_owned(), meta_str(&application, "name").to_owned());
        let mut status = application.get("status").cloned().unwrap_or_else(|| json!({}));
        let conditions = status.get("conditions").and_then(Value::as_array).cloned().unwrap_or_default();
        let existing = conditions.iter().find(|c| c.get("type").and_then(Value::as_str) == Some(NODE_LOST));
        let unchanged = match (existing, message) {
            (None, None) => true,
            (Some(existing), Some(message)) => existing["message"] == message,
            _ => false,
        };
        if unchanged {
            return Ok(());
        }
        let mut conditions: Vec<Value> = conditions
            .into_iter()
            .filter(|c| c.get("type").and_then(Value::as_str) != Some(NODE_LOST))
            .collect();
        if let Some(message) = message {
            conditions.push(json!({
                "type": NODE_LOST, "status": "True", "reason": NODE_LOST, "message": message,
                "lastTransitionTime": crate::status::now(),
            }));
        }
        status["conditions"] = json!(conditions);
        application.insert("status".into(), status);
        match self.client.update_status(&self.inner.applications, Some(&namespace), &name, &application).await
        {
            Ok(_) | Err(RegistryError::NotFound { .. }) => Ok(()),
            Err(error) => Err(error),
        }
    }

    async fn lose(&self, node: &str) -> Result<(), RegistryError> {
        let timeout = self.inner.config.lost_timeout.as_secs();
        for application in self.bound_to(node).await? {
            let (namespace, name) = (meta_str(&application, "namespace"), meta_str(&application, "name"));
            match unbind(&self.client, &self.inner.applications, namespace, name, Some(node), false).await {
                Ok(Unbinding::Unbound { application, .. }) => {
                    let message = format!(
                        "Node {node} was lost (Ready=Unknown for longer than {timeout}s): unbound from it to be placed again"
                    );
                    let involved = involved(&self.inner.applications, &application);
                    if let Err(error) =
                        self.recorder.record(&involved, Severity::Warning, NODE_LOST, &message).await
                    {
                        tracing::debug!(%error, "the NodeLost event was not recorded");
                    }
                }
                Ok(Unbinding::Pinned { application, .. }) => {
                    let message = format!(
                        "node {node} is lost: it has been Ready=Unknown for longer than {timeout}s; this Application is pinned to it \
                         and stays until the node returns or its author moves it"
                    );
                    self.condition(application, Some(&message)).await?;
                }
                Ok(Unbinding::NotBound) | Err(RegistryError::NotFound { .. }) => {}
                Err(error) => return Err(error),
            }
        }
        Ok(())
    }

    async fn found(&self, node: &str) -> Result<(), RegistryError> {
        for application in self.bound_to(node).await? {
            self.condition(application, None).await?;
        }
        Ok(())
    }

    fn lost(&self) -> std::sync::MutexGuard<'_, HashSet<String>> {
        self.lost.lock().expect("the lost-node set's lock is never held across a panic")
    }
}

#[async_trait::async_trait]
impl Reconciler for Loss {
    async fn reconcile(&self, key: &Key) -> Result<Action, ReconcileError> {
        let name = key.name();
        let node = match self.client.get(&self.inner.nodes, None, name).await {
            Ok(node) => node,
            Err(RegistryError::NotFound { .. }) => {
                self.lost().remove(name);
                return Ok(Action::AwaitChange);
            }
            Err(error) => return Err(error.into()),
        };
        let ready = node
            .get("status")
            .and_then(|status| status.get("conditions"))
            .and_then(Value::as_array)
            .and_then(|conditions| {
                conditions
                    .iter()
                    .find(|c| c.get("type").and_then(Value::as_str) == Some(ConditionType::Ready.as_str()))
            });
        match verdict(ready, jiff::Timestamp::now(), self.inner.config.lost_timeout) {
            Verdict::Present => {
                if self.lost().contains(name) {
                    self.found(name).await?;
                    self.lost().remove(name);
                    tracing::info!(node = name, "a lost node reports again");
                }
                Ok(Action::AwaitChange)
            }
            Verdict::Silent(again) => Ok(Action::RequeueAfter(again)),
            Verdict::Lost => {
                if self.lost().insert(name.to_owned()) {
                    tracing::warn!(
                        node = name,
                        "a node is lost; what the scheduler placed there is placed again"
                    );
                }
                // Again each resync: something placed there meanwhile (by an author's pin to a
                // lost node) is looked at too.
                self.lose(name).await?;
                Ok(Action::RequeueAfter(self.inner.config.lost_timeout))
            }
        }
    }
}

impl NodeServer {
    /// The node-loss loop; run it elected, on one replica at a time.
    pub fn loss_loop(&self) -> Loop {
        let inner = &self.inner;
        let client = inner.control.client(controller_identity("node-lifecycle"));
        let recorder = Recorder::new(client.clone(), "kayra-runtime-lifecycle");
        let source = ResourceFeed::objects(client.clone(), inner.nodes.clone());
        let loss = Loss { inner: inner.clone(), client, recorder, lost: Mutex::default() };
        Loop::new("node-loss", loss).source(source).concurrency(2)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_is_lost_once_unknown_for_longer_than_the_timeout() {
        let now: jiff::Timestamp = "2026-01-01T00:10:00Z".parse().expect("a time");
        let timeout = Duration::from_secs(300);
        let ready = |status: &str, since: &str| json!({"type": "Ready", "status": status, "lastTransitionTime": since});
        assert_eq!(verdict(None, now, timeout), Verdict::Present, "never reported");
        assert_eq!(verdict(Some(&ready("True", "2026-01-01T00:00:00Z")), now, timeout), Verdict::Present);
        assert_eq!(
            verdict(Some(&ready("False", "2026-01-01T00:00:00Z")), now, timeout),
            Verdict::Present,
            "a node that says it is not ready is heard from, not lost"
        );
        assert_eq!(
            verdict(Some(&ready("Unknown", "2026-01-01T00:08:00Z")), now, timeout),
            Verdict::Silent(Duration::from_secs(181))
        );
        assert_eq!(verdict(Some(&ready("Unknown", "2026-01-01T00:05:00Z")), now, timeout), Verdict::Lost);
        assert_eq!(
            verdict(Some(&json!({"type": "Ready", "status": "Unknown"})), now, timeout),
            Verdict::Lost
        );
    }
}
