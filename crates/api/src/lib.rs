//! Kayra's object model: the shape of every Kind, its defaults and validation, its table
//! columns, and the [`scheme`] that names each one (group, version, kind, plural, short
//! names, scope, subresources).
//!
//! Core `v1` Kinds use the builtin Kubernetes shapes from `k8s-openapi`, so kubectl's typed
//! commands work on them; Kayra's own Kinds (`fleet.<domain>/v1`) are defined in [`kinds`].
//! Start at [`scheme::Scheme`].
//!
//! This crate is shapes and pure functions only: it does no I/O and knows nothing of storage,
//! HTTP or the registry.

pub mod clock;
pub mod codec;
pub mod kinds;
pub mod openapi;
pub mod quantity;
pub mod scheme;
pub mod session;
pub mod table;
pub mod validation;
pub mod verb;
pub mod view;
