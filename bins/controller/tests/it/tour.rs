//! The README's first commands as a reader runs them: `kayra-controller` with its local node,
//! its data directory inside a directory only root may enter (as `/root` is, or a Debian home
//! directory), then the five-minute tour's Application applied, waited for and read.
//!
//! The tour's Application gets its test's marker as `$0` of its script (an extra argument, so
//! it runs exactly as the tour's does), and the test stops what it started by that marker and
//! by the local node's data directory.

use std::path::Path;
use std::time::Duration;

use crate::Controller;
use crate::agents::{alive, is_root, kill_all_with, kubectl_ok, the_process, unique, wait_for};

/// Stops, however the test ends, every process whose command line holds one of its needles.
struct StopOnDrop(Vec<String>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        for needle in &self.0 {
            kill_all_with(needle);
        }
    }
}

#[test]
fn the_readme_tour_runs_with_the_data_directory_inside_a_private_directory() {
    if !crate::have_kubectl() {
        return;
    }
    let controller = Controller::start_with_local_node_in_a_private_directory(&["--store", "sled"]);
    let marker = unique("tour");
    let agent_data = controller.scratch().join("data/agent").display().to_string();
    let _stop = StopOnDrop(vec![marker.clone(), agent_data]);
    let tour = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/examples/application.yaml");
    let manifest = std::fs::read_to_string(&tour).unwrap();
    assert!(manifest.contains("\nspec:\n"), "{manifest}");
    let marked = manifest.replacen("\nspec:\n", &format!("\nspec:\n  args: [\"{marker}\"]\n"), 1);
    let path = controller.scratch().join("application.yaml");
    std::fs::write(&path, marked).unwrap();

    kubectl_ok(&controller, &["create", "namespace", "demo"]);
    kubectl_ok(&controller, &["-n", "demo", "apply", "-f", path.to_str().unwrap()]);
    kubectl_ok(&controller, &["-n", "demo", "wait", "--for=condition=Ready", "app/hello", "--timeout=60s"]);
    // Ready means its process runs: it is there, as the default user, and says hello.
    let (pid, uid) = the_process(&marker);
    if is_root() {
        assert_eq!(uid, 65532, "a root agent runs the tour's process as the default runAsUser");
    }
    let logs = wait_for("hello's output", Duration::from_secs(15), || {
        let logs = kubectl_ok(&controller, &["-n", "demo", "logs", "hello"]);
        logs.lines().any(|line| line == "hello").then_some(logs)
    });
    assert!(!logs.contains("kayra:"), "{logs}");
    let pods = kubectl_ok(&controller, &["-n", "demo", "get", "pods", "-o", "wide"]);
    let line = pods.lines().find(|line| line.starts_with("hello ")).unwrap_or_else(|| panic!("{pods}"));
    assert!(line.contains("1/1") && line.contains("Running"), "{pods}");
    let status =
        kubectl_ok(&controller, &["-n", "demo", "get", "app", "hello", "-o", "jsonpath={.status.restarts}"]);
    assert_eq!(status, "0", "the tour's process has not restarted");

    kubectl_ok(&controller, &["-n", "demo", "delete", "app", "hello"]);
    wait_for("hello's process to stop", Duration::from_secs(40), || (!alive(pid)).then_some(()));
}
