//! Facts about the host for the Node's status: capacity (CPUs, memory, process ids), operating
//! system, architecture, kernel, OS image, hostname and addresses.

use std::net::{IpAddr, UdpSocket};

/// What a node reports about its host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeFacts {
    /// The host's name.
    pub hostname: String,
    /// `InternalIP` (a non-loopback IPv4 address, when there is one) and `Hostname`.
    pub addresses: Vec<NodeAddress>,
    /// CPUs this process may run on.
    pub cpu_cores: u32,
    /// Physical memory, in bytes.
    pub memory_bytes: u64,
    /// The most process ids the kernel hands out (`kernel.pid_max`).
    pub pids: u64,
    /// `linux`.
    pub operating_system: String,
    /// The architecture as Kubernetes names it: `amd64`, `arm64`, …
    pub architecture: String,
    /// The kernel release, as `uname -r` prints it.
    pub kernel_version: String,
    /// `PRETTY_NAME` from `/etc/os-release`.
    pub os_image: String,
}

/// One address of a node, as `status.addresses` holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeAddress {
    /// `InternalIP` or `Hostname`.
    pub type_: String,
    /// The address.
    pub address: String,
}

/// Reads the facts of this host.
pub fn node_facts() -> NodeFacts {
    let uname = rustix::system::uname();
    let hostname = uname.nodename().to_string_lossy().into_owned();
    let mut addresses = Vec::new();
    if let Some(ip) = outbound_ipv4() {
        addresses.push(NodeAddress { type_: "InternalIP".to_owned(), address: ip.to_string() });
    }
    addresses.push(NodeAddress { type_: "Hostname".to_owned(), address: hostname.clone() });
    NodeFacts {
        hostname,
        addresses,
        cpu_cores: std::thread::available_parallelism().map_or(1, |n| n.get() as u32),
        memory_bytes: std::fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|text| mem_total(&text))
            .unwrap_or(0),
        pids: std::fs::read_to_string("/proc/sys/kernel/pid_max")
            .ok()
            .and_then(|text| text.trim().parse().ok())
            .unwrap_or(32768),
        operating_system: "linux".to_owned(),
        architecture: kubernetes_arch(std::env::consts::ARCH).to_owned(),
        kernel_version: uname.release().to_string_lossy().into_owned(),
        os_image: std::fs::read_to_string("/etc/os-release")
            .ok()
            .and_then(|text| pretty_name(&text))
            .unwrap_or_else(|| "Linux".to_owned()),
    }
}

/// `MemTotal` of `/proc/meminfo`, in bytes.
pub(crate) fn mem_total(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|line| line.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// What the whole host uses now: the node's own usage sample.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostUsage {
    /// When it was read.
    pub at: jiff::Timestamp,
    /// CPU time spent by every CPU outside idle and I/O wait since boot, in microseconds.
    pub cpu_usec: u64,
    /// Memory in use: total less what the kernel counts available.
    pub memory_bytes: u64,
    /// Physical memory.
    pub memory_total_bytes: u64,
    /// Processes and threads that exist.
    pub pids: u64,
    /// Out-of-memory kills since boot.
    pub oom_kills: u64,
}

/// Reads what the host uses now, from `/proc`; what cannot be read counts as zero.
pub fn host_usage() -> HostUsage {
    let read = |path: &str| std::fs::read_to_string(path).unwrap_or_default();
    let meminfo = read("/proc/meminfo");
    let total = mem_total(&meminfo).unwrap_or(0);
    HostUsage {
        at: jiff::Timestamp::now(),
        cpu_usec: busy_cpu_usec(&read("/proc/stat")).unwrap_or(0),
        memory_bytes: total.saturating_sub(meminfo_bytes(&meminfo, "MemAvailable:").unwrap_or(total)),
        memory_total_bytes: total,
        pids: threads(&read("/proc/loadavg")).unwrap_or(0),
        oom_kills: read("/proc/vmstat")
            .lines()
            .find_map(|line| line.strip_prefix("oom_kill "))
            .and_then(|count| count.trim().parse().ok())
            .unwrap_or(0),
    }
}

/// `/proc/stat` counts CPU time in USER_HZ ticks, which Linux fixes at 100 a second.
const USER_HZ: u64 = 100;

/// CPU time outside idle and I/O wait, in microseconds, from the `cpu` line of `/proc/stat`
/// (user, nice, system, idle, iowait, irq, softirq, steal; guest time is already in user).
pub(crate) fn busy_cpu_usec(stat: &str) -> Option<u64> {
    let line = stat.lines().find(|line| line.starts_with("cpu "))?;
    let ticks: Vec<u64> = line.split_whitespace().skip(1).map(str::parse).collect::<Result<_, _>>().ok()?;
    let busy: u64 = ticks
        .iter()
        .take(8)
        .enumerate()
        .filter(|(field, _)| !matches!(field, 3 | 4))
        .map(|(_, ticks)| ticks)
        .sum();
    Some(busy * (1_000_000 / USER_HZ))
}

/// A `kB` line of `/proc/meminfo`, in bytes.
fn meminfo_bytes(meminfo: &str, field: &str) -> Option<u64> {
    let line = meminfo.lines().find(|line| line.starts_with(field))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// The scheduling entities that exist, the total of `/proc/loadavg`'s `running/total`.
pub(crate) fn threads(loadavg: &str) -> Option<u64> {
    loadavg.split_whitespace().nth(3)?.split('/').nth(1)?.parse().ok()
}

/// `PRETTY_NAME` of an os-release file, unquoted.
pub(crate) fn pretty_name(os_release: &str) -> Option<String> {
    let value = os_release.lines().find_map(|line| line.strip_prefix("PRETTY_NAME="))?;
    Some(value.trim().trim_matches('"').trim_matches('\'').to_owned())
}

/// Rust's architecture name as Go (and so Kubernetes) spells it.
pub(crate) fn kubernetes_arch(rust: &str) -> &str {
    match rust {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "386",
        "powerpc64" => "ppc64le",
        "arm" => "arm",
        other => other,
    }
}

/// The IPv4 address this host would send from towards the outside: connecting a UDP socket
/// picks the route and source address without sending anything. Loopback does not count.
fn outbound_ipv4() -> Option<IpAddr> {
    let socket = UdpSocket::bind("0.0.0.0:0").ok()?;
    socket.connect("192.0.2.1:9").ok()?;
    Some(socket.local_addr().ok()?.ip()).filter(|ip| !ip.is_loopback() && !ip.is_unspecified())
}

#[cfg(test)]
mod tests;
