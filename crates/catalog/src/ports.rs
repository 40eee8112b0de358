//! What the catalog asks of its embedder besides storage: where subscribers' namespaces are
//! kept. The storage port is `kayra_store::Store`; the id, clock, document and step ports sit
//! beside the code that uses them ([`crate::IdGenerator`], [`kayra_api::clock::Clock`],
//! [`crate::SpecFetcher`], [`crate::steps::StepRunner`]).

use std::collections::BTreeSet;

use kayra_store::StoreError;

/// Where a namespace stands, as far as a new subscription goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NamespaceState {
    /// No namespace of that name.
    Absent,
    /// It exists and takes new subscriptions.
    Active,
    /// It is being deleted: it takes nothing new, and its subscriptions are ending.
    Terminating,
}

/// The namespaces subscribers live in, as the embedder keeps them. Kayra reads its own
/// `v1` Namespaces; a team embedding the catalog answers from wherever its tenants are.
#[async_trait::async_trait]
pub trait Namespaces: Send + Sync {
    /// The state of the namespace `name`. When the namespaces cannot be read just now, answer
    /// [`StoreError::Unavailable`], so the caller knows to try again.
    async fn state(&self, name: &str) -> Result<NamespaceState, StoreError>;
}

/// Namespaces fixed when the catalog is built, for an embedder whose tenants are a list in its
/// configuration: each is active, every other name absent.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FixedNamespaces {
    names: BTreeSet<String>,
}

impl FixedNamespaces {
    /// Exactly `names`.
    pub fn new(names: impl IntoIterator<Item = impl Into<String>>) -> FixedNamespaces {
        FixedNamespaces { names: names.into_iter().map(Into::into).collect() }
    }
}

#[async_trait::async_trait]
impl Namespaces for FixedNamespaces {
    async fn state(&self, name: &str) -> Result<NamespaceState, StoreError> {
        Ok(if self.names.contains(name) { NamespaceState::Active } else { NamespaceState::Absent })
    }
}
