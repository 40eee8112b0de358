//! Which replica holds a node's session, recorded in the store so that every replica knows:
//! a `coordination.k8s.io/v1` Lease `kayra-system/node-session.<node>` whose `holderIdentity`
//! is the replica's id, annotated with the URL the replica serves at, renewed with the node's
//! own Lease and lasting the node-ready timeout (`kubectl get leases -n kayra-system` shows who
//! holds which node).
//!
//! A replica that opens a node's session takes the record over. The replica that held it
//! before closes its own session of that node as soon as it sees the record name another
//! replica at a later revision than its own claim (it follows the records with a watch), and
//! at the latest at its next renewal, which refuses to overwrite another holder's record. So
//! two replicas push to one node at once for no longer than the watch takes to deliver the
//! takeover, and never longer than one renewal interval (a quarter of the node-ready timeout).

use std::sync::{Arc, Weak};

use kayra_api::kinds::secret::BOOTSTRAP_TOKEN_NAMESPACE as NAMESPACE;
use kayra_registry::{Object, RegistryError, WatchEvent, WatchOptions, meta_str};
use serde_json::{Value, json};

use crate::session::Live;
use crate::{Inner, NodeServerError};

/// A replica of the controller, as the records name it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replica {
    /// Unique to this process.
    pub id: String,
    /// Where it serves (`https://host:port`), for the others to reach it.
    pub url: String,
}

/// The record of `node`'s session: `node-session.<node>`, or, for a name too long to carry,
/// the SHA-256 of the name after the prefix; the record names its node in an annotation
/// either way.
pub(crate) fn record_name(node: &str) -> String {
    crate::registration::bounded_name(PREFIX, node)
}

const PREFIX: &str = "node-session.";

fn annotation(inner: &Inner) -> String {
    format!("fleet.{}/replica-url", inner.control.scheme().domain())
}

fn node_annotation(inner: &Inner) -> String {
    format!("fleet.{}/node", inner.control.scheme().domain())
}

/// The node `record` is about.
fn node_of<'a>(inner: &Inner, record: &'a Object) -> Option<&'a str> {
    let annotations = record.get("metadata").and_then(|metadata| metadata.get("annotations"));
    let named =
        annotations.and_then(|annotations| annotations.get(node_annotation(inner))).and_then(Value::as_str);
    named.or_else(|| meta_str(record, "name").strip_prefix(PREFIX))
}

/// The record naming `replica` as the holder, renewed now; `stored` is kept otherwise.
fn held(inner: &Inner, stored: Option<Object>, node: &str, replica: &Replica, claimed: bool) -> Value {
    let now = kayra_api::clock::micro_time(jiff::Timestamp::now());
    let duration = i64::try_from(inner.config.ready_timeout.as_secs()).unwrap_or(i64::MAX).max(1);
    let mut record = stored.map(Value::Object).unwrap_or_else(|| {
        json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
               "metadata": {"name": record_name(node), "namespace": NAMESPACE}, "spec": {}})
    });
    record["metadata"]["annotations"][annotation(inner)] = json!(replica.url);
    record["metadata"]["annotations"][node_annotation(inner)] = json!(node);
    let spec = &mut record["spec"];
    if claimed && spec["holderIdentity"] != json!(replica.id) {
        let transitions = spec["leaseTransitions"].as_i64().unwrap_or(0);
        spec["leaseTransitions"] = json!(transitions + 1);
        spec["acquireTime"] = json!(now);
    }
    spec["holderIdentity"] = json!(replica.id);
    spec["leaseDurationSeconds"] = json!(duration);
    spec["renewTime"] = json!(now);
    record
}

/// How many times a write is tried again after another writer moved the record.
const RETRIES: usize = 3;

/// Records that this replica holds `live`'s session (a node that opens a session here takes
/// the record over from any other).
pub(crate) async fn claim(inner: &Inner, live: &Live) -> Result<(), NodeServerError> {
    write(inner, live, true).await.map(|_| ())
}

/// Renews the record of `live`'s session; when another replica holds it now, ends this
/// session instead (the node opened one there since).
pub(crate) async fn renew(inner: &Inner, live: &Live) -> Result<(), NodeServerError> {
    if !write(inner, live, false).await? {
        tracing::info!(node = %live.node, "another replica holds the node's session now; ending this one");
        live.end();
    }
    Ok(())
}

/// Writes the record naming this replica; `false` when renewing a record another replica
/// took over.
async fn write(inner: &Inner, live: &Live, claiming: bool) -> Result<bool, NodeServerError> {
    let Some(replica) = inner.replica.get() else { return Ok(true) };
    let name = record_name(&live.node);
    let failed = |source| NodeServerError::Registry {
        what: format!("recording who holds node {}", live.node),
        source,
    };
    for attempt in 0..=RETRIES {
        let stored = match inner.reader.get(&inner.leases, Some(NAMESPACE), &name).await {
            Ok(stored) => Some(stored),
            Err(RegistryError::NotFound { .. }) => None,
            Err(source) => return Err(failed(source)),
        };
        let holder =
            stored.as_ref().and_then(|record| spec_str(record, "holderIdentity")).unwrap_or_default();
        if !claiming && !holder.is_empty() && holder != replica.id {
            return Ok(false);
        }
        let exists = stored.is_some();
        let record = held(inner, stored, &live.node, replica, claiming);
        let written = match exists {
            true => inner.reader.update(&inner.leases, Some(NAMESPACE), &name, &record).await,
            false => inner.reader.create(&inner.leases, Some(NAMESPACE), &record).await,
        };
        match written {
            Ok(record) => {
                if claiming {
                    let revision = meta_str(&record, "resourceVersion").parse().unwrap_or(u64::MAX);
                    live.claimed.store(revision, std::sync::atomic::Ordering::Release);
                }
                return Ok(true);
            }
            Err(
                RegistryError::Conflict { .. }
                | RegistryError::AlreadyExists { .. }
                | RegistryError::NotFound { .. },
            ) if attempt < RETRIES => {}
            Err(source) => return Err(failed(source)),
        }
    }
    Err(failed(RegistryError::Conflict {
        resource: "leases.coordination.k8s.io".into(),
        name,
        message: "the record kept moving".into(),
    }))
}

fn spec_str<'a>(record: &'a Object, field: &str) -> Option<&'a str> {
    record.get("spec")?.get(field)?.as_str()
}

/// The replica holding `node`'s session, as the store records it, while the record lasts.
pub(crate) async fn holder(inner: &Inner, node: &str) -> Result<Option<Replica>, NodeServerError> {
    let record = match inner.reader.get(&inner.leases, Some(NAMESPACE), &record_name(node)).await {
        Ok(record) => record,
        Err(RegistryError::NotFound { .. }) => return Ok(None),
        Err(source) => {
            return Err(NodeServerError::Registry { what: format!("reading who holds node {node}"), source });
        }
    };
    Ok(current_holder(inner, &record))
}

/// The replica `record` names, while the record lasts.
fn current_holder(inner: &Inner, record: &Object) -> Option<Replica> {
    let renewed = spec_str(record, "renewTime").and_then(|at| at.parse::<jiff::Timestamp>().ok());
    let lasts = record.get("spec").and_then(|spec| spec.get("leaseDurationSeconds")).and_then(Value::as_i64);
    let current = match (renewed, lasts) {
        (Some(at), Some(seconds)) => jiff::Timestamp::now().duration_since(at).as_secs() <= seconds,
        _ => false,
    };
    let url = record
        .get("metadata")
        .and_then(|metadata| metadata.get("annotations"))
        .and_then(|annotations| annotations.get(annotation(inner)))
        .and_then(Value::as_str);
    match (current, spec_str(record, "holderIdentity"), url) {
        (true, Some(id), Some(url)) => Some(Replica { id: id.to_owned(), url: url.to_owned() }),
        _ => None,
    }
}

/// Every replica that holds a node's session, as the current records name them, once each.
pub(crate) async fn holders(inner: &Inner) -> Result<Vec<Replica>, NodeServerError> {
    let records = inner.reader.list_all(&inner.leases, Some(NAMESPACE)).await.map_err(|source| {
        NodeServerError::Registry { what: "listing who holds the nodes' sessions".to_owned(), source }
    })?;
    let mut replicas: Vec<Replica> = records
        .iter()
        .filter(|record| meta_str(record, "name").starts_with(PREFIX))
        .filter_map(|record| current_holder(inner, record))
        .collect();
    replicas.sort_by(|a, b| a.id.cmp(&b.id));
    replicas.dedup_by(|a, b| a.id == b.id);
    Ok(replicas)
}

/// Follows every session record until the server goes: a record that names another replica,
/// written after this replica's claim of that node, ends this replica's session of it.
pub(crate) async fn follow(inner: Weak<Inner>) {
    loop {
        let Some(strong) = inner.upgrade() else { return };
        let options = WatchOptions { namespace: Some(NAMESPACE.to_owned()), ..WatchOptions::default() };
        let mut stream = match strong.reader.watch(&strong.leases, &options).await {
            Ok(stream) => stream,
            Err(error) => {
                tracing::warn!(%error, "cannot follow the session records; trying again");
                drop(strong);
                tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                continue;
            }
        };
        drop(strong);
        while let Ok(event) = stream.next().await {
            let Some(inner) = inner.upgrade() else { return };
            if let WatchEvent::Added(record) | WatchEvent::Modified(record) = &event {
                taken_over(&inner, record);
            }
        }
    }
}

/// Ends this replica's session of the node `record` names, if the record says another replica
/// took it over after this one claimed it.
fn taken_over(inner: &Arc<Inner>, record: &Object) {
    let (Some(replica), Some(node)) = (inner.replica.get(), node_of(inner, record)) else {
        return;
    };
    if spec_str(record, "holderIdentity").is_none_or(|holder| holder == replica.id) {
        return;
    }
    let revision: u64 = meta_str(record, "resourceVersion").parse().unwrap_or(0);
    let Some(live) = inner.sessions().get(node).cloned() else { return };
    if revision > live.claimed.load(std::sync::atomic::Ordering::Acquire) {
        tracing::info!(node, "another replica took the node's session over; ending this one");
        live.end();
    }
}
