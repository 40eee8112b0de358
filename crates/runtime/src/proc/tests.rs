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

#[test]
fn a_process_stopped_by_a_signal_says_so_and_a_continued_one_does_not() {
    let mut child = std::process::Command::new("sleep").arg("30").spawn().unwrap();
    let id = ProcessId::of(child.id()).unwrap();
    assert!(!id.is_stopped());
    let pid = rustix::process::Pid::from_raw(child.id() as i32).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::STOP).unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !id.is_stopped() {
        assert!(std::time::Instant::now() < deadline, "the child never stopped");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    rustix::process::kill_process(pid, rustix::process::Signal::CONT).unwrap();
    while id.is_stopped() {
        assert!(std::time::Instant::now() < deadline, "the child never went on");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    assert!(
        !ProcessId { start_time: id.start_time + 1, ..id }.is_stopped(),
        "another process is not this one"
    );
    let _ = child.kill();
    let _ = child.wait();
}
