//! What goes wrong in placement: a plugin that refuses an Application outright, a bind that
//! could not be written, or the application layer's resources not being there.

use kayra_registry::RegistryError;

/// What went wrong in the scheduler.
#[derive(Debug, thiserror::Error)]
pub enum SchedulerError {
    /// A pre-filter plugin rejects the Application on every node; the reason is counted once
    /// per node, in kube-scheduler's words.
    #[error("{reason}")]
    Rejected {
        /// Why, as kube-scheduler words a filter's reason.
        reason: String,
    },
    /// A reserve plugin refused the node chosen for the Application.
    #[error("{reason}")]
    ReservationRefused {
        /// Why the decision cannot stand.
        reason: String,
    },
    /// No bind plugin binds the Application.
    #[error("no bind plugin binds {app} to {node}")]
    NoBinder {
        /// The Application, `namespace/name`.
        app: String,
        /// The node it was to go to.
        node: String,
    },
    /// The bind's write failed.
    #[error("binding {app} to {node}: {source}")]
    Bind {
        /// The Application, `namespace/name`.
        app: String,
        /// The node it was to go to.
        node: String,
        /// Why the write failed.
        #[source]
        source: Box<RegistryError>,
    },
    /// A resource the scheduler works on is not served.
    #[error("{what}: {source}")]
    Registry {
        /// What was being done.
        what: String,
        /// Why it failed.
        #[source]
        source: Box<RegistryError>,
    },
}

impl SchedulerError {
    /// Whether trying again unchanged may succeed: a write that met a concurrent one, or a
    /// store that was briefly unavailable. A refusal holds until something changes.
    pub fn is_retryable(&self) -> bool {
        match self {
            SchedulerError::Bind { source, .. } | SchedulerError::Registry { source, .. } => {
                source.is_retryable()
            }
            SchedulerError::Rejected { .. }
            | SchedulerError::ReservationRefused { .. }
            | SchedulerError::NoBinder { .. } => false,
        }
    }
}
