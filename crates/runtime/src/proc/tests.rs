//! Process identity from `/proc`.

use super::*;

#[test]
fn the_start_time_is_field_22_even_when_the_name_has_parentheses() {
    let stat = b"4242 (a) b (c)) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 100 18446744073709551615";
    assert_eq!(start_time_from_stat(stat), Some(987654));
    assert_eq!(state_from_stat(stat), Some(b'S'));
    assert_eq!(start_time_from_stat(b"1 (x) S 1"), None);
}

#[test]
fn this_process_is_alive_and_a_wrong_start_time_is_not() {
    let me = ProcessId::of(std::process::id()).unwrap();
    assert!(me.is_alive());
    assert!(!ProcessId { start_time: me.start_time + 1, ..me }.is_alive(), "a reused pid is another process");
}
