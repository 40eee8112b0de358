//! What the real binary logs: plain text when stderr is not a terminal, and a startup line
//! that names the addresses it serves on.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::{Controller, free_port};

/// Waits for the `serving` line in `log()`, and answers it.
fn serving_line(log: impl Fn() -> String) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let text = log();
        if let Some(line) = text.lines().find(|line| line.contains("serving")) {
            return line.to_owned();
        }
        assert!(Instant::now() < deadline, "no `serving` line within 30 s:\n{text}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn logs_to_a_file_are_plain_text_and_name_the_listen_addresses() {
    let controller = Controller::start(&[]);
    let line = serving_line(|| controller.log());
    let https = controller.url().replace("https://", "");
    let http = controller.http_url().replace("http://", "");
    assert!(
        line.contains(&format!("https={https}")) && line.contains(&format!("http={http}")),
        "the startup line names both addresses: {line}"
    );
    assert!(!line.contains("Some("), "{line}");
    let log = controller.log();
    assert!(!log.contains('\x1b'), "no ANSI escape codes when stderr is a file:\n{log:?}");
}

#[test]
fn the_startup_line_says_off_for_a_disabled_listener() {
    let dir = tempfile::tempdir().unwrap();
    let log_path = dir.path().join("controller.log");
    let https = free_port();
    let mut child = Command::new(env!("CARGO_BIN_EXE_kayra-controller"))
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        .args(["--listen", &format!("127.0.0.1:{https}"), "--http-listen", "off"])
        .env("KAYRA_LOG", "info")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log_path).unwrap())
        .spawn()
        .expect("the controller starts");
    let line = serving_line(|| std::fs::read_to_string(&log_path).unwrap_or_default());
    let _ = child.kill();
    let _ = child.wait();
    assert!(line.contains(&format!("https=127.0.0.1:{https}")) && line.contains("http=off"), "{line}");
}

/// The admin token stays in its file: what the controller prints to a log (on the first start,
/// on a restart, and from `init`) reads the token from there instead of carrying it.
#[test]
fn the_admin_token_never_reaches_the_log_only_the_command_that_reads_it() {
    let mut controller = Controller::start(&["--store", "sled"]);
    serving_line(|| controller.log());
    let token = controller.token();
    let data = std::fs::canonicalize(controller.scratch().join("data")).unwrap();
    let export = format!("export TOKEN=$(cat {}/admin.token)", data.display());
    let log = controller.log();
    assert!(!log.contains(&token), "the first start printed the token:\n{log}");
    assert!(log.contains(&export), "{log}");
    controller.restart();
    let restarted = controller.log();
    assert!(restarted.matches(&export).count() >= 2 && !restarted.contains(&token), "{restarted}");
    let init = Command::new(env!("CARGO_BIN_EXE_kayra-controller"))
        .arg("--data-dir")
        .arg(&data)
        .arg("init")
        .output()
        .expect("the controller binary runs");
    let said = format!("{}{}", String::from_utf8_lossy(&init.stdout), String::from_utf8_lossy(&init.stderr));
    assert!(init.status.success() && said.contains(&export) && !said.contains(&token), "{said}");
}

/// The console carries the operator's log: audit lines go to the audit log only, unless
/// `auditToConsole: true` asks for them on the console as well.
#[test]
fn audit_lines_stay_off_the_console_unless_asked_for() {
    for (settings, on_console) in [("", false), ("auditToConsole: true\n", true)] {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("kayra.yaml");
        std::fs::write(&config, settings).unwrap();
        let controller = Controller::start(&["--store", "memory", "--config", config.to_str().unwrap()]);
        let created = Command::new("curl")
            .args(["-s", "-o", "/dev/null", "-w", "%{http_code}", "-X", "POST"])
            .args(["-H", &format!("Authorization: Bearer {}", controller.token())])
            .args(["-H", "Content-Type: application/json", "-H", "Audit-Id: audited-write"])
            .args(["-d", r#"{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"audited"}}"#])
            .arg(format!("{}/api/v1/namespaces", controller.http_url()))
            .output()
            .expect("curl runs");
        assert_eq!(String::from_utf8_lossy(&created.stdout), "201", "{settings:?}");
        let audited = "\"auditID\":\"audited-write\"";
        let audit_log = controller.scratch().join("data/audit.log");
        let deadline = Instant::now() + Duration::from_secs(10);
        while !std::fs::read_to_string(&audit_log).unwrap_or_default().contains(audited) {
            assert!(Instant::now() < deadline, "the write is not in the audit log");
            std::thread::sleep(Duration::from_millis(50));
        }
        let log = controller.log();
        assert_eq!(log.contains(audited), on_console, "{settings:?}:\n{log}");
    }
}
