//! RBAC upkeep: the bootstrap roles, created on every start when missing and brought up to date
//! when unedited (an edited one is left as it is), and the loop that rebuilds the API's RBAC
//! index whenever roles, bindings or namespaces change (and every few seconds regardless).

use std::sync::Arc;
use std::time::Duration;

use kayra_api::kinds::rbac::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use kayra_apiserver::ApiState;
use kayra_authz::Rbac;
use kayra_registry::{ListOptions, RegistryError, Resource, WatchOptions, WriteOptions, meta_str};
use serde_json::{Value, json};

const RESYNC: Duration = Duration::from_secs(5);

fn resource(state: &ApiState, group: &str, plural: &str) -> Resource {
    let kind = state.scheme().find(group, "v1", plural).expect("the scheme serves RBAC");
    state.resource_for(kind).clone()
}

/// The ClusterRoles and ClusterRoleBindings every cluster starts with.
fn bootstrap(domain: &str) -> (Vec<Value>, Vec<Value>) {
    let fleet = format!("fleet.{domain}");
    let authorization = format!("authorization.{domain}");
    let catalog = format!("catalog.{domain}");
    let registrations = json!(["apiregistrations", "apiregistrations/sync", "apiregistrations/status"]);
    let writes = json!(["get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"]);
    let api_version = format!("{authorization}/v1");
    let role = |name: &str, rules: Value| json!({"apiVersion": api_version, "kind": "ClusterRole", "metadata": {"name": name, "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"}}, "rules": rules});
    let workloads = json!(["applications", "applicationsets", "services"]);
    // Pods are a read-only view of Applications; events are written by the system.
    let core = json!({"apis": [""], "resources": ["pods", "events"], "verbs": ["get", "list", "watch"]});
    let statuses = json!(["applications/status", "applicationsets/status"]);
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
                {"apis": [fleet], "resources": ["certificatesigningrequests", "certificatesigningrequests/status"], "verbs": ["*"]},
                {"apis": [catalog], "resources": registrations, "verbs": writes},
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
            ]),
        ),
        role(
            "view",
            json!([
                {"apis": [fleet], "resources": workloads, "verbs": ["get", "list", "watch"]},
                {"apis": [catalog], "resources": ["subscriptions"], "verbs": ["get", "list", "watch"]},
                core,
                {"apis": [fleet], "resources": statuses, "verbs": ["get", "list", "watch"]},
            ]),
        ),
        role(
            "system:node",
            json!([
                {"apis": [""], "resources": ["nodes", "nodes/status"], "verbs": ["get", "list", "watch", "create", "update", "patch"]},
                {"apis": [fleet], "resources": ["certificatesigningrequests"], "verbs": ["get", "list", "watch", "create"]},
            ]),
        ),
        role(
            "system:node-bootstrapper",
            json!([
                {"apis": [fleet], "resources": ["certificatesigningrequests"], "verbs": ["get", "list", "watch", "create"]},
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

/// Creates each bootstrap role and binding that is missing, and brings each one nobody has
/// edited up to the current defaults. An edited one is left exactly as it is.
pub(crate) async fn ensure_bootstrap(state: &ApiState) -> Result<(), RegistryError> {
    let group = format!("authorization.{}", state.scheme().domain());
    let (roles, bindings) = bootstrap(state.scheme().domain());
    for (plural, objects) in [("clusterroles", roles), ("clusterrolebindings", bindings)] {
        let resource = resource(state, &group, plural);
        for mut object in objects {
            let digest = grant_digest(&object);
            object["metadata"]["annotations"] = json!({DEFAULTS_DIGEST: digest});
            let name = object["metadata"]["name"].as_str().unwrap_or_default().to_owned();
            let current = match state.registry().get(&resource, None, &name).await {
                Ok(current) => Value::Object(current),
                Err(RegistryError::NotFound { .. }) => {
                    match state.registry().create(&resource, None, object, WriteOptions::default()).await {
                        Ok(_) | Err(RegistryError::AlreadyExists { .. }) => continue,
                        Err(error) => return Err(error),
                    }
                }
                Err(error) => return Err(error),
            };
            let recorded = current["metadata"]["annotations"][DEFAULTS_DIGEST].as_str().unwrap_or_default();
            let current_digest = grant_digest(&current);
            if recorded != current_digest || current_digest == digest {
                continue;
            }
            tracing::info!(%name, "bringing an unedited bootstrap {plural} object up to the current defaults");
            object["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"].clone();
            if let Some(Value::Object(annotations)) = current["metadata"].get("annotations").cloned() {
                for (key, value) in annotations {
                    object["metadata"]["annotations"]
                        .as_object_mut()
                        .map(|own| own.entry(key).or_insert(value));
                }
            }
            match state.registry().update(&resource, None, &name, object, WriteOptions::default()).await {
                Ok(_) | Err(RegistryError::Conflict { .. }) => {}
                Err(error) => return Err(error),
            }
        }
    }
    Ok(())
}

/// Every object of a resource, page after page.
async fn all(state: &ApiState, resource: &Resource) -> Result<Vec<Value>, RegistryError> {
    let mut objects = Vec::new();
    let mut options = ListOptions::default();
    loop {
        let page = state.registry().list(resource, None, &options).await?;
        objects.extend(page.items.into_iter().map(Value::Object));
        match page.continue_token {
            Some(token) => options.continue_token = Some(token),
            None => return Ok(objects),
        }
    }
}

/// Reads every role, binding and namespace into a fresh index.
async fn rebuild(state: &ApiState, resources: &[Resource; 5]) -> Result<Rbac, RegistryError> {
    let mut rbac = Rbac::default();
    let decode_failed = |error: serde_json::Error| {
        RegistryError::BadRequest(format!("a stored RBAC object does not decode: {error}"))
    };
    for value in all(state, &resources[0]).await? {
        rbac.add_cluster_role(serde_json::from_value::<ClusterRole>(value).map_err(decode_failed)?);
    }
    for value in all(state, &resources[1]).await? {
        rbac.add_role(serde_json::from_value::<Role>(value).map_err(decode_failed)?);
    }
    for value in all(state, &resources[2]).await? {
        rbac.add_cluster_binding(serde_json::from_value::<ClusterRoleBinding>(value).map_err(decode_failed)?);
    }
    for value in all(state, &resources[3]).await? {
        rbac.add_binding(serde_json::from_value::<RoleBinding>(value).map_err(decode_failed)?);
    }
    for value in all(state, &resources[4]).await? {
        if let Value::Object(namespace) = value {
            rbac.add_namespace(meta_str(&namespace, "name"));
        }
    }
    Ok(rbac)
}

/// Keeps the API's RBAC index current until the process ends.
pub(crate) async fn run(state: Arc<ApiState>) {
    let group = format!("authorization.{}", state.scheme().domain());
    let resources = [
        resource(&state, &group, "clusterroles"),
        resource(&state, &group, "roles"),
        resource(&state, &group, "clusterrolebindings"),
        resource(&state, &group, "rolebindings"),
        resource(&state, "", "namespaces"),
    ];
    let (changed, mut wake) = tokio::sync::mpsc::channel::<()>(1);
    for watched in resources.clone() {
        let (state, changed) = (state.clone(), changed.clone());
        // Each watcher ends with the loop that reads its wake-ups.
        tokio::spawn(async move {
            while !changed.is_closed() {
                let Ok(mut stream) = state.registry().watch(&watched, &WatchOptions::default()).await else {
                    tokio::select! {
                        () = changed.closed() => return,
                        () = tokio::time::sleep(RESYNC) => continue,
                    }
                };
                loop {
                    tokio::select! {
                        () = changed.closed() => return,
                        event = stream.next() => match event {
                            Ok(_) => { let _ = changed.try_send(()); }
                            Err(_) => break,
                        },
                    }
                }
            }
        });
    }
    loop {
        match rebuild(&state, &resources).await {
            Ok(rbac) => state.set_rbac(rbac),
            Err(error) => {
                tracing::warn!(%error, "rebuilding the RBAC index failed; keeping the previous one")
            }
        }
        let _ = tokio::time::timeout(RESYNC, wake.recv()).await;
    }
}
