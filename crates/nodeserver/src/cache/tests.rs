//! The cache maps each change to the nodes it concerns: a node gets its Applications and
//! exactly the Secrets they reference.

use serde_json::json;

use super::*;

fn document(value: Value) -> Document {
    match value {
        Value::Object(object) => Arc::new(object),
        _ => unreachable!("the tests pass objects"),
    }
}

fn application(name: &str, node: &str, uid: &str, generation: i64, secrets: &[&str]) -> Document {
    let env: Vec<Value> = secrets
        .iter()
        .map(|secret| json!({"name": "X", "secretRef": {"name": secret, "key": "k"}}))
        .collect();
    document(json!({
        "metadata": {"namespace": "demo", "name": name, "uid": uid, "generation": generation},
        "spec": {"command": ["/bin/true"], "env": env, "placement": {"nodeName": node}},
    }))
}

fn secret(name: &str, version: &str) -> Document {
    document(
        json!({"metadata": {"namespace": "demo", "name": name, "uid": format!("u-{name}"), "resourceVersion": version}}),
    )
}

fn keys(item: &Item) -> Vec<&str> {
    item.keys.iter().map(Key::as_str).collect()
}

#[test]
fn a_node_gets_its_applications_and_exactly_the_secrets_they_reference() {
    let cache = Cache::default();
    cache.replace(
        Collection::Applications,
        vec![
            application("web", "n1", "u1", 1, &["db"]),
            application("api", "n2", "u2", 1, &["token"]),
            application("loose", "", "u3", 1, &["other"]),
        ],
    );
    cache.replace(Collection::Secrets, vec![secret("db", "5"), secret("token", "6"), secret("other", "7")]);
    let desired = cache.desired("n1");
    let names: Vec<&str> = desired.applications.iter().map(|a| meta_str(a, "name")).collect();
    let secrets: Vec<&str> = desired.secrets.iter().map(|s| meta_str(s, "name")).collect();
    assert_eq!((names, secrets), (vec!["web"], vec!["db"]));
    assert!(cache.desired("n3").applications.is_empty());
}

#[test]
fn a_secret_change_concerns_every_node_whose_applications_reference_it() {
    let cache = Cache::default();
    let items = cache.replace(
        Collection::Applications,
        vec![
            application("a", "n1", "u1", 1, &["shared"]),
            application("b", "n2", "u2", 1, &["shared"]),
            application("c", "n2", "u3", 1, &["shared"]),
            application("d", "n3", "u4", 1, &[]),
        ],
    );
    assert_eq!(
        items.iter().map(keys).collect::<Vec<_>>(),
        vec![vec!["n1"], vec!["n2"], vec!["n2"], vec!["n3"]]
    );
    let item =
        cache.apply(Collection::Secrets, &WatchEvent::Modified(Arc::new((*secret("shared", "9")).clone())));
    assert_eq!(keys(&item), vec!["n1", "n2"]);
    // One of n2's two users goes: n2 still uses the Secret; then the other goes too.
    cache.apply(
        Collection::Applications,
        &WatchEvent::Deleted(Arc::new((*application("b", "n2", "u2", 1, &["shared"])).clone())),
    );
    assert_eq!(
        keys(
            &cache.apply(
                Collection::Secrets,
                &WatchEvent::Modified(Arc::new((*secret("shared", "10")).clone()))
            )
        ),
        vec!["n1", "n2"]
    );
    cache.apply(
        Collection::Applications,
        &WatchEvent::Modified(Arc::new((*application("c", "n2", "u3", 2, &[])).clone())),
    );
    assert_eq!(
        keys(
            &cache.apply(
                Collection::Secrets,
                &WatchEvent::Modified(Arc::new((*secret("shared", "11")).clone()))
            )
        ),
        vec!["n1"]
    );
}

#[test]
fn the_signature_ignores_status_and_sees_generation_deletion_and_recreation() {
    let web = application("web", "n1", "u1", 1, &[]);
    let base = signature(std::slice::from_ref(&web), &[], 0);
    let mut with_status = (*web).clone();
    with_status.insert("status".into(), json!({"phase": "Running"}));
    with_status["metadata"]["resourceVersion"] = json!("99");
    assert_eq!(signature(&[Arc::new(with_status)], &[], 0), base);
    assert_ne!(signature(&[application("web", "n1", "u1", 2, &[])], &[], 0), base, "a new generation");
    assert_ne!(
        signature(&[application("web", "n1", "u9", 1, &[])], &[], 0),
        base,
        "re-created under the same name"
    );
    assert_ne!(signature(&[], &[], 0), base, "deleted");
    let mut deleting = (*web).clone();
    deleting["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
    assert_ne!(signature(&[Arc::new(deleting)], &[], 0), base, "being deleted");
    assert_ne!(
        signature(std::slice::from_ref(&web), &[secret("s", "1")], 0),
        signature(&[web], &[secret("s", "2")], 0),
        "secret data"
    );
}

/// A binding leaves `generation` as it was, so an Application unbound from a node and bound
/// to it again before the node was pushed to is the same document as before: the node must
/// still be told (its status was reset meanwhile, and its node reports it again).
#[test]
fn an_application_unbound_and_bound_again_before_a_push_changes_its_nodes_signature() {
    let cache = Cache::default();
    cache.replace(Collection::Applications, vec![application("web", "n1", "u1", 1, &[])]);
    let before = cache.desired("n1").signature;
    for node in ["", "n1"] {
        let moved = Arc::new((*application("web", node, "u1", 1, &[])).clone());
        cache.apply(Collection::Applications, &WatchEvent::Modified(moved));
    }
    assert_ne!(cache.desired("n1").signature, before);
    let unmoved = Arc::new((*application("web", "n1", "u1", 1, &[])).clone());
    let after = cache.desired("n1").signature;
    cache.apply(Collection::Applications, &WatchEvent::Modified(unmoved));
    assert_eq!(cache.desired("n1").signature, after, "a write that leaves it in place changes nothing");
}

#[test]
fn a_relist_forgets_what_is_gone() {
    let cache = Cache::default();
    cache.replace(Collection::Applications, vec![application("a", "n1", "u1", 1, &["s"])]);
    cache.replace(Collection::Nodes, vec![document(json!({"metadata": {"name": "n1"}}))]);
    assert!(!cache.synced());
    cache.replace(Collection::Secrets, vec![]);
    assert!(cache.synced());
    assert!(cache.has_node("n1"));
    cache.replace(Collection::Applications, vec![]);
    cache.replace(Collection::Nodes, vec![]);
    assert!(cache.desired("n1").applications.is_empty());
    assert!(!cache.has_node("n1"));
}

#[test]
fn a_change_is_kept_as_the_watch_cache_holds_it_not_copied() {
    let cache = Cache::default();
    let web = application("web", "n1", "u1", 1, &["db"]);
    let db = secret("db", "5");
    cache.apply(Collection::Applications, &WatchEvent::Added(web.clone()));
    cache.apply(Collection::Secrets, &WatchEvent::Added(db.clone()));
    let desired = cache.desired("n1");
    assert!(Arc::ptr_eq(&desired.applications[0], &web), "the Application is the event's own object");
    assert!(Arc::ptr_eq(&desired.secrets[0], &db), "the Secret is the event's own object");
}

#[test]
fn hex_writes_each_byte_as_two_lower_case_digits() {
    assert_eq!(hex(&[0x00, 0x0f, 0xa5, 0xff]), "000fa5ff");
    assert_eq!(hex(&[]), "");
}
