//! What the smoke run counts as a benchmark's figure, and which of cargo's artifacts it runs.

use serde_json::json;

use super::*;

#[test]
fn a_figure_is_a_json_line_of_the_benchmark_itself_with_a_number_for_its_value() {
    let figure =
        r#"{"bench":"http","name":"GET-1","value":1051.0,"unit":"req/s","ceiling":4159.0,"ratio":0.25}"#;
    assert!(is_figure(figure, "http"));
    let count =
        r#"{"bench":"nodes","name":"pushes lost","value":0,"unit":"count","ceiling":null,"ratio":null}"#;
    assert!(is_figure(count, "nodes"));
    // Another benchmark's line, a value that is not a number, a line that is not JSON, a JSON
    // line without a name (the load generator's own answer).
    assert!(!is_figure(figure, "watch"));
    assert!(!is_figure(
        r#"{"bench":"loop","name":"p99","value":null,"unit":"ms","ceiling":null,"ratio":null}"#,
        "loop"
    ));
    assert!(!is_figure("  GET-1      ours     1051/s", "http"));
    assert!(!is_figure(r#"{"requests":10,"rate":1051.0,"p50_ms":0.9,"p99_ms":1.1}"#, "http"));
}

#[test]
fn the_binary_run_is_the_benchmark_built_as_a_program_not_its_test_harness_nor_another() {
    let artifact = |name: &str, kind: &str, test: bool, executable: &str| {
        json!({"reason": "compiler-artifact", "target": {"name": name, "kind": [kind]},
               "profile": {"test": test}, "executable": executable})
    };
    let built = artifact("kayra-bench", "bin", false, "/target/debug/kayra-bench");
    assert_eq!(benchmark_binary(&built), Some(PathBuf::from("/target/debug/kayra-bench")));
    let harness = artifact("kayra-bench", "bin", true, "/target/debug/deps/kayra_bench-0123");
    assert_eq!(benchmark_binary(&harness), None);
    assert_eq!(
        benchmark_binary(&artifact("kayra-controller", "bin", false, "/target/debug/kayra-controller")),
        None
    );
    assert_eq!(benchmark_binary(&json!({"reason": "build-finished", "success": true})), None);
}
