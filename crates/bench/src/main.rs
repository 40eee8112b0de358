//! `kayra-bench store`, `api`, `catalog`, `loop`, `scheduler`, `appset`, `nodes`, `http`, `watch`, `consul` and `replicas`: throughput and latency, each
//! printed next to a ceiling measured in the same run (bare sled, bare etcd-client, a bare HTTP
//! handler, a bare channel of keys, a bare tonic stream, etcd's own election), so the ratios hold on a shared, noisy
//! machine where absolute numbers do not.

#![allow(clippy::print_stdout)]

mod api;
mod appset;
mod catalog;
mod consul;
mod http;
mod loops;
mod nodes;
mod replicas;
mod scheduler;
mod store;
mod watch;

use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("KAYRA_LOG").unwrap_or_else(|_| "warn".into()),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("a runtime starts");
    match args.first().map(String::as_str) {
        Some(which @ ("store" | "api" | "catalog" | "loop" | "scheduler" | "appset")) => {
            let result = match which {
                "store" => runtime.block_on(store::run()),
                "api" => runtime.block_on(api::run()),
                "loop" => runtime.block_on(loops::run()),
                "scheduler" => runtime.block_on(scheduler::run(&args[1..])),
                "appset" => runtime.block_on(appset::run(&args[1..])),
                _ => runtime.block_on(catalog::run()),
            };
            match result {
                Ok(()) => ExitCode::SUCCESS,
                Err(error) => {
                    eprintln!("benchmark failed: {error}");
                    ExitCode::FAILURE
                }
            }
        }
        Some(which @ ("http" | "http-load" | "http-bare" | "http-durable")) => {
            let result = match which {
                "http" => runtime.block_on(http::run()),
                // The external benchmark's load generator and bare handler, each a process of its own.
                "http-load" => runtime.block_on(http::load(&args[1..])),
                "http-durable" => runtime.block_on(http::durable(&args[1..])),
                _ => runtime.block_on(http::bare(&args[1..])),
            };
            match result {
                Ok(()) => ExitCode::SUCCESS,
                Err(error) => {
                    eprintln!("benchmark failed: {error}");
                    ExitCode::FAILURE
                }
            }
        }
        Some(which @ ("nodes" | "nodes-bare-server" | "watch" | "consul" | "replicas")) => {
            let result = if which == "consul" {
                runtime.block_on(consul::run(&args[1..]))
            } else if which == "replicas" {
                runtime.block_on(replicas::run(&args[1..]))
            } else if which == "watch" {
                runtime.block_on(watch::run(&args[1..]))
            } else if which == "nodes" {
                runtime.block_on(nodes::run(&args[1..]))
            } else {
                // The node benchmark's ceiling, re-executed as a process of its own.
                runtime.block_on(nodes::bare::serve(&args[1..]))
            };
            match result {
                Ok(()) => ExitCode::SUCCESS,
                Err(error) => {
                    eprintln!("benchmark failed: {error}");
                    ExitCode::FAILURE
                }
            }
        }
        _ => {
            eprintln!(
                "usage: kayra-bench store | api | catalog | loop | scheduler [--store memory|sled] | appset [--store memory|sled] | nodes [--nodes N] [--rounds R] [--store memory|sled] | http | watch [--stuck N] [--watchers N] [--objects N] | consul | replicas [--rounds R]"
            );
            ExitCode::from(64)
        }
    }
}
