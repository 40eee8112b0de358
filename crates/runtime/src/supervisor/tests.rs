//! What the exec shim's report says about a start, and errors in the C library's words.

use super::*;

#[test]
fn the_shim_report_tells_a_started_workload_from_one_that_never_started() {
    let cases: &[(&str, ShimReport)] = &[
        ("exec\n", ShimReport::Started),
        ("exec", ShimReport::Started),
        (
            "exec\nfailed chdir /srv/app: permission denied\n",
            ShimReport::NotStarted("chdir /srv/app: permission denied".into()),
        ),
        (
            "exec\nfailed exec /bin/nope: No such file or directory (os error 2)\n",
            ShimReport::NotStarted("exec /bin/nope: No such file or directory (os error 2)".into()),
        ),
        (
            "failed joining the cgroup /sys/fs/cgroup/x/cgroup.procs: no space\n",
            ShimReport::NotStarted("joining the cgroup /sys/fs/cgroup/x/cgroup.procs: no space".into()),
        ),
        ("", ShimReport::NotStarted("the exec shim ended before it started the process".into())),
        ("hello\n", ShimReport::NotStarted("the exec shim ended before it started the process".into())),
    ];
    for (said, expect) in cases {
        assert_eq!(&ShimReport::read(said.as_bytes()), expect, "{said:?}");
    }
}

#[test]
fn errors_read_as_the_c_library_words_them() {
    let cases = [
        (io::Error::from_raw_os_error(13), "permission denied"),
        (io::Error::from_raw_os_error(2), "no such file or directory"),
        (io::Error::from_raw_os_error(20), "not a directory"),
        (io::Error::other("Odd"), "odd"),
    ];
    for (error, expect) in cases {
        assert_eq!(describe(&error), expect, "{error}");
    }
}
