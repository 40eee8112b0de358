//! What a caller asks of a write beyond the object itself, in Kubernetes' terms (`dryRun`,
//! `fieldValidation`, `fieldManager`, a delete's preconditions and propagation policy), and
//! what a write answers. The HTTP adapter reads them from a request's query and body; a loop
//! builds them directly.

use kayra_registry::{Object, RegistryError};

/// How a write treats fields its Kind does not have (`fieldValidation`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum FieldValidation {
    /// Refuse the write, naming every unknown field.
    Strict,
    /// Drop them and warn about each (Kubernetes' default).
    #[default]
    Warn,
    /// Drop them silently.
    Ignore,
}

impl FieldValidation {
    /// The value of that spelling (`Strict`, `Warn`, `Ignore`; empty is the default).
    pub fn parse(text: &str) -> Result<FieldValidation, RegistryError> {
        match text {
            "" | "Warn" => Ok(FieldValidation::Warn),
            "Strict" => Ok(FieldValidation::Strict),
            "Ignore" => Ok(FieldValidation::Ignore),
            other => Err(RegistryError::BadRequest(format!(
                "fieldValidation: Unsupported value: \"{other}\": supported values: \"Ignore\", \"Strict\", \"Warn\""
            ))),
        }
    }
}

/// The longest `fieldManager` accepted, as kube-apiserver bounds it.
pub const MAX_FIELD_MANAGER: usize = 128;

/// What a create, update or patch asks beyond its object.
#[derive(Debug, Clone, Default)]
pub struct WriteRequest {
    /// Decide and answer as if writing, but write nothing (`dryRun=All`).
    pub dry_run: bool,
    /// What to do with fields the Kind does not have.
    pub field_validation: FieldValidation,
    /// Who makes the change (`fieldManager`), at most [`MAX_FIELD_MANAGER`] printable
    /// characters.
    pub field_manager: Option<String>,
}

impl WriteRequest {
    /// Checks what the request asks: a field manager that is too long or not printable is
    /// refused.
    pub(crate) fn check(&self) -> Result<(), RegistryError> {
        let Some(manager) = &self.field_manager else { return Ok(()) };
        if manager.chars().count() > MAX_FIELD_MANAGER {
            return Err(RegistryError::BadRequest(format!(
                "fieldManager: Too long: may not be longer than {MAX_FIELD_MANAGER} characters"
            )));
        }
        if manager.chars().any(char::is_control) {
            return Err(RegistryError::BadRequest(
                "fieldManager: Invalid value: must consist of printable characters".to_owned(),
            ));
        }
        Ok(())
    }
}

/// What a delete asks beyond the object's name (the `DeleteOptions` body and query).
#[derive(Debug, Clone, Default)]
pub struct DeleteRequest {
    /// The object must have this uid.
    pub uid: Option<String>,
    /// The object must be at this resourceVersion.
    pub resource_version: Option<String>,
    /// `Orphan`, `Background` or `Foreground`.
    pub propagation_policy: Option<String>,
    /// Accepted for compatibility; deletion is immediate once finalizers are done.
    pub grace_period_seconds: Option<i64>,
    /// Decide and answer as if deleting, but delete nothing.
    pub dry_run: bool,
}

/// What a create, update or patch wrote.
#[derive(Debug, Clone, PartialEq)]
pub struct Written {
    /// The object as stored (or as it would be, on a dry run).
    pub object: Object,
    /// Warnings for the caller (the unknown fields dropped under `fieldValidation=Warn`).
    pub warnings: Vec<String>,
}
