//! The audit log: one JSON line per mutating request (and per log or exec-like read), allowed
//! or not, to a file (and, when asked, to tracing as well): what was asked, by whom, from where,
//! and what was answered.
//!
//! The layer sits above authentication, so that requests refused there are recorded too; the
//! layers below tell it who the request turned out to be through the [`Subject`] it puts in the
//! request. A request that panics is recorded as the 500 it is answered with.

use std::io::Write;
use std::panic::AssertUnwindSafe;
use std::path::Path;
use std::sync::{Arc, Mutex};

use axum::extract::{ConnectInfo, Request, State};
use axum::middleware::Next;
use axum::response::Response;
use futures_util::FutureExt;
use kayra_authn::Identity;
use serde_json::{Value, json};

use super::audit_id::AuditId;
use crate::state::ApiState;

/// Records the request's line once it is answered.
pub(crate) async fn layer(State(state): State<Arc<ApiState>>, mut request: Request, next: Next) -> Response {
    let method = request.method().clone();
    let path = request.uri().path().to_owned();
    let Some(log) = state.audit.clone().filter(|_| AuditLog::audits(method.as_str(), &path)) else {
        return next.run(request).await;
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
    let answered = AssertUnwindSafe(next.run(request)).catch_unwind().await;
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
        let (user, groups): (Value, Value) = match entry.user {
            Some(identity) => (json!(identity.user), json!(identity.groups)),
            None => (Value::Null, Value::Null),
        };
        let impersonator = entry
            .impersonator
            .map_or(Value::Null, |identity| json!({"user": identity.user, "groups": identity.groups}));
        let mut line = json!({
            "time": jiff::Timestamp::now().to_string(),
            "auditID": entry.audit_id,
            "verb": entry.method,
            "path": entry.path,
            "user": user,
            "groups": groups,
            "impersonator": impersonator,
            "remote": entry.remote,
            "decision": decision,
            "code": entry.code,
        });
        if !entry.command.is_empty() {
            line["command"] = json!(entry.command);
        }
        // One rendering, shared by tracing and the file; one write per line (formatting into
        // the file directly would issue a system call for every token of the JSON).
        let mut text = line.to_string();
        if self.console {
            tracing::info!(target: "audit", line = %text);
        }
        text.push('\n');
        let mut file = self.file.lock().expect("audit log lock poisoned");
        if let Err(error) = file.write_all(text.as_bytes()) {
            tracing::error!(%error, "writing the audit log failed");
        }
    }
}
