//! The admission port: a writer's admission, asked on every create, update, patch, subresource
//! write and delete, and how its refusal becomes a [`RegistryError`].

use std::sync::Arc;

use kayra_api::validation::FieldError;

use crate::options::{DeleteOptions, WriteOptions};
use crate::{Object, Part, RegistryError, Resource, invalid, meta_str};

/// What a write does to an object, as admission sees it (a patch is an update of the patched
/// result).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    /// A new object.
    Create,
    /// A replaced object: an update or a patch, of the object or of a subresource.
    Update,
    /// A deleted object, or one marked for deletion while finalizers remain.
    Delete,
}

/// One write, as admission decides on it.
#[derive(Debug, Clone, Copy)]
pub struct AdmissionRequest<'a> {
    /// The resource written.
    pub resource: &'a Resource,
    /// What the write does.
    pub operation: Operation,
    /// The object or its status.
    pub part: Part,
    /// Whether nothing will be written (`dryRun=All`): admission decides the same way.
    pub dry_run: bool,
}

/// Why admission refuses a write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// The writer may not make this write (a policy): `Forbidden`, whatever the object.
    Forbidden(String),
    /// The object names something it may not (an invalid reference): `Invalid`, each field
    /// named.
    Invalid(Vec<FieldError>),
    /// The write conflicts with the state of other objects (a Service deleted while
    /// Applications still join it): `Conflict`, saying what holds it.
    Conflict(String),
}

/// A writer's admission: may change the object a create or update would store (after the Kind's
/// defaults, before its validation), then decides on it as it would be stored (defaulted and
/// valid) and on the object it replaces. Called for create, update, patch (on the patched
/// result), subresource writes and delete (with the object as it stands), dry run or not. A
/// refusal writes nothing.
pub trait Admission: Send + Sync {
    /// Changes `object` before it is validated (the mutating plugins); answers whether it
    /// changed it. `old` is what it replaces, on update.
    fn mutate(
        &self,
        request: &AdmissionRequest<'_>,
        object: &mut Object,
        old: Option<&Object>,
    ) -> Result<bool, Refusal>;

    /// Decides on `object` as it would be stored (on delete, as it stands) and on `old`, what
    /// it replaces (on delete, the same object).
    fn validate(
        &self,
        request: &AdmissionRequest<'_>,
        object: &Object,
        old: Option<&Object>,
    ) -> Result<(), Refusal>;
}

/// Who decides whether a write may be made: a writer's admission chain, or nobody.
#[derive(Clone)]
pub struct Admit(Option<Arc<dyn Admission>>);

impl Admit {
    /// The writer's admission decides.
    pub fn by(admission: Arc<dyn Admission>) -> Admit {
        Admit(Some(admission))
    }

    /// Nobody decides: only for writes the control plane makes on its own behalf that no
    /// writer's policy may refuse (the namespace finalizer deleting a terminating namespace's
    /// contents), and for tests of the registry itself. Every write a caller asks for is
    /// admitted through `Admit::by`.
    pub const fn unadmitted_housekeeping() -> Admit {
        Admit(None)
    }

    /// Lets the admission change `object` before it is validated; answers whether it did.
    fn mutate(
        &self,
        request: &AdmissionRequest<'_>,
        object: &mut Object,
        old: Option<&Object>,
    ) -> Result<bool, RegistryError> {
        let Some(admission) = &self.0 else { return Ok(false) };
        admission.mutate(request, object, old).map_err(|refusal| refused(request.resource, object, refusal))
    }

    /// Asks the admission to decide on `object` as it would be stored.
    fn validate(
        &self,
        request: &AdmissionRequest<'_>,
        object: &Object,
        old: Option<&Object>,
    ) -> Result<(), RegistryError> {
        let Some(admission) = &self.0 else { return Ok(()) };
        admission.validate(request, object, old).map_err(|refusal| refused(request.resource, object, refusal))
    }
}

impl std::fmt::Debug for Admit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Admit").field("admission", &self.0.is_some()).finish()
    }
}

/// A refusal as a [`RegistryError`].
fn refused(resource: &Resource, object: &Object, refusal: Refusal) -> RegistryError {
    match refusal {
        Refusal::Forbidden(message) => RegistryError::Forbidden(message),
        Refusal::Invalid(causes) => invalid(resource, object, causes),
        Refusal::Conflict(message) => RegistryError::Conflict {
            resource: resource.qualified(),
            name: meta_str(object, "name").to_owned(),
            message,
        },
    }
}

impl WriteOptions {
    /// Lets the writer's admission change the object a write would store.
    pub(crate) fn mutate(
        &self,
        resource: &Resource,
        operation: Operation,
        object: &mut Object,
        old: Option<&Object>,
    ) -> Result<bool, RegistryError> {
        let request = AdmissionRequest { resource, operation, part: self.part, dry_run: self.dry_run };
        self.admit.mutate(&request, object, old)
    }

    /// Asks the writer's admission whether the write may be made.
    pub(crate) fn validate(
        &self,
        resource: &Resource,
        operation: Operation,
        object: &Object,
        old: Option<&Object>,
    ) -> Result<(), RegistryError> {
        let request = AdmissionRequest { resource, operation, part: self.part, dry_run: self.dry_run };
        self.admit.validate(&request, object, old)
    }
}

impl DeleteOptions {
    /// Asks the deleter's admission whether the object, as it stands, may be deleted.
    pub(crate) fn validate(&self, resource: &Resource, object: &Object) -> Result<(), RegistryError> {
        let request = AdmissionRequest {
            resource,
            operation: Operation::Delete,
            part: Part::Main,
            dry_run: self.dry_run,
        };
        self.admit.validate(&request, object, Some(object))
    }
}
