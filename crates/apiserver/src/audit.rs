//! The audit log: one JSON line per mutating request (and per log or exec-like read), allowed
//! or not, to a file (and, when asked, to tracing as well): what was asked, by whom, from where,
//! and what was answered.

use std::io::Write;
use std::path::Path;
use std::sync::Mutex;

use serde_json::{Value, json};

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
        let line = json!({
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
