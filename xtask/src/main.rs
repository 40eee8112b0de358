//! `cargo xtask <task>`: the project's tasks, in Rust so they run wherever cargo does.
//!
//! - `ci`: formatting, clippy with warnings denied, every test, cargo-deny (bans, licences,
//!   sources), tidy (every `.rs` file opens with a `//!` comment; no library source file over
//!   800 lines; each binary's `src` within 300 lines; the HTTP adapter names no registry or
//!   store of its own) and the boundary check (no domain crate depends on an adapter, no crate on
//!   a binary). Green here means green in CI.
//!   Tests run under cargo-nextest when it is installed, with the `ci` profile of
//!   `.config/nextest.toml` (a test still running after ten minutes is ended and fails), else
//!   under `cargo test`, whose whole run is ended after [`CARGO_TEST_DEADLINE`]. A test that
//!   finds a tool missing (etcd, kubectl, nginx) passes without running what it tests; the run
//!   ends with the list of those skips and why, and under CI (`CI` set) a skip is a failure.
//!   Last, `bench --smoke`.
//! - `tidy`: the tidy and boundary checks alone.
//! - `e2e`: the kubectl acceptance suite against the real binary.
//! - `bench store`, `bench api`, `bench catalog`, `bench loop`, `bench scheduler`, `bench appset`,
//!   `bench nodes [--nodes N]`, `bench http`, `bench watch`, `bench consul`, `bench replicas`:
//!   the benchmarks, in release mode.
//! - `bench --smoke`: every benchmark at a small size, from the tests' debug build ([`smoke`]).

#![allow(clippy::print_stdout)]

mod smoke;

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

/// Crates on the outside of the hexagon: they may use axum, tonic, sled or etcd-client, and
/// nothing at the centre may depend on them. `controlplane` and `nodeagent` are the outer ring's
/// compositions: they wire adapters into the domain crates' ports for the two binaries.
const ADAPTERS: &[&str] = &[
    "store-sled",
    "store-etcd",
    "apiserver",
    "consul",
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
    "kayra-consul",
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
            ["tidy"] => tidy().and_then(|()| boundaries()),
            // The controller's end-to-end tests run the agent and the command line beside it:
            // build them first, so they never find one missing or run a stale one.
            ["e2e"] => cargo(&["build", "--package", "kayra-agent", "--package", "kayra-cli"])
                .and_then(|()| tests(&["--package", "kayra-controller"], &mut Vec::new())),
            ["bench", "--smoke"] => smoke::run(&root()),
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
            // The node, watch and Consul benchmarks run the real controller binary as a process of
            // its own.
            ["bench", which @ ("nodes" | "watch" | "consul" | "replicas"), rest @ ..] => {
                cargo(&["build", "--release", "--package", "kayra-controller"]).and_then(|()| {
                    let mut args = vec!["run", "--release", "--package", "kayra-bench", "--", which];
                    args.extend_from_slice(rest);
                    cargo(&args)
                })
            }
            _ => Err(
                "usage: cargo xtask ci | cargo xtask tidy | cargo xtask e2e | cargo xtask bench --smoke | cargo xtask bench store|api|catalog|loop|scheduler [--store sled]|appset [--store sled]|nodes [--nodes N]|http|watch [--stuck N] [--watchers N] [--objects N]|consul|replicas [--rounds R]"
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
    // The controller's end-to-end tests run the agent and the command line beside it, which no
    // test of their own packages builds: build them first, so they never find one missing or
    // run a stale one.
    step("test", || {
        cargo(&["build", "--package", "kayra-agent", "--package", "kayra-cli", "--locked"])
            .and_then(|()| tests(&["--workspace", "--locked"], &mut skipped))
    })?;
    // Every benchmark still runs and prints its figures; none of its targets is checked.
    step("bench --smoke", || smoke::run(&root()))
}

/// The nextest profile every run uses, on a developer's machine as in CI: one that passes
/// here passes there. `.config/nextest.toml` defines it: slow tests are reported after a minute
/// and ended after ten, and nothing is retried.
const NEXTEST_PROFILE: &str = "ci";

/// How long a whole `cargo test` run may take before it is ended as hung. libtest has no
/// per-test timeout on stable Rust, so without nextest only the run as a whole is bounded: a
/// hung test fails the run after this long, without naming which test hung.
const CARGO_TEST_DEADLINE: std::time::Duration = std::time::Duration::from_secs(90 * 60);

/// Runs the tests of `selection` (cargo package arguments), doctests included, with nextest
/// when it is installed and `cargo test` otherwise, then prints every skip: the tests' (read back
/// from the file [`SKIPPED_LOG`] names) after `earlier`, the ones xtask itself made. Under CI a
/// skip fails the run, though the tests already refuse to skip there.
fn tests(selection: &[&str], earlier: &mut Vec<String>) -> Result<(), String> {
    let log = std::env::temp_dir().join(format!("kayra-skipped-{}.log", std::process::id()));
    let _ = std::fs::remove_file(&log);
    let env = [(SKIPPED_LOG, log.as_os_str())];
    let nextest =
        cargo_command().args(["nextest", "--version"]).output().is_ok_and(|out| out.status.success());
    let ran = if nextest {
        let run = [&["nextest", "run", "--profile", NEXTEST_PROFILE, "--no-fail-fast"], selection].concat();
        let doc = [&["test", "--doc"], selection].concat();
        cargo_with(&run, &env).and_then(|()| cargo_with(&doc, &env))
    } else {
        println!(
            "cargo-nextest is not installed: running the tests with `cargo test` \
             (`cargo install cargo-nextest --locked` gives each test its own process)"
        );
        cargo_within(&[&["test", "--no-fail-fast"], selection].concat(), &env, CARGO_TEST_DEADLINE)
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

/// The workspace root: where `cargo run` says xtask's manifest is, else where it was built
/// from. The running value comes first, since a target directory shared between clones (CI
/// keeps one outside the clone) may hold an xtask built in another.
fn root() -> PathBuf {
    let manifest = std::env::var_os("CARGO_MANIFEST_DIR")
        .map_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")), PathBuf::from);
    manifest.parent().expect("xtask sits in the workspace root").to_path_buf()
}

fn cargo_binary() -> String {
    std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned())
}

/// A cargo command without the variables `cargo run` set for xtask itself (`CARGO_PKG_*`,
/// `CARGO_MANIFEST_*`, ...). Build scripts that read them (ring's reads `CARGO_MANIFEST_DIR`)
/// ask to be rerun when they change, so a build inheriting xtask's values and the same build
/// run from a shell would each rebuild the other's artifacts, and all that depends on them.
fn cargo_command() -> Command {
    let mut command = Command::new(cargo_binary());
    for (name, _) in std::env::vars_os() {
        let name = name.to_string_lossy();
        if ["CARGO_PKG_", "CARGO_MANIFEST_", "CARGO_CRATE_NAME", "CARGO_BIN_NAME", "CARGO_PRIMARY_PACKAGE"]
            .iter()
            .any(|set_by_run| name.starts_with(set_by_run))
        {
            command.env_remove(name.as_ref());
        }
    }
    command
}

fn cargo(args: &[&str]) -> Result<(), String> {
    cargo_with(args, &[])
}

fn cargo_with(args: &[&str], env: &[(&str, &std::ffi::OsStr)]) -> Result<(), String> {
    let status = cargo_command()
        .args(args)
        .envs(env.iter().copied())
        .current_dir(root())
        .status()
        .map_err(|error| format!("cannot run cargo: {error}"))?;
    if status.success() { Ok(()) } else { Err(format!("`cargo {}` failed ({status})", args.join(" "))) }
}

/// Runs cargo as [`cargo_with`] does, in a process group of its own that is killed, test
/// processes and all, once `deadline` has passed.
fn cargo_within(
    args: &[&str],
    env: &[(&str, &std::ffi::OsStr)],
    deadline: std::time::Duration,
) -> Result<(), String> {
    use std::os::unix::process::CommandExt;
    let mut child = cargo_command()
        .args(args)
        .envs(env.iter().copied())
        .current_dir(root())
        .process_group(0)
        .spawn()
        .map_err(|error| format!("cannot run cargo: {error}"))?;
    let started = std::time::Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().map_err(|error| format!("waiting for cargo: {error}"))? {
            break status;
        }
        if started.elapsed() >= deadline {
            let group = format!("-{}", child.id());
            let _ = Command::new("kill").args(["-KILL", "--", &group]).status();
            let _ = child.wait();
            return Err(format!(
                "`cargo {}` was still running after {} minutes: a test hung, and the run was ended",
                args.join(" "),
                deadline.as_secs() / 60
            ));
        }
        std::thread::sleep(std::time::Duration::from_secs(1));
    };
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

/// The tidy rules: every Rust file opens with a `//!` comment saying what it owns; no source
/// file in `crates/` grows past [`MAX_FILE_LINES`] (tests excepted); each binary's `src` stays
/// within [`MAX_BINARY_LINES`], its assembly living in a library; the HTTP adapter reaches the
/// registry only through the application layer's client; only the registry's housekeeping
/// writes without admission; and the code map names exactly the crates that exist.
fn tidy() -> Result<(), String> {
    let mut problems = Vec::new();
    for dir in ["crates", "bins", "examples", "xtask"] {
        visit(&root().join(dir), &mut |path| {
            if path.extension().is_some_and(|ext| ext == "rs") {
                let text = std::fs::read_to_string(path).unwrap_or_default();
                if !text.starts_with("//!") {
                    problems.push(format!("{} has no //! header", relative(path)));
                }
            }
        });
    }
    problems.extend(long_files());
    problems.extend(fat_binaries());
    problems.extend(second_doors());
    problems.extend(unadmitted_writers());
    problems.extend(unmapped_crates());
    if problems.is_empty() { Ok(()) } else { Err(problems.join("\n  ")) }
}

/// The most lines a source file of a library crate may have: one a reader holds in one
/// sitting. Tests (`tests.rs`, `tests/`) are not counted.
const MAX_FILE_LINES: usize = 800;

/// The most lines a binary's `src` may have in all: `main.rs`, its arguments and configuration,
/// and nothing else; the assembly lives in `kayra-controlplane` and `kayra-nodeagent`.
const MAX_BINARY_LINES: usize = 300;

fn is_test(path: &Path) -> bool {
    path.file_name().is_some_and(|name| name == "tests.rs")
        || path.components().any(|part| part.as_os_str() == "tests")
}

fn relative(path: &Path) -> String {
    path.strip_prefix(root()).unwrap_or(path).display().to_string()
}

fn lines(path: &Path) -> usize {
    std::fs::read_to_string(path).map_or(0, |text| text.lines().count())
}

fn long_files() -> Vec<String> {
    let mut long = Vec::new();
    visit(&root().join("crates"), &mut |path| {
        if path.extension().is_some_and(|ext| ext == "rs") && !is_test(path) {
            let count = lines(path);
            if count > MAX_FILE_LINES {
                long.push(format!(
                    "{} has {count} lines, more than {MAX_FILE_LINES}: split it by what it holds",
                    relative(path)
                ));
            }
        }
    });
    long
}

fn fat_binaries() -> Vec<String> {
    let mut fat = Vec::new();
    let Ok(binaries) = std::fs::read_dir(root().join("bins")) else { return fat };
    for binary in binaries.flatten() {
        let mut count = 0;
        visit(&binary.path().join("src"), &mut |path| {
            if path.extension().is_some_and(|ext| ext == "rs") {
                count += lines(path);
            }
        });
        if count > MAX_BINARY_LINES {
            fat.push(format!(
                "{}/src has {count} lines, more than {MAX_BINARY_LINES}: a binary parses its arguments and calls its library",
                relative(&binary.path())
            ));
        }
    }
    fat
}

/// What the HTTP adapter must never name: the registry itself, or a store under it. Its
/// requests reach the registry only through `kayra_application`'s client, which authorizes and
/// admits them (the application layer keeps `registry()` to itself; this catches a registry
/// built beside it).
const SECOND_DOORS: &[&str] =
    &["kayra_registry::Registry", "Registry::new", ".registry()", "dyn Store", "kayra_store::mvcc"];

/// Where a write may be made without a writer's admission (`Admit::unadmitted_housekeeping`):
/// where it is defined, the namespace finalizer's own writes, and the registry's tests.
const UNADMITTED_ALLOWED: &[&str] =
    &["crates/registry/src/admission.rs", "crates/registry/src/namespaces.rs"];

fn unadmitted_writers() -> Vec<String> {
    let mut writers = Vec::new();
    for dir in ["crates", "bins", "examples"] {
        visit(&root().join(dir), &mut |path| {
            let shown = relative(path);
            let allowed = UNADMITTED_ALLOWED.contains(&shown.as_str())
                || (shown.starts_with("crates/registry/") && is_test(path));
            if path.extension().is_some_and(|ext| ext == "rs")
                && !allowed
                && std::fs::read_to_string(path).is_ok_and(|text| text.contains("unadmitted_housekeeping"))
            {
                writers.push(format!(
                    "{shown} writes without admission: every write a caller asks for is admitted by its chain"
                ));
            }
        });
    }
    writers
}

/// The code map (`docs/architecture.md`) names every crate under `crates/` that exists, as
/// `` `crates/<name>` ``, and none that does not.
fn unmapped_crates() -> Vec<String> {
    let map = std::fs::read_to_string(root().join("docs/architecture.md")).unwrap_or_default();
    let named: std::collections::BTreeSet<String> = map
        .match_indices("`crates/")
        .filter_map(|(at, found)| {
            let rest = &map[at + found.len()..];
            let name: String = rest
                .chars()
                .take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-')
                .collect();
            (!name.is_empty()).then_some(name)
        })
        .collect();
    let existing: std::collections::BTreeSet<String> = std::fs::read_dir(root().join("crates"))
        .map(|entries| {
            entries
                .flatten()
                .filter(|entry| entry.path().join("Cargo.toml").is_file())
                .map(|entry| entry.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    let mut problems: Vec<String> = existing
        .difference(&named)
        .map(|name| format!("docs/architecture.md does not map crates/{name}: give it a paragraph"))
        .collect();
    problems.extend(
        named
            .difference(&existing)
            .map(|name| format!("docs/architecture.md names crates/{name}, which does not exist")),
    );
    problems
}

/// Whether `line` names `word` whole: not as the start of a longer identifier
/// (`kayra_registry::Registry` is not named by `kayra_registry::RegistryError`).
fn names(line: &str, word: &str) -> bool {
    line.match_indices(word).any(|(at, _)| {
        line[at + word.len()..].chars().next().is_none_or(|next| !(next.is_alphanumeric() || next == '_'))
    })
}

fn second_doors() -> Vec<String> {
    let mut doors = Vec::new();
    visit(&root().join("crates/apiserver/src"), &mut |path| {
        if path.extension().is_none_or(|ext| ext != "rs") || is_test(path) {
            return;
        }
        let text = std::fs::read_to_string(path).unwrap_or_default();
        for (at, line) in text.lines().enumerate() {
            if let Some(door) = SECOND_DOORS.iter().find(|door| names(line, door)) {
                doors.push(format!(
                    "{}:{}: names `{door}`: the HTTP adapter reaches the registry only through the application layer's client",
                    relative(path),
                    at + 1
                ));
            }
        }
    });
    doors
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
        let output = cargo_command()
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
    violations.extend(binary_dependents()?);
    violations.sort();
    violations.dedup();
    if violations.is_empty() { Ok(()) } else { Err(violations.join("\n")) }
}

/// Every member that depends on a binary crate (`bins/*`), in any section: libraries, tests and
/// benchmarks build what a binary runs from the library it calls (`kayra-controlplane`,
/// `kayra-nodeagent`), never from the binary.
fn binary_dependents() -> Result<Vec<String>, String> {
    let package = |manifest: &str| {
        manifest.lines().map(str::trim).find_map(|line| {
            let name = line.strip_prefix("name")?.trim_start().strip_prefix('=')?;
            Some(name.trim().trim_matches('"').to_owned())
        })
    };
    let mut binaries = Vec::new();
    for entry in std::fs::read_dir(root().join("bins")).map_err(|error| error.to_string())?.flatten() {
        if let Some(name) =
            std::fs::read_to_string(entry.path().join("Cargo.toml")).ok().as_deref().and_then(package)
        {
            binaries.push(name);
        }
    }
    let mut violations = Vec::new();
    for folder in ["crates", "bins", "examples"] {
        let Ok(members) = std::fs::read_dir(root().join(folder)) else { continue };
        for entry in members.flatten() {
            let Ok(manifest) = std::fs::read_to_string(entry.path().join("Cargo.toml")) else { continue };
            let own = package(&manifest).unwrap_or_default();
            for (section, named) in dependencies(&manifest) {
                if section.contains("dependencies")
                    && named != own
                    && binaries.iter().any(|binary| binary == named)
                {
                    violations.push(format!(
                        "{folder}/{} depends on the binary crate {named}",
                        entry.file_name().to_string_lossy()
                    ));
                }
            }
        }
    }
    Ok(violations)
}

/// Each line of a manifest that names a crate, with the section it is in (`[dependencies]`,
/// `[dev-dependencies]`, ...): the crate named, as the line begins.
fn dependencies(manifest: &str) -> Vec<(&str, &str)> {
    let mut section = "";
    let mut named = Vec::new();
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            section = line;
            continue;
        }
        named.push((section, line.split(['=', '.', ' ']).next().unwrap_or_default()));
    }
    named
}

/// Members that may depend on the HTTP server stack directly: the HTTP adapters (the API's and
/// the Consul projection's) and the gRPC one, the
/// test kit and the benchmarks (and the example team services under `examples/`, which are
/// apps of their own, not parts of Kayra).
const HTTP_STACK_USERS: &[&str] =
    &["crates/apiserver", "crates/consul", "crates/grpc", "crates/testkit", "crates/bench"];

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
            for (section, named) in dependencies(&manifest) {
                if section == "[dependencies]" && matches!(named, "axum" | "hyper") {
                    violations.push(format!("{member} depends on {named} directly"));
                }
            }
        }
    }
    Ok(violations)
}
