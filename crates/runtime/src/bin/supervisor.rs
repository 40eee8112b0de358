//! The supervisor as a program of its own: the argv prefix this crate's tests give the runtime.
//! The agent and controller binaries call the same entry point from a `supervise` subcommand.

fn main() {
    std::process::exit(kayra_runtime::supervise_main(std::env::args().skip(1).collect()));
}
