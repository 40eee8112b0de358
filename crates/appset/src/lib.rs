//! The ApplicationSet loop: expands each set into its Applications (and the Services its
//! components declare), rolls template changes out within the set's budget, and reports how far
//! it is in the set's status.
//!
//! Start at [`render`] (a set and the Nodes → what it should have) and [`plan`] (that and what
//! exists → the writes and the status); both do no IO and are table-tested. [`reconciler`]
//! keeps list-and-watch caches of sets, Applications, Nodes and Services and applies each plan
//! through the application layer under the loop's own identity.
//!
//! This crate never deletes a child of a set being deleted nor one it does not own by uid: a
//! set's deletion and its cascade belong to the garbage collector.

pub mod plan;
pub mod reconciler;
pub mod render;

use kayra_registry::RegistryError;

/// What went wrong in the set's loop.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The set does not render (too many children, a name that cannot be made valid, two
    /// children with one name).
    #[error("{0}")]
    Render(String),
    /// A read or write through the application layer failed.
    #[error("{0}")]
    Registry(#[source] RegistryError),
    /// The set, as stored, does not decode into its Kind.
    #[error("the stored set does not decode: {0}")]
    Decode(#[source] serde_json::Error),
}

impl Error {
    /// Whether trying again later may succeed.
    pub fn is_retryable(&self) -> bool {
        matches!(self, Error::Registry(_))
    }
}
