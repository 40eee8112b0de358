//! Moving an Application off its node: what `pods/eviction` and the node-loss loop do.
//!
//! An Application the scheduler placed carries the annotation `fleet.<domain>/scheduled-by`,
//! written with its binding. Unbinding it clears `spec.placement.nodeName` and drops the
//! annotation in one write of its binding, which leaves `generation` as the binding did: its
//! node's agent no longer finds it in its desired state and stops it (within its grace period),
//! and the scheduler places it again. An Application its author
//! pinned (a binding without the annotation) is never moved: only its author changes the pin.

use std::sync::Arc;

use kayra_api::kinds::application::{bound_node, scheduled_by_annotation};
use kayra_registry::{Object, RegistryError, Resource, meta_str};

use crate::ApplicationLayer;
use crate::client::Client;
use crate::events::{Involved, Recorder, Severity};

/// How many times an unbinding that lost a race to another writer is tried again.
const RETRIES: usize = 5;

/// Whether the scheduler placed `application` (rather than its author pinning it).
pub fn scheduler_placed(domain: &str, application: &Object) -> bool {
    application
        .get("metadata")
        .and_then(|metadata| metadata.get("annotations"))
        .and_then(|annotations| annotations.get(scheduled_by_annotation(domain)))
        .is_some()
}

/// What unbinding found.
#[derive(Debug, Clone, PartialEq)]
pub enum Unbinding {
    /// It was bound to this node by the scheduler and is now unbound, awaiting placement.
    Unbound {
        /// The node it left.
        node: String,
        /// The Application as written.
        application: Object,
    },
    /// Its author pinned it to this node: it stays.
    Pinned {
        /// The node it is pinned to.
        node: String,
        /// The Application as it stands.
        application: Object,
    },
    /// It is bound to no node (or, with `from`, to another one): nothing to move.
    NotBound,
}

/// Unbinds the Application `namespace`/`name` from its node (only from `from`, when given),
/// as `client`, when the scheduler placed it; a dry run writes nothing.
pub async fn unbind(
    client: &Client,
    applications: &Resource,
    namespace: &str,
    name: &str,
    from: Option<&str>,
    dry_run: bool,
) -> Result<Unbinding, RegistryError> {
    let domain = client.layer().scheme().domain().to_owned();
    let mut attempt = 0;
    loop {
        let application = client.get(applications, Some(namespace), name).await?;
        let Some(node) = bound_node(&application).map(str::to_owned) else { return Ok(Unbinding::NotBound) };
        if from.is_some_and(|from| from != node) {
            return Ok(Unbinding::NotBound);
        }
        if !scheduler_placed(&domain, &application) {
            return Ok(Unbinding::Pinned { node, application });
        }
        if dry_run {
            return Ok(Unbinding::Unbound { node, application });
        }
        match client.unbind(namespace, name, meta_str(&application, "resourceVersion")).await {
            Ok(application) => return Ok(Unbinding::Unbound { node, application }),
            Err(RegistryError::Conflict { .. }) if attempt < RETRIES => attempt += 1,
            Err(error) => return Err(error),
        }
    }
}

/// An Application as an Event's object.
pub fn involved(applications: &Resource, application: &Object) -> Involved {
    Involved {
        api_version: format!("{}/{}", applications.group, applications.version),
        kind: "Application".into(),
        namespace: meta_str(application, "namespace").into(),
        name: meta_str(application, "name").into(),
        uid: meta_str(application, "uid").into(),
    }
}

/// What an eviction (`POST pods/<name>/eviction`) decided.
#[derive(Debug, Clone, PartialEq)]
pub enum Eviction {
    /// The Application was unbound from this node and will be placed again; or it was bound to
    /// none and there was nothing to move (`node` is `None`).
    Evicted {
        /// The node it left.
        node: Option<String>,
    },
    /// Its author pinned it to this node: it cannot move, as a pod whose disruption budget
    /// allows no disruption cannot be evicted.
    Refused {
        /// The node it is pinned to.
        node: String,
    },
}

/// Evicts the Pod `namespace`/`name` — the Application of that name — acting as the
/// control plane's `eviction` component (the caller was authorized for `create
/// pods/eviction`). A moved Application gets an Event `Evicted`.
pub async fn evict(
    control: &Arc<ApplicationLayer>,
    namespace: &str,
    name: &str,
    dry_run: bool,
) -> Result<Eviction, RegistryError> {
    let client = control.client(crate::controller_identity("eviction"));
    let applications = client.resource(&format!("fleet.{}", control.scheme().domain()), "applications")?;
    match unbind(&client, &applications, namespace, name, None, dry_run).await? {
        Unbinding::NotBound => Ok(Eviction::Evicted { node: None }),
        Unbinding::Pinned { node, .. } => Ok(Eviction::Refused { node }),
        Unbinding::Unbound { node, application } => {
            if !dry_run {
                let message =
                    format!("Evicted from node {node} through pods/eviction; it will be placed again");
                let recorder = Recorder::new(client.clone(), "kayra-eviction");
                let involved = involved(&applications, &application);
                if let Err(error) = recorder.record(&involved, Severity::Normal, "Evicted", &message).await {
                    tracing::debug!(%error, "the Evicted event was not recorded");
                }
            }
            Ok(Eviction::Evicted { node: Some(node) })
        }
    }
}
