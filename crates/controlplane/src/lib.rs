//! The control plane's assembly: everything `kayra-controller` runs, as a library, so that the
//! binary, the test kit and the benchmarks build the same thing. [`pki::init`] writes the
//! data directory's credentials; [`store::open_store`] opens the configured store;
//! [`assemble::assemble`] builds the application layer, the catalog, the node server and the
//! HTTP surface's state over it; [`run::run`] serves them and runs the loops until told to
//! stop; [`run::serve`] does all of it from a [`config::Config`], with the local node beside.
//! [`token`] mints bootstrap tokens through the running controller; [`identity`] rotates the
//! service-account signing key through it.
//!
//! Start reading at `run.rs`, then `assemble.rs` and `loops.rs`. `bridges.rs` answers one
//! domain crate's ports with another's; `local.rs` is the controller's in-process node.
//!
//! This crate is the outer ring: it may wire adapters (the stores, the HTTP and gRPC surfaces,
//! the client) into the domain crates' ports, and nothing but the binary depends on it for
//! production. It never holds a rule of its own: who may do what, what an object may hold, how
//! a loop reconciles, all live in the domain crates it wires. It never parses a command line,
//! installs a logger or handles a signal (the binary does), and never writes to standard output.

mod address;
pub mod assemble;
mod bridges;
pub mod cluster;
pub mod config;
mod error;
pub mod features;
pub mod identity;
mod local;
mod loops;
mod metered;
mod peers;
pub mod pki;
mod process;
mod retry;
pub mod run;
pub mod store;
pub mod token;
mod usage;
mod watch_metrics;

pub use error::ControlPlaneError;
