//! What workloads and nodes consume, read from the usage samples their nodes report: the
//! `metrics.k8s.io/v1beta1` NodeMetrics and PodMetrics that `kubectl top` reads, in the shapes
//! kube's metrics-server serves, and the `ApplicationMetrics` an Application's `metrics`
//! subresource answers. None of them is stored: the samples live in memory beside the node's
//! session, and these shapes are built from them on every read.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::Kind;
use crate::scheme::{KindInfo, NameRule, typed};
use crate::verb::Verb;

/// The API group `kubectl top` reads.
pub const METRICS_GROUP: &str = "metrics.k8s.io";

/// The version `kubectl top` reads.
pub const METRICS_VERSION: &str = "v1beta1";

/// NodeMetrics is what a node consumes (its whole host, not only its workloads), as a rate over
/// the window between its last two usage samples.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeMetrics {
    /// APIVersion defines the versioned schema of this representation of an object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    /// Kind is a string value representing the REST resource this object represents.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// The node's name and labels.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// When the later of the two samples was taken (RFC 3339), by the node's clock.
    #[serde(default)]
    pub timestamp: String,
    /// The time between the two samples the rate is taken over (`15.002s`).
    #[serde(default)]
    pub window: String,
    /// `cpu` in nanocores (`1000000000n` is one core) and `memory` in bytes.
    #[serde(default)]
    pub usage: BTreeMap<String, String>,
}

/// PodMetrics is what one Application's process consumes, as a rate over the window between
/// its last two usage samples. Its one container is named after the Application.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodMetrics {
    /// APIVersion defines the versioned schema of this representation of an object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    /// Kind is a string value representing the REST resource this object represents.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// The Application's name, namespace and labels.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// When the later of the two samples was taken (RFC 3339), by the node's clock.
    #[serde(default)]
    pub timestamp: String,
    /// The time between the two samples the rate is taken over (`15.002s`).
    #[serde(default)]
    pub window: String,
    /// One entry, named after the Application.
    #[serde(default)]
    pub containers: Vec<ContainerMetrics>,
}

/// ContainerMetrics is what one container consumes.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ContainerMetrics {
    /// The container's name: the Application's.
    #[serde(default)]
    pub name: String,
    /// `cpu` in nanocores and `memory` in bytes.
    #[serde(default)]
    pub usage: BTreeMap<String, String>,
}

/// ApplicationMetrics is what an Application's process has consumed since it started, from the
/// last usage sample its node reported. The figures are cumulative: two readings give a rate,
/// one gives none.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApplicationMetrics {
    /// APIVersion defines the versioned schema of this representation of an object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    /// Kind is a string value representing the REST resource this object represents.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// The Application's name and namespace.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// The node the sample was taken on.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub node: String,
    /// When it was taken (RFC 3339), by the node's clock.
    #[serde(default)]
    pub timestamp: String,
    /// CPU time used, in microseconds.
    #[serde(default)]
    pub cpu_microseconds: u64,
    /// Time the process was held back by its CPU limit, in microseconds.
    #[serde(default)]
    pub cpu_throttled_microseconds: u64,
    /// Memory in use, in bytes.
    #[serde(default)]
    pub memory_bytes: u64,
    /// The most memory in use so far, in bytes.
    #[serde(default)]
    pub memory_peak_bytes: u64,
    /// Processes and threads.
    #[serde(default)]
    pub pids: u64,
    /// Out-of-memory kills.
    #[serde(default)]
    pub oom_kills: u64,
}

impl Kind for NodeMetrics {}
impl Kind for PodMetrics {}

/// The `metrics.k8s.io/v1beta1` Kinds: read (get, list with label selectors), never written.
pub(crate) fn kind_infos() -> [KindInfo; 2] {
    let read_only = |info: KindInfo| KindInfo {
        version: METRICS_VERSION,
        verbs: &[Verb::Get, Verb::List],
        usage: true,
        ..info
    };
    [
        read_only(KindInfo::v1(
            METRICS_GROUP,
            "NodeMetrics",
            "nodes",
            "",
            false,
            NameRule::Subdomain,
            typed::<NodeMetrics>(),
        )),
        read_only(KindInfo::v1(
            METRICS_GROUP,
            "PodMetrics",
            "pods",
            "",
            true,
            NameRule::Subdomain,
            typed::<PodMetrics>(),
        )),
    ]
}
