//! `cargo xtask bench --smoke`: every benchmark run once at a small size, to show that each
//! still runs and prints its figures. It fails only if one does not run (a non-zero exit, or
//! still running after [`DEADLINE`]) or prints no figure (no JSON figure line of its own); a
//! figure's value, and any target, are never checked here.
//!
//! It runs the debug build the tests make: `cargo build --workspace --all-targets` resolves the
//! same features as `cargo nextest run --workspace`, so after the tests it compiles only the
//! benchmark binary itself, and each benchmark runs the `kayra-controller` built beside it.

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// Every benchmark, in the order the smoke run takes them.
pub(crate) const BENCHMARKS: &[&str] = &[
    "store",
    "api",
    "catalog",
    "loop",
    "scheduler",
    "appset",
    "nodes",
    "http",
    "watch",
    "consul",
    "replicas",
];

/// How long one benchmark's smoke run may take before it is ended as hung: all of them together
/// take under three minutes on a two-core machine.
const DEADLINE: Duration = Duration::from_secs(4 * 60);

/// What one benchmark's smoke run printed.
#[derive(Debug, Default)]
struct Printed {
    /// Its JSON figure lines whose value is a number.
    figures: usize,
    /// Why it measured something, or nothing, for want of a tool (its `skipped: ` lines).
    skips: Vec<String>,
}

/// Builds the benchmarks and runs each at its smoke size, then prints how long each took and
/// every part that a missing tool kept from running (a failure under CI, as a test's skip is).
pub(crate) fn run(root: &Path) -> Result<(), String> {
    let bench = build(root)?;
    let started = Instant::now();
    let mut skipped: Vec<String> = Vec::new();
    let mut failures = Vec::new();
    let mut summary = Vec::new();
    for which in BENCHMARKS {
        println!("==> bench {which} --smoke");
        let began = Instant::now();
        let outcome = run_one(&bench, which);
        let took = began.elapsed().as_secs_f64();
        match outcome {
            Ok(printed) if printed.figures == 0 && printed.skips.is_empty() => {
                failures.push(format!("{which} printed no figure"));
                summary.push(format!("  {which:<10} {took:>6.1} s  no figure"));
            }
            Ok(printed) => {
                skipped.extend(printed.skips.iter().map(|skip| format!("xtask bench --smoke {skip}")));
                let skips =
                    if printed.skips.is_empty() { String::new() } else { ", a part skipped".to_owned() };
                summary.push(format!("  {which:<10} {took:>6.1} s  {} figures{skips}", printed.figures));
            }
            Err(error) => {
                failures.push(format!("{which}: {error}"));
                summary.push(format!("  {which:<10} {took:>6.1} s  failed"));
            }
        }
    }
    println!(
        "==> bench --smoke: {} benchmarks in {:.1} s",
        BENCHMARKS.len(),
        started.elapsed().as_secs_f64()
    );
    for line in &summary {
        println!("{line}");
    }
    if !skipped.is_empty() {
        println!("==> skipped: {} part(s) not measured, for want of a tool", skipped.len());
        for skip in &skipped {
            println!("  {skip}");
        }
    }
    if !failures.is_empty() {
        return Err(failures.join("; "));
    }
    if std::env::var_os("CI").is_some() && !skipped.is_empty() {
        return Err(format!("{} benchmark part(s) skipped under CI", skipped.len()));
    }
    Ok(())
}

/// Builds every target of the workspace in the debug profile, as the tests do; answers where
/// the benchmark binary is.
fn build(root: &Path) -> Result<PathBuf, String> {
    let args =
        ["build", "--workspace", "--all-targets", "--locked", "--message-format", "json-render-diagnostics"];
    let output = crate::cargo_command()
        .args(args)
        .current_dir(root)
        .stderr(Stdio::inherit())
        .output()
        .map_err(|error| format!("cannot run cargo: {error}"))?;
    if !output.status.success() {
        return Err(format!("`cargo {}` failed ({})", args.join(" "), output.status));
    }
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .find_map(|message| benchmark_binary(&message))
        .ok_or_else(|| "cargo built no kayra-bench binary".to_owned())
}

/// The executable of the `kayra-bench` binary (not its test harness), if `message` (one of
/// cargo's JSON messages) is the artifact that made it.
fn benchmark_binary(message: &Value) -> Option<PathBuf> {
    let is_binary = message["reason"] == "compiler-artifact"
        && message["target"]["name"] == "kayra-bench"
        && message["target"]["kind"].as_array().is_some_and(|kinds| kinds.iter().any(|kind| kind == "bin"))
        && message["profile"]["test"] == false;
    is_binary.then(|| message["executable"].as_str().map(PathBuf::from)).flatten()
}

/// Runs `kayra-bench <which> --smoke` in a process group of its own, echoing what it prints;
/// answers what it printed, or why it failed. The group (the benchmark and every process it
/// started) is killed if it runs past [`DEADLINE`].
fn run_one(bench: &Path, which: &str) -> Result<Printed, String> {
    use std::os::unix::process::CommandExt;
    let mut child = Command::new(bench)
        .args([which, "--smoke"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .process_group(0)
        .spawn()
        .map_err(|error| format!("cannot run {}: {error}", bench.display()))?;
    let stdout = child.stdout.take().ok_or("the benchmark has no stdout")?;
    let bench_name = which.to_owned();
    let reader = std::thread::spawn(move || {
        let mut printed = Printed::default();
        for line in std::io::BufReader::new(stdout).lines().map_while(Result::ok) {
            println!("{line}");
            if let Some(skip) = line.strip_prefix("skipped: ") {
                printed.skips.push(skip.to_owned());
            } else if is_figure(&line, &bench_name) {
                printed.figures += 1;
            }
        }
        printed
    });
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().map_err(|error| format!("waiting for it: {error}"))? {
            break status;
        }
        if started.elapsed() >= DEADLINE {
            let group = format!("-{}", child.id());
            let _ = Command::new("kill").args(["-KILL", "--", &group]).status();
            let _ = child.wait();
            let _ = reader.join();
            return Err(format!("still running after {} minutes, and ended", DEADLINE.as_secs() / 60));
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let printed = reader.join().map_err(|_| "the reader of its output panicked")?;
    if status.success() { Ok(printed) } else { Err(format!("exited with {status}")) }
}

/// Whether `line` is one of benchmark `which`'s JSON figure lines with a number for its value.
fn is_figure(line: &str, which: &str) -> bool {
    serde_json::from_str::<Value>(line).is_ok_and(|figure| {
        figure["bench"] == which && figure["name"].is_string() && figure["value"].is_number()
    })
}

#[cfg(test)]
mod tests;
