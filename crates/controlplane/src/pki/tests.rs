//! What `init` writes, and the serving certificate covering the address served on.

use super::*;

#[test]
fn the_serving_certificate_is_issued_again_only_for_an_address_it_does_not_cover() {
    let dir = tempfile::tempdir().unwrap();
    let config = Config { data_dir: dir.path().to_owned(), ..Config::default() };
    init(&config).unwrap();
    let certificate = || std::fs::read_to_string(dir.path().join("pki/server.crt")).unwrap();
    let first = certificate();
    let names = certificate_names(&first).unwrap();
    assert_eq!(names, ["localhost", "127.0.0.1", "::1"]);
    cover_serving_host(dir.path(), "127.0.0.1".parse().unwrap()).unwrap();
    assert_eq!(certificate(), first, "a covered address keeps the certificate");
    cover_serving_host(dir.path(), "10.9.8.7".parse().unwrap()).unwrap();
    let covering = certificate();
    assert_eq!(certificate_names(&covering).unwrap(), ["localhost", "127.0.0.1", "::1", "10.9.8.7"]);
    cover_serving_host(dir.path(), "10.9.8.7".parse().unwrap()).unwrap();
    assert_eq!(certificate(), covering);
    serving_tls(dir.path()).expect("the new certificate and key serve together");
}

#[test]
fn init_makes_the_admin_token_once_and_keeps_it() {
    let dir = tempfile::tempdir().unwrap();
    let config = Config { data_dir: dir.path().to_owned(), ..Config::default() };
    let first = init(&config).unwrap();
    assert_eq!(first.admin_token, AdminToken::Created);
    let token = std::fs::read_to_string(&first.paths.admin_token).unwrap();
    assert_eq!(init(&config).unwrap().admin_token, AdminToken::Kept);
    assert_eq!(std::fs::read_to_string(&first.paths.admin_token).unwrap(), token);
}
