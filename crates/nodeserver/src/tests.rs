//! Tests of the node server over an in-memory application layer.

use std::sync::Arc;
use std::time::Duration;

use kayra_api::clock::SystemClock;
use kayra_api::scheme::Scheme;
use kayra_application::ApplicationLayer;
use kayra_authn::Identity;
use kayra_registry::Registry;
use kayra_store::mvcc::{MvccStore, Options};

use crate::{Config, NodeServer, NodeServerError};

fn server(ready_timeout: Duration) -> NodeServer {
    let store = Arc::new(MvccStore::in_memory(Options::default()).expect("a memory store"));
    let registry = Registry::new(store, Arc::new(SystemClock), "/registry/");
    let control = Arc::new(ApplicationLayer::new(Arc::new(Scheme::new("example.com")), registry));
    NodeServer::new(control, Config { ready_timeout, ..Config::default() }).expect("a node server")
}

fn node(name: &str) -> Identity {
    Identity::new(format!("system:node:{name}"), "", vec!["system:nodes".into()])
}

#[tokio::test]
async fn one_live_session_per_node_and_a_silent_one_is_taken_over() {
    let server = server(Duration::from_millis(200));
    assert!(matches!(
        server.open(&Identity::new("alice", "", vec![])),
        Err(NodeServerError::NotANode { .. })
    ));
    let impostor = Identity::new("system:node:n1", "", vec!["devs".into()]);
    assert!(
        matches!(server.open(&impostor), Err(NodeServerError::NotANode { .. })),
        "the name alone is not a node"
    );
    assert!(matches!(server.open(&node("Bad_Name")), Err(NodeServerError::BadNodeName { .. })));

    let mut first = server.open(&node("n1")).expect("the first session");
    assert!(matches!(server.open(&node("n1")), Err(NodeServerError::AlreadyConnected { .. })));
    let other = server.open(&node("n2")).expect("another node has its own session");
    assert_eq!(server.sessions(), 2);

    // Silent past the ready timeout: a new session takes over and the old one ends.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let second = server.open(&node("n1")).expect("a silent session is taken over");
    let ended =
        tokio::time::timeout(Duration::from_secs(1), first.next()).await.expect("the old session ends");
    assert!(ended.is_none());
    drop(first);
    assert_eq!(server.sessions(), 2, "dropping the replaced session leaves its successor in place");
    drop((second, other));
    assert_eq!(server.sessions(), 0);

    // Stopping ends every session and refuses new ones.
    let mut live = server.open(&node("n3")).expect("a session");
    server.shutdown();
    assert!(tokio::time::timeout(Duration::from_secs(1), live.next()).await.expect("ends").is_none());
    assert!(matches!(server.open(&node("n4")), Err(NodeServerError::ShuttingDown)));
}
