//! The data directory's record of its node: which name a later start runs under.

use super::*;

fn check(joined_as: Option<&str>, given: Option<&str>, expect: Result<&str, &str>) {
    let dir = tempfile::tempdir().unwrap();
    if let Some(name) = joined_as {
        write_private(&dir.path().join(NAME_FILE), name).unwrap();
    }
    match (run_node_name(dir.path(), given), expect) {
        (Ok(name), Ok(expected)) => assert_eq!(name, expected, "{joined_as:?} {given:?}"),
        (Err(error), Err(expected)) => {
            let said = error.to_string();
            assert!(said.contains(expected), "{joined_as:?} {given:?}: {said}");
            assert!(!error.is_retryable(), "a contradicting name stays contradicting");
        }
        (answer, expected) => panic!("{joined_as:?} {given:?}: {answer:?}, expected {expected:?}"),
    }
}

#[test]
fn a_joined_data_directory_names_its_node_and_refuses_another_name() {
    check(Some("n1"), None, Ok("n1"));
    check(Some("n1"), Some("n1"), Ok("n1"));
    check(Some("n1"), Some("vm"), Err("belongs to node \"n1\", not \"vm\"; pass --name n1"));
    check(None, Some("vm"), Ok("vm"));
    check(None, None, Ok(default_node_name().as_str()));
}
