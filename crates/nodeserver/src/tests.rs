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

/// Silence is measured on tokio's clock: paused, the 200 ms ready timeout passes only when
/// the test sleeps past it, however long a busy machine takes between two calls.
#[tokio::test(start_paused = true)]
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

#[tokio::test]
async fn a_session_keeps_its_last_two_samples_and_only_of_what_is_bound_to_it() {
    use kayra_api::session::{NodeMessage, UsageSample};
    let server = server(Duration::from_secs(40));
    let source = server.usage_source();
    let session = server.open(&node("n1")).expect("a session");
    let whole_node = |at: &str, cpu_usage_usec: u64| UsageSample {
        cpu_usage_usec,
        memory_bytes: 7,
        timestamp: at.to_owned(),
        ..UsageSample::default()
    };
    session.receive(NodeMessage::Usage(whole_node("2026-01-01T00:00:00Z", 1_000_000))).await.unwrap();
    let one = source.node("n1").await.expect("the node's sample");
    assert_eq!((one.node.as_str(), one.previous.is_none(), one.rate()), ("n1", true, None));
    session.receive(NodeMessage::Usage(whole_node("2026-01-01T00:00:10Z", 21_000_000))).await.unwrap();
    let rate = source.node("n1").await.and_then(|samples| samples.rate()).expect("two samples give a rate");
    assert_eq!((rate.nanocores, rate.memory_bytes), (2_000_000_000, 7), "two cores over ten seconds");
    assert_eq!(source.nodes().await.len(), 1);
    // An Application not bound to the node is not the node's to report.
    let stranger = UsageSample {
        namespace: "demo".into(),
        name: "web".into(),
        uid: "u1".into(),
        ..whole_node("2026-01-01T00:00:10Z", 5)
    };
    session.receive(NodeMessage::Usage(stranger)).await.unwrap();
    assert!(source.application("demo", "web").await.is_none());
    assert!(source.applications(None).await.is_empty());
    // The samples live with the session.
    drop(session);
    assert!(source.node("n1").await.is_none() && source.nodes().await.is_empty());
}

/// Two replicas of one control plane (one store), each serving as itself.
async fn replicas() -> [(NodeServer, crate::Replica); 2] {
    use crate::Replica;
    let store = Arc::new(MvccStore::in_memory(Options::default()).expect("a memory store"));
    let registry = Registry::new(store, Arc::new(SystemClock), "/registry/");
    let control = Arc::new(ApplicationLayer::new(Arc::new(Scheme::new("example.com")), registry));
    let admin = control.client(kayra_application::controller_identity("test"));
    let namespaces = admin.resource("", "namespaces").expect("namespaces");
    let namespace =
        serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kayra-system"}});
    admin.create(&namespaces, None, namespace).await.expect("the namespace");
    let config = || Config { ready_timeout: Duration::from_secs(40), ..Config::default() };
    let (a, b) =
        (NodeServer::new(control.clone(), config()).unwrap(), NodeServer::new(control, config()).unwrap());
    let (replica_a, replica_b) = (
        Replica { id: "a".into(), url: "https://10.0.0.1:6443".into() },
        Replica { id: "b".into(), url: "https://10.0.0.2:6443".into() },
    );
    a.serve_as(replica_a.clone());
    b.serve_as(replica_b.clone());
    [(a, replica_a), (b, replica_b)]
}

/// Waits for the session record of `node` to name `replica`, for up to 20 s: on a quiet machine
/// the claim's write and the watch that carries it take milliseconds.
async fn held_by(server: &NodeServer, node: &str, replica: &crate::Replica) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while tokio::time::Instant::now() < deadline {
        if server.holder(node).await.expect("readable").as_ref() == Some(replica) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("the record did not name {replica:?} within 20 s");
}

/// Waits until `server` (serving as `replica`) has acted on every session record written so
/// far: a session of node `marker` opened there is taken over by `other`, and `server` ends it
/// on seeing that record. It follows the records with one watch, in order, and ends a session
/// at once (a cancellation its `next` sees without waiting), so whatever an earlier record
/// would have done to another of its sessions is done by then. The bound is the watch's
/// delivery, milliseconds on a quiet machine.
async fn followed_until_now(server: &NodeServer, replica: &crate::Replica, other: &NodeServer, marker: &str) {
    let mut taken = server.open(&node(marker)).expect("the marker's session");
    held_by(other, marker, replica).await;
    let taker = other.open(&node(marker)).expect("the marker's session, taken over");
    let ended = tokio::time::timeout(Duration::from_secs(5), taken.next()).await;
    assert!(
        ended.expect("the marker's session ends within 5 s (milliseconds on a quiet machine)").is_none(),
        "the marker's session ends"
    );
    drop((taken, taker));
}

#[tokio::test]
async fn a_node_that_opens_a_session_on_another_replica_ends_its_session_on_the_first() {
    let [(a, replica_a), (b, replica_b)] = replicas().await;
    let mut on_a = a.open(&node("n1")).expect("a session on the first replica");
    held_by(&b, "n1", &replica_a).await;
    let mut on_b = b.open(&node("n1")).expect("a session on the second replica");
    held_by(&a, "n1", &replica_b).await;
    let ended = tokio::time::timeout(Duration::from_secs(5), on_a.next()).await;
    assert!(ended.expect("the first replica's session ends within the watch's delay").is_none());
    drop(on_a);
    // Had any record written so far ended the new holder's session (one naming the first replica
    // again, say), the second replica would have acted on it before the marker's takeover.
    followed_until_now(&b, &replica_b, &a, "marker").await;
    assert!(
        tokio::time::timeout(Duration::ZERO, on_b.next()).await.is_err(),
        "the new holder's session goes on"
    );
    assert_eq!(b.holder("n1").await.expect("readable"), Some(replica_b), "nothing wrote the first back");
}

#[tokio::test]
async fn a_node_whose_session_flaps_between_replicas_is_pushed_to_by_one_at_a_time() {
    let replicas = replicas().await;
    // The documented bound: the old holder ends its session within the watch's delay, and at
    // the latest at its next renewal, a quarter of the node-ready timeout (10 s here).
    let bound = Duration::from_secs(40) / 4;
    let mut current = replicas[0].0.open(&node("n1")).expect("a first session");
    held_by(&replicas[1].0, "n1", &replicas[0].1).await;
    let mut longest = Duration::ZERO;
    for flap in 1..=20 {
        let (server, replica) = &replicas[flap % 2];
        let opened = std::time::Instant::now();
        let next = server.open(&node("n1")).unwrap_or_else(|error| panic!("flap {flap} opens: {error}"));
        let ended = tokio::time::timeout(bound, current.next()).await;
        assert!(
            ended
                .unwrap_or_else(|_| panic!("flap {flap}: two replicas pushed to n1 past {bound:?}"))
                .is_none(),
            "the session that moved away ends"
        );
        longest = longest.max(opened.elapsed());
        held_by(server, "n1", replica).await;
        current = next;
    }
    // The last holder (the 20th flap's, the first replica) has acted on every flap's record by
    // the time it ends the marker's session.
    let ((last, last_replica), (other, _)) = (&replicas[0], &replicas[1]);
    followed_until_now(last, last_replica, other, "marker").await;
    assert!(
        tokio::time::timeout(Duration::ZERO, current.next()).await.is_err(),
        "the last holder's session goes on"
    );
    assert_eq!(replicas[0].0.sessions() + replicas[1].0.sessions(), 1, "one session in all");
    eprintln!("20 flaps between two replicas: the longest overlap was {longest:?} (bound {bound:?})");
}

#[tokio::test]
async fn a_node_named_longer_than_a_record_name_can_be_is_recorded_and_taken_over_too() {
    let [(a, replica_a), (b, replica_b)] = replicas().await;
    let label = "n".repeat(60);
    let long = format!("{label}.{label}.{label}.{label}.example");
    assert!(long.len() > 240);
    assert!(crate::holder::record_name(&long).len() <= 253, "the record's name fits");
    let mut on_a = a.open(&node(&long)).expect("a session on the first replica");
    held_by(&b, &long, &replica_a).await;
    let _on_b = b.open(&node(&long)).expect("a session on the second replica");
    held_by(&a, &long, &replica_b).await;
    let ended = tokio::time::timeout(Duration::from_secs(5), on_a.next()).await;
    assert!(ended.expect("the first replica's session ends").is_none());
}

/// Each Application of the pushed node gets one token per file it asks for, held and pushed
/// again unchanged until 80 % of its life has passed, then minted afresh; an Application that
/// asks for none gets none. Paused, tokio's clock moves only when the test advances it.
#[tokio::test(start_paused = true)]
async fn a_nodes_tokens_are_held_until_four_fifths_of_their_life_then_minted_afresh() {
    use kayra_api::session::DesiredState;
    use serde_json::json;
    let store = Arc::new(MvccStore::in_memory(Options::default()).expect("a memory store"));
    let registry = Registry::new(store, Arc::new(SystemClock), "/registry/");
    let control = Arc::new(ApplicationLayer::new(Arc::new(Scheme::new("example.com")), registry));
    control.set_issuer("https://kayra.test:6443".to_owned());
    let admin = control.client(kayra_application::controller_identity("test"));
    let namespaces = admin.resource("", "namespaces").expect("namespaces");
    let namespace = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kayra-system"}});
    admin.create(&namespaces, None, namespace).await.expect("the namespace");
    let server = NodeServer::new(control.clone(), Config::default()).expect("a node server");
    let document = |name: &str, uid: &str, identity: serde_json::Value| {
        let object = json!({
            "metadata": {"name": name, "namespace": "default", "uid": uid},
            "spec": {"command": ["sleep"], "identity": identity},
        });
        Arc::new(object.as_object().expect("an object").clone())
    };
    let state = || DesiredState {
        applications: vec![
            document(
                "web",
                "u-web",
                json!({"tokens": [{"audience": "vault", "path": "vault", "expirationSeconds": 600}]}),
            ),
            document("quiet", "u-quiet", json!({"automount": false})),
        ],
        signature: "s".to_owned(),
        ..DesiredState::default()
    };
    let tokens = &server.inner.tokens;

    let mut first = state();
    let due = tokens.fill(&control, "n1", &mut first).await.expect("a token falls due");
    let files: Vec<(&str, &str)> = first.tokens.iter().map(|t| (t.uid.as_str(), t.path.as_str())).collect();
    assert_eq!(files, [("u-web", "token"), ("u-web", "vault")], "the API's token and the one asked for");
    assert!(due <= Duration::from_secs(480) && due >= Duration::from_secs(470), "80 % of 600 s: {due:?}");
    let vault =
        |state: &DesiredState| state.tokens.iter().find(|t| t.path == "vault").cloned().expect("vault");
    let claims = control.verify_token(&vault(&first).token).await;
    assert!(
        matches!(claims, Err(kayra_application::identity::Refusal::Gone)),
        "signed, for an Application not stored"
    );
    assert_ne!(first.signature, "s", "the tokens are part of the signature");

    tokio::time::advance(Duration::from_secs(400)).await;
    let mut again = state();
    tokens.fill(&control, "n1", &mut again).await;
    assert_eq!(vault(&again), vault(&first), "held while fresh");
    assert_eq!(again.signature, first.signature);

    tokio::time::advance(Duration::from_secs(100)).await;
    let mut later = state();
    let due = tokens.fill(&control, "n1", &mut later).await.expect("a token falls due");
    assert_ne!(vault(&later).token, vault(&first).token, "minted afresh once due");
    assert_eq!(
        later.tokens.iter().find(|t| t.path == "token"),
        first.tokens.iter().find(|t| t.path == "token")
    );
    assert!(due <= Duration::from_secs(480), "the next is the fresh one's: {due:?}");

    // Another node's state carries only its own Applications' tokens.
    let mut elsewhere = DesiredState { signature: "s".to_owned(), ..DesiredState::default() };
    assert_eq!(tokens.fill(&control, "n2", &mut elsewhere).await, None);
    assert!(elsewhere.tokens.is_empty() && elsewhere.signature == "s");
}
