//! What a registry operation can fail with, in the API's terms but without HTTP: the HTTP
//! adapter maps each variant to a status code and `reason` in one place.

use kayra_api::validation::FieldError;
use kayra_store::StoreError;

/// Everything a registry operation can fail with.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    /// No object of that name (or no namespace of that name to hold it).
    #[error("{resource} \"{name}\" not found")]
    NotFound {
        /// The resource, qualified by group (`applications.fleet.example.com`).
        resource: String,
        /// The name looked for.
        name: String,
    },
    /// The object exists, but its node has reported no usage sample of it yet (or not the
    /// two a rate needs): there is nothing to answer, and zeros would be a lie.
    #[error("{message}")]
    NotMeasured {
        /// The resource asked for, qualified by group (`pods.metrics.k8s.io`).
        resource: String,
        /// The name asked for.
        name: String,
        /// What is missing, and why.
        message: String,
    },
    /// An object of that name exists already.
    #[error("{resource} \"{name}\" already exists")]
    AlreadyExists {
        /// The resource, qualified by group.
        resource: String,
        /// The name taken.
        name: String,
    },
    /// The object changed since the caller read it, or a precondition does not hold.
    #[error("Operation cannot be fulfilled on {resource} \"{name}\": {message}")]
    Conflict {
        /// The resource, qualified by group.
        resource: String,
        /// The object's name.
        name: String,
        /// What did not hold.
        message: String,
    },
    /// A server-side apply would change fields other managers own: one cause per field, each
    /// naming its manager.
    #[error("{message}")]
    ApplyConflict {
        /// kube-apiserver's message (`Apply failed with 1 conflict: conflict with "m": .f`).
        message: String,
        /// Each field (`.spec.replicas`) and its manager (`conflict with "m"`).
        causes: Vec<(String, String)>,
    },
    /// The object breaks the Kind's rules; every offending field is named.
    #[error("{kind} \"{name}\" is invalid: {}", causes.iter().map(|c| format!("{}: {}", c.field, c.message)).collect::<Vec<_>>().join(", "))]
    Invalid {
        /// The Kind.
        kind: String,
        /// The object's name (may be empty when the name itself is missing).
        name: String,
        /// Each offending field.
        causes: Vec<FieldError>,
    },
    /// The request itself is malformed (a bad selector, a body that is not an object...).
    #[error("{0}")]
    BadRequest(String),
    /// The operation is refused whatever the object (creating in a terminating namespace).
    #[error("{0}")]
    Forbidden(String),
    /// The requested history is gone (a stale continue token or watch revision).
    #[error("{message}")]
    Expired {
        /// What expired, in the words kubectl expects.
        message: String,
        /// A continue token that lists the rest at the current revision, when there is one.
        continue_from: Option<String>,
    },
    /// The requested resourceVersion is newer than anything stored.
    #[error("Too large resource version: {requested}, current: {current}")]
    TooLargeResourceVersion {
        /// The revision asked for.
        requested: u64,
        /// The store's revision.
        current: u64,
    },
    /// The storage layer failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Stored data is not a valid object.
    #[error("stored object at {key} is corrupt: {message}")]
    Corrupt {
        /// The store key.
        key: String,
        /// The decoding error.
        message: String,
    },
}

impl RegistryError {
    /// Whether trying again unchanged may succeed.
    pub fn is_retryable(&self) -> bool {
        match self {
            RegistryError::Store(error) => error.is_retryable(),
            RegistryError::Conflict { .. } => true,
            _ => false,
        }
    }
}
