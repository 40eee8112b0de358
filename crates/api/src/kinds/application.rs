//! Application: one supervised process on one node.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    NodeAffinity, NodeSelectorRequirement, PodAffinity, PodAffinityTerm, PodAntiAffinity, Toleration,
    WeightedPodAffinityTerm,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::{Condition, Kind, duplicates, validate_conditions};
use crate::quantity::Quantity;
use crate::validation::{FieldError, has_control_breaks, is_clean_absolute_path, is_dns_subdomain};

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
    #[serde(default)]
    pub command: Vec<String>,
    /// Arguments appended to `command`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// The working directory: an absolute, clean path. Defaults to the agent's per-application
    /// directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub working_dir: Option<String>,
    /// Environment variables, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<EnvVar>,
    /// Ports the process listens on: a declaration for service discovery.
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

const RESTART_POLICIES: &[&str] = &["Always", "OnFailure", "Never"];
const PHASES: &[&str] = &["Pending", "Running", "Succeeded", "Failed", "Terminating"];

impl Kind for Application {
    /// A write that moves the Application off its node (unbound to be placed again, or pinned
    /// elsewhere) ends what its status said of the run there: until a node reports the new
    /// placement it is `Pending` and not Ready, as a Pod placed anew starts. Only `Scheduled`
    /// (what placement says) and the counts that span placements stay.
    fn carried_status(old: &Map<String, Value>, object: &mut Map<String, Value>) {
        let node = |object: &Map<String, Value>| {
            object
                .get("spec")
                .and_then(|spec| spec.pointer("/placement/nodeName"))
                .and_then(Value::as_str)
                .map(str::to_owned)
        };
        let (before, after) = (node(old), node(object));
        if before.is_none() || before == after {
            return;
        }
        let Some(status) = object.get_mut("status").and_then(Value::as_object_mut) else { return };
        status.retain(|field, _| matches!(field.as_str(), "conditions" | "observedGeneration" | "attempts"));
        status.insert("phase".into(), Value::String("Pending".into()));
        if let Some(Value::Array(conditions)) = status.get_mut("conditions") {
            conditions.retain(|condition| condition.get("type").and_then(Value::as_str) == Some("Scheduled"));
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
        let spec = &self.spec;
        let mut errors = Vec::new();
        if spec.command.is_empty() {
            errors.push(FieldError::required("spec.command"));
        }
        if let Some(program) = spec.command.first()
            && program.is_empty()
        {
            errors.push(FieldError::invalid("spec.command[0]", "\"\"", "must name a program"));
        }
        for (field, list) in [("spec.command", &spec.command), ("spec.args", &spec.args)] {
            for (at, arg) in list.iter().enumerate() {
                if has_control_breaks(arg) {
                    errors.push(FieldError::invalid(
                        format!("{field}[{at}]"),
                        format!("{arg:?}"),
                        "must not contain NUL, CR or LF",
                    ));
                }
            }
        }
        if let Some(dir) = &spec.working_dir
            && !is_clean_absolute_path(dir)
        {
            errors.push(FieldError::invalid(
                "spec.workingDir",
                format!("\"{dir}\""),
                "must be an absolute, clean path",
            ));
        }
        errors.extend(validate_env(&spec.env));
        errors.extend(validate_ports(&spec.ports));
        if let Some(resources) = &spec.resources {
            errors.extend(validate_resources(resources));
        }
        let lifecycle = &spec.lifecycle;
        let policy = lifecycle.restart_policy.as_deref().unwrap_or("Always");
        if !RESTART_POLICIES.contains(&policy) {
            errors.push(FieldError::not_supported("spec.lifecycle.restartPolicy", policy, RESTART_POLICIES));
        }
        for (field, value) in [
            ("terminationGracePeriodSeconds", lifecycle.termination_grace_period_seconds),
            ("backoffLimit", lifecycle.backoff_limit),
            ("activeDeadlineSeconds", lifecycle.active_deadline_seconds),
        ] {
            if let Some(value) = value.filter(|value| *value < 0) {
                errors.push(FieldError::invalid(
                    format!("spec.lifecycle.{field}"),
                    value,
                    "must be greater than or equal to 0",
                ));
            }
        }
        if policy == "Always" {
            for (field, value) in [
                ("backoffLimit", lifecycle.backoff_limit),
                ("activeDeadlineSeconds", lifecycle.active_deadline_seconds),
            ] {
                if value.is_some() {
                    errors.push(FieldError::forbidden(
                        format!("spec.lifecycle.{field}"),
                        "only jobs (restartPolicy OnFailure or Never) have one",
                    ));
                }
            }
        }
        if let Some(placement) = &spec.placement
            && let Some(node) = placement.node_name.as_deref().filter(|node| !is_dns_subdomain(node))
        {
            errors.push(FieldError::invalid(
                "spec.placement.nodeName",
                format!("\"{node}\""),
                "must be a DNS subdomain",
            ));
        }
        if let Some(placement) = &spec.placement {
            errors.extend(validate_placement(placement));
        }
        if let Some(service) = spec.service_name.as_deref().filter(|name| !is_dns_subdomain(name)) {
            errors.push(FieldError::invalid(
                "spec.serviceName",
                format!("\"{service}\""),
                "must be a DNS subdomain",
            ));
        }
        if let Some(context) = &spec.security_context {
            for (field, value) in [("runAsUser", context.run_as_user), ("runAsGroup", context.run_as_group)] {
                if let Some(value) = value.filter(|value| !(0..=i64::from(u32::MAX - 1)).contains(value)) {
                    errors.push(FieldError::invalid(
                        format!("spec.securityContext.{field}"),
                        value,
                        "must be between 0 and 4294967294, inclusive",
                    ));
                }
            }
        }
        if let Some(probes) = &spec.probes {
            for (field, probe) in [("readiness", &probes.readiness), ("liveness", &probes.liveness)] {
                if let Some(probe) = probe {
                    errors.extend(validate_probe(
                        &format!("spec.probes.{field}"),
                        probe,
                        field == "liveness",
                    ));
                }
            }
        }
        if let Some(status) = &self.status {
            if let Some(phase) = status.phase.as_deref().filter(|phase| !PHASES.contains(phase)) {
                errors.push(FieldError::not_supported("status.phase", phase, PHASES));
            }
            errors.extend(validate_conditions("status.conditions", &status.conditions));
        }
        errors
    }
}

fn validate_probe(field: &str, probe: &Probe, liveness: bool) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let handlers = [probe.exec.is_some(), probe.http_get.is_some(), probe.tcp_socket.is_some()];
    match handlers.iter().filter(|set| **set).count() {
        0 => errors.push(FieldError::required(format!("{field}.exec|httpGet|tcpSocket"))),
        1 => {}
        _ => errors
            .push(FieldError::forbidden(field.to_owned(), "may have only one of exec, httpGet or tcpSocket")),
    }
    if let Some(exec) = &probe.exec {
        if exec.command.is_empty() || exec.command[0].is_empty() {
            errors.push(FieldError::required(format!("{field}.exec.command")));
        }
        for (at, arg) in exec.command.iter().enumerate() {
            if has_control_breaks(arg) {
                errors.push(FieldError::invalid(
                    format!("{field}.exec.command[{at}]"),
                    format!("{arg:?}"),
                    "must not contain NUL, CR or LF",
                ));
            }
        }
    }
    let ports = [
        ("httpGet.port", probe.http_get.as_ref().map(|http| http.port)),
        ("tcpSocket.port", probe.tcp_socket.as_ref().map(|tcp| tcp.port)),
    ];
    for (name, port) in ports {
        if let Some(port) = port.filter(|port| !(1..=65535).contains(port)) {
            errors.push(FieldError::invalid(
                format!("{field}.{name}"),
                port,
                "must be between 1 and 65535, inclusive",
            ));
        }
    }
    if let Some(path) = probe.http_get.as_ref().and_then(|http| http.path.as_deref())
        && (!path.starts_with('/') || has_control_breaks(path) || path.contains(' '))
    {
        errors.push(FieldError::invalid(
            format!("{field}.httpGet.path"),
            format!("\"{path}\""),
            "must start with / and contain no spaces or line breaks",
        ));
    }
    for (name, value, least) in [
        ("initialDelaySeconds", probe.initial_delay_seconds, 0),
        ("periodSeconds", probe.period_seconds, 1),
        ("timeoutSeconds", probe.timeout_seconds, 1),
        ("failureThreshold", probe.failure_threshold, 1),
        ("successThreshold", probe.success_threshold, 1),
    ] {
        if let Some(value) = value.filter(|value| *value < least) {
            errors.push(FieldError::invalid(
                format!("{field}.{name}"),
                value,
                &format!("must be greater than or equal to {least}"),
            ));
        }
    }
    if liveness && probe.success_threshold.is_some_and(|value| value != 1) {
        errors.push(FieldError::invalid(
            format!("{field}.successThreshold"),
            probe.success_threshold.unwrap_or_default(),
            "must be 1 for a liveness probe",
        ));
    }
    errors
}

fn is_env_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn validate_env(env: &[EnvVar]) -> Vec<FieldError> {
    let mut errors = Vec::new();
    if env.len() > MAX_ENV {
        errors.push(FieldError::too_many("spec.env", env.len(), MAX_ENV));
    }
    for (at, var) in env.iter().enumerate() {
        let field = format!("spec.env[{at}]");
        let import_all = var.secret_ref.as_ref().is_some_and(|secret| secret.key == "*");
        if import_all {
            if !var.name.is_empty() {
                errors.push(FieldError::forbidden(
                    format!("{field}.name"),
                    "must be empty when every key of a Secret is imported",
                ));
            }
        } else if var.name.is_empty() {
            errors.push(FieldError::required(format!("{field}.name")));
        } else if !is_env_name(&var.name) {
            errors.push(FieldError::invalid(
                format!("{field}.name"),
                format!("\"{}\"", var.name),
                "must match [A-Za-z_][A-Za-z0-9_]*",
            ));
        }
        if var.prefix.is_some() && !import_all {
            errors.push(FieldError::forbidden(format!("{field}.prefix"), "only with secretRef.key \"*\""));
        }
        if let Some(prefix) = var.prefix.as_deref().filter(|p| !p.is_empty() && !is_env_name(p)) {
            errors.push(FieldError::invalid(
                format!("{field}.prefix"),
                format!("\"{prefix}\""),
                "must match [A-Za-z_][A-Za-z0-9_]*",
            ));
        }
        match (&var.value, &var.secret_ref) {
            (Some(_), Some(_)) => errors.push(FieldError::forbidden(
                format!("{field}.secretRef"),
                "may not be set together with value",
            )),
            (Some(value), None) if has_control_breaks(value) => {
                errors.push(FieldError::invalid(
                    format!("{field}.value"),
                    "<value>",
                    "must not contain NUL, CR or LF",
                ));
            }
            (_, Some(secret)) => {
                if !is_dns_subdomain(&secret.name) {
                    errors.push(FieldError::invalid(
                        format!("{field}.secretRef.name"),
                        format!("\"{}\"", secret.name),
                        "must be a DNS subdomain",
                    ));
                }
                if secret.key.is_empty() {
                    errors.push(FieldError::required(format!("{field}.secretRef.key")));
                }
            }
            _ => {}
        }
    }
    errors.extend(duplicates(
        "spec.env",
        env.iter().map(|var| var.name.as_str()).filter(|name| !name.is_empty()),
    ));
    errors
}

fn validate_ports(ports: &[Port]) -> Vec<FieldError> {
    let mut errors = Vec::new();
    for (at, port) in ports.iter().enumerate() {
        if !(1..=65535).contains(&port.port) {
            errors.push(FieldError::invalid(
                format!("spec.ports[{at}].port"),
                port.port,
                "must be between 1 and 65535, inclusive",
            ));
        }
        if !matches!(port.protocol.as_str(), "TCP" | "UDP") {
            errors.push(FieldError::not_supported(
                format!("spec.ports[{at}].protocol"),
                &port.protocol,
                &["TCP", "UDP"],
            ));
        }
    }
    errors.extend(duplicates("spec.ports", ports.iter().filter_map(|port| port.name.as_deref())));
    errors
}

fn validate_resources(resources: &Resources) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let mut parsed = |side: &str, list: &Option<ResourceList>| -> [Option<Quantity>; 2] {
        let Some(list) = list else { return [None, None] };
        [("cpu", &list.cpu), ("memory", &list.memory)].map(|(name, value)| {
            let value = value.as_deref()?;
            let quantity = Quantity::parse(value);
            if quantity.is_none() {
                errors.push(FieldError::invalid(
                    format!("spec.resources.{side}.{name}"),
                    format!("\"{value}\""),
                    "must be a quantity such as 500m, 2, 128Mi or 1G",
                ));
            }
            quantity
        })
    };
    let requests = parsed("requests", &resources.requests);
    let limits = parsed("limits", &resources.limits);
    for (at, name) in ["cpu", "memory"].iter().enumerate() {
        if let (Some(request), Some(limit)) = (requests[at], limits[at])
            && request > limit
        {
            errors.push(FieldError::invalid(
                format!("spec.resources.requests.{name}"),
                format!(
                    "\"{}\"",
                    resources
                        .requests
                        .as_ref()
                        .and_then(|r| if at == 0 { r.cpu.clone() } else { r.memory.clone() })
                        .unwrap_or_default()
                ),
                &format!("must be less than or equal to {name} limit"),
            ));
        }
    }
    errors
}

const NODE_OPERATORS: &[&str] = &["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"];
const SELECTOR_OPERATORS: &[&str] = &["In", "NotIn", "Exists", "DoesNotExist"];
const TAINT_EFFECTS: &[&str] = &["NoSchedule", "PreferNoSchedule", "NoExecute"];

fn validate_placement(placement: &Placement) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let field = "spec.placement";
    if let Some(affinity) = &placement.affinity {
        if let Some(node) = &affinity.node_affinity {
            let required = node.required_during_scheduling_ignored_during_execution.as_ref();
            for (at, term) in required.into_iter().flat_map(|r| r.node_selector_terms.iter()).enumerate() {
                let term_field = format!(
                    "{field}.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[{at}]"
                );
                for (i, requirement) in term.match_expressions.iter().flatten().enumerate() {
                    errors.extend(validate_node_requirement(
                        &format!("{term_field}.matchExpressions[{i}]"),
                        requirement,
                    ));
                }
                if term.match_fields.as_ref().is_some_and(|fields| !fields.is_empty()) {
                    errors.push(FieldError::forbidden(
                        format!("{term_field}.matchFields"),
                        "is not supported; use matchExpressions over node labels",
                    ));
                }
            }
            let preferred = node.preferred_during_scheduling_ignored_during_execution.iter().flatten();
            for (at, term) in preferred.enumerate() {
                let term_field = format!(
                    "{field}.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[{at}]"
                );
                errors.extend(validate_weight(&term_field, term.weight));
                for (i, requirement) in term.preference.match_expressions.iter().flatten().enumerate() {
                    errors.extend(validate_node_requirement(
                        &format!("{term_field}.preference.matchExpressions[{i}]"),
                        requirement,
                    ));
                }
            }
        }
        let workload = [
            (
                "workloadAffinity",
                affinity.workload_affinity.as_ref().map(|a| {
                    (
                        &a.required_during_scheduling_ignored_during_execution,
                        &a.preferred_during_scheduling_ignored_during_execution,
                    )
                }),
            ),
            (
                "workloadAntiAffinity",
                affinity.workload_anti_affinity.as_ref().map(|a| {
                    (
                        &a.required_during_scheduling_ignored_during_execution,
                        &a.preferred_during_scheduling_ignored_during_execution,
                    )
                }),
            ),
        ];
        for (name, rules) in workload {
            let Some((required, preferred)) = rules else { continue };
            for (at, term) in required.iter().flatten().enumerate() {
                errors.extend(validate_workload_term(
                    &format!("{field}.affinity.{name}.requiredDuringSchedulingIgnoredDuringExecution[{at}]"),
                    term,
                ));
            }
            for (at, WeightedPodAffinityTerm { weight, pod_affinity_term }) in
                preferred.iter().flatten().enumerate()
            {
                let term_field =
                    format!("{field}.affinity.{name}.preferredDuringSchedulingIgnoredDuringExecution[{at}]");
                errors.extend(validate_weight(&term_field, *weight));
                errors.extend(validate_workload_term(
                    &format!("{term_field}.podAffinityTerm"),
                    pod_affinity_term,
                ));
            }
        }
    }
    for (at, toleration) in placement.tolerations.iter().enumerate() {
        let t_field = format!("{field}.tolerations[{at}]");
        let operator = toleration.operator.as_deref().unwrap_or("Equal");
        match operator {
            "Equal" => {
                if toleration.key.as_deref().unwrap_or_default().is_empty() {
                    errors.push(FieldError::invalid(format!("{t_field}.operator"), "\"Equal\"", "operator must be Exists when `key` is empty, which means \"match all values and all keys\""));
                }
            }
            "Exists" => {
                if toleration.value.as_deref().is_some_and(|value| !value.is_empty()) {
                    errors.push(FieldError::invalid(
                        format!("{t_field}.operator"),
                        "\"Exists\"",
                        "value must be empty when `operator` is 'Exists'",
                    ));
                }
            }
            other => errors.push(FieldError::not_supported(
                format!("{t_field}.operator"),
                other,
                &["Equal", "Exists"],
            )),
        }
        if let Some(effect) =
            toleration.effect.as_deref().filter(|e| !e.is_empty() && !TAINT_EFFECTS.contains(e))
        {
            errors.push(FieldError::not_supported(format!("{t_field}.effect"), effect, TAINT_EFFECTS));
        }
        if toleration.toleration_seconds.is_some() && toleration.effect.as_deref() != Some("NoExecute") {
            errors.push(FieldError::invalid(
                format!("{t_field}.effect"),
                format!("\"{}\"", toleration.effect.as_deref().unwrap_or_default()),
                "effect must be 'NoExecute' when `tolerationSeconds` is set",
            ));
        }
    }
    errors
}

fn validate_weight(field: &str, weight: i32) -> Option<FieldError> {
    (!(1..=100).contains(&weight))
        .then(|| FieldError::invalid(format!("{field}.weight"), weight, "must be in the range 1-100"))
}

fn validate_node_requirement(field: &str, requirement: &NodeSelectorRequirement) -> Vec<FieldError> {
    let mut errors = Vec::new();
    if requirement.key.is_empty() {
        errors.push(FieldError::required(format!("{field}.key")));
    }
    let values = requirement.values.as_deref().unwrap_or_default();
    match requirement.operator.as_str() {
        "In" | "NotIn" if values.is_empty() => errors.push(FieldError::required(format!("{field}.values"))),
        "Exists" | "DoesNotExist" if !values.is_empty() => errors.push(FieldError::forbidden(
            format!("{field}.values"),
            "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
        )),
        "Gt" | "Lt" if values.len() != 1 => errors.push(FieldError::required(format!("{field}.values"))),
        "Gt" | "Lt" if values[0].parse::<i64>().is_err() => errors.push(FieldError::invalid(
            format!("{field}.values[0]"),
            format!("\"{}\"", values[0]),
            "must be an integer",
        )),
        operator if !NODE_OPERATORS.contains(&operator) => {
            errors.push(FieldError::not_supported(format!("{field}.operator"), operator, NODE_OPERATORS));
        }
        _ => {}
    }
    errors
}

fn validate_workload_term(field: &str, term: &PodAffinityTerm) -> Vec<FieldError> {
    let mut errors = Vec::new();
    if term.topology_key.is_empty() {
        errors.push(FieldError::required(format!("{field}.topologyKey")));
    }
    if let Some(selector) = &term.label_selector {
        errors.extend(validate_label_selector(&format!("{field}.labelSelector"), selector));
    }
    if term.namespace_selector.is_some() {
        errors.push(FieldError::forbidden(
            format!("{field}.namespaceSelector"),
            "is not supported; list `namespaces`",
        ));
    }
    errors
}

fn validate_label_selector(field: &str, selector: &LabelSelector) -> Vec<FieldError> {
    let mut errors = Vec::new();
    for (at, requirement) in selector.match_expressions.iter().flatten().enumerate() {
        let values = requirement.values.as_deref().unwrap_or_default();
        let item = format!("{field}.matchExpressions[{at}]");
        match requirement.operator.as_str() {
            "In" | "NotIn" if values.is_empty() => {
                errors.push(FieldError::required(format!("{item}.values")))
            }
            "Exists" | "DoesNotExist" if !values.is_empty() => errors.push(FieldError::forbidden(
                format!("{item}.values"),
                "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
            )),
            operator if !SELECTOR_OPERATORS.contains(&operator) => {
                errors.push(FieldError::not_supported(
                    format!("{item}.operator"),
                    operator,
                    SELECTOR_OPERATORS,
                ));
            }
            _ => {}
        }
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(placement: serde_json::Value) -> Vec<String> {
        let application: Application = serde_json::from_value(serde_json::json!({
            "spec": {"command": ["/bin/true"], "placement": placement},
        }))
        .expect("the test's placement decodes");
        application.validate(None).into_iter().map(|error| error.field).collect()
    }

    #[test]
    fn placement_rules_take_kubernetes_shapes_and_are_validated() {
        let good = serde_json::json!({
            "nodeSelector": {"disk": "ssd"},
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [
                        {"key": "zone", "operator": "In", "values": ["a", "b"]},
                        {"key": "gpu", "operator": "DoesNotExist"},
                        {"key": "cores", "operator": "Gt", "values": ["4"]},
                    ]}]},
                    "preferredDuringSchedulingIgnoredDuringExecution": [
                        {"weight": 10, "preference": {"matchExpressions": [{"key": "zone", "operator": "NotIn", "values": ["c"]}]}},
                    ],
                },
                "workloadAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "kubernetes.io/hostname"},
                ]},
                "workloadAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 100, "podAffinityTerm": {"labelSelector": {"matchExpressions": [{"key": "app", "operator": "Exists"}]}, "topologyKey": "zone"}},
                ]},
            },
            "tolerations": [
                {"key": "dedicated", "operator": "Equal", "value": "db", "effect": "NoSchedule"},
                {"operator": "Exists"},
                {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 30},
            ],
        });
        assert_eq!(fields(good), Vec::<String>::new());
        let bad = serde_json::json!({
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [
                        {"key": "zone", "operator": "In"},
                        {"key": "gpu", "operator": "Exists", "values": ["x"]},
                        {"key": "cores", "operator": "Lt", "values": ["four"]},
                        {"key": "x", "operator": "Near", "values": ["y"]},
                    ]}]},
                    "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 0, "preference": {}}],
                },
                "workloadAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{"topologyKey": ""}]},
            },
            "tolerations": [{"key": "a", "operator": "Exists", "value": "b"}, {"value": "b"}, {"key": "a", "effect": "Never"}, {"key": "a", "tolerationSeconds": 5}],
        });
        let required = "spec.placement.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions";
        assert_eq!(
            fields(bad),
            [
                format!("{required}[0].values"),
                format!("{required}[1].values"),
                format!("{required}[2].values[0]"),
                format!("{required}[3].operator"),
                "spec.placement.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight".into(),
                "spec.placement.affinity.workloadAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey".into(),
                "spec.placement.tolerations[0].operator".into(),
                "spec.placement.tolerations[1].operator".into(),
                "spec.placement.tolerations[2].effect".into(),
                "spec.placement.tolerations[3].effect".into(),
            ]
        );
        assert_eq!(scheduled_by_annotation("example.com"), "fleet.example.com/scheduled-by");
    }

    #[test]
    fn moving_off_its_node_ends_what_the_status_said_of_the_run_there() {
        let with = |node: Option<&str>| {
            let object = serde_json::json!({
                "spec": {"placement": node.map_or(serde_json::json!({}), |n| serde_json::json!({"nodeName": n}))},
                "status": {"phase": "Running", "restarts": 3, "attempts": 1, "observedGeneration": 2, "startedAt": "t",
                           "address": "10.0.0.1", "conditions": [{"type": "Ready", "status": "True"}, {"type": "Scheduled", "status": "True"}]},
            });
            object.as_object().unwrap().clone()
        };
        let reset = serde_json::json!({"phase": "Pending", "attempts": 1, "observedGeneration": 2,
                                       "conditions": [{"type": "Scheduled", "status": "True"}]});
        for (before, after, moved) in [
            (Some("a"), None, true),
            (Some("a"), Some("b"), true),
            (Some("a"), Some("a"), false),
            (None, Some("a"), false),
            (None, None, false),
        ] {
            let old = with(before);
            let mut object = with(after);
            Application::carried_status(&old, &mut object);
            let expected = if moved { reset.clone() } else { with(after)["status"].clone() };
            assert_eq!(object["status"], expected, "{before:?} -> {after:?}");
        }
    }
}
