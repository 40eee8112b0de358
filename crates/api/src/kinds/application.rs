//! Application: one supervised process on one node.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{NodeAffinity, PodAffinity, PodAntiAffinity, Toleration};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::{Condition, ConditionType, Kind};
use crate::scheme::{
    ATTACH, BINDING, EXEC, FREEZE, FROZEN, HISTORY, KindInfo, LOG, METRICS, NameRule, PORTFORWARD, ROLLBACK,
    STATUS, THAW, TOKEN, typed,
};
use crate::table::{Column, text_or_none};
use crate::validation::FieldError;

mod identity;
mod validation;

pub use identity::{
    AUTOMOUNT_PATH, DEFAULT_EXPIRATION_SECONDS, MAX_EXPIRATION_SECONDS, MIN_EXPIRATION_SECONDS, MOUNT_PATH,
    Projection, TokenProjection, WorkloadIdentity,
};

/// The annotation that marks an Application the scheduler placed, `fleet.<domain>/scheduled-by`,
/// with value [`SCHEDULER`]. It is written in the same write that sets
/// `spec.placement.nodeName`; an Application with a node and without it was pinned by its
/// author and is never moved. Clearing `nodeName` and removing the annotation together asks for
/// a new placement.
pub fn scheduled_by_annotation(domain: &str) -> String {
    format!("fleet.{domain}/scheduled-by")
}

/// The value of [`scheduled_by_annotation`] on an Application the scheduler placed.
pub const SCHEDULER: &str = "kayra-scheduler";

/// The reason of the `Ready` condition while the node waits out a restart back-off before
/// running the process again, as kubelet names the waiting state of a container that keeps
/// failing.
pub const BACK_OFF: &str = "CrashLoopBackOff";

/// The most environment entries an Application may have.
pub const MAX_ENV: usize = 256;

/// The field naming the node an Application is bound to, as field selectors and field errors
/// name it.
pub const NODE_NAME_FIELD: &str = "spec.placement.nodeName";

/// The same field as a JSON pointer into an Application's JSON.
pub const NODE_NAME_POINTER: &str = "/spec/placement/nodeName";

/// The node an Application's JSON is bound to, if any (an empty name is none).
pub fn bound_node(application: &Map<String, Value>) -> Option<&str> {
    let placement = application.get("spec")?.get("placement")?;
    placement.get("nodeName")?.as_str().filter(|node| !node.is_empty())
}

/// Application is one supervised process on one node: what to run, with what environment and
/// resources, where, and how to restart it. Scaling out is an ApplicationSet's job.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Application {
    /// APIVersion defines the versioned schema of this representation of an object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    /// Kind is a string value representing the REST resource this object represents.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Standard object's metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// What to run and how.
    #[serde(default)]
    pub spec: ApplicationSpec,
    /// What the node reports about the process; written through the status subresource.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<ApplicationStatus>,
}

/// ApplicationSpec is the desired state of an Application: its command line, environment,
/// ports, resources, restart behaviour and placement.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApplicationSpec {
    /// The program and its first arguments; `command[0]` is an absolute path or a name looked
    /// up in the agent's PATH. Required.
    #[schemars(extend("x-kubernetes-list-type" = "atomic"))]
    #[serde(default)]
    pub command: Vec<String>,
    /// Arguments appended to `command`.
    #[schemars(extend("x-kubernetes-list-type" = "atomic"))]
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// The working directory: an absolute, clean path. Defaults to the agent's per-application
    /// directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub working_dir: Option<String>,
    /// Environment variables, in order.
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<EnvVar>,
    /// Ports the process listens on: a declaration for service discovery.
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["port", "protocol"]))]
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ports: Vec<Port>,
    /// CPU and memory the process asks for and may not exceed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<Resources>,
    /// Restart behaviour and limits.
    #[serde(default)]
    pub lifecycle: Lifecycle,
    /// Where the process may run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<Placement>,
    /// The Service in the same namespace this Application is a member of.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_name: Option<String>,
    /// The user and group the process runs as.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub security_context: Option<SecurityContext>,
    /// Health checks the node runs against the process.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probes: Option<Probes>,
    /// The service-account tokens the process is given (one for the API by default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity: Option<WorkloadIdentity>,
    /// Whether the process keeps a stdin that `kubectl attach -i` writes to, as a Pod's
    /// container's `stdin`; it stays open across attaches. Without it the process's stdin is
    /// empty.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub stdin: bool,
    /// Whether the process is frozen: held where it is by the node (its cgroup frozen, or its
    /// process group stopped), probes suspended, no restart counted, until thawed. Written only
    /// through the `freeze` and `thaw` subresources (for a set's child, the set's); an ordinary
    /// write that changes it is refused.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub frozen: bool,
}

/// The identity the process runs as. When the node agent runs as root, the process runs as
/// this user and group (65532 each when unset), with no supplementary groups; when the agent
/// is not root, the process runs as the agent's own user and asking for another one fails.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SecurityContext {
    /// The numeric user ID the process runs as; 65532 when unset. Root (0) is refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_as_user: Option<i64>,
    /// The numeric group ID the process runs as; 65532 when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_as_group: Option<i64>,
}

/// The uid and gid a process runs as when its Application names none.
pub const DEFAULT_RUN_AS: u32 = 65532;

/// Health checks, as Kubernetes probes behave.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Probes {
    /// Whether the process is ready to serve: drives the `Ready` condition. Without one, the
    /// process is ready while it runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub readiness: Option<Probe>,
    /// Whether the process is alive: after `failureThreshold` failures in a row it is stopped
    /// and started again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub liveness: Option<Probe>,
}

/// One health check: exactly one of `exec`, `httpGet` or `tcpSocket`, and its timing.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Probe {
    /// Runs a command as the process's user; exit 0 is success.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exec: Option<ExecAction>,
    /// An HTTP GET to the process on the node's loopback address; a status from 200 to 399 is
    /// success.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_get: Option<HttpGetAction>,
    /// A TCP connection to the process on the node's loopback address; connecting is success.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp_socket: Option<TcpSocketAction>,
    /// Seconds after the process starts before the first check; default 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initial_delay_seconds: Option<i64>,
    /// Seconds between checks; default 10, at least 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub period_seconds: Option<i64>,
    /// Seconds after which a check counts as failed; default 1, at least 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_seconds: Option<i64>,
    /// Failures in a row after which the probe has failed; default 3, at least 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_threshold: Option<i64>,
    /// Successes in a row after a failure before the probe succeeds again; default 1, and
    /// exactly 1 for liveness.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub success_threshold: Option<i64>,
}

/// A command to run as a check.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExecAction {
    /// The program and its arguments; not run through a shell.
    #[schemars(extend("x-kubernetes-list-type" = "atomic"))]
    #[serde(default)]
    pub command: Vec<String>,
}

/// An HTTP GET as a check.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HttpGetAction {
    /// The port, 1 to 65535.
    pub port: i64,
    /// The path, starting with `/`; default `/`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
}

/// A TCP connection as a check.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TcpSocketAction {
    /// The port, 1 to 65535.
    pub port: i64,
}

/// One environment variable: a literal value, or a value from a Secret.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EnvVar {
    /// The variable's name, `[A-Za-z_][A-Za-z0-9_]*`. Empty only when every key of a Secret is
    /// imported (`secretRef.key: "*"`).
    #[serde(default)]
    pub name: String,
    /// A literal value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    /// A value taken from a Secret in the same namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<SecretKeyRef>,
    /// With `secretRef.key: "*"`: prepended to every imported key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix: Option<String>,
}

/// A key of a Secret.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SecretKeyRef {
    /// The Secret's name.
    pub name: String,
    /// The key within the Secret, or `*` for every key.
    pub key: String,
    /// Whether the Application may start without the Secret or key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub optional: Option<bool>,
}

/// A port the process listens on.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Port {
    /// A name for the port, unique within the Application.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The port number, 1 to 65535.
    pub port: i64,
    /// `TCP` (the default) or `UDP`.
    #[serde(default = "tcp")]
    pub protocol: String,
}

fn tcp() -> String {
    "TCP".to_owned()
}

/// CPU and memory requests and limits.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Resources {
    /// What the process needs; the scheduler places by requests. An unset request takes the
    /// limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests: Option<ResourceList>,
    /// What the process may not exceed; the agent enforces limits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<ResourceList>,
}

/// Amounts of CPU and memory.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceList {
    /// CPU in cores, such as `500m` or `2`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<String>,
    /// Memory in bytes, such as `128Mi` or `1G`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<String>,
}

/// Restart behaviour and limits.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Lifecycle {
    /// `Always` (the default), `OnFailure`, or `Never` (a job that runs once).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restart_policy: Option<String>,
    /// Seconds between the stop signal and a forced kill; default 30.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub termination_grace_period_seconds: Option<i64>,
    /// For jobs: how many failed attempts before the job is Failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backoff_limit: Option<i64>,
    /// For jobs: seconds the job may run in all before it is Failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_deadline_seconds: Option<i64>,
}

/// Where the process may run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Placement {
    /// The node to run on: pinned by the user, or written by the scheduler.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_name: Option<String>,
    /// Labels a node must carry.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub node_selector: BTreeMap<String, String>,
    /// Rules over node labels and over the Applications already placed. Like Kubernetes',
    /// they are IgnoredDuringExecution: they decide where the Application is placed, and a
    /// placed Application stays where it is when labels or the rules change later.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub affinity: Option<Affinity>,
    /// The taints of nodes this Application tolerates, in Kubernetes' shape.
    #[schemars(extend("x-kubernetes-list-type" = "set"))]
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tolerations: Vec<Toleration>,
    /// Higher priorities are placed first; equal ones oldest first. Default 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<i64>,
}

/// Affinity is a group of placement rules: over node labels, and over the Applications already
/// placed (co-locate with them, or keep apart from them, within a topology domain).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Affinity {
    /// Describes node affinity scheduling rules for the Application.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_affinity: Option<NodeAffinity>,
    /// Describes rules to place the Application in the same topology domain (nodes with the
    /// same value of the label `topologyKey`) as other Applications, as Kubernetes'
    /// podAffinity; `labelSelector` selects Applications by their labels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload_affinity: Option<PodAffinity>,
    /// Describes rules to keep the Application out of the topology domains of other
    /// Applications, as Kubernetes' podAntiAffinity. Required rules are symmetric: a placed
    /// Application's rule also keeps newcomers it selects away from it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload_anti_affinity: Option<PodAntiAffinity>,
}

/// ApplicationStatus is what the node reports about an Application's process.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApplicationStatus {
    /// `Pending`, `Running`, `Succeeded`, `Failed` or `Terminating`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// A human-readable account of the phase.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The `metadata.generation` this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `Scheduled` and `Ready`, in the Kubernetes condition shape.
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// When the current process started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<String>,
    /// When the last process ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<String>,
    /// The last process's exit code.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i64>,
    /// How many times the process was restarted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restarts: Option<i64>,
    /// For jobs: how many times the process was started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempts: Option<i64>,
    /// The address the process is reachable at.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
}

impl Application {
    /// The node the Application is bound to, if any (an empty name is none).
    pub fn bound_node(&self) -> Option<&str> {
        self.spec.placement.as_ref()?.node_name.as_deref().filter(|node| !node.is_empty())
    }

    /// The TCP ports the Application declares: the only ones port-forward reaches.
    pub fn tcp_ports(&self) -> Vec<u16> {
        let tcp = self.spec.ports.iter().filter(|port| port.protocol.eq_ignore_ascii_case("TCP"));
        tcp.filter_map(|port| u16::try_from(port.port).ok()).collect()
    }
}

impl Kind for Application {
    /// A write that moves the Application off its node (unbound to be placed again, or pinned
    /// elsewhere) ends what its status said of the run there: until a node reports the new
    /// placement it is `Pending` and not Ready, as a Pod placed anew starts. Only `Scheduled`
    /// (what placement says) and the counts that span placements stay.
    fn carried_status(old: &Map<String, Value>, object: &mut Map<String, Value>) {
        let before = bound_node(old);
        if before.is_none() || before == bound_node(object) {
            return;
        }
        let Some(status) = object.get_mut("status").and_then(Value::as_object_mut) else { return };
        status.retain(|field, _| matches!(field.as_str(), "conditions" | "observedGeneration" | "attempts"));
        status.insert("phase".into(), Value::String("Pending".into()));
        if let Some(Value::Array(conditions)) = status.get_mut("conditions") {
            let scheduled = Some(ConditionType::Scheduled.as_str());
            conditions.retain(|condition| condition.get("type").and_then(Value::as_str) == scheduled);
        }
    }

    /// A rollback restores what the author asked for, not where the process runs: the node
    /// stays as it is now (placed by the scheduler or pinned since).
    fn restored(current: &Map<String, Value>, restored: &mut Map<String, Value>) {
        let node = bound_node(current).map(str::to_owned);
        let Some(spec) = restored.get_mut("spec").and_then(Value::as_object_mut) else { return };
        let placement = spec.entry("placement").or_insert_with(|| Value::Object(Map::new()));
        let Some(placement) = placement.as_object_mut() else { return };
        match node {
            Some(node) => placement.insert("nodeName".into(), Value::String(node)),
            None => placement.remove("nodeName"),
        };
        if placement.is_empty() {
            spec.remove("placement");
        }
    }

    fn default_fields(&mut self) {
        let lifecycle = &mut self.spec.lifecycle;
        lifecycle.restart_policy.get_or_insert_with(|| "Always".to_owned());
        lifecycle.termination_grace_period_seconds.get_or_insert(30);
        if let Some(probes) = &mut self.spec.probes {
            for probe in [&mut probes.readiness, &mut probes.liveness].into_iter().flatten() {
                probe.initial_delay_seconds.get_or_insert(0);
                probe.period_seconds.get_or_insert(10);
                probe.timeout_seconds.get_or_insert(1);
                probe.failure_threshold.get_or_insert(3);
                probe.success_threshold.get_or_insert(1);
            }
        }
        if let Some(resources) = &mut self.spec.resources
            && let Some(limits) = resources.limits.clone()
        {
            let requests = resources.requests.get_or_insert_with(ResourceList::default);
            if requests.cpu.is_none() {
                requests.cpu = limits.cpu;
            }
            if requests.memory.is_none() {
                requests.memory = limits.memory;
            }
        }
    }

    fn validate(&self, _old: Option<&Self>) -> Vec<FieldError> {
        validation::validate(self)
    }
}

/// Applications as served in `fleet`: their log, status and binding, and the fields
/// `--field-selector` may use.
pub(crate) fn kind_info(fleet: &str) -> KindInfo {
    KindInfo {
        short_names: &["app", "apps"],
        categories: &["all"],
        subresources: &[
            STATUS,
            LOG,
            BINDING,
            METRICS,
            TOKEN,
            EXEC,
            ATTACH,
            PORTFORWARD,
            HISTORY,
            ROLLBACK,
            FREEZE,
            THAW,
        ],
        doors: &[FROZEN],
        field_labels: &[NODE_NAME_FIELD, "spec.serviceName", "status.phase"],
        columns: &[
            Column {
                name: "Phase",
                type_: "string",
                format: "",
                description: "The process's phase",
                priority: 0,
                cell: |o, _| text_or_none(o, "status.phase"),
            },
            Column {
                name: "Node",
                type_: "string",
                format: "",
                description: "The node the process runs on",
                priority: 0,
                cell: |o, _| text_or_none(o, NODE_NAME_FIELD),
            },
            Column {
                name: "Restarts",
                type_: "integer",
                format: "",
                description: "How many times the process was restarted",
                priority: 0,
                cell: |o, _| o.pointer("/status/restarts").cloned().unwrap_or(Value::from(0)),
            },
            Column {
                name: "Command",
                type_: "string",
                format: "",
                description: "The program and its arguments",
                priority: 1,
                cell: application_command,
            },
            Column {
                name: "Address",
                type_: "string",
                format: "",
                description: "Where the process is reachable",
                priority: 1,
                cell: |o, _| text_or_none(o, "status.address"),
            },
        ],
        ..KindInfo::v1(
            fleet,
            "Application",
            "applications",
            "application",
            true,
            NameRule::Subdomain,
            typed::<Application>(),
        )
    }
}

fn application_command(object: &Value, _: jiff::Timestamp) -> Value {
    let words = |pointer: &str| -> Vec<String> {
        object
            .pointer(pointer)
            .and_then(Value::as_array)
            .map(|list| list.iter().filter_map(Value::as_str).map(str::to_owned).collect())
            .unwrap_or_default()
    };
    let mut argv = words("/spec/command");
    argv.extend(words("/spec/args"));
    Value::String(argv.join(" "))
}

#[cfg(test)]
mod tests;
