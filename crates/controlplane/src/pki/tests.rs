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

#[test]
fn the_admin_kubeconfig_follows_the_listener_on_this_host_and_nowhere_else() {
    let dir = tempfile::tempdir().unwrap();
    let config = Config { data_dir: dir.path().to_owned(), ..Config::default() };
    init(&config).unwrap();
    let server = || {
        let text = std::fs::read_to_string(admin_kubeconfig(dir.path())).unwrap();
        Kubeconfig::parse(&text).unwrap().clusters[0].cluster.server.clone()
    };
    assert_eq!(server(), "https://127.0.0.1:6443");
    follow_listener(dir.path(), "127.0.0.1".parse().unwrap(), 17443).unwrap();
    assert_eq!(server(), "https://127.0.0.1:17443", "serving on another port");
    follow_listener(dir.path(), "0.0.0.0".parse().unwrap(), 17443).unwrap();
    assert_eq!(server(), "https://127.0.0.1:17443", "listening everywhere, loopback still reaches it");
    follow_listener(dir.path(), "10.9.8.7".parse().unwrap(), 6443).unwrap();
    assert_eq!(server(), "https://10.9.8.7:6443", "serving on one address of the host");
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(admin_kubeconfig(dir.path())).unwrap().permissions(),
    );
    assert_eq!(mode & 0o077, 0, "the kubeconfig holds the admin's key: its owner's alone");

    // An operator's kubeconfig naming the balancer stays as it is.
    let text = std::fs::read_to_string(admin_kubeconfig(dir.path())).unwrap();
    let mut balanced = Kubeconfig::parse(&text).unwrap();
    balanced.clusters[0].cluster.server = "https://kayra.example.com:443".to_owned();
    std::fs::write(admin_kubeconfig(dir.path()), balanced.to_yaml()).unwrap();
    follow_listener(dir.path(), "127.0.0.1".parse().unwrap(), 17443).unwrap();
    assert_eq!(server(), "https://kayra.example.com:443");
}
