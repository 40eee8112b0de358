//! Which rlimits stand in for which limits.

use super::*;

#[test]
fn memory_becomes_address_space_and_pids_the_process_count() {
    let cases = [
        (Limits::default(), vec![]),
        (
            Limits { memory_bytes: Some(1 << 30), cpu_millis: Some(500), pids: None },
            vec![Rlimit::AddressSpace(1 << 30)],
        ),
        (
            Limits { memory_bytes: Some(1 << 20), cpu_millis: None, pids: Some(64) },
            vec![Rlimit::AddressSpace(1 << 20), Rlimit::Processes(64)],
        ),
    ];
    for (limits, expect) in cases {
        assert_eq!(for_limits(&limits), expect, "{limits:?}");
    }
}
