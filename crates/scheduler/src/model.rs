//! What the scheduler reads of Nodes and Applications, decoded once when the store says they
//! changed: names, labels, capacity, taints, readiness; requests, rules and priority.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Taint, Toleration};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kayra_api::kinds::application::{Affinity, Placement, SCHEDULER, scheduled_by_annotation};
use kayra_api::kinds::{Condition, ConditionType};
use kayra_api::quantity::Quantity;
use kayra_registry::Object;
use serde::Deserialize;

/// CPU in millicores and memory in bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Resources {
    /// Millicores.
    pub cpu: i64,
    /// Bytes.
    pub memory: i64,
}

impl Resources {
    /// The sum of two amounts.
    pub fn plus(self, other: Resources) -> Resources {
        Resources { cpu: self.cpu + other.cpu, memory: self.memory + other.memory }
    }

    /// The difference of two amounts.
    pub fn minus(self, other: Resources) -> Resources {
        Resources { cpu: self.cpu - other.cpu, memory: self.memory - other.memory }
    }
}

/// What kube-scheduler counts for an Application that requests no CPU when it scores a node
/// (never when it checks fit): 100 millicores.
pub const DEFAULT_CPU_REQUEST: i64 = 100;
/// What kube-scheduler counts for an Application that requests no memory when it scores a
/// node: 200 MiB.
pub const DEFAULT_MEMORY_REQUEST: i64 = 200 * 1024 * 1024;

/// Whether a node answers: the `Ready` condition, as the node's liveness sets it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Readiness {
    /// `Ready=True`.
    Ready,
    /// `Ready=False`: the node answers and says it cannot run work.
    NotReady,
    /// `Ready=Unknown`, or no condition: the node is not heard from.
    Unknown,
}

/// A Node as the scheduler sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeInfo {
    /// The Node's name.
    pub name: String,
    /// Its labels.
    pub labels: BTreeMap<String, String>,
    /// Cordoned (`spec.unschedulable`).
    pub unschedulable: bool,
    /// Its taints.
    pub taints: Vec<Taint>,
    /// What it offers to Applications (`status.allocatable`); a resource it does not list is 0.
    pub allocatable: Resources,
    /// Its `Ready` condition.
    pub readiness: Readiness,
    /// When the node was last heard from (`Ready`'s `lastHeartbeatTime`).
    pub heartbeat: Option<jiff::Timestamp>,
}

impl NodeInfo {
    /// A ready, untainted node with `allocatable` and `labels`.
    pub fn new(name: &str, allocatable: Resources, labels: &[(&str, &str)]) -> NodeInfo {
        NodeInfo {
            name: name.to_owned(),
            labels: labels.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect(),
            unschedulable: false,
            taints: Vec::new(),
            allocatable,
            readiness: Readiness::Ready,
            heartbeat: None,
        }
    }

    /// Decodes a stored Node; `None` when it does not decode.
    pub fn from_object(object: &Object) -> Option<NodeInfo> {
        let node = Node::deserialize(object).ok()?;
        let name = node.metadata.name.clone().unwrap_or_default();
        let spec = node.spec.unwrap_or_default();
        let status = node.status.unwrap_or_default();
        let allocatable = status.allocatable.as_ref().map_or_else(Resources::default, |list| Resources {
            cpu: list.get("cpu").map_or(0, |q| millicores(&q.0)),
            memory: list.get("memory").map_or(0, |q| bytes(&q.0)),
        });
        let ready = status.conditions.iter().flatten().find(|c| c.type_ == ConditionType::Ready.as_str());
        let readiness = match ready.map(|c| c.status.as_str()) {
            Some("True") => Readiness::Ready,
            Some("False") => Readiness::NotReady,
            _ => Readiness::Unknown,
        };
        Some(NodeInfo {
            name,
            labels: node.metadata.labels.unwrap_or_default(),
            unschedulable: spec.unschedulable.unwrap_or(false),
            taints: spec.taints.unwrap_or_default(),
            allocatable,
            readiness,
            heartbeat: ready.and_then(|c| c.last_heartbeat_time.as_ref()).map(|time| time.0),
        })
    }

    /// The node's value of a topology key: its label, or for `kubernetes.io/hostname` on a
    /// node without that label, its name.
    pub fn topology(&self, key: &str) -> Option<&str> {
        match self.labels.get(key) {
            Some(value) => Some(value),
            None if key == HOSTNAME => Some(&self.name),
            None => None,
        }
    }

    /// Whether a change from `self` to `new` may let an Application that did not fit fit now. A
    /// heartbeat alone does not, unless it ends a silence longer than `heartbeat_timeout` (the
    /// node counted as unreachable meanwhile, and is back).
    pub fn relevant_change(&self, new: &NodeInfo, heartbeat_timeout: Option<Duration>) -> bool {
        let silence_ended = match (heartbeat_timeout, self.heartbeat, new.heartbeat) {
            (Some(timeout), Some(old), Some(new)) => {
                new.duration_since(old).as_secs_f64() > timeout.as_secs_f64()
            }
            _ => false,
        };
        self.labels != new.labels
            || self.unschedulable != new.unschedulable
            || self.taints != new.taints
            || self.allocatable != new.allocatable
            || self.readiness != new.readiness
            || silence_ended
    }
}

/// The well-known label naming a node's host, the usual `topologyKey` for one per node.
pub const HOSTNAME: &str = "kubernetes.io/hostname";

fn millicores(text: &str) -> i64 {
    Quantity::parse(text).map_or(0, |q| (q.value() * 1000.0).ceil() as i64)
}

fn bytes(text: &str) -> i64 {
    Quantity::parse(text).map_or(0, |q| q.value().ceil() as i64)
}

/// An Application as the scheduler sees it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AppInfo {
    /// `namespace/name`.
    pub id: String,
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// Its uid.
    pub uid: String,
    /// The version it was read at.
    pub resource_version: String,
    /// Its `metadata.generation`: a change of spec, as opposed to one of status.
    pub generation: i64,
    /// When it was created (RFC 3339), the tie-break between equal priorities.
    pub created: String,
    /// Its labels.
    pub labels: BTreeMap<String, String>,
    /// What it requests: an unset request is 0 here.
    pub requests: Resources,
    /// Labels a node must carry.
    pub node_selector: BTreeMap<String, String>,
    /// Its affinity rules.
    pub affinity: Affinity,
    /// The taints it tolerates.
    pub tolerations: Vec<Toleration>,
    /// Its priority (default 0).
    pub priority: i64,
    /// The node it is bound to.
    pub node: Option<String>,
    /// Whether the scheduler bound it (the scheduled-by annotation), as opposed to its author.
    pub scheduler_placed: bool,
    /// Whether its process is done for good (`Succeeded` or `Failed`): it holds nothing.
    pub finished: bool,
    /// Whether it is being deleted.
    pub deleting: bool,
    /// The message of its `Scheduled=False` condition, if it has one (to tell a changed
    /// explanation).
    pub scheduled_message: Option<String>,
}

impl AppInfo {
    /// An Application named `namespace/name` with nothing set.
    pub fn new(namespace: &str, name: &str) -> AppInfo {
        AppInfo {
            id: format!("{namespace}/{name}"),
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            ..AppInfo::default()
        }
    }

    /// Decodes a stored Application of a deployment whose domain is `domain`: only what the
    /// scheduler reads (`Scheduling`), so a relist of many Applications does not decode
    /// their commands, environments and managed fields.
    pub fn from_object(object: &Object, domain: &str) -> Option<AppInfo> {
        Scheduling::deserialize(object).ok().map(|app| app.info(domain))
    }

    /// Whether it waits for a node: no node, not finished, not being deleted.
    pub fn wants_placement(&self) -> bool {
        self.node.is_none() && !self.finished && !self.deleting
    }

    /// What it counts for when a node is scored: unset requests count as kube-scheduler's
    /// defaults.
    pub fn scoring_requests(&self) -> Resources {
        Resources {
            cpu: if self.requests.cpu == 0 { DEFAULT_CPU_REQUEST } else { self.requests.cpu },
            memory: if self.requests.memory == 0 { DEFAULT_MEMORY_REQUEST } else { self.requests.memory },
        }
    }
}

/// A shared, decoded Application.
pub type App = Arc<AppInfo>;

/// What the scheduler reads of a stored Application, in the shape of
/// [`Application`](kayra_api::kinds::application::Application)'s own
/// fields; every other field is skipped.
#[derive(Deserialize)]
struct Scheduling {
    #[serde(default)]
    metadata: SchedulingMetadata,
    #[serde(default)]
    spec: SchedulingSpec,
    #[serde(default)]
    status: Option<SchedulingStatus>,
}

impl Scheduling {
    /// The Application as the scheduler sees it, in a deployment whose domain is `domain`.
    fn info(self, domain: &str) -> AppInfo {
        let metadata = self.metadata;
        let placement = self.spec.placement.unwrap_or_default();
        let node = placement.node_name.filter(|node| !node.is_empty());
        let requests = self.spec.resources.and_then(|r| r.requests).unwrap_or_default();
        let annotations = metadata.annotations.unwrap_or_default();
        let status = self.status.unwrap_or_default();
        let namespace = metadata.namespace.unwrap_or_default();
        let name = metadata.name.unwrap_or_default();
        AppInfo {
            id: format!("{namespace}/{name}"),
            namespace,
            name,
            uid: metadata.uid.unwrap_or_default(),
            resource_version: metadata.resource_version.unwrap_or_default(),
            generation: metadata.generation.unwrap_or_default(),
            created: metadata.creation_timestamp.map(|t| t.0.to_string()).unwrap_or_default(),
            labels: metadata.labels.unwrap_or_default(),
            requests: Resources {
                cpu: requests.cpu.as_deref().map_or(0, millicores),
                memory: requests.memory.as_deref().map_or(0, bytes),
            },
            node_selector: placement.node_selector,
            affinity: placement.affinity.unwrap_or_default(),
            tolerations: placement.tolerations,
            priority: placement.priority.unwrap_or(0),
            node,
            scheduler_placed: annotations.get(&scheduled_by_annotation(domain)).map(String::as_str)
                == Some(SCHEDULER),
            finished: matches!(status.phase.as_deref(), Some("Succeeded" | "Failed")),
            deleting: metadata.deletion_timestamp.is_some(),
            scheduled_message: status
                .conditions
                .iter()
                .find(|c| c.type_ == ConditionType::Scheduled.as_str() && c.status == "False")
                .map(|c| c.message.clone().unwrap_or_default()),
        }
    }
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct SchedulingMetadata {
    namespace: Option<String>,
    name: Option<String>,
    uid: Option<String>,
    resource_version: Option<String>,
    generation: Option<i64>,
    creation_timestamp: Option<Time>,
    deletion_timestamp: Option<Time>,
    labels: Option<BTreeMap<String, String>>,
    annotations: Option<BTreeMap<String, String>>,
}

#[derive(Default, Deserialize)]
struct SchedulingSpec {
    resources: Option<kayra_api::kinds::application::Resources>,
    placement: Option<Placement>,
}

#[derive(Default, Deserialize)]
struct SchedulingStatus {
    phase: Option<String>,
    #[serde(default)]
    conditions: Vec<Condition>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The Application as the whole typed Kind decodes it: what the scheduler's narrower
    /// decode must agree with.
    fn decoded_whole(object: &Object, domain: &str) -> Option<AppInfo> {
        let app = kayra_api::kinds::application::Application::deserialize(object).ok()?;
        let metadata = app.metadata;
        let scheduling = Scheduling {
            metadata: SchedulingMetadata {
                namespace: metadata.namespace,
                name: metadata.name,
                uid: metadata.uid,
                resource_version: metadata.resource_version,
                generation: metadata.generation,
                creation_timestamp: metadata.creation_timestamp,
                deletion_timestamp: metadata.deletion_timestamp,
                labels: metadata.labels,
                annotations: metadata.annotations,
            },
            spec: SchedulingSpec { resources: app.spec.resources, placement: app.spec.placement },
            status: app
                .status
                .map(|status| SchedulingStatus { phase: status.phase, conditions: status.conditions }),
        };
        Some(scheduling.info(domain))
    }

    #[test]
    fn the_scheduler_decodes_what_the_whole_kind_would() {
        let domain = "example.com";
        let annotation = scheduled_by_annotation(domain);
        let objects = [
            serde_json::json!({
                "apiVersion": "fleet.example.com/v1", "kind": "Application",
                "metadata": {
                    "name": "web", "namespace": "shop", "uid": "u-1", "resourceVersion": "42", "generation": 3,
                    "creationTimestamp": "2026-01-02T03:04:05Z", "labels": {"app": "web", "tier": "front"},
                    "annotations": {annotation.clone(): SCHEDULER, "note": "x"},
                    "managedFields": [{"manager": "kubectl", "operation": "Update", "apiVersion": "fleet.example.com/v1",
                                       "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:command": {}}}}],
                },
                "spec": {
                    "command": ["/bin/sleep", "60"], "env": [{"name": "A", "value": "b"}],
                    "resources": {"requests": {"cpu": "250m", "memory": "64Mi"}, "limits": {"cpu": "1"}},
                    "placement": {
                        "nodeName": "n1", "nodeSelector": {"zone": "a"}, "priority": 7,
                        "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
                        "affinity": {"workloadAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                            {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "kubernetes.io/hostname"}]}},
                    },
                },
                "status": {"phase": "Running", "conditions": [{"type": "Scheduled", "status": "True", "lastTransitionTime": "2026-01-02T03:04:06Z"}]},
            }),
            serde_json::json!({
                "metadata": {"name": "waits", "namespace": "shop", "deletionTimestamp": "2026-01-02T03:04:07Z",
                             "annotations": {annotation: "someone-else"}},
                "spec": {"command": ["/bin/true"], "placement": {"nodeName": ""}},
                "status": {"phase": "Pending", "conditions": [
                    {"type": "Ready", "status": "False", "lastTransitionTime": "2026-01-02T03:04:06Z"},
                    {"type": "Scheduled", "status": "False", "reason": "Unschedulable", "message": "0/3 nodes are available",
                     "lastTransitionTime": "2026-01-02T03:04:06Z"}]},
            }),
            serde_json::json!({"metadata": {"name": "done", "namespace": "jobs"}, "spec": {"command": ["/bin/true"]},
                               "status": {"phase": "Succeeded"}}),
            serde_json::json!({"metadata": {"name": "bare"}}),
            serde_json::json!({"metadata": {"name": "odd", "labels": "not a map"}}),
        ];
        let decoded: Vec<bool> = objects
            .iter()
            .map(|object| {
                let object = object.as_object().expect("an object");
                let decoded = AppInfo::from_object(object, domain);
                assert_eq!(decoded, decoded_whole(object, domain), "{object:?}");
                decoded.is_some()
            })
            .collect();
        assert_eq!(decoded, [true, true, true, true, false], "only labels that are no map fail to decode");
    }

    #[test]
    fn a_change_is_relevant_when_it_may_let_something_fit() {
        fn at(time: &str) -> Option<jiff::Timestamp> {
            Some(time.parse().expect("a time"))
        }
        let before = || {
            let mut node = NodeInfo::new("n1", Resources { cpu: 1000, memory: 1 << 30 }, &[("zone", "a")]);
            node.heartbeat = at("2026-01-01T00:00:00Z");
            node
        };
        let timeout = Some(Duration::from_secs(40));
        type Case = (&'static str, fn(&mut NodeInfo), Option<Duration>, bool);
        let cases: [Case; 8] = [
            ("a heartbeat on time", |n| n.heartbeat = at("2026-01-01T00:00:10Z"), timeout, false),
            ("a heartbeat after a silence", |n| n.heartbeat = at("2026-01-01T00:01:00Z"), timeout, true),
            ("a silence with no timeout", |n| n.heartbeat = at("2026-01-01T00:01:00Z"), None, false),
            ("labels", |n| drop(n.labels.insert("zone".into(), "b".into())), timeout, true),
            ("uncordoned", |n| n.unschedulable = !n.unschedulable, timeout, true),
            ("capacity", |n| n.allocatable.memory *= 2, timeout, true),
            ("no longer heard from", |n| n.readiness = Readiness::Unknown, timeout, true),
            ("nothing", |_| {}, timeout, false),
        ];
        for (case, change, timeout, relevant) in cases {
            let mut new = before();
            change(&mut new);
            assert_eq!(before().relevant_change(&new, timeout), relevant, "{case}");
        }
        let mut not_ready = before();
        not_ready.readiness = Readiness::NotReady;
        assert!(not_ready.relevant_change(&before(), timeout), "NotReady to Ready");
        let mut unheard = before();
        unheard.heartbeat = None;
        assert!(!unheard.relevant_change(&before(), timeout), "a first heartbeat");
    }
}
