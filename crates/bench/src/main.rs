//! `kayra-bench store`: the storage port's throughput and latency on memory, sled and etcd,
//! each printed next to a ceiling measured in the same run (bare sled, bare etcd-client), so
//! the ratios hold on a shared, noisy machine where absolute numbers do not.

#![allow(clippy::print_stdout)]

mod store;

use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("a runtime starts");
    match args.first().map(String::as_str) {
        Some("store") => match runtime.block_on(store::run()) {
            Ok(()) => ExitCode::SUCCESS,
            Err(error) => {
                eprintln!("benchmark failed: {error}");
                ExitCode::FAILURE
            }
        },
        _ => {
            eprintln!("usage: kayra-bench store");
            ExitCode::from(64)
        }
    }
}
