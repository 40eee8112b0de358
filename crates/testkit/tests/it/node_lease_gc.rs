//! A node's Lease goes with its Node, with real agents: the Lease the node server writes names
//! the Node (by uid) as its owner, so deleting a stopped agent's Node deletes its Lease, and a
//! Node deleted while its agent runs is registered again and its Lease then names the new Node.

use std::future::Future;
use std::time::{Duration, Instant};

use kayra_testkit::{Store, TestServer};
use reqwest::StatusCode;
use serde_json::Value;

const LEASES: &str = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases";

async fn get(server: &TestServer, path: &str) -> (StatusCode, Value) {
    let response = server.admin().get(format!("{}{path}", server.url())).send().await.expect("an answer");
    let code = response.status();
    (code, response.json().await.unwrap_or(Value::Null))
}

/// Asks `check` until it answers something, for at most `within`.
async fn wait_for<T, F: Future<Output = Option<T>>>(
    what: &str,
    within: Duration,
    mut check: impl FnMut() -> F,
) -> T {
    let deadline = Instant::now() + within;
    loop {
        if let Some(found) = check().await {
            return found;
        }
        assert!(Instant::now() < deadline, "{what} did not happen within {within:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn node_uid(server: &TestServer, node: &str) -> Option<String> {
    let (code, node) = get(server, &format!("/api/v1/nodes/{node}")).await;
    (code == StatusCode::OK).then(|| node["metadata"]["uid"].as_str().unwrap_or_default().to_owned())
}

/// The uid of the Node that node `node`'s Lease names as its owner, once it has a Lease.
async fn lease_owner(server: &TestServer, node: &str) -> Option<String> {
    let (code, lease) = get(server, &format!("{LEASES}/{node}")).await;
    if code != StatusCode::OK {
        return None;
    }
    let owner = &lease["metadata"]["ownerReferences"][0];
    assert_eq!((owner["apiVersion"].as_str(), owner["kind"].as_str()), (Some("v1"), Some("Node")), "{lease}");
    assert_eq!(owner["name"], node, "{lease}");
    owner["uid"].as_str().map(str::to_owned)
}

async fn delete_node(server: &TestServer, node: &str) {
    let url = format!("{}/api/v1/nodes/{node}", server.url());
    let response = server.admin().delete(url).send().await.expect("an answer");
    assert_eq!(response.status(), StatusCode::OK, "{}", response.text().await.unwrap_or_default());
}

#[tokio::test]
async fn deleting_a_stopped_nodes_node_object_deletes_its_lease() {
    let server = TestServer::start(Store::Memory).await;
    let agent = server.join_agent("lease-goes").await;
    let name = agent.name().to_owned();
    let uid = node_uid(&server, &name).await.expect("the Node is registered");
    let owner = wait_for("the node's Lease", Duration::from_secs(60), || lease_owner(&server, &name)).await;
    assert_eq!(owner, uid, "the Lease is owned by the Node as it is");
    drop(agent);
    delete_node(&server, &name).await;
    wait_for("the Lease's deletion", Duration::from_secs(30), || async {
        let (code, lease) = get(&server, &format!("{LEASES}/{name}")).await;
        match code {
            StatusCode::NOT_FOUND => Some(()),
            StatusCode::OK => None,
            other => panic!("{other}: {lease}"),
        }
    })
    .await;
    assert_eq!(node_uid(&server, &name).await, None, "nothing made the Node again");
}

#[tokio::test]
async fn a_node_made_again_under_its_name_has_a_lease_naming_the_new_node() {
    let server = TestServer::start(Store::Memory).await;
    let agent = server.join_agent("lease-new").await;
    let name = agent.name().to_owned();
    let first = node_uid(&server, &name).await.expect("the Node is registered");
    let owner = wait_for("the node's Lease", Duration::from_secs(60), || lease_owner(&server, &name)).await;
    assert_eq!(owner, first);
    delete_node(&server, &name).await;
    // The running agent's next report registers the Node again, under another uid.
    let second = wait_for("the Node's registration again", Duration::from_secs(60), || async {
        node_uid(&server, &name).await.filter(|uid| *uid != first)
    })
    .await;
    let owner = wait_for("a Lease naming the new Node", Duration::from_secs(60), || async {
        lease_owner(&server, &name).await.filter(|owner| *owner != first)
    })
    .await;
    assert_eq!(owner, second, "the Lease names the Node as it is now:\n{}", agent.log());
}

#[tokio::test]
async fn a_lease_deleted_between_status_writes_is_made_again_naming_its_node() {
    let server = TestServer::start(Store::Memory).await;
    let agent = server.join_agent("lease-again").await;
    let name = agent.name().to_owned();
    let uid = node_uid(&server, &name).await.expect("the Node is registered");
    wait_for("the node's Lease", Duration::from_secs(60), || lease_owner(&server, &name)).await;
    let (_, first) = get(&server, &format!("{LEASES}/{name}")).await;
    let url = format!("{}{LEASES}/{name}", server.url());
    let response = server.admin().delete(url).send().await.expect("an answer");
    assert_eq!(response.status(), StatusCode::OK);
    // The next heartbeat renews a Lease that is gone: it makes a new one, which its Node owns
    // from the start, though the Node's unchanged status is not written meanwhile.
    let again = wait_for("a new Lease", Duration::from_secs(60), || async {
        let (code, lease) = get(&server, &format!("{LEASES}/{name}")).await;
        (code == StatusCode::OK && lease["metadata"]["uid"] != first["metadata"]["uid"]).then_some(lease)
    })
    .await;
    let owner = &again["metadata"]["ownerReferences"][0];
    assert_eq!(
        (owner["kind"].as_str(), owner["uid"].as_str()),
        (Some("Node"), Some(uid.as_str())),
        "{again}"
    );
}
