//! The admission chain: what a writer may store, beyond whether it may write at all. An ordered
//! [`Chain`] of plugins — mutating plugins first, each seeing what the one before it made, then
//! validating plugins, each of which may refuse — decides every create, update, patch (on the
//! patched result), delete and subresource write, dry runs included.
//!
//! Start at [`Chain::standard`], the plugins every Kayra server runs: [`rbac_escalation`] (an
//! RBAC object grants only what its writer holds), [`workload_references`] (a workload names only
//! Secrets and Services its writer may read), [`run_as_non_root`] (no workload runs as root),
//! [`node_restriction`] (a node writes only its own Node and its Applications' status),
//! [`node_placement`] (a binding names a Node that exists and has room, and only the scheduler
//! moves what it placed) and
//! [`certificate_requests`] (who asked for a certificate is stamped, and only the approval
//! subresource decides), [`child_ownership`] (only an ApplicationSet makes and changes its
//! children) and [`deletion_protection`] (no Service or Secret is deleted while Applications
//! name it). [`Chain::for_caller`] binds a chain to one writer as the registry's
//! [`kayra_registry::Admission`] port. A plugin reads what it needs through [`ports`], never the
//! store directly.
//!
//! A refusal is a [`Refusal`]: `Forbidden` for a policy (the writer may not), `Invalid` for an
//! object that names something it may not (each field named). This crate knows nothing of HTTP;
//! the REST adapter maps refusals to 403 and 422 through the registry's errors.

pub mod certificate_requests;
pub mod child_ownership;
pub mod deletion_protection;
pub mod node_placement;
pub mod node_restriction;
pub mod ports;
pub mod rbac_escalation;
pub mod run_as_non_root;
pub mod workload_references;

use std::borrow::Cow;
use std::sync::Arc;

use kayra_authz::Caller;
use kayra_registry::{AdmissionRequest, Object, Operation, Part, Refusal};

use crate::ports::{Fleet, Permissions};

/// One write as the plugins see it: who writes what, how, and the object as it would be stored
/// (on delete, as it stands) with what it replaces.
#[derive(Debug, Clone, Copy)]
pub struct Write<'a> {
    /// The writer.
    pub caller: &'a Caller,
    /// What the write does.
    pub operation: Operation,
    /// The object or a subresource (`status`).
    pub part: Part,
    /// Whether nothing will be written: plugins decide the same way.
    pub dry_run: bool,
    /// The API group; empty for core.
    pub api: &'a str,
    /// The resource's plural.
    pub resource: &'a str,
    /// The namespace, for namespaced resources.
    pub namespace: Option<&'a str>,
    /// The object's name.
    pub name: &'a str,
    /// The object as it would be stored; on delete, as it stands.
    pub object: &'a Object,
    /// What it replaces: the stored object on update and delete, nothing on create.
    pub old: Option<&'a Object>,
}

/// A plugin that may change the object before it is validated.
pub trait Mutating: Send + Sync {
    /// The plugin's name, as refusals quote it.
    fn name(&self) -> &'static str;

    /// The object this plugin would store instead of `write.object`, or `None` to leave it.
    fn mutate(&self, write: &Write<'_>) -> Result<Option<Object>, Refusal>;
}

/// A plugin that decides on the object as it would be stored.
pub trait Validating: Send + Sync {
    /// The plugin's name, as refusals quote it.
    fn name(&self) -> &'static str;

    /// `Ok` to admit the write; a refusal says which rule refuses it and what to change.
    fn validate(&self, write: &Write<'_>) -> Result<(), Refusal>;
}

/// An ordered list of plugins: every mutating plugin, in order, then every validating plugin,
/// in order, the first refusal ending the write.
#[derive(Clone, Default)]
pub struct Chain {
    mutating: Vec<Arc<dyn Mutating>>,
    validating: Vec<Arc<dyn Validating>>,
}

impl std::fmt::Debug for Chain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Chain")
            .field("mutating", &self.mutating.iter().map(|p| p.name()).collect::<Vec<_>>())
            .field("validating", &self.validating.iter().map(|p| p.name()).collect::<Vec<_>>())
            .finish()
    }
}

impl Chain {
    /// The plugins every Kayra server runs, deciding against `permissions` (the RBAC state of
    /// the moment). `domain` is the deployment's: RBAC Kinds live in `authorization.<domain>`,
    /// workloads in `fleet.<domain>`. `fleet` is the Nodes and what is bound to them, as
    /// placement is decided against.
    pub fn standard(domain: &str, permissions: Arc<dyn Permissions>, fleet: Arc<dyn Fleet>) -> Chain {
        Chain::default()
            .with_mutating(Arc::new(certificate_requests::CertificateRequests))
            .with_mutating(Arc::new(child_ownership::ChildOwnership::new(domain)))
            .with_mutating(Arc::new(node_placement::NodePlacement::new(domain, fleet.clone())))
            .with_validating(Arc::new(child_ownership::ChildOwnership::new(domain)))
            .with_validating(Arc::new(deletion_protection::DeletionProtection::new(domain, fleet.clone())))
            .with_validating(Arc::new(rbac_escalation::RbacEscalation::new(domain, permissions.clone())))
            .with_validating(Arc::new(workload_references::WorkloadReferences::new(domain, permissions)))
            .with_validating(Arc::new(run_as_non_root::RunAsNonRoot::new(domain)))
            .with_validating(Arc::new(node_restriction::NodeRestriction::new(domain)))
            .with_validating(Arc::new(node_placement::NodePlacement::new(domain, fleet)))
            .with_validating(Arc::new(certificate_requests::CertificateRequests))
    }

    /// This chain with `plugin` after its other mutating plugins.
    pub fn with_mutating(mut self, plugin: Arc<dyn Mutating>) -> Chain {
        self.mutating.push(plugin);
        self
    }

    /// This chain with `plugin` after its other validating plugins.
    pub fn with_validating(mut self, plugin: Arc<dyn Validating>) -> Chain {
        self.validating.push(plugin);
        self
    }

    /// The plugins' names in the order they run.
    pub fn plugin_names(&self) -> Vec<&'static str> {
        let mutating = self.mutating.iter().map(|plugin| plugin.name());
        mutating.chain(self.validating.iter().map(|plugin| plugin.name())).collect()
    }

    /// Runs the mutating plugins: the object to store (borrowed when none changed it).
    pub fn mutate<'a>(&self, write: &Write<'a>) -> Result<Cow<'a, Object>, Refusal> {
        let mut object = Cow::Borrowed(write.object);
        for plugin in &self.mutating {
            let seen = Write { object: &object, ..*write };
            if let Some(changed) = plugin.mutate(&seen).map_err(|refusal| quoted(plugin.name(), refusal))? {
                object = Cow::Owned(changed);
            }
        }
        Ok(object)
    }

    /// Runs the validating plugins; the first refusal is the answer.
    pub fn validate(&self, write: &Write<'_>) -> Result<(), Refusal> {
        for plugin in &self.validating {
            plugin.validate(write).map_err(|refusal| quoted(plugin.name(), refusal))?;
        }
        Ok(())
    }

    /// This chain deciding `caller`'s writes, as the registry's admission port.
    pub fn for_caller(self, caller: Caller) -> Arc<dyn kayra_registry::Admission> {
        Arc::new(CallerAdmission { chain: self, caller })
    }
}

/// A policy refusal names the plugin whose rule refuses; an invalid object's causes name their
/// fields and say why themselves.
fn quoted(plugin: &str, refusal: Refusal) -> Refusal {
    match refusal {
        Refusal::Forbidden(message) => Refusal::Forbidden(format!("{plugin}: {message}")),
        Refusal::Conflict(message) => Refusal::Conflict(format!("{plugin}: {message}")),
        invalid @ Refusal::Invalid(_) => invalid,
    }
}

/// Whether the writer is the control plane itself: one of its loops
/// (`system:kayra:<component>`, in `system:masters`).
pub(crate) fn control_plane(caller: &Caller) -> bool {
    caller.user.starts_with(CONTROL_PLANE_PREFIX) && caller.groups.iter().any(|g| g == kayra_authz::MASTERS)
}

/// The user names of the control plane's own loops begin so.
const CONTROL_PLANE_PREFIX: &str = "system:kayra:";

/// A chain bound to one writer: the registry's admission port.
struct CallerAdmission {
    chain: Chain,
    caller: Caller,
}

impl CallerAdmission {
    fn write<'a>(
        &'a self,
        request: &AdmissionRequest<'a>,
        object: &'a Object,
        old: Option<&'a Object>,
    ) -> Write<'a> {
        let resource = request.resource;
        let namespace = Some(kayra_registry::meta_str(object, "namespace")).filter(|_| resource.namespaced);
        Write {
            caller: &self.caller,
            operation: request.operation,
            part: request.part,
            dry_run: request.dry_run,
            api: &resource.group,
            resource: &resource.plural,
            namespace,
            name: kayra_registry::meta_str(object, "name"),
            object,
            old,
        }
    }
}

impl kayra_registry::Admission for CallerAdmission {
    fn mutate(
        &self,
        request: &AdmissionRequest<'_>,
        object: &mut Object,
        old: Option<&Object>,
    ) -> Result<bool, Refusal> {
        if self.chain.mutating.is_empty() {
            return Ok(false);
        }
        let current = object.clone();
        match self.chain.mutate(&self.write(request, &current, old))? {
            Cow::Owned(changed) => {
                *object = changed;
                Ok(true)
            }
            Cow::Borrowed(_) => Ok(false),
        }
    }

    fn validate(
        &self,
        request: &AdmissionRequest<'_>,
        object: &Object,
        old: Option<&Object>,
    ) -> Result<(), Refusal> {
        self.chain.validate(&self.write(request, object, old))
    }
}

#[cfg(test)]
mod fixture;
#[cfg(test)]
mod tests;
