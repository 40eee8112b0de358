//! The enter shim: runs a command beside a running workload, as `kubectl exec` asks, with
//! everything the workload itself got from its exec shim — its cgroup (so the command counts
//! against the workload's limits), its rlimits, its mount namespace (where its identity
//! directory is mounted), its user and group with no supplementary groups, its working
//! directory and its environment. `PATH` is the workload's, so a bare program name is found as
//! the workload would find it.
//!
//! `<supervisor argv> enter <run dir> <tty|pipes> <argv...>`: with `tty`, its standard streams
//! are a pseudo-terminal's other end, which becomes its controlling terminal in a session of its
//! own; otherwise its starter put it in a process group of its own. Either way the group's id is
//! its pid, which is what the runtime signals. When it cannot run the command it says why on
//! stderr and exits 126 (or 127 when the program is not found), as shells do.

use std::io;
use std::os::fd::AsFd;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;

use crate::supervisor::{describe, read_spec, read_state};

/// The shim's entry point; returns only when the command could not be run: its exit code.
pub(crate) fn main(dir: &Path, terminal: &str, argv: &[String]) -> i32 {
    let (code, why) = enter(dir, terminal == "tty", argv);
    eprintln!("kayra: {why}");
    code
}

/// Enters the workload of the run in `dir` and execs `argv`; returns only when that failed.
fn enter(dir: &Path, tty: bool, argv: &[String]) -> (i32, String) {
    let Some((program, _)) = argv.split_first() else {
        return (127, "no command given".to_owned());
    };
    let spec = match read_spec(dir) {
        Ok(spec) => spec,
        Err(error) => return (126, format!("reading the run spec: {error}")),
    };
    let Some(state) = read_state(dir).filter(|state| state.run == spec.run && state.exit.is_none()) else {
        return (126, "the application's process is not running".to_owned());
    };
    if !state.workload.is_alive() {
        return (126, "the application's process is not running".to_owned());
    }
    if tty {
        if let Err(error) = rustix::process::setsid() {
            return (126, format!("starting a session for the terminal: {}", describe(&error.into())));
        }
        if let Err(error) = rustix::process::ioctl_tiocsctty(io::stdin().as_fd()) {
            return (126, format!("taking the terminal: {}", describe(&error.into())));
        }
    }
    let me = std::process::id().to_string();
    for procs in &spec.cgroup_procs {
        if let Err(error) = std::fs::write(procs, &me) {
            return (126, format!("joining the cgroup {}: {}", procs.display(), describe(&error)));
        }
    }
    for limit in &spec.rlimits {
        if let Err(error) = crate::rlimit::apply(*limit) {
            eprintln!("kayra: setting {limit:?}: {error}");
        }
    }
    if spec.identity_mount.is_some()
        && let Err(error) = enter_mount_namespace(state.workload)
    {
        return (126, format!("entering the process's mount namespace: {}", describe(&error)));
    }
    if let Some((uid, gid)) = spec.user
        && let Err(error) = crate::supervisor::become_user(uid, gid)
    {
        return (126, format!("becoming user {uid} (group {gid}): {}", describe(&error)));
    }
    if let Err(error) = std::env::set_current_dir(&spec.working_dir) {
        return (126, format!("chdir {}: {}", spec.working_dir.display(), describe(&error)));
    }
    let mut env = spec.env.clone();
    if tty && !env.iter().any(|(name, _)| name == "TERM") {
        env.push(("TERM".to_owned(), "xterm".to_owned()));
    }
    let error = Command::new(program)
        .args(&argv[1..])
        .env_clear()
        .envs(env.iter().map(|(name, value)| (name, value)))
        .exec();
    let code = if error.kind() == io::ErrorKind::NotFound { 127 } else { 126 };
    (code, format!("exec {program}: {}", describe(&error)))
}

/// Joins the mount namespace of `workload`, checking after opening it that the pid still names
/// that very process (and not a newer one that took its number).
fn enter_mount_namespace(workload: crate::proc::ProcessId) -> io::Result<()> {
    let namespace = std::fs::File::open(format!("/proc/{}/ns/mnt", workload.pid))?;
    if !workload.is_alive() {
        return Err(io::Error::other("the application's process ended"));
    }
    rustix::thread::move_into_link_name_space(
        namespace.as_fd(),
        Some(rustix::thread::LinkNameSpaceType::Mount),
    )?;
    Ok(())
}
