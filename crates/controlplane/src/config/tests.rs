//! `kayra.yaml`: keys read, defaults kept, unknown keys and bad values refused.

use super::*;

#[test]
fn yaml_keys_are_read_and_unknown_ones_refused() {
    let config =
        Config::from_yaml("domain: acme.io\nstore: etcd\netcd:\n  endpoints: [\"http://10.0.0.1:2379\"]\n")
            .unwrap();
    assert_eq!((config.domain.as_str(), config.store), ("acme.io", StoreKind::Etcd));
    assert_eq!(config.etcd.prefix, "/kayra/");
    assert_eq!(Config::from_yaml("").unwrap().listen.port(), 6443);
    let error = Config::from_yaml("domian: typo.io\n").unwrap_err();
    assert!(error.contains("domian"), "{error}");
    assert!(Config::from_yaml("store: floppy\n").is_err());
    assert_eq!(Config::from_yaml("").unwrap().max_connections, 4096);
    assert_eq!(Config::from_yaml("maxConnections: 12000\n").unwrap().max_connections, 12000);
    assert!(Config { max_connections: 0, ..Config::default() }.validate().is_err());
    let watch = Config::from_yaml("").unwrap();
    assert_eq!((watch.watch_stall_timeout_seconds, watch.watch_window_bytes), (10, 64 << 20));
    let watch = Config::from_yaml("watchStallTimeoutSeconds: 3\nwatchWindowBytes: 8388608\n").unwrap();
    assert_eq!((watch.watch_stall_timeout_seconds, watch.watch_window_bytes), (3, 8 << 20));
    assert!(Config { watch_stall_timeout_seconds: 0, ..Config::default() }.validate().is_err());
    let streams = Config::default();
    assert_eq!(
        (streams.stream_idle_timeout_seconds, streams.max_streams_per_node, streams.max_streams_per_user),
        (14400, 128, 64),
        "kubelet's streamingConnectionIdleTimeout of 4 h"
    );
    let streams =
        Config::from_yaml("streamIdleTimeoutSeconds: 60\nmaxStreamsPerNode: 8\nmaxStreamsPerUser: 2\n")
            .unwrap();
    assert_eq!(
        (streams.stream_idle_timeout_seconds, streams.max_streams_per_node, streams.max_streams_per_user),
        (60, 8, 2)
    );
    assert!(Config { max_streams_per_user: 0, ..Config::default() }.validate().is_err());
    assert!(Config { watch_window_bytes: 1000, ..Config::default() }.validate().is_err());
    assert!(Config { domain: "Not A Domain".into(), ..Config::default() }.validate().is_err());
    assert_eq!(Config::from_yaml("").unwrap().scheduler.policy, SchedulerPolicy::Spread);
    let binpack = Config::from_yaml("scheduler:\n  policy: binpack\n").unwrap();
    assert_eq!(binpack.scheduler.policy, SchedulerPolicy::Binpack);
    assert!(Config::from_yaml("scheduler:\n  policy: random\n").is_err());
}

#[test]
fn nodes_count_as_not_ready_after_40_seconds_and_lost_after_5_minutes_unless_told() {
    let defaults = Config::from_yaml("").unwrap();
    assert_eq!((defaults.node_ready_timeout_seconds, defaults.node_lost_timeout_seconds), (40, 300));
    let told = Config::from_yaml("nodeReadyTimeoutSeconds: 10\nnodeLostTimeoutSeconds: 60\n").unwrap();
    assert_eq!((told.node_ready_timeout_seconds, told.node_lost_timeout_seconds), (10, 60));
}

#[test]
fn audit_lines_reach_the_console_only_when_asked() {
    assert!(!Config::from_yaml("").unwrap().audit_to_console);
    assert!(Config::from_yaml("auditToConsole: true\n").unwrap().audit_to_console);
}

#[test]
fn feature_gates_are_read_from_yaml_and_an_unknown_one_refused_at_start() {
    let config = Config::from_yaml("featureGates:\n  NodeLogs: true\n").unwrap();
    assert!(config.validate().is_ok());
    assert!(config.features().unwrap().node_logs());
    assert!(!Config::from_yaml("").unwrap().features().unwrap().node_logs(), "NodeLogs is off by default");
    let typo = Config::from_yaml("featureGates:\n  NodeLog: true\n").unwrap();
    let error = typo.validate().unwrap_err();
    assert!(
        error.contains("featureGates: unknown feature gate \"NodeLog\"; the gates are: NodeLogs"),
        "{error}"
    );
    assert!(Config::from_yaml("featureGates:\n  NodeLogs: maybe\n").is_err());
}

#[test]
fn the_issuer_defaults_to_the_first_server_name_and_must_be_an_https_url() {
    assert_eq!(Config::default().service_account_issuer(), "https://127.0.0.1:6443");
    let named = Config::from_yaml("serverNames: [kayra.acme.io, 10.0.0.2]\nlisten: 0.0.0.0:7443\n").unwrap();
    assert_eq!(named.service_account_issuer(), "https://kayra.acme.io:7443");
    let set = Config::from_yaml("serviceAccountIssuer: https://issuer.acme.io/\n").unwrap();
    assert_eq!(set.service_account_issuer(), "https://issuer.acme.io");
    for bad in ["http://issuer.acme.io", "https://", "https://issuer?x=1", "issuer.acme.io"] {
        let config = Config { service_account_issuer: Some(bad.to_owned()), ..Config::default() };
        let error = config.validate().expect_err(bad);
        assert!(error.contains("serviceAccountIssuer"), "{error}");
    }
}

#[test]
fn ten_spec_states_are_kept_unless_told_and_never_more_than_a_hundred() {
    assert_eq!(Config::from_yaml("").unwrap().history_limit, 10);
    let told = Config::from_yaml("historyLimit: 3\n").unwrap();
    assert_eq!(told.history_limit, 3);
    assert!(told.validate().is_ok());
    assert!(Config::from_yaml("historyLimit: 0\n").unwrap().validate().is_ok(), "0 keeps none");
    let error = Config { history_limit: 101, ..Config::default() }.validate().unwrap_err();
    assert!(error.contains("historyLimit must be at most 100"), "{error}");
    assert!(Config::from_yaml("historyLimit: -1\n").is_err());
}
