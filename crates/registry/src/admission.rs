//! The admission port: a writer's admission, asked on every create, update, patch, subresource
//! write and delete, and how its refusal becomes a [`RegistryError`].

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

/// The registry's side of admission: which request it is, and a refusal as a [`RegistryError`].
fn admission_request<'a>(
    resource: &'a Resource,
    operation: Operation,
    part: Part,
    dry_run: bool,
) -> AdmissionRequest<'a> {
    AdmissionRequest { resource, operation, part, dry_run }
}

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
    pub(crate) fn mutate(
        &self,
        resource: &Resource,
        operation: Operation,
        object: &mut Object,
        old: Option<&Object>,
    ) -> Result<bool, RegistryError> {
        let Some(admission) = &self.admission else { return Ok(false) };
        let request = admission_request(resource, operation, self.part, self.dry_run);
        admission.mutate(&request, object, old).map_err(|refusal| refused(resource, object, refusal))
    }

    pub(crate) fn validate(
        &self,
        resource: &Resource,
        operation: Operation,
        object: &Object,
        old: Option<&Object>,
    ) -> Result<(), RegistryError> {
        let Some(admission) = &self.admission else { return Ok(()) };
        let request = admission_request(resource, operation, self.part, self.dry_run);
        admission.validate(&request, object, old).map_err(|refusal| refused(resource, object, refusal))
    }
}

impl DeleteOptions {
    pub(crate) fn validate(&self, resource: &Resource, object: &Object) -> Result<(), RegistryError> {
        let Some(admission) = &self.admission else { return Ok(()) };
        let request = admission_request(resource, Operation::Delete, Part::Main, self.dry_run);
        admission
            .validate(&request, object, Some(object))
            .map_err(|refusal| refused(resource, object, refusal))
    }
}
