//! `kayra-bench store`, `api`, `catalog`, `loop`, `scheduler`, `appset`, `nodes`, `http`,
//! `watch`, `consul` and `replicas`: throughput and latency, each printed next to a ceiling
//! measured in the same run (bare sled, bare etcd-client, a bare HTTP handler, a bare channel of
//! keys, a bare tonic stream, etcd's own election), so the ratios hold on a shared, noisy
//! machine where absolute numbers do not. Each prints its figures through [`report`]: a table
//! and one JSON line per figure. `--smoke` runs any of them at a small size (`cargo xtask bench
//! --smoke` runs them all so); the benchmarks that run `kayra-controller` run the one built
//! beside this binary, in the same profile.

#![allow(clippy::print_stdout)]

mod api;
mod appset;
mod catalog;
mod consul;
mod http;
mod loops;
mod nodes;
mod replicas;
mod report;
mod scheduler;
mod store;
mod watch;

use std::process::ExitCode;

use report::Size;

/// The controller's allocator, so that the product measured in process and the ceilings this
/// binary serves allocate as the controller does.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const USAGE: &str = "usage: kayra-bench store | api | catalog | loop | scheduler [--store memory|sled] | appset [--store memory|sled] | nodes [--nodes N] [--rounds R] [--store memory|sled] [--heartbeat-seconds S] | http | watch [--stuck N] [--watchers N] [--objects N] | consul | replicas [--rounds R], each with --smoke for a small run";

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
    let Some((which, rest)) = args.split_first() else {
        eprintln!("{USAGE}");
        return ExitCode::from(64);
    };
    let (size, rest) = Size::of(rest);
    let takes_options = matches!(
        which.as_str(),
        "scheduler"
            | "appset"
            | "nodes"
            | "watch"
            | "replicas"
            | "http-load"
            | "http-durable"
            | "http-bare"
            | "nodes-bare-server"
    );
    if !takes_options && !rest.is_empty() {
        eprintln!("{USAGE}");
        return ExitCode::from(64);
    }
    let result = match which.as_str() {
        "store" => runtime.block_on(store::run(size)),
        "api" => runtime.block_on(api::run(size)),
        "catalog" => runtime.block_on(catalog::run(size)),
        "loop" => runtime.block_on(loops::run(size)),
        "scheduler" => runtime.block_on(scheduler::run(&rest, size)),
        "appset" => runtime.block_on(appset::run(&rest, size)),
        "nodes" => runtime.block_on(nodes::run(&rest, size)),
        "http" => runtime.block_on(http::run(size)),
        "watch" => runtime.block_on(watch::run(&rest, size)),
        "consul" => runtime.block_on(consul::run(size)),
        "replicas" => runtime.block_on(replicas::run(&rest, size)),
        // The ceilings and the load generator of the benchmarks above, each re-executed as a
        // process of its own.
        "http-load" => runtime.block_on(http::load(&rest)),
        "http-durable" => runtime.block_on(http::durable(&rest)),
        "http-bare" => runtime.block_on(http::bare(&rest)),
        "nodes-bare-server" => runtime.block_on(nodes::bare::serve(&rest)),
        _ => {
            eprintln!("{USAGE}");
            return ExitCode::from(64);
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("benchmark failed: {error}");
            ExitCode::FAILURE
        }
    }
}
