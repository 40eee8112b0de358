//! The API catalog's rules: what an [`ApiRegistration`] and a [`Subscription`] may hold, which
//! API groups cannot be registered, which namespaces may subscribe, how a sync and a canary
//! rollout move a registration's `sync_id`, which subscriptions are due for reconciliation,
//! what a registration's sync status reports, and which resources an API serves according to
//! its OpenAPI document.
//!
//! The rules are pure functions ([`validate`], [`sync`], [`due`], [`status`],
//! [`openapi::resources`]); [`Catalog`] applies them over the storage port
//! (`kayra_store::Store`) and the catalog's own ports: the namespaces subscribers live in
//! ([`ports::Namespaces`]), where sync ids and time come from ([`IdGenerator`],
//! [`kayra_api::clock::Clock`]), and,
//! for a reconciliation pass ([`Catalog::reconcile`]), how an API's document is fetched and a
//! step is sent ([`SpecFetcher`], [`steps::StepRunner`]). The crate knows nothing of HTTP, of
//! Kayra's API server or of any storage engine: Kayra serves it over HTTP, and a team can embed
//! it in its own service over its own store. Start reading at [`Catalog`].
//!
//! # Embedding the catalog
//!
//! A team's own catalog, over the memory store (`kayra_store_sled::open` gives a durable one),
//! with its tenants as a fixed list of namespaces; `examples/embed-catalog` serves the same over
//! HTTP.
//!
//! ```
//! use std::sync::Arc;
//!
//! use kayra_catalog::ports::FixedNamespaces;
//! use kayra_catalog::steps::{StepRequest, StepRunner};
//! use kayra_catalog::{
//!     ApiRegistration, Catalog, CatalogError, RandomIds, Scope, SpecFetcher, Subscription,
//!     SyncRequest,
//! };
//! use kayra_api::clock::SystemClock;
//! use kayra_store::mvcc::{MvccStore, Options};
//!
//! /// The team's gateway, which serves every API's OpenAPI document.
//! struct Gateway;
//!
//! #[async_trait::async_trait]
//! impl SpecFetcher for Gateway {
//!     async fn fetch(&self, _url: &str, _limit: usize) -> Result<(u16, Vec<u8>), String> {
//!         let document = r#"{"openapi": "3.1.0", "paths": {"/apis/compute.example.com/v1/machines": {"get": {}}}}"#;
//!         Ok((200, document.as_bytes().to_vec()))
//!     }
//! }
//!
//! #[async_trait::async_trait]
//! impl StepRunner for Gateway {
//!     async fn send(&self, _request: &StepRequest) -> Result<u16, String> {
//!         Ok(200)
//!     }
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), CatalogError> {
//! let scope = Scope {
//!     root: "/catalog/".to_owned(),
//!     domain: "example.com".to_owned(),
//!     platform: "sandbox".to_owned(),
//!     region: "eu-west-1".to_owned(),
//!     // The team's own service answers under this group; nobody may register it.
//!     reserved_groups: vec!["tenants.example.com".to_owned()],
//! };
//! let catalog = Catalog::new(
//!     Arc::new(MvccStore::in_memory(Options::default())?),
//!     scope,
//!     Arc::new(FixedNamespaces::new(["sre", "apps"])),
//!     Arc::new(RandomIds),
//!     Arc::new(SystemClock),
//! );
//!
//! let compute = ApiRegistration {
//!     name: "compute.example.com".to_owned(),
//!     short_name: "compute".to_owned(),
//!     active: true,
//!     owner: "sre-a".to_owned(),
//!     ..ApiRegistration::default()
//! };
//! let created = catalog.create_registration(compute).await?;
//! assert_eq!(created.object.platform, "sandbox", "the scope is stamped whatever the body says");
//! catalog.subscribe("sre", Subscription::new("", "compute.example.com", true)).await?;
//!
//! // Every rule Kayra's API has, the embedder has too.
//! let reserved = ApiRegistration { name: "tenants.example.com".to_owned(), ..ApiRegistration::default() };
//! assert!(matches!(catalog.create_registration(reserved).await, Err(CatalogError::Invalid(_))));
//! let ghost = catalog.subscribe("ghost", Subscription::new("", "compute.example.com", true)).await;
//! assert!(matches!(ghost, Err(CatalogError::NotFound(_))));
//!
//! // A new build, first for `sre` only; a pass of the reconciler takes `sre` to it.
//! let canary = SyncRequest { canary_namespaces: vec!["sre".to_owned()] };
//! let build = catalog.sync("compute.example.com", &canary).await?.object.sync_id;
//! let config = kayra_catalog::steps::ReconcilerConfig {
//!     gateway_url: Some("http://gateway.internal".to_owned()),
//!     ..Default::default()
//! };
//! let report = catalog.reconcile(&config, &Gateway, &Gateway, 4).await?;
//! assert_eq!(report.attempts.len(), 1);
//! assert_eq!(report.attempts[0].failure, None);
//!
//! let status = catalog.status("compute.example.com").await?;
//! assert_eq!(status.sync_id, build);
//! assert_eq!((status.subscriptions[0].namespace.as_str(), status.subscriptions[0].synced), ("sre", true));
//! # Ok(())
//! # }
//! ```

pub mod openapi;
pub mod ports;
pub mod reconciler;
mod registration;
mod service;
pub mod steps;
mod subscription;
mod sync;

pub use registration::{ApiRegistration, DependencyRef, Problem, is_api_name, is_short_name, validate};
pub use service::{Attempt, Catalog, CatalogError, Report, Scope, SpecFetcher, Stored, StoredSpec};
pub use subscription::{RegistrationStatus, Subscription, SubscriptionState, SubscriptionSync, status};
pub use sync::{IdGenerator, RandomIds, SyncError, SyncRequest, due, sync};
