//! Feature gates at the command line and in `kayra.yaml`: an unknown gate stops the controller
//! before it starts, with exit code 64 and an error naming the gate and the gates there are.

use std::process::Command;

fn controller(args: &[&str]) -> std::process::Output {
    let data = tempfile::tempdir().unwrap();
    Command::new(env!("CARGO_BIN_EXE_kayra-controller"))
        .arg("--data-dir")
        .arg(data.path())
        .args(args)
        .arg("init")
        .output()
        .expect("the controller binary runs")
}

#[test]
fn an_unknown_feature_gate_is_refused_at_start() {
    let refused = controller(&["--feature-gates", "NodeLogs=true,NodeLog=true"]);
    let said = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(64), "{said}");
    assert!(said.contains("unknown feature gate \"NodeLog\"; the gates are: NodeLogs"), "{said}");

    let settings = tempfile::tempdir().unwrap();
    let config = settings.path().join("kayra.yaml");
    std::fs::write(&config, "featureGates:\n  Bogus: false\n").unwrap();
    let refused = controller(&["--config", config.to_str().unwrap()]);
    let said = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(64), "{said}");
    assert!(said.contains("featureGates: unknown feature gate \"Bogus\""), "{said}");

    let malformed = controller(&["--feature-gates", "NodeLogs=yes"]);
    assert_eq!(malformed.status.code(), Some(64), "{}", String::from_utf8_lossy(&malformed.stderr));

    let known = controller(&["--feature-gates", "NodeLogs=true"]);
    assert!(known.status.success(), "{}", String::from_utf8_lossy(&known.stderr));
}
