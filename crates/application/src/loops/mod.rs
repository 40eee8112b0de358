//! The loops that keep the application layer itself current, each on the one loop runtime:
//! [`rbac`] rebuilds the RBAC index every decision is made over, [`bootstrap`] keeps the
//! bootstrap roles, and [`namespaces`] finalizes terminating namespaces.

pub mod bootstrap;
pub mod namespaces;
pub mod rbac;
