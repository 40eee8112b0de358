//! Placement of Applications that name no node. This placer binds such an Application to the
//! fleet's only schedulable node (cordoned and not-Ready nodes are not schedulable), so a
//! fleet of one — the controller's own local node — runs what it is given with no pinning.
//! With no schedulable node, or several, the Application stays `Pending` with condition
//! `Scheduled=False` saying why, and is looked at again as nodes come and go.
//!
//! A bound Application stays where it is: placement is decided once (as Kubernetes'
//! `IgnoredDuringExecution`), and a pin its author wrote is never changed.

use std::time::Duration;

use kayra_control::client::Client;
use kayra_control::events::{Involved, Recorder, Severity};
use kayra_control::feed::ResourceFeed;
use kayra_loop::runtime::Loop;
use kayra_loop::{Action, Key, ReconcileError, Reconciler};
use kayra_registry::{Object, PatchKind, RegistryError, Resource, meta_str};
use serde_json::{Value, json};

/// How soon an Application that could not be placed is looked at again.
const RETRY: Duration = Duration::from_secs(5);

/// Places Applications that name no node.
#[derive(Debug)]
pub struct Placer {
    client: Client,
    applications: Resource,
    nodes: Resource,
    recorder: Recorder,
}

/// What the fleet offers an Application that names no node.
#[derive(Debug, PartialEq, Eq)]
pub enum Placement {
    /// Bind it to this node.
    Bind(String),
    /// Leave it pending, for this reason.
    Pending(String),
}

/// Whether a Node may receive new work: not cordoned, and Ready.
pub fn schedulable(node: &Object) -> bool {
    let cordoned =
        node.get("spec").and_then(|spec| spec.get("unschedulable")).and_then(Value::as_bool) == Some(true);
    let ready = node
        .get("status")
        .and_then(|status| status.get("conditions"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .any(|c| {
            c.get("type").and_then(Value::as_str) == Some("Ready")
                && c.get("status").and_then(Value::as_str) == Some("True")
        });
    !cordoned && ready
}

/// Decides where an Application that names no node goes, given every Node.
pub fn place(nodes: &[Object]) -> Placement {
    let candidates: Vec<&str> =
        nodes.iter().filter(|node| schedulable(node)).map(|node| meta_str(node, "name")).collect();
    match candidates.as_slice() {
        [only] => Placement::Bind((*only).to_owned()),
        [] => {
            let cordoned = nodes
                .iter()
                .filter(|node| {
                    node.get("spec").and_then(|s| s.get("unschedulable")).and_then(Value::as_bool)
                        == Some(true)
                })
                .count();
            let not_ready = nodes.len() - cordoned;
            Placement::Pending(format!(
                "0/{} nodes are available: {cordoned} node(s) were cordoned, {not_ready} node(s) were not ready.",
                nodes.len()
            ))
        }
        several => Placement::Pending(format!(
            "{} nodes are schedulable and this controller binds an Application that names no node only \
             while exactly one is; set spec.placement.nodeName to choose one",
            several.len()
        )),
    }
}

impl Placer {
    /// The placer, acting as `client`.
    pub fn new(client: Client) -> Result<Placer, RegistryError> {
        let fleet = format!("fleet.{}", client.control().scheme().domain());
        let applications = client.resource(&fleet, "applications")?;
        let nodes = client.resource("", "nodes")?;
        let recorder = Recorder::new(client.clone(), "kayra-scheduler");
        Ok(Placer { client, applications, nodes, recorder })
    }

    /// The loop: one key per Application.
    pub fn into_loop(self) -> Loop {
        let source = ResourceFeed::objects(self.client.clone(), self.applications.clone());
        Loop::new("placement", self).source(source).concurrency(2)
    }

    fn involved(&self, application: &Object) -> Involved {
        let (namespace, name) = (meta_str(application, "namespace"), meta_str(application, "name"));
        Involved {
            api_version: format!("{}/{}", self.applications.group, self.applications.version),
            kind: "Application".into(),
            namespace: namespace.into(),
            name: name.into(),
            uid: meta_str(application, "uid").into(),
        }
    }

    /// Sets condition `Scheduled` (and phase `Pending` on an Application with none); writes only
    /// a change.
    async fn scheduled(
        &self,
        mut application: Object,
        status: &str,
        reason: &str,
        message: &str,
    ) -> Result<bool, RegistryError> {
        let (namespace, name) =
            (meta_str(&application, "namespace").to_owned(), meta_str(&application, "name").to_owned());
        let mut current = application.get("status").cloned().unwrap_or_else(|| json!({}));
        let conditions = current.get("conditions").and_then(Value::as_array).cloned().unwrap_or_default();
        let existing = conditions.iter().find(|c| c.get("type").and_then(Value::as_str) == Some("Scheduled"));
        if existing.is_some_and(|c| c["status"] == status && c["reason"] == reason && c["message"] == message)
        {
            return Ok(false);
        }
        let now = jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string();
        let since = match existing {
            Some(c) if c["status"] == status => c["lastTransitionTime"].clone(),
            _ => json!(now),
        };
        let condition = json!({"type": "Scheduled", "status": status, "reason": reason, "message": message, "lastTransitionTime": since});
        let mut conditions: Vec<Value> = conditions
            .into_iter()
            .filter(|c| c.get("type").and_then(Value::as_str) != Some("Scheduled"))
            .collect();
        conditions.insert(0, condition);
        current["conditions"] = json!(conditions);
        if current.get("phase").is_none() {
            current["phase"] = json!("Pending");
        }
        if status == "False" {
            current["message"] = json!(message);
        }
        application.insert("status".into(), current);
        self.client.update_status(&self.applications, Some(&namespace), &name, &application).await?;
        Ok(true)
    }
}

#[async_trait::async_trait]
impl Reconciler for Placer {
    async fn reconcile(&self, key: &Key) -> Result<Action, ReconcileError> {
        let (namespace, name) = (key.namespace().unwrap_or_default(), key.name());
        let application = match self.client.get(&self.applications, Some(namespace), name).await {
            Ok(application) => application,
            Err(RegistryError::NotFound { .. }) => return Ok(Action::AwaitChange),
            Err(error) => return Err(error.into()),
        };
        let bound = application
            .get("spec")
            .and_then(|spec| spec.pointer("/placement/nodeName"))
            .and_then(Value::as_str)
            .filter(|node| !node.is_empty());
        if bound.is_some() || !meta_str(&application, "deletionTimestamp").is_empty() {
            return Ok(Action::AwaitChange);
        }
        let nodes = self.client.list_all(&self.nodes, None).await?;
        match place(&nodes) {
            Placement::Bind(node) => {
                let patch = json!({
                    "metadata": {"resourceVersion": meta_str(&application, "resourceVersion"), "annotations": {format!("fleet.{}/scheduled-by", self.client.control().scheme().domain()): "kayra-scheduler"}},
                    "spec": {"placement": {"nodeName": node}},
                });
                let bound = match self
                    .client
                    .patch(&self.applications, Some(namespace), name, PatchKind::Merge, &patch)
                    .await
                {
                    Ok(bound) => bound,
                    // Changed meanwhile: the change queues it again.
                    Err(RegistryError::Conflict { .. } | RegistryError::NotFound { .. }) => {
                        return Ok(Action::AwaitChange);
                    }
                    Err(error) => return Err(error.into()),
                };
                let message = format!("Successfully assigned {namespace}/{name} to {node}");
                let involved = self.involved(&bound);
                self.scheduled(bound, "True", "Scheduled", &message).await?;
                if let Err(error) =
                    self.recorder.record(&involved, Severity::Normal, "Scheduled", &message).await
                {
                    tracing::debug!(%error, "the Scheduled event was not recorded");
                }
                Ok(Action::AwaitChange)
            }
            Placement::Pending(message) => {
                let involved = self.involved(&application);
                if self.scheduled(application, "False", "Unschedulable", &message).await?
                    && let Err(error) =
                        self.recorder.record(&involved, Severity::Warning, "FailedScheduling", &message).await
                {
                    tracing::debug!(%error, "the FailedScheduling event was not recorded");
                }
                Ok(Action::RequeueAfter(RETRY))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, cordoned: bool, ready: &str) -> Object {
        match json!({"metadata": {"name": name}, "spec": {"unschedulable": cordoned},
                     "status": {"conditions": [{"type": "Ready", "status": ready}]}})
        {
            Value::Object(object) => object,
            _ => unreachable!("an object"),
        }
    }

    #[test]
    fn the_only_schedulable_node_gets_the_application() {
        assert_eq!(place(&[node("a", false, "True")]), Placement::Bind("a".into()));
        assert_eq!(
            place(&[node("a", true, "True"), node("b", false, "True"), node("c", false, "Unknown")]),
            Placement::Bind("b".into())
        );
        assert_eq!(
            place(&[node("a", true, "True"), node("c", false, "Unknown")]),
            Placement::Pending(
                "0/2 nodes are available: 1 node(s) were cordoned, 1 node(s) were not ready.".into()
            )
        );
        assert_eq!(
            place(&[]),
            Placement::Pending(
                "0/0 nodes are available: 0 node(s) were cordoned, 0 node(s) were not ready.".into()
            )
        );
        let Placement::Pending(several) = place(&[node("a", false, "True"), node("b", false, "True")]) else {
            panic!("two schedulable nodes are not one")
        };
        assert!(
            several.contains("2 nodes are schedulable") && several.contains("spec.placement.nodeName"),
            "{several}"
        );
    }
}
