//! Structured merge, the machinery of server-side apply: an object, its managers
//! (`metadata.managedFields`), a write and the Kind's schema in; the object to store, its
//! managers and any conflicts out. Pure functions over JSON: no I/O, no clock (the time is an
//! input), nothing of HTTP or storage.
//!
//! Start at [`operation`]: [`operation::apply`] merges an applied configuration and decides
//! ownership and conflicts; [`operation::record_update`] records every other write. The shapes
//! they follow are a [`schema::Schema`] read from the Kind's OpenAPI document and its list and
//! map markers; who owns what is a [`set::FieldSet`] per [`managed::Entry`], in Kubernetes'
//! `FieldsV1` form on the wire. [`typed`](crate::typed) holds the walks over a value and its
//! type that all of it is made of.
//!
//! The semantics are kube-apiserver's (its structured-merge-diff and field manager), so that
//! `kubectl apply --server-side`, client-go's and kube-rs's appliers behave as they do there.

pub mod error;
mod last_applied;
pub mod managed;
pub mod operation;
pub mod path;
pub mod schema;
pub mod set;
mod typed;

#[cfg(test)]
mod tests;
