//! The API catalog's rules: what an [`ApiRegistration`] and a [`Subscription`] may hold, how a
//! sync and a canary rollout move a registration's `sync_id`, which subscriptions are due for
//! reconciliation and what a registration's sync status reports, and which resources an API
//! serves according to its OpenAPI document.
//!
//! Everything here is a pure function of its inputs; where randomness is needed it comes
//! through the [`IdGenerator`] port, so a team embedding the catalog decides where ids come from
//! and tests fix them.

pub mod openapi;
mod registration;
mod service;
pub mod steps;
mod subscription;
mod sync;

pub use registration::{ApiRegistration, DependencyRef, Problem, is_api_name, is_short_name, validate};
pub use service::{
    Attempt, Catalog, CatalogError, Clock, Report, Scope, SpecFetcher, Stored, StoredSpec, SystemClock,
};
pub use subscription::{RegistrationStatus, Subscription, SubscriptionState, SubscriptionSync, status};
pub use sync::{IdGenerator, RandomIds, SyncError, SyncRequest, due, sync};
