//! Writing what a node reports: its own Node's status and its Applications' statuses, through
//! the status subresource under the node's own identity, so the application layer's
//! authorization and node restriction apply as they would to the node's REST requests.

use std::time::Instant;

use kayra_api::kinds::{Condition, ConditionType};
use kayra_api::session::{ApplicationReport, NodeReport};
use kayra_registry::{Object, RegistryError, meta_str};
use serde_json::{Value, json};

use crate::session::Live;
use crate::{Inner, NodeServerError};

/// The last node status written in a session: a digest of what it said (less the heartbeat;
/// the status itself is some 4 KiB decoded, kept per session) and when.
#[derive(Debug, Clone)]
pub(crate) struct Written {
    digest: [u8; 32],
    at: Instant,
}

fn digest(content: &Value) -> [u8; 32] {
    let bytes = serde_json::to_vec(content).expect("JSON values serialise");
    let mut digest = [0; 32];
    digest.copy_from_slice(ring::digest::digest(&ring::digest::SHA256, &bytes).as_ref());
    digest
}

/// How many times a status write is retried after a conflict with a concurrent writer.
const CONFLICT_RETRIES: usize = 3;

pub(crate) fn now() -> String {
    jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// The node's status as reported, less what the controller stamps.
fn reported_status(report: &NodeReport) -> Value {
    let addresses: Vec<Value> =
        report.addresses.iter().map(|(type_, address)| json!({"type": type_, "address": address})).collect();
    let info = &report.info;
    json!({
        "capacity": report.capacity,
        "allocatable": report.allocatable,
        "addresses": addresses,
        "nodeInfo": {
            "operatingSystem": info.operating_system,
            "architecture": info.architecture,
            "osImage": info.os_image,
            "kernelVersion": info.kernel_version,
            "kubeletVersion": info.agent_version,
            "kubeProxyVersion": "",
            "containerRuntimeVersion": "",
            "machineID": info.machine_id,
            "systemUUID": "",
            "bootID": info.boot_id,
        },
        "conditions": report.conditions.iter().filter(|c| c.type_ != ConditionType::Ready.as_str()).collect::<Vec<_>>(),
    })
}

/// The Ready condition for a node heard from now, keeping when it last turned true.
fn ready_condition(stored: Option<&Value>, now: &str) -> Value {
    let since = stored
        .filter(|ready| ready.get("status").and_then(Value::as_str) == Some("True"))
        .and_then(|ready| ready.get("lastTransitionTime"))
        .and_then(Value::as_str)
        .unwrap_or(now);
    json!({
        "type": ConditionType::Ready.as_str(), "status": "True", "reason": "KayraAgentReady",
        "message": "kayra-agent is posting ready status",
        "lastHeartbeatTime": now, "lastTransitionTime": since,
    })
}

/// Writes node `live.node`'s status from `report`, stamping the heartbeat with the controller's
/// clock, and renews its Lease ([`crate::lease`]), which carries the heartbeat between status
/// writes. The status is written when it changed, when the stored Node is not `Ready=True`
/// (marked `Unknown`, or never reported), on the session's first report, and otherwise every
/// `status_report` (kubelet's `nodeStatusReportFrequency`). A missing Node is registered
/// ([`crate::registration`]): as the node asks on its first registration, cordoned when it was
/// deleted after one.
pub(crate) async fn write_node(
    inner: &Inner,
    live: &Live,
    report: NodeReport,
) -> Result<(), NodeServerError> {
    let content = reported_status(&report);
    let reported = digest(&content);
    let due = {
        let written = live.written.lock().expect("the status record's lock is never held across a panic");
        match written.as_ref() {
            Some(written) => {
                written.digest != reported
                    || written.at.elapsed() >= inner.config.status_report
                    || !inner.cache.node_ready(&live.node)
            }
            None => true,
        }
    };
    if !due {
        return crate::lease::renew(inner, live, None).await;
    }
    let client = inner.client_for(live.identity.clone());
    let node = live.node.as_str();
    let mut attempt = 0;
    let stored = loop {
        let mut object = match inner.reader.get(&inner.nodes, None, node).await {
            Ok(object) => {
                // A heartbeat is not held up by the record: without it, a Node deleted later
                // would be re-created as a first registration, but nodes stay Ready meanwhile.
                if let Err(error) = crate::registration::ensure_recorded(inner, live).await {
                    tracing::warn!(node, %error, "the node's registration is not recorded yet; tried again at its next status");
                }
                object
            }
            Err(RegistryError::NotFound { .. }) => {
                // Labelled as kubelet labels its Node; a label's value holds at most 63
                // characters, so a longer name is labelled with its first label, the host's
                // short name.
                let hostname = match node.len() <= 63 {
                    true => node,
                    false => node.split('.').next().unwrap_or(node),
                };
                let labels = json!({
                    "kubernetes.io/hostname": hostname,
                    "kubernetes.io/os": report.info.operating_system,
                    "kubernetes.io/arch": report.info.architecture,
                });
                crate::registration::register(inner, live, &report.registration, labels).await?
            }
            Err(source) => {
                return Err(NodeServerError::Registry { what: format!("reading node {node}"), source });
            }
        };
        let now = now();
        let stored_ready = object
            .get("status")
            .and_then(|status| status.get("conditions"))
            .and_then(Value::as_array)
            .and_then(|conditions| {
                conditions
                    .iter()
                    .find(|c| c.get("type").and_then(Value::as_str) == Some(ConditionType::Ready.as_str()))
            })
            .cloned();
        let mut status = content.clone();
        if let Some(conditions) = status.get_mut("conditions").and_then(Value::as_array_mut) {
            conditions.insert(0, ready_condition(stored_ready.as_ref(), &now));
            for condition in conditions.iter_mut().skip(1) {
                condition["lastHeartbeatTime"] = json!(now);
            }
        }
        object.insert("status".into(), status);
        match client.update_status(&inner.nodes, None, node, &object).await {
            Ok(stored) => break stored,
            Err(RegistryError::Conflict { .. }) if attempt < CONFLICT_RETRIES => attempt += 1,
            Err(source) => {
                return Err(NodeServerError::Registry {
                    what: format!("writing node {node}'s status"),
                    source,
                });
            }
        }
    };
    *live.written.lock().expect("the status record's lock is never held across a panic") =
        Some(Written { digest: reported, at: Instant::now() });
    crate::lease::renew(inner, live, Some(&stored)).await
}

/// Writes one Application's status as its node reported it. Only an Application bound to the
/// session's node, with the uid the node was given, is written; the `Scheduled` condition stays
/// the scheduler's.
pub(crate) async fn write_application(
    inner: &Inner,
    live: &Live,
    report: ApplicationReport,
) -> Result<(), NodeServerError> {
    let client = inner.client_for(live.identity.clone());
    let (namespace, name) = (report.namespace.as_str(), report.name.as_str());
    let mut attempt = 0;
    loop {
        let mut object = match inner.reader.get(&inner.applications, Some(namespace), name).await {
            Ok(object) => object,
            Err(RegistryError::NotFound { .. }) => return Ok(()),
            Err(source) => {
                let what = format!("reading application {namespace}/{name}");
                return Err(NodeServerError::Registry { what, source });
            }
        };
        if kayra_api::kinds::application::bound_node(&object) != Some(live.node.as_str()) {
            return Err(NodeServerError::NotBoundHere {
                namespace: namespace.to_owned(),
                name: name.to_owned(),
                node: live.node.clone(),
            });
        }
        if meta_str(&object, "uid") != report.uid {
            return Ok(());
        }
        let status = merged_status(&object, &report);
        if object.get("status") == Some(&status) {
            return Ok(());
        }
        object.insert("status".into(), status);
        match client.update_status(&inner.applications, Some(namespace), name, &object).await {
            Ok(_) => return Ok(()),
            Err(RegistryError::Conflict { .. }) if attempt < CONFLICT_RETRIES => attempt += 1,
            Err(source) => {
                let what = format!("writing application {namespace}/{name}'s status");
                return Err(NodeServerError::Registry { what, source });
            }
        }
    }
}

/// The status to store: the node's report whole, with the stored `Scheduled` condition kept.
fn merged_status(object: &Object, report: &ApplicationReport) -> Value {
    let mut status = report.status.clone();
    status.conditions.retain(|condition| condition.type_ != ConditionType::Scheduled.as_str());
    let scheduled: Option<Condition> = object
        .get("status")
        .and_then(|status| status.get("conditions"))
        .and_then(Value::as_array)
        .and_then(|conditions| {
            conditions
                .iter()
                .find(|c| c.get("type").and_then(Value::as_str) == Some(ConditionType::Scheduled.as_str()))
        })
        .and_then(|condition| serde_json::from_value(condition.clone()).ok());
    if let Some(scheduled) = scheduled {
        status.conditions.insert(0, scheduled);
    }
    serde_json::to_value(status).unwrap_or(Value::Null)
}

#[cfg(test)]
mod tests;
