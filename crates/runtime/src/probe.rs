//! Health checks as Kubernetes probes behave: a readiness probe starts failing (not ready)
//! and turns ready after `successThreshold` successes in a row; a liveness probe starts
//! passing and fails after `failureThreshold` failures in a row. [`Counter`] is that rule
//! without IO; [`check`] runs one `exec`, `httpGet` or `tcpSocket` check.

use std::path::PathBuf;
use std::time::Duration;

use kayra_api::kinds::application::Probe;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A probe's verdict from consecutive results.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Counter {
    success_threshold: u32,
    failure_threshold: u32,
    successes: u32,
    failures: u32,
    passing: bool,
}

impl Counter {
    /// A readiness counter: failing until it has enough successes.
    pub(crate) fn readiness(probe: &Probe) -> Counter {
        Counter::new(probe, false)
    }

    /// A liveness counter: passing until it has enough failures.
    pub(crate) fn liveness(probe: &Probe) -> Counter {
        Counter::new(probe, true)
    }

    fn new(probe: &Probe, passing: bool) -> Counter {
        let threshold = |value: Option<i64>, default: u32| {
            value.and_then(|v| u32::try_from(v).ok()).unwrap_or(default).max(1)
        };
        Counter {
            success_threshold: threshold(probe.success_threshold, 1),
            failure_threshold: threshold(probe.failure_threshold, 3),
            successes: 0,
            failures: 0,
            passing,
        }
    }

    /// Records one result: the new verdict when it changes.
    pub(crate) fn record(&mut self, ok: bool) -> Option<bool> {
        if ok {
            self.failures = 0;
            self.successes += 1;
            if !self.passing && self.successes >= self.success_threshold {
                self.passing = true;
                return Some(true);
            }
        } else {
            self.successes = 0;
            self.failures += 1;
            if self.passing && self.failures >= self.failure_threshold {
                self.passing = false;
                return Some(false);
            }
        }
        None
    }
}

/// The timing of a probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Timing {
    /// Before the first check.
    pub(crate) initial_delay: Duration,
    /// Between checks.
    pub(crate) period: Duration,
    /// For one check.
    pub(crate) timeout: Duration,
}

impl Timing {
    /// The timing `probe` asks for, with the Kubernetes defaults.
    pub(crate) fn of(probe: &Probe) -> Timing {
        let seconds = |value: Option<i64>, default: u64| {
            Duration::from_secs(value.and_then(|v| u64::try_from(v).ok()).unwrap_or(default))
        };
        Timing {
            initial_delay: seconds(probe.initial_delay_seconds, 0),
            period: seconds(probe.period_seconds, 10).max(Duration::from_secs(1)),
            timeout: seconds(probe.timeout_seconds, 1).max(Duration::from_secs(1)),
        }
    }
}

/// Where and as whom an exec check runs: the process's own working directory, environment and
/// user.
#[derive(Debug, Clone)]
pub(crate) struct ExecContext {
    /// The working directory.
    pub(crate) working_dir: PathBuf,
    /// The environment.
    pub(crate) env: Vec<(String, String)>,
    /// The user and group, when the runtime drops privileges.
    pub(crate) user: Option<(u32, u32)>,
}

/// Runs one check: `Ok` when it passed, else why not.
pub(crate) async fn check(probe: &Probe, timeout: Duration, context: &ExecContext) -> Result<(), String> {
    match tokio::time::timeout(timeout, check_once(probe, context)).await {
        Ok(result) => result,
        Err(_) => Err(format!("timed out after {}s", timeout.as_secs())),
    }
}

async fn check_once(probe: &Probe, context: &ExecContext) -> Result<(), String> {
    if let Some(exec) = &probe.exec {
        let (program, args) = exec.command.split_first().ok_or("empty command")?;
        let mut command = tokio::process::Command::new(program);
        command
            .args(args)
            .env_clear()
            .envs(context.env.iter().map(|(k, v)| (k, v)))
            .current_dir(&context.working_dir)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true);
        if let Some((uid, gid)) = context.user {
            command.uid(uid).gid(gid);
        }
        let status = command.status().await.map_err(|error| format!("exec {program}: {error}"))?;
        return if status.success() {
            Ok(())
        } else {
            Err(format!("command {program} exited with {status}"))
        };
    }
    if let Some(http) = &probe.http_get {
        let port = u16::try_from(http.port).map_err(|_| "bad port")?;
        let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .map_err(|error| format!("Get http://127.0.0.1:{port}: {error}"))?;
        let path = http.path.as_deref().unwrap_or("/");
        let request = format!(
            "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUser-Agent: kayra-probe/1.0\r\nConnection: close\r\n\r\n"
        );
        stream.write_all(request.as_bytes()).await.map_err(|error| error.to_string())?;
        let mut head = vec![0; 64];
        let read = stream.read(&mut head).await.map_err(|error| error.to_string())?;
        let code = http_status(&head[..read]).ok_or("not an HTTP response")?;
        return if (200..400).contains(&code) {
            Ok(())
        } else {
            Err(format!("HTTP probe failed with statuscode: {code}"))
        };
    }
    if let Some(tcp) = &probe.tcp_socket {
        let port = u16::try_from(tcp.port).map_err(|_| "bad port")?;
        tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .map_err(|error| format!("dial tcp 127.0.0.1:{port}: {error}"))?;
        return Ok(());
    }
    Err("the probe has no check".to_owned())
}

/// The status code of an HTTP/1 response's first line.
pub(crate) fn http_status(head: &[u8]) -> Option<u16> {
    let line = head.split(|b| *b == b'\r' || *b == b'\n').next()?;
    let mut words = line.split(|b| *b == b' ');
    words.next().filter(|version| version.starts_with(b"HTTP/"))?;
    std::str::from_utf8(words.next()?).ok()?.parse().ok()
}

#[cfg(test)]
mod tests;
