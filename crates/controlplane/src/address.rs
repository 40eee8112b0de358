//! The addresses the controller answers to: the URL of the listener it serves on (the host's
//! own address when it listens on every address), recorded in the data directory when it
//! starts serving, so that what prints a join command names where the controller really is.

use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};

use crate::ControlPlaneError;

/// The file under the data directory naming the URL the serving controller answers to.
const SERVING_URL_FILE: &str = "serving-url";

/// The host a client names to reach a listener on `ip`: `ip` itself, and when it listens on
/// every address, one of the host's own that is not loopback (127.0.0.1 when it has none).
pub(crate) fn serving_host(ip: IpAddr) -> IpAddr {
    if ip.is_unspecified() { host_address().unwrap_or(Ipv4Addr::LOCALHOST.into()) } else { ip }
}

/// The URL of `host`'s HTTPS listener on `port`.
pub(crate) fn serving_url(host: IpAddr, port: u16) -> String {
    format!("https://{}:{port}", bracketed(&host.to_string()))
}

/// The port a URL names, when it names one.
pub(crate) fn url_port(url: &str) -> Option<u16> {
    let (_, port) = url.rsplit_once(':')?;
    port.trim_end_matches('/').parse().ok()
}

/// The host a URL names, without brackets around an IPv6 address.
pub(crate) fn url_host(url: &str) -> Option<&str> {
    let rest = url.split_once("://")?.1;
    let authority = rest.split('/').next()?;
    match authority.strip_prefix('[') {
        Some(bracketed) => bracketed.split_once(']').map(|(host, _)| host),
        None => Some(authority.rsplit_once(':').map_or(authority, |(host, _)| host)),
    }
}

/// Records `url` as the one the controller serving from `data_dir` answers to.
pub(crate) fn record_serving_url(data_dir: &Path, url: &str) -> Result<(), ControlPlaneError> {
    let path = serving_url_file(data_dir);
    let temporary = path.with_extension("tmp");
    std::fs::write(&temporary, format!("{url}\n"))
        .and_then(|()| std::fs::rename(&temporary, &path))
        .map_err(ControlPlaneError::io(format!("cannot write {}", path.display())))
}

/// The URL the controller serving from `data_dir` last recorded; `None` before it served.
pub(crate) fn recorded_serving_url(data_dir: &Path) -> Option<String> {
    let text = std::fs::read_to_string(serving_url_file(data_dir)).ok()?;
    Some(text.trim().to_owned()).filter(|url| url.starts_with("https://"))
}

fn serving_url_file(data_dir: &Path) -> PathBuf {
    data_dir.join(SERVING_URL_FILE)
}

/// The host's address on its default route, when it has one that is not loopback. Connecting a
/// UDP socket sends nothing; it only asks the kernel which address it would send from.
pub(crate) fn host_address() -> Option<IpAddr> {
    let socket = std::net::UdpSocket::bind("0.0.0.0:0").ok()?;
    socket.connect("192.0.2.1:9").ok()?;
    let ip = socket.local_addr().ok()?.ip();
    (!ip.is_loopback() && !ip.is_unspecified()).then_some(ip)
}

/// An IPv6 address in brackets, as a URL needs it.
pub(crate) fn bracketed(host: &str) -> String {
    if host.contains(':') && !host.starts_with('[') { format!("[{host}]") } else { host.to_owned() }
}

#[cfg(test)]
mod tests;
