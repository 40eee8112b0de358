//! From an Application and the Secrets pushed with it to what one run executes: the program
//! (looked up in the agent's `PATH`), its arguments, its environment (values and Secret keys,
//! `key: "*"` importing every key under a prefix), the user it runs as and its limits. No IO:
//! whether a path is an executable file is asked of the caller.

use std::path::{Path, PathBuf};

use kayra_api::kinds::application::{Application, DEFAULT_RUN_AS, EnvVar};
use kayra_api::kinds::secret::Secret;
use kayra_api::quantity::Quantity;

use crate::cgroup::Limits;

/// The `PATH` a process gets when its Application sets none.
pub(crate) const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// Who the runtime runs as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct AgentUser {
    /// The effective uid.
    pub(crate) uid: u32,
    /// The effective gid.
    pub(crate) gid: u32,
}

/// What one run executes.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Plan {
    /// The program's path.
    pub(crate) program: PathBuf,
    /// `command` then `args`.
    pub(crate) argv: Vec<String>,
    /// The whole environment, in order.
    pub(crate) env: Vec<(String, String)>,
    /// The working directory the Application names, if any.
    pub(crate) working_dir: Option<PathBuf>,
    /// The user and group to drop to (only when the runtime is root).
    pub(crate) user: Option<(u32, u32)>,
    /// The limits.
    pub(crate) limits: Limits,
    /// Seconds between SIGTERM and SIGKILL.
    pub(crate) grace_seconds: u64,
}

/// Why an Application cannot be started; the message names what to fix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Refused(pub(crate) String);

/// What the plan is made from besides the Application.
pub(crate) struct Context<'a> {
    /// The Secrets pushed for the node (any namespace; only the Application's own is read).
    pub(crate) secrets: &'a [Secret],
    /// Who the runtime runs as.
    pub(crate) agent: AgentUser,
    /// The agent's `PATH`, where a bare command name is looked up.
    pub(crate) agent_path: &'a str,
    /// The `HOME` and default working directory.
    pub(crate) home: &'a Path,
    /// The node's name, as `HOSTNAME`.
    pub(crate) hostname: &'a str,
    /// The process cap every Application gets.
    pub(crate) pids: Option<u64>,
    /// Whether a path is an executable file.
    pub(crate) is_executable: &'a dyn Fn(&Path) -> bool,
    /// The controller's API (host and port), as `KUBERNETES_SERVICE_HOST` and `_PORT`.
    pub(crate) api: Option<(&'a str, u16)>,
    /// The identity directory as the process sees it, as `KAYRA_IDENTITY_DIR`.
    pub(crate) identity_dir: Option<&'a Path>,
}

/// Plans one run of `app`.
pub(crate) fn plan(app: &Application, context: &Context<'_>) -> Result<Plan, Refused> {
    let spec = &app.spec;
    let command = spec.command.first().ok_or_else(|| Refused("spec.command is empty".to_owned()))?;
    let program = find_program(command, context.agent_path, context.is_executable)?;
    let user = user(app, context.agent)?;
    let namespace = app.metadata.namespace.as_deref().unwrap_or("default");
    let mut env = vec![
        ("PATH".to_owned(), DEFAULT_PATH.to_owned()),
        ("HOME".to_owned(), context.home.display().to_string()),
        ("HOSTNAME".to_owned(), context.hostname.to_owned()),
    ];
    if let Some((host, port)) = context.api {
        env.push(("KUBERNETES_SERVICE_HOST".to_owned(), host.to_owned()));
        env.push(("KUBERNETES_SERVICE_PORT".to_owned(), port.to_string()));
    }
    if let Some(dir) = context.identity_dir {
        env.push(("KAYRA_IDENTITY_DIR".to_owned(), dir.display().to_string()));
    }
    for (name, value) in resolve_env(&spec.env, namespace, context.secrets)? {
        set(&mut env, name, value);
    }
    Ok(Plan {
        program,
        argv: spec.command.iter().chain(&spec.args).cloned().collect(),
        env,
        working_dir: spec.working_dir.as_ref().map(PathBuf::from),
        user,
        limits: limits(app, context.pids),
        grace_seconds: spec.lifecycle.termination_grace_period_seconds.unwrap_or(30).max(0) as u64,
    })
}

/// The program `command` names: a path as it is, a bare name found in `path`.
pub(crate) fn find_program(
    command: &str,
    path: &str,
    is_executable: &dyn Fn(&Path) -> bool,
) -> Result<PathBuf, Refused> {
    if command.contains('/') {
        let program = PathBuf::from(command);
        return if is_executable(&program) {
            Ok(program)
        } else {
            Err(Refused(format!("command \"{command}\" is not an executable file")))
        };
    }
    path.split(':')
        .filter(|dir| !dir.is_empty())
        .map(|dir| Path::new(dir).join(command))
        .find(|candidate| is_executable(candidate))
        .ok_or_else(|| Refused(format!("command \"{command}\" not found in PATH ({path})")))
}

/// The uid and gid to drop to: the Application's (65532 each by default) when the agent is
/// root; none when it is not, which refuses an Application asking for another user.
pub(crate) fn user(app: &Application, agent: AgentUser) -> Result<Option<(u32, u32)>, Refused> {
    let context = app.spec.security_context.clone().unwrap_or_default();
    let wanted = |value: Option<i64>| {
        value.map(|id| u32::try_from(id).map_err(|_| Refused(format!("id {id} is out of range"))))
    };
    let (uid, gid) = (wanted(context.run_as_user).transpose()?, wanted(context.run_as_group).transpose()?);
    if agent.uid == 0 {
        let (uid, gid) = (uid.unwrap_or(DEFAULT_RUN_AS), gid.unwrap_or(DEFAULT_RUN_AS));
        if uid == 0 {
            return Err(Refused("spec.securityContext.runAsUser 0 (root) is not allowed".to_owned()));
        }
        return Ok(Some((uid, gid)));
    }
    for (field, asked, own) in [("runAsUser", uid, agent.uid), ("runAsGroup", gid, agent.gid)] {
        if let Some(asked) = asked.filter(|asked| *asked != own) {
            return Err(Refused(format!(
                "spec.securityContext.{field} is {asked}, but the agent runs as {own} and not as root, so its processes run as {own}; remove the field or run the agent as root"
            )));
        }
    }
    Ok(None)
}

/// The Application's environment entries, Secrets resolved; a later entry of the same name
/// replaces an earlier one.
pub(crate) fn resolve_env(
    vars: &[EnvVar],
    namespace: &str,
    secrets: &[Secret],
) -> Result<Vec<(String, String)>, Refused> {
    let mut env = Vec::new();
    for var in vars {
        let Some(reference) = &var.secret_ref else {
            set(&mut env, var.name.clone(), var.value.clone().unwrap_or_default());
            continue;
        };
        let optional = reference.optional.unwrap_or(false);
        let secret = secrets.iter().find(|secret| {
            secret.metadata.name.as_deref() == Some(reference.name.as_str())
                && secret.metadata.namespace.as_deref().unwrap_or("default") == namespace
        });
        let Some(secret) = secret else {
            if optional {
                continue;
            }
            return Err(Refused(format!("secret \"{}\" not found", reference.name)));
        };
        let text = |key: &str| -> Result<Option<String>, Refused> {
            let Some(bytes) = secret.value(key) else { return Ok(None) };
            String::from_utf8(bytes).map(Some).map_err(|_| {
                Refused(format!("key \"{key}\" of secret \"{}\" is not UTF-8 text", reference.name))
            })
        };
        if reference.key == "*" {
            let prefix = var.prefix.as_deref().unwrap_or("");
            for key in secret.data.keys() {
                if let Some(value) = text(key)? {
                    set(&mut env, format!("{prefix}{key}"), value);
                }
            }
            continue;
        }
        match text(&reference.key)? {
            Some(value) => set(&mut env, var.name.clone(), value),
            None if optional => {}
            None => {
                return Err(Refused(format!(
                    "couldn't find key {} in Secret {namespace}/{}",
                    reference.key, reference.name
                )));
            }
        }
    }
    Ok(env)
}

fn set(env: &mut Vec<(String, String)>, name: String, value: String) {
    match env.iter_mut().find(|(existing, _)| *existing == name) {
        Some(entry) => entry.1 = value,
        None => env.push((name, value)),
    }
}

/// The Application's limits in kernel units, with the node's process cap.
pub(crate) fn limits(app: &Application, pids: Option<u64>) -> Limits {
    let limits = app.spec.resources.as_ref().and_then(|resources| resources.limits.as_ref());
    let parse = |value: Option<&String>| value.and_then(|value| Quantity::parse(value)).map(Quantity::value);
    Limits {
        memory_bytes: parse(limits.and_then(|l| l.memory.as_ref())).map(|bytes| bytes as u64),
        cpu_millis: parse(limits.and_then(|l| l.cpu.as_ref()))
            .map(|cores| (cores * 1000.0).ceil().max(1.0) as u64),
        pids,
    }
}

#[cfg(test)]
mod tests;
