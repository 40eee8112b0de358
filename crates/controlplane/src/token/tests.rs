//! Join commands and token lifetimes.

use super::*;
use crate::address::{bracketed, host_address};

#[test]
fn the_join_command_names_the_server_token_and_ca_pin() {
    let listening = |listen: &str| Config { listen: listen.parse().unwrap(), ..Config::default() };
    let config = listening("10.1.2.3:6443");
    assert_eq!(join_server(&config, None), "https://10.1.2.3:6443");
    assert_eq!(join_server(&config, Some("https://kayra.example.com:443/")), "https://kayra.example.com:443");
    assert_eq!(join_server(&config, Some("kayra.example.com")), "https://kayra.example.com:6443");
    assert_eq!(join_server(&config, Some("kayra.example.com:7443")), "https://kayra.example.com:7443");
    assert_eq!(join_server(&config, Some("fd00::1")), "https://[fd00::1]:6443");
    assert_eq!(join_server(&listening("[fd00::2]:6443"), None), "https://[fd00::2]:6443");
    let everywhere = join_server(&listening("0.0.0.0:6443"), None);
    let expected = host_address().map_or("127.0.0.1".to_owned(), |ip| bracketed(&ip.to_string()));
    assert_eq!(everywhere, format!("https://{expected}:6443"));
    assert!(!everywhere.contains("0.0.0.0"));
    assert_eq!(
        join_command("https://10.1.2.3:6443", "abcdef.0123456789abcdef", "sha256:00ff"),
        "kayra-agent join --server https://10.1.2.3:6443 --token abcdef.0123456789abcdef --ca-cert-hash sha256:00ff"
    );
}

#[test]
fn ttls_are_durations_within_a_week() {
    assert_eq!(parse_ttl("24h"), Ok(Duration::from_secs(86_400)));
    assert_eq!(parse_ttl("1h30m"), Ok(Duration::from_secs(5_400)));
    assert!(parse_ttl("0s").is_err());
    assert!(parse_ttl("-1h").is_err());
    assert_eq!(parse_ttl("168h"), Ok(MAX_TTL));
    assert!(parse_ttl("169h").is_err());
    assert!(parse_ttl("soon").is_err());
}

#[test]
fn the_join_command_names_the_address_served_on_unless_told_another() {
    let dir = tempfile::tempdir().unwrap();
    let config = Config { data_dir: dir.path().to_owned(), ..Config::default() };
    assert_eq!(join_server(&config, None), "https://127.0.0.1:6443", "before it served, the configured");
    crate::address::record_serving_url(dir.path(), "https://127.0.0.1:7443").unwrap();
    assert_eq!(join_server(&config, None), "https://127.0.0.1:7443");
    assert_eq!(join_server(&config, Some("kayra.example.com")), "https://kayra.example.com:7443");
    assert_eq!(join_server(&config, Some("kayra.example.com:443")), "https://kayra.example.com:443");
}
