//! Host facts: the parsers, and this host read whole.

use super::*;

#[test]
fn files_parse_into_facts() {
    assert_eq!(mem_total("MemTotal:       24598364 kB\nMemFree: 1 kB\n"), Some(24598364 * 1024));
    assert_eq!(mem_total("MemFree: 1 kB\n"), None);
    assert_eq!(
        pretty_name("NAME=\"Debian\"\nPRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\n").as_deref(),
        Some("Debian GNU/Linux 12 (bookworm)")
    );
    assert_eq!(
        [kubernetes_arch("x86_64"), kubernetes_arch("aarch64"), kubernetes_arch("riscv64")],
        ["amd64", "arm64", "riscv64"]
    );
}

#[test]
fn this_host_has_capacity_and_a_name() {
    let facts = node_facts();
    assert!(facts.cpu_cores >= 1 && facts.memory_bytes > 1 << 20 && facts.pids > 1, "{facts:?}");
    assert!(
        !facts.hostname.is_empty() && !facts.kernel_version.is_empty() && facts.operating_system == "linux"
    );
    assert_eq!(facts.addresses.last().map(|a| a.type_.as_str()), Some("Hostname"));
    assert!(
        facts.addresses.iter().all(|a| a.address != "127.0.0.1"),
        "no loopback address: {:?}",
        facts.addresses
    );
}

#[test]
fn the_host_s_usage_parses_from_proc() {
    let stat = "cpu  100 20 30 5000 40 5 6 7 0 0\ncpu0 50 10 15 2500 20 2 3 3 0 0\n";
    // user + nice + system + irq + softirq + steal = 168 ticks of 10 ms.
    assert_eq!(busy_cpu_usec(stat), Some(168 * 10_000));
    assert_eq!(busy_cpu_usec("intr 1 2\n"), None);
    assert_eq!(threads("0.52 0.58 0.59 3/467 12345\n"), Some(467));
    assert_eq!(threads(""), None);
    let usage = host_usage();
    assert!(
        usage.memory_total_bytes > 1 << 20 && usage.memory_bytes <= usage.memory_total_bytes,
        "{usage:?}"
    );
    assert!(usage.cpu_usec > 0 && usage.pids > 1, "{usage:?}");
}
