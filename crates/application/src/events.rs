//! Events: what the loops tell operators about the objects they work on, as core `v1` Events
//! (`kubectl get events`, `kubectl describe`).

use kayra_api::kinds::core::EventType;
use kayra_registry::RegistryError;
use serde_json::json;

use crate::client::Client;

/// The object an Event is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Involved {
    /// Its `apiVersion`.
    pub api_version: String,
    /// Its Kind.
    pub kind: String,
    /// Its namespace; empty for a cluster-scoped object.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// Its uid, when known: `kubectl describe` finds an object's Events by it.
    pub uid: String,
}

/// Whether an Event is routine or something an operator should look at: its `type`, as the
/// recorder's callers name it.
pub type Severity = EventType;

/// Writes Events as one component of the control plane.
#[derive(Debug, Clone)]
pub struct Recorder {
    client: Client,
    component: String,
    host: Option<String>,
}

impl Recorder {
    /// A recorder writing through `client`, naming `component` as the Events' source.
    pub fn new(client: Client, component: impl Into<String>) -> Recorder {
        Recorder { client, component: component.into(), host: None }
    }

    /// A recorder for what `component` on node `host` reports, as kubelet records its Events
    /// (`source.host`): an Event about an Application is then also one about its Pod there.
    pub fn on_node(client: Client, component: impl Into<String>, host: impl Into<String>) -> Recorder {
        Recorder { client, component: component.into(), host: Some(host.into()) }
    }

    /// Records one Event about `involved`, in its namespace (`default` for cluster-scoped
    /// objects, as Kubernetes does).
    pub async fn record(
        &self,
        involved: &Involved,
        severity: Severity,
        reason: &str,
        message: &str,
    ) -> Result<(), RegistryError> {
        let resource = self.client.resource("", "events")?;
        let namespace = if involved.namespace.is_empty() { "default" } else { involved.namespace.as_str() };
        let now = jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string();
        let event = json!({
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"generateName": format!("{}.", involved.name), "namespace": namespace},
            "involvedObject": {
                "apiVersion": involved.api_version, "kind": involved.kind,
                "name": involved.name, "namespace": involved.namespace,
            },
            "reason": reason, "message": message,
            "type": severity.as_str(),
            "source": {"component": self.component},
            "firstTimestamp": now, "lastTimestamp": now, "count": 1,
        });
        let mut event = event;
        if !involved.uid.is_empty() {
            event["involvedObject"]["uid"] = json!(involved.uid);
        }
        if let Some(host) = &self.host {
            event["source"]["host"] = json!(host);
        }
        self.client.create(&resource, Some(namespace), event).await.map(|_| ())
    }
}
