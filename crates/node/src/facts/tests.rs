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
