//! The audit log: one JSON line per mutating request (and per log or exec-like read), allowed
//! or not, to a file (and, when asked, to tracing as well): what was asked, by whom, from where,
//! and what was answered.
//!
//! The layer sits above authentication, so that requests refused there are recorded too; the
//! layers below tell it who the request turned out to be through the [`Subject`] it puts in the
//! request. A request that panics is recorded as the 500 it is answered with.

use std::future::Future;
use std::io::Write;
use std::panic::AssertUnwindSafe;
use std::path::Path;
use std::sync::{Arc, Mutex};

use axum::extract::{ConnectInfo, Request};
use axum::response::Response;
use futures_util::FutureExt;
use kayra_authn::Identity;

use super::audit_id::AuditId;
use crate::state::ApiState;

/// Records the request's line once it is answered.
pub(crate) async fn layer<F: Future<Output = Response>>(
    state: &Arc<ApiState>,
    mut request: Request,
    next: impl FnOnce(Request) -> F,
) -> Response {
    let method = request.method().clone();
    let path = request.uri().path().to_owned();
    let Some(log) = state.audit.clone().filter(|_| AuditLog::audits(method.as_str(), &path)) else {
        return next(request).await;
    };
    let audit_id = request.extensions().get::<AuditId>().map(|id| id.0.clone()).unwrap_or_default();
    // An exec is recorded with the command line it runs.
    let command: Vec<String> = match path.ends_with("/exec") {
        true => form_urlencoded::parse(request.uri().query().unwrap_or_default().as_bytes())
            .filter(|(key, _)| key == "command")
            .map(|(_, word)| word.into_owned())
            .collect(),
        false => Vec::new(),
    };
    let remote =
        request.extensions().get::<ConnectInfo<std::net::SocketAddr>>().map(|info| info.0.to_string());
    let subject = Subject::default();
    request.extensions_mut().insert(subject.clone());
    let answered = AssertUnwindSafe(next(request)).catch_unwind().await;
    let code = answered.as_ref().map_or(500, |response| response.status().as_u16());
    let (user, impersonator) = subject.get();
    log.record(&Entry {
        audit_id: &audit_id,
        method: method.as_str(),
        path: &path,
        user: user.as_ref(),
        impersonator: impersonator.as_ref(),
        remote,
        code,
        command: &command,
    });
    match answered {
        Ok(response) => response,
        // The recovery layer above answers it, and logs it with its backtrace.
        Err(panic) => std::panic::resume_unwind(panic),
    }
}

/// Who an audited request acts as, and who impersonates when someone does: told by the
/// authentication and impersonation layers as soon as they know.
#[derive(Debug, Clone, Default)]
pub(crate) struct Subject(Arc<Mutex<(Option<Identity>, Option<Identity>)>>);

impl Subject {
    /// Tells the audit layer above `request` (if it audits it) who it acts as.
    pub(crate) fn tell(request: &Request, user: &Identity, impersonator: Option<&Identity>) {
        if let Some(subject) = request.extensions().get::<Subject>() {
            *subject.0.lock().expect("the subject's lock is never held across a panic") =
                (Some(user.clone()), impersonator.cloned());
        }
    }

    fn get(&self) -> (Option<Identity>, Option<Identity>) {
        self.0.lock().expect("the subject's lock is never held across a panic").clone()
    }
}

/// An append-only file of JSON lines.
#[derive(Debug)]
pub struct AuditLog {
    file: Mutex<std::fs::File>,
    /// Whether each line also goes to tracing (target `audit`), and so to the console.
    console: bool,
}

/// One audited request.
#[derive(Debug)]
pub(crate) struct Entry<'a> {
    pub(crate) audit_id: &'a str,
    pub(crate) method: &'a str,
    pub(crate) path: &'a str,
    pub(crate) user: Option<&'a kayra_authn::Identity>,
    pub(crate) impersonator: Option<&'a kayra_authn::Identity>,
    pub(crate) remote: Option<String>,
    pub(crate) code: u16,
    /// An exec's command line, one word each.
    pub(crate) command: &'a [String],
}

/// One line of the audit log, borrowed from the request it records. Its keys are in
/// alphabetical order, as every line of the log has always had them.
#[derive(serde::Serialize)]
struct Line<'a> {
    #[serde(rename = "auditID")]
    audit_id: &'a str,
    code: u16,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    command: &'a [String],
    decision: &'static str,
    groups: Option<&'a [String]>,
    impersonator: Option<Impersonator<'a>>,
    path: &'a str,
    remote: Option<&'a str>,
    #[serde(serialize_with = "serialize_display")]
    time: &'a jiff::Timestamp,
    user: Option<&'a str>,
    verb: &'a str,
}

#[derive(serde::Serialize)]
struct Impersonator<'a> {
    groups: &'a [String],
    user: &'a str,
}

fn serialize_display<S: serde::Serializer>(
    value: &&jiff::Timestamp,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    serializer.collect_str(value)
}

impl AuditLog {
    /// Opens (creating, appending to) the log at `path`, readable by its owner only.
    pub fn open(path: &Path) -> std::io::Result<AuditLog> {
        use std::os::unix::fs::OpenOptionsExt;
        let file = std::fs::OpenOptions::new().create(true).append(true).mode(0o600).open(path)?;
        Ok(AuditLog { file: Mutex::new(file), console: false })
    }

    /// The same log, writing each line to tracing (target `audit`) as well when `console` is
    /// true; by default the console carries the operator's log, not a second audit trail.
    pub fn with_console(self, console: bool) -> AuditLog {
        AuditLog { console, ..self }
    }

    /// Whether a request is audited: every write, and reads of logs or exec-like subresources.
    pub(crate) fn audits(method: &str, path: &str) -> bool {
        !matches!(method, "GET" | "HEAD" | "OPTIONS")
            || path.ends_with("/log")
            || path.ends_with("/exec")
            || path.ends_with("/attach")
            || path.ends_with("/portforward")
            || path.ends_with("/proxy")
    }

    pub(crate) fn record(&self, entry: &Entry<'_>) {
        let decision = match entry.code {
            401 => "unauthenticated",
            403 => "denied",
            _ => "allowed",
        };
        let time = jiff::Timestamp::now();
        let line = Line {
            audit_id: entry.audit_id,
            code: entry.code,
            command: entry.command,
            decision,
            groups: entry.user.map(|identity| identity.groups.as_slice()),
            impersonator: entry
                .impersonator
                .map(|identity| Impersonator { groups: &identity.groups, user: &identity.user }),
            path: entry.path,
            remote: entry.remote.as_deref(),
            time: &time,
            user: entry.user.map(|identity| identity.user.as_str()),
            verb: entry.method,
        };
        // Encoded straight from the request's own strings into one buffer, then one write per
        // line (formatting into the file directly would issue a system call for every token).
        let mut text = Vec::with_capacity(256);
        serde_json::to_writer(&mut text, &line).expect("an audit line always serializes");
        if self.console {
            tracing::info!(target: "audit", line = %String::from_utf8_lossy(&text));
        }
        text.push(b'\n');
        let mut file = self.file.lock().expect("audit log lock poisoned");
        if let Err(error) = file.write_all(&text) {
            tracing::error!(%error, "writing the audit log failed");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_is_one_json_object_with_its_keys_in_alphabetical_order_and_a_command_only_for_an_exec() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.log");
        let log = AuditLog::open(&path).unwrap();
        let alice = Identity::new("alice", "", vec!["dev".to_owned()]);
        let admin = Identity::new("admin", "", vec!["system:masters".to_owned()]);
        let command = ["/bin/sh".to_owned(), "-c".to_owned(), "echo \"hi\"".to_owned()];
        log.record(&Entry {
            audit_id: "a-1",
            method: "POST",
            path: "/api/v1/namespaces/default/pods/web/exec",
            user: Some(&alice),
            impersonator: Some(&admin),
            remote: Some("127.0.0.1:4000".to_owned()),
            code: 101,
            command: &command,
        });
        log.record(&Entry {
            audit_id: "a-2",
            method: "DELETE",
            path: "/api/v1/namespaces/x",
            user: None,
            impersonator: None,
            remote: None,
            code: 401,
            command: &[],
        });
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "{text}");
        let time = |line: &str| serde_json::from_str::<serde_json::Value>(line).unwrap()["time"].clone();
        let stamp = time(lines[0]);
        stamp.as_str().unwrap().parse::<jiff::Timestamp>().expect("an RFC 3339 time");
        assert_eq!(
            lines[0],
            format!(
                r#"{{"auditID":"a-1","code":101,"command":["/bin/sh","-c","echo \"hi\""],"decision":"allowed","groups":["dev","system:authenticated"],"impersonator":{{"groups":["system:masters","system:authenticated"],"user":"admin"}},"path":"/api/v1/namespaces/default/pods/web/exec","remote":"127.0.0.1:4000","time":{stamp},"user":"alice","verb":"POST"}}"#
            )
        );
        assert_eq!(
            lines[1],
            format!(
                r#"{{"auditID":"a-2","code":401,"decision":"unauthenticated","groups":null,"impersonator":null,"path":"/api/v1/namespaces/x","remote":null,"time":{},"user":null,"verb":"DELETE"}}"#,
                time(lines[1])
            )
        );
    }
}
