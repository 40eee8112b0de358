//! The addresses the controller answers to: the host's own address when it listens on every
//! address, and URLs written the way a client needs them.

/// The host's address on its default route, when it has one that is not loopback. Connecting a
/// UDP socket sends nothing; it only asks the kernel which address it would send from.
pub(crate) fn host_address() -> Option<std::net::IpAddr> {
    let socket = std::net::UdpSocket::bind("0.0.0.0:0").ok()?;
    socket.connect("192.0.2.1:9").ok()?;
    let ip = socket.local_addr().ok()?.ip();
    (!ip.is_loopback() && !ip.is_unspecified()).then_some(ip)
}

/// An IPv6 address in brackets, as a URL needs it.
pub(crate) fn bracketed(host: &str) -> String {
    if host.contains(':') && !host.starts_with('[') { format!("[{host}]") } else { host.to_owned() }
}
