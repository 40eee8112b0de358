//! `cargo xtask <task>`: the project's tasks, in Rust so they run wherever cargo does.
//!
//! - `ci`: formatting, clippy with warnings denied, every test, cargo-deny (bans, licences,
//!   sources), tidy (every `.rs` file opens with a `//!` comment) and the boundary check (no
//!   domain crate depends on an adapter). Green here means green in CI.
//!   Tests run under cargo-nextest when it is installed, else under `cargo test`. A test that
//!   finds a tool missing (etcd, kubectl, nginx) passes without running what it tests; the run
//!   ends with the list of those skips and why, and under CI (`CI` set) a skip is a failure.
//! - `e2e`: the kubectl acceptance suite against the real binary.
//! - `bench store`, `bench api`, `bench catalog`, `bench loop`, `bench scheduler`, `bench appset`,
//!   `bench nodes [--nodes N]`, `bench http`, `bench watch`: the
//!   benchmarks, in release mode.

#![allow(clippy::print_stdout)]

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

/// Crates on the outside of the hexagon: they may use axum, tonic, sled or etcd-client, and
/// nothing at the centre may depend on them. `controlplane` and `nodeagent` are the outer ring's
/// compositions: they wire adapters into the domain crates' ports for the two binaries.
const ADAPTERS: &[&str] = &[
    "store-sled",
    "store-etcd",
    "apiserver",
    "grpc",
    "client",
    "controlplane",
    "nodeagent",
    "testkit",
    "bench",
];

/// What a domain crate must never reach, directly or not.
const FORBIDDEN: &[&str] = &[
    "axum",
    "tonic",
    "hyper",
    "sled",
    "etcd-client",
    "kayra-store-sled",
    "kayra-store-etcd",
    "kayra-apiserver",
    "kayra-grpc",
    "kayra-client",
    "kayra-testkit",
    "kayra-bench",
];

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let result =
        match args.as_slice() {
            ["ci"] => ci(),
            // The controller's end-to-end tests run the agent binary beside it: build it first,
            // so they never find it missing or run a stale one.
            ["e2e"] => cargo(&["build", "--package", "kayra-agent"])
                .and_then(|()| tests(&["--package", "kayra-controller"], &mut Vec::new())),
            ["bench", which @ ("store" | "api" | "catalog" | "loop")] => {
                cargo(&["run", "--release", "--package", "kayra-bench", "--", which])
            }
            ["bench", which @ ("scheduler" | "appset"), rest @ ..] => {
                let mut args = vec!["run", "--release", "--package", "kayra-bench", "--", which];
                args.extend_from_slice(rest);
                cargo(&args)
            }
            // The external HTTP benchmark drives the real controller binary from other processes.
            ["bench", "http"] => cargo(&["build", "--release", "--package", "kayra-controller"])
                .and_then(|()| cargo(&["run", "--release", "--package", "kayra-bench", "--", "http"])),
            // The node and watch benchmarks run the real controller binary as a process of its own.
            ["bench", which @ ("nodes" | "watch"), rest @ ..] => {
                cargo(&["build", "--release", "--package", "kayra-controller"]).and_then(|()| {
                    let mut args = vec!["run", "--release", "--package", "kayra-bench", "--", which];
                    args.extend_from_slice(rest);
                    cargo(&args)
                })
            }
            _ => Err(
                "usage: cargo xtask ci | cargo xtask e2e | cargo xtask bench store|api|catalog|loop|scheduler [--store sled]|appset [--store sled]|nodes [--nodes N]|http|watch [--stuck N] [--watchers N] [--objects N]"
                    .to_owned(),
            ),
        };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("xtask: {error}");
            ExitCode::FAILURE
        }
    }
}

/// The environment variable naming the file where a skipped test appends `<package> <test>:
/// <reason>`; `kayra_store_etcd::test_server::SKIPPED_LOG` on the tests' side.
const SKIPPED_LOG: &str = "KAYRA_SKIPPED_LOG";

fn ci() -> Result<(), String> {
    let mut skipped = Vec::new();
    step("fmt", || cargo(&["fmt", "--all", "--check"]))?;
    step("tidy", tidy)?;
    step("boundaries", boundaries)?;
    step("clippy", || {
        cargo(&[
            "clippy",
            "--workspace",
            "--all-targets",
            "--all-features",
            "--locked",
            "--",
            "-D",
            "warnings",
        ])
    })?;
    step("deny", || deny(&mut skipped))?;
    step("test", || tests(&["--workspace", "--locked"], &mut skipped))
}

/// Runs the tests of `selection` (cargo package arguments), doctests included, with nextest
/// when it is installed and `cargo test` otherwise, then prints every skip: the tests' (read back
/// from the file [`SKIPPED_LOG`] names) after `earlier`, the ones xtask itself made. Under CI a
/// skip fails the run, though the tests already refuse to skip there.
fn tests(selection: &[&str], earlier: &mut Vec<String>) -> Result<(), String> {
    let log = std::env::temp_dir().join(format!("kayra-skipped-{}.log", std::process::id()));
    let _ = std::fs::remove_file(&log);
    let env = [(SKIPPED_LOG, log.as_os_str())];
    let nextest = Command::new(cargo_binary())
        .args(["nextest", "--version"])
        .output()
        .is_ok_and(|out| out.status.success());
    let ran = if nextest {
        let run = [&["nextest", "run", "--no-fail-fast"], selection].concat();
        let doc = [&["test", "--doc"], selection].concat();
        cargo_with(&run, &env).and_then(|()| cargo_with(&doc, &env))
    } else {
        println!(
            "cargo-nextest is not installed: running the tests with `cargo test` \
             (`cargo install cargo-nextest --locked` gives each test its own process)"
        );
        cargo_with(&[&["test", "--no-fail-fast"], selection].concat(), &env)
    };
    let recorded = std::fs::read_to_string(&log).unwrap_or_default();
    let _ = std::fs::remove_file(&log);
    let mut skips: Vec<String> = recorded.lines().map(str::to_owned).collect();
    skips.sort();
    skips.splice(0..0, earlier.drain(..));
    if !skips.is_empty() {
        println!("==> skipped: {} check(s) passed without running, for want of a tool", skips.len());
        for skip in &skips {
            println!("  {skip}");
        }
    }
    ran?;
    if std::env::var_os("CI").is_some() && !skips.is_empty() {
        return Err(format!("{} check(s) skipped under CI", skips.len()));
    }
    Ok(())
}

fn step(name: &str, run: impl FnOnce() -> Result<(), String>) -> Result<(), String> {
    println!("==> {name}");
    run().map_err(|error| format!("{name}: {error}"))
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("xtask sits in the workspace root").to_path_buf()
}

fn cargo_binary() -> String {
    std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned())
}

fn cargo(args: &[&str]) -> Result<(), String> {
    cargo_with(args, &[])
}

fn cargo_with(args: &[&str], env: &[(&str, &std::ffi::OsStr)]) -> Result<(), String> {
    let status = Command::new(cargo_binary())
        .args(args)
        .envs(env.iter().copied())
        .current_dir(root())
        .status()
        .map_err(|error| format!("cannot run cargo: {error}"))?;
    if status.success() { Ok(()) } else { Err(format!("`cargo {}` failed ({status})", args.join(" "))) }
}

/// cargo-deny's bans (including the adapter wrappers), licences and sources. The advisory
/// database cannot be fetched from these machines, so advisories are not checked here.
fn deny(skipped: &mut Vec<String>) -> Result<(), String> {
    let installed =
        Command::new("cargo-deny").arg("--version").output().is_ok_and(|out| out.status.success());
    if !installed {
        if std::env::var_os("CI").is_some() {
            return Err("cargo-deny is not installed; .ci/run installs it".to_owned());
        }
        let reason = "cargo-deny is not installed (cargo install cargo-deny --version 0.20.2 --locked)";
        println!("skipped: {reason}");
        skipped.push(format!("xtask deny: {reason}"));
        return Ok(());
    }
    cargo(&["deny", "--all-features", "check", "bans", "licenses", "sources"])
}

/// Every Rust file opens with a `//!` comment saying what it owns.
fn tidy() -> Result<(), String> {
    let mut missing = Vec::new();
    for dir in ["crates", "bins", "examples", "xtask"] {
        visit(&root().join(dir), &mut |path| {
            if path.extension().is_some_and(|ext| ext == "rs") {
                let text = std::fs::read_to_string(path).unwrap_or_default();
                if !text.starts_with("//!") {
                    missing.push(path.display().to_string());
                }
            }
        });
    }
    if missing.is_empty() {
        Ok(())
    } else {
        Err(format!("files without a //! header:\n  {}", missing.join("\n  ")))
    }
}

fn visit(dir: &Path, found: &mut dyn FnMut(&Path)) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            if path.file_name().is_some_and(|name| name != "target") {
                visit(&path, found);
            }
        } else {
            found(&path);
        }
    }
}

/// No domain crate reaches an adapter, axum, tonic, hyper, sled or etcd-client.
fn boundaries() -> Result<(), String> {
    let mut violations = Vec::new();
    let crates = std::fs::read_dir(root().join("crates")).map_err(|error| error.to_string())?;
    for entry in crates.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if ADAPTERS.contains(&name.as_str()) || !entry.path().join("Cargo.toml").is_file() {
            continue;
        }
        let package = format!("kayra-{name}");
        let output = Command::new(cargo_binary())
            .args([
                "tree",
                "--quiet",
                "--package",
                &package,
                "--edges",
                "normal",
                "--prefix",
                "none",
                "--all-features",
            ])
            .current_dir(root())
            .output()
            .map_err(|error| format!("cannot run cargo tree: {error}"))?;
        if !output.status.success() {
            return Err(format!(
                "cargo tree failed for {package}: {}",
                String::from_utf8_lossy(&output.stderr)
            ));
        }
        let tree = String::from_utf8_lossy(&output.stdout);
        for line in tree.lines() {
            let dependency = line.split_whitespace().next().unwrap_or_default();
            if FORBIDDEN.contains(&dependency) {
                violations.push(format!("{package} depends on {dependency}"));
            }
        }
    }
    violations.extend(http_stack_users()?);
    violations.sort();
    violations.dedup();
    if violations.is_empty() { Ok(()) } else { Err(violations.join("\n")) }
}

/// Members that may depend on the HTTP server stack directly: the HTTP and gRPC adapters, the
/// test kit and the benchmarks (and the example team services under `examples/`, which are
/// apps of their own, not parts of Kayra).
const HTTP_STACK_USERS: &[&str] = &["crates/apiserver", "crates/grpc", "crates/testkit", "crates/bench"];

/// Every member outside [`HTTP_STACK_USERS`] that names axum or hyper among its dependencies:
/// loops, domain crates and binaries reach HTTP only through an adapter.
fn http_stack_users() -> Result<Vec<String>, String> {
    let mut violations = Vec::new();
    for folder in ["crates", "bins"] {
        let members = std::fs::read_dir(root().join(folder)).map_err(|error| error.to_string())?;
        for entry in members.flatten() {
            let member = format!("{folder}/{}", entry.file_name().to_string_lossy());
            let Ok(manifest) = std::fs::read_to_string(entry.path().join("Cargo.toml")) else { continue };
            if HTTP_STACK_USERS.contains(&member.as_str()) {
                continue;
            }
            let mut section = "";
            for line in manifest.lines().map(str::trim) {
                if line.starts_with('[') {
                    section = line;
                    continue;
                }
                let named = line.split(['=', '.', ' ']).next().unwrap_or_default();
                if section == "[dependencies]" && matches!(named, "axum" | "hyper") {
                    violations.push(format!("{member} depends on {named} directly"));
                }
            }
        }
    }
    Ok(violations)
}
