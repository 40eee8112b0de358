//! The bootstrap roles: the ClusterRoles and ClusterRoleBindings every cluster starts with,
//! created when missing and brought up to date while nobody has edited them (an edited one is
//! left exactly as it is). Reconciled at every start, one key per object.

use kayra_api::kinds::rbac::ClusterRole;
use kayra_api::kinds::rbac::ClusterRoleBinding;
use kayra_loop::runtime::Loop;
use kayra_loop::source::Fixed;
use kayra_loop::{Action, Key, ReconcileError, Reconciler};
use kayra_registry::RegistryError;
use serde_json::{Value, json};

use crate::client::Client;

/// The ClusterRoles and ClusterRoleBindings every cluster starts with.
pub fn defaults(domain: &str) -> (Vec<Value>, Vec<Value>) {
    let fleet = format!("fleet.{domain}");
    let authorization = format!("authorization.{domain}");
    let catalog = format!("catalog.{domain}");
    let registrations = json!(["apiregistrations", "apiregistrations/sync", "apiregistrations/status"]);
    let writes = json!(["get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"]);
    let api_version = format!("{authorization}/v1");
    let role = |name: &str, rules: Value| json!({"apiVersion": api_version, "kind": "ClusterRole", "metadata": {"name": name, "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"}}, "rules": rules});
    let workloads = json!(["applications", "applicationsets", "services"]);
    // Pods are a read-only view of Applications; events are written by the system.
    let core =
        json!({"apis": [""], "resources": ["pods", "pods/log", "events"], "verbs": ["get", "list", "watch"]});
    // An Application's output and what it consumes, as `kubectl logs` and `kubectl top pod`
    // read them (metrics.k8s.io's pods, as Kubernetes' aggregated view, edit and admin grant).
    let logs =
        json!({"apis": [fleet], "resources": ["applications/log", "applications/metrics"], "verbs": ["get"]});
    let pod_metrics =
        json!({"apis": ["metrics.k8s.io"], "resources": ["pods"], "verbs": ["get", "list", "watch"]});
    let statuses = json!(["applications/status", "applicationsets/status"]);
    // Evicting a pod moves the Application the scheduler placed (what `kubectl drain` does);
    // as in Kubernetes, admin and edit may, and so may a sysadmin, who drains nodes.
    let eviction = json!({"apis": [""], "resources": ["pods/eviction"], "verbs": ["create"]});
    // A service-account token for an Application, what an operator asks to see what its
    // workload presents; as Kubernetes' admin and edit may create `serviceaccounts/token`.
    let tokens =
        json!({"apis": [fleet, ""], "resources": ["applications/token", "pods/token"], "verbs": ["create"]});
    // A command beside a running process, its own stdin and output, its declared ports (`kubectl
    // exec`, `cp`, `attach`, `port-forward`): each a `create` of a stream, as Kubernetes' admin
    // and edit may, and view may not.
    let streams = json!({"apis": [fleet, ""], "resources": ["applications/exec", "applications/attach", "applications/portforward", "pods/exec", "pods/attach", "pods/portforward"], "verbs": ["create"]});
    // The spec states the workloads' histories keep, which whoever reads the workloads reads;
    // a rollback is an update, which whoever updates them may make.
    let history = json!({"apis": [fleet], "resources": ["applications/history", "applicationsets/history", "services/history"], "verbs": ["get"]});
    let rollback = json!({"apis": [fleet], "resources": ["applications/rollback", "applicationsets/rollback", "services/rollback"], "verbs": ["create"]});
    // Freezing and thawing a workload (both `create` on `<resource>/freeze`): admin's alone, as
    // a permission of its own to grant.
    let freeze = json!({"apis": [fleet], "resources": ["applications/freeze", "applicationsets/freeze"], "verbs": ["create"]});
    let roles = vec![
        role(
            "cluster-admin",
            json!([
                {"apis": ["*"], "resources": ["*"], "verbs": ["*"]},
                {"nonResourceURLs": ["*"], "verbs": ["*"]},
            ]),
        ),
        role(
            "sysadmin",
            json!([
                {"apis": [""], "resources": ["namespaces", "namespaces/status", "nodes", "nodes/status"], "verbs": ["*"]},
                // Not `*`: `bind` and `escalate` would let a sysadmin grant itself more.
                {"apis": [authorization], "resources": ["*"], "verbs": ["get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"]},
                {"apis": ["certificates.k8s.io"], "resources": ["certificatesigningrequests", "certificatesigningrequests/approval", "certificatesigningrequests/status"], "verbs": ["*"]},
                {"apis": [catalog], "resources": registrations, "verbs": writes},
                {"apis": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]},
                {"apis": ["metrics.k8s.io"], "resources": ["nodes", "pods"], "verbs": ["get", "list", "watch"]},
                // The nodes' heartbeats, which `kubectl describe node` shows.
                {"apis": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get", "list", "watch"]},
                eviction.clone(),
            ]),
        ),
        role(
            "admin",
            json!([
                {"apis": [fleet], "resources": workloads, "verbs": ["*"]},
                core,
                // Not `*`: that would include `bind` and `escalate`, which lift escalation prevention.
                {"apis": [authorization], "resources": ["roles", "rolebindings"], "verbs": ["get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"]},
                {"apis": [catalog], "resources": ["subscriptions"], "verbs": writes},
                {"apis": [fleet], "resources": ["secrets"], "verbs": ["*"]},
                {"apis": [fleet], "resources": statuses, "verbs": ["get", "list", "watch", "update", "patch"]},
                logs.clone(),
                pod_metrics.clone(),
                eviction.clone(),
                tokens.clone(),
                streams.clone(),
                history.clone(),
                rollback.clone(),
                freeze,
            ]),
        ),
        role(
            "edit",
            json!([
                {"apis": [fleet], "resources": workloads, "verbs": ["get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"]},
                {"apis": [catalog], "resources": ["subscriptions"], "verbs": writes},
                core,
                {"apis": [fleet], "resources": ["secrets"], "verbs": ["get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"]},
                {"apis": [fleet], "resources": statuses, "verbs": ["get", "list", "watch"]},
                logs.clone(),
                pod_metrics.clone(),
                eviction,
                tokens,
                streams,
                history.clone(),
                rollback,
            ]),
        ),
        role(
            "view",
            json!([
                {"apis": [fleet], "resources": workloads, "verbs": ["get", "list", "watch"]},
                {"apis": [catalog], "resources": ["subscriptions"], "verbs": ["get", "list", "watch"]},
                core,
                {"apis": [fleet], "resources": statuses, "verbs": ["get", "list", "watch"]},
                logs,
                pod_metrics,
                history,
            ]),
        ),
        // A node writes its own Node (NodeRestriction admission confines it to that one), renews
        // its certificate and reports events; it reads no Application or Secret over REST: what
        // it runs reaches it over its session, confined to what is bound to it.
        role(
            "system:node",
            json!([
                {"apis": [""], "resources": ["nodes", "nodes/status"], "verbs": ["get", "list", "watch", "create", "update", "patch"]},
                {"apis": ["certificates.k8s.io"], "resources": ["certificatesigningrequests"], "verbs": ["get", "list", "watch", "create"]},
                // Its heartbeat: node restriction confines writes to its own Lease.
                {"apis": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"]},
                // Node restriction confines these to the Applications bound to the node; a node
                // reads no Application, and no Secret, over the API: its session brings them.
                {"apis": [fleet], "resources": ["applications/status"], "verbs": ["update", "patch"]},
                {"apis": [""], "resources": ["events"], "verbs": ["create", "patch"]},
            ]),
        ),
        // A bootstrap token may only ask for a certificate and watch for the answer.
        role(
            "system:node-bootstrapper",
            json!([
                {"apis": ["certificates.k8s.io"], "resources": ["certificatesigningrequests"], "verbs": ["get", "list", "watch", "create"]},
            ]),
        ),
        role(
            "system:basic-user",
            json!([
                {"apis": ["authorization.k8s.io"], "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"], "verbs": ["create"]},
                {"apis": ["authentication.k8s.io"], "resources": ["selfsubjectreviews"], "verbs": ["create"]},
                // Apps ask Kayra for RBAC decisions about their own APIs.
                {"apis": [authorization], "resources": ["check"], "verbs": ["create"]},
                // An API's stored OpenAPI document is open to every authenticated caller.
                {"apis": [catalog], "resources": ["apiregistrations/openapi.json"], "verbs": ["get"]},
            ]),
        ),
        // What a verifier elsewhere (Vault's kubernetes auth) is bound to: reviewing tokens
        // and asking RBAC on others' behalf, as Kubernetes' role of the same name.
        role(
            "system:auth-delegator",
            json!([
                {"apis": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"]},
                {"apis": ["authorization.k8s.io"], "resources": ["subjectaccessreviews"], "verbs": ["create"]},
            ]),
        ),
        role(
            "system:monitoring",
            json!([
                {"nonResourceURLs": ["/metrics", "/healthz", "/livez", "/readyz"], "verbs": ["get"]},
            ]),
        ),
        role(
            "system:discovery",
            json!([
                {"nonResourceURLs": ["/api", "/api/*", "/apis", "/apis/*", "/version", "/openapi", "/openapi/*", "/healthz", "/livez", "/readyz"], "verbs": ["get"]},
            ]),
        ),
    ];
    let binding = |name: &str, group: &str| {
        json!({
            "apiVersion": api_version, "kind": "ClusterRoleBinding",
            "metadata": {"name": name, "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"}},
            "subjects": [{"kind": "Group", "name": group}],
            "roleRef": {"kind": "ClusterRole", "name": name},
        })
    };
    let bindings = vec![
        binding("system:discovery", "system:authenticated"),
        binding("system:basic-user", "system:authenticated"),
        binding("cluster-admin", "system:masters"),
        binding("system:node", "system:nodes"),
        binding("system:node-bootstrapper", "system:bootstrappers"),
        binding("system:monitoring", "system:monitoring"),
    ];
    (roles, bindings)
}

/// The annotation holding the digest of what a bootstrap object granted when it was last
/// written by the controller: while the object still grants exactly that, nobody has edited it
/// and it follows the defaults.
const DEFAULTS_DIGEST: &str = "kayra.io/bootstrap-digest";

/// What a role or binding grants, as a digest: its rules, or its subjects and role.
fn grant_digest(object: &Value) -> String {
    let grant = match serde_json::from_value::<ClusterRole>(object.clone()) {
        Ok(role) if object.get("rules").is_some() => serde_json::to_vec(&role.rules),
        _ => match serde_json::from_value::<ClusterRoleBinding>(object.clone()) {
            Ok(binding) => serde_json::to_vec(&(&binding.subjects, &binding.role_ref)),
            Err(error) => Err(error),
        },
    }
    .unwrap_or_default();
    let digest = ring::digest::digest(&ring::digest::SHA256, &grant);
    digest.as_ref().iter().map(|byte| format!("{byte:02x}")).collect()
}

/// Keeps each bootstrap object as the defaults say, unless it was edited.
#[derive(Debug, Clone)]
pub struct BootstrapReconciler {
    client: Client,
    group: String,
    roles: Vec<Value>,
    bindings: Vec<Value>,
}

impl BootstrapReconciler {
    /// The reconciler, writing as `client`.
    pub fn new(client: Client) -> BootstrapReconciler {
        let domain = client.layer().scheme().domain().to_owned();
        let (roles, bindings) = defaults(&domain);
        BootstrapReconciler { client, group: format!("authorization.{domain}"), roles, bindings }
    }

    /// Every object's key: `clusterroles/<name>` or `clusterrolebindings/<name>`.
    pub fn keys(&self) -> Vec<Key> {
        let named = |plural: &str, objects: &[Value]| -> Vec<Key> {
            objects
                .iter()
                .map(|object| {
                    Key::new(format!("{plural}/{}", object["metadata"]["name"].as_str().unwrap_or_default()))
                })
                .collect()
        };
        let mut keys = named("clusterroles", &self.roles);
        keys.extend(named("clusterrolebindings", &self.bindings));
        keys
    }

    /// The loop: every object once per start (or leadership term).
    pub fn into_loop(self) -> Loop {
        let keys = self.keys();
        Loop::new("bootstrap-roles", self).source(Fixed::new(keys))
    }

    /// Reconciles every object now, in order: roles before the bindings that name them.
    pub async fn ensure_all(&self) -> Result<(), RegistryError> {
        for key in self.keys() {
            self.ensure(&key).await?;
        }
        Ok(())
    }

    /// Creates the object `key` names when missing; brings it up to the defaults when nobody
    /// edited it.
    async fn ensure(&self, key: &Key) -> Result<(), RegistryError> {
        let Some((plural, name)) = key.as_str().split_once('/') else { return Ok(()) };
        let defaults = if plural == "clusterroles" { &self.roles } else { &self.bindings };
        let Some(default) = defaults.iter().find(|object| object["metadata"]["name"] == name) else {
            return Ok(());
        };
        let resource = self.client.resource(&self.group, plural)?;
        let mut object = default.clone();
        let digest = grant_digest(&object);
        object["metadata"]["annotations"] = json!({DEFAULTS_DIGEST: digest});
        let current = match self.client.get(&resource, None, name).await {
            Ok(current) => Value::Object(current),
            Err(RegistryError::NotFound { .. }) => {
                return match self.client.create(&resource, None, object).await {
                    Ok(_) | Err(RegistryError::AlreadyExists { .. }) => Ok(()),
                    Err(error) => Err(error),
                };
            }
            Err(error) => return Err(error),
        };
        let recorded = current["metadata"]["annotations"][DEFAULTS_DIGEST].as_str().unwrap_or_default();
        let current_digest = grant_digest(&current);
        if recorded != current_digest || current_digest == digest {
            return Ok(());
        }
        tracing::info!(%name, "bringing an unedited bootstrap {plural} object up to the current defaults");
        object["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"].clone();
        if let Some(Value::Object(annotations)) = current["metadata"].get("annotations").cloned() {
            for (key, value) in annotations {
                object["metadata"]["annotations"].as_object_mut().map(|own| own.entry(key).or_insert(value));
            }
        }
        match self.client.update(&resource, None, name, object).await {
            Ok(_) | Err(RegistryError::Conflict { .. }) => Ok(()),
            Err(error) => Err(error),
        }
    }
}

#[async_trait::async_trait]
impl Reconciler for BootstrapReconciler {
    async fn reconcile(&self, key: &Key) -> Result<Action, ReconcileError> {
        self.ensure(key).await?;
        Ok(Action::AwaitChange)
    }
}

#[cfg(test)]
mod tests;
