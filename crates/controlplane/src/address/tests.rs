//! The URL a listener is reached through, and its record in the data directory.

use super::*;

fn check(bound: &str, expect: &str) {
    let bound: std::net::SocketAddr = bound.parse().unwrap();
    assert_eq!(serving_url(serving_host(bound.ip()), bound.port()), expect, "{bound}");
}

#[test]
fn a_listener_is_reached_through_its_own_address_or_the_hosts() {
    check("127.0.0.1:7443", "https://127.0.0.1:7443");
    check("10.1.2.3:6443", "https://10.1.2.3:6443");
    check("[fd00::2]:6443", "https://[fd00::2]:6443");
    let host = host_address().map_or("127.0.0.1".to_owned(), |ip| bracketed(&ip.to_string()));
    check("0.0.0.0:7443", &format!("https://{host}:7443"));
    check("[::]:7443", &format!("https://{host}:7443"));
    assert_eq!(url_port("https://[fd00::2]:6443"), Some(6443));
    assert_eq!(url_port("https://kayra.example.com"), None);
    assert_eq!(url_host("https://[fd00::2]:6443/api"), Some("fd00::2"));
    assert_eq!(url_host("https://10.1.2.3:6443"), Some("10.1.2.3"));
    assert_eq!(url_host("https://kayra.example.com"), Some("kayra.example.com"));
    assert_eq!(url_host("kayra.example.com"), None);
}

#[test]
fn the_serving_url_is_read_back_as_recorded() {
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(recorded_serving_url(dir.path()), None, "nothing served yet");
    record_serving_url(dir.path(), "https://127.0.0.1:7443").unwrap();
    assert_eq!(recorded_serving_url(dir.path()).as_deref(), Some("https://127.0.0.1:7443"));
    record_serving_url(dir.path(), "https://10.1.2.3:6443").unwrap();
    assert_eq!(recorded_serving_url(dir.path()).as_deref(), Some("https://10.1.2.3:6443"));
}
