//! What a merge can fail with: an apply's conflicts, a configuration that cannot be merged,
//! unreadable managed fields, or a schema that cannot be read.

/// One field another manager owns that an apply would change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conflict {
    /// The manager, as a conflict names it (`"kubectl" with subresource "scale" using
    /// fleet.example.com/v1`).
    pub manager: String,
    /// The field, as kube-apiserver prints a path (`.spec.replicas`).
    pub field: String,
}

/// Why an apply (or the managed fields of a write) cannot be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MergeError {
    /// The apply would change fields other managers own.
    #[error("{message}")]
    Conflicts {
        /// kube-apiserver's message: `Apply failed with 1 conflict: conflict with "m": .f`.
        message: String,
        /// Each field and its manager.
        conflicts: Vec<Conflict>,
    },
    /// The applied configuration cannot be merged (a list item without its key, a set item
    /// twice), at the field named.
    #[error("{field}: {message}")]
    Invalid {
        /// The field, dotted (`spec.env[1]`).
        field: String,
        /// What is wrong.
        message: String,
    },
    /// The applied configuration sets `metadata.managedFields`, or the stored ones cannot be
    /// read.
    #[error("{0}")]
    ManagedFields(String),
    /// A schema's `$ref` names no definition.
    #[error("the schema refers to {0}, which it does not define")]
    MissingDefinition(String),
    /// A schema's list says it is a map without saying by what keys.
    #[error("a list of type map declares no x-kubernetes-list-map-keys")]
    MapWithoutKeys,
}
