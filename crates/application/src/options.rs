//! What a caller asks of a write beyond the object itself, in Kubernetes' terms (`dryRun`,
//! `fieldValidation`, `fieldManager`, a delete's preconditions and propagation policy), and
//! what a write answers. The HTTP adapter reads them from a request's query and body; a loop
//! builds them directly.

use kayra_api::validation::FieldError;
use kayra_authn::Identity;
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
    /// The client's `User-Agent`: its first word names the manager when `fieldManager` does
    /// not, as kube-apiserver names it (`kubectl/v1.32.4 (linux/amd64) ...` is `kubectl`).
    pub user_agent: Option<String>,
    /// Take over fields other managers own (`force`), on a server-side apply only.
    pub force: bool,
}

impl WriteRequest {
    /// The manager the write is recorded as: `fieldManager`; else the first word of the
    /// user agent, its unprintable characters dropped and cut at [`MAX_FIELD_MANAGER`] bytes;
    /// else the manager `identity` stands for (see [`manager_of`]).
    pub fn manager(&self, identity: &Identity) -> String {
        if let Some(manager) = self.field_manager.as_deref().filter(|manager| !manager.is_empty()) {
            return manager.to_owned();
        }
        let agent = self.user_agent.as_deref().unwrap_or_default();
        let word: String =
            agent.split('/').next().unwrap_or_default().chars().filter(|c| !c.is_control()).collect();
        match bounded(word.trim()) {
            "" => manager_of(identity),
            word => word.to_owned(),
        }
    }

    /// Checks what an apply asks beyond [`WriteRequest::check`]: it must name its manager.
    pub(crate) fn check_apply(&self) -> Result<(), RegistryError> {
        self.check()?;
        if self.field_manager.as_deref().is_none_or(str::is_empty) {
            return Err(patch_options_invalid(FieldError {
                field: "fieldManager".to_owned(),
                message: "Required value: is required for apply patch".to_owned(),
                reason: "FieldValueRequired",
            }));
        }
        Ok(())
    }

    /// Checks what a patch that is not an apply asks beyond [`WriteRequest::check`]: `force`
    /// is an apply's alone.
    pub(crate) fn check_patch(&self) -> Result<(), RegistryError> {
        self.check()?;
        if self.force {
            return Err(patch_options_invalid(FieldError::forbidden(
                "force",
                "may not be specified for non-apply patch",
            )));
        }
        Ok(())
    }

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

/// The manager a writer that names none is recorded as: the control plane's loops
/// (`system:kayra:<loop>`) as `kayra-<loop>`, a node's agent (`system:node:<name>`) as
/// `kayra-agent`, anyone else by their user name, at most [`MAX_FIELD_MANAGER`] bytes.
pub fn manager_of(identity: &Identity) -> String {
    let user = identity.user.as_str();
    let manager = if let Some(component) = user.strip_prefix("system:kayra:") {
        format!("kayra-{component}")
    } else if user.starts_with("system:node:") {
        "kayra-agent".to_owned()
    } else {
        user.to_owned()
    };
    bounded(&manager).to_owned()
}

/// `text` cut at [`MAX_FIELD_MANAGER`] bytes, on a character boundary.
fn bounded(text: &str) -> &str {
    let mut end = text.len().min(MAX_FIELD_MANAGER);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// A refusal of a patch's options, as kube-apiserver words it
/// (`PatchOptions.meta.k8s.io "" is invalid: ...`).
fn patch_options_invalid(cause: FieldError) -> RegistryError {
    RegistryError::Invalid {
        kind: "PatchOptions.meta.k8s.io".to_owned(),
        name: String::new(),
        causes: vec![cause],
    }
}

/// What a server-side apply wrote.
#[derive(Debug, Clone, PartialEq)]
pub struct Applied {
    /// The object as stored (or as it would be, on a dry run).
    pub object: Object,
    /// Warnings for the caller (the unknown fields dropped under `fieldValidation=Warn`).
    pub warnings: Vec<String>,
    /// Whether the apply created the object.
    pub created: bool,
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
