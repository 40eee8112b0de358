//! What the node server knows of the store: every Application, Secret and Node, indexed by the
//! node each concerns, kept current by list-and-watch feeds on the loop runtime. Each feed maps
//! a change to the nodes whose desired state it may alter, so the push loop recomputes exactly
//! those.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};

use kayra_api::kinds::application::bound_node;
use kayra_api::session::{DesiredState, Document};
use kayra_application::feed::Follower;
use kayra_loop::Key;
use kayra_loop::source::Item;
use kayra_registry::{Object, WatchEvent, meta_str};
use serde_json::Value;

/// The collections the cache holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Collection {
    Applications,
    Secrets,
    Nodes,
}

/// Every Application, Secret and Node, indexed by node.
#[derive(Debug, Default)]
pub(crate) struct Cache {
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    applications: HashMap<String, Placed>,
    by_node: HashMap<String, BTreeSet<String>>,
    secrets: HashMap<String, Document>,
    /// For each Secret (`namespace/name`), the nodes whose Applications reference it, with how
    /// many of them do.
    users: HashMap<String, HashMap<String, usize>>,
    /// The names of the Node objects that exist: all the push needs of them (a whole Node is
    /// some 10 KiB decoded, per node, and the registry's watch cache holds it already).
    nodes: HashSet<String>,
    /// The Nodes whose stored `Ready` condition is not `True` (never reported, or marked
    /// `Unknown` by the liveness loop): their next report is written whatever it says.
    not_ready: HashSet<String>,
    /// For each node, how many times an Application left it (unbound, or bound elsewhere):
    /// part of its signature, since one that comes back before a push is the same document.
    departures: HashMap<String, u64>,
    synced: BTreeSet<&'static str>,
}

/// An Application with what the index needs of it.
#[derive(Debug)]
struct Placed {
    object: Document,
    node: Option<String>,
    secrets: BTreeSet<String>,
}

impl Cache {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().expect("the cache's lock is never held across a panic")
    }

    /// Whether every collection has been listed at least once: before that, a desired state
    /// could miss Applications a node runs, and pushing it would stop them.
    pub(crate) fn synced(&self) -> bool {
        self.state().synced.len() == 3
    }

    /// Whether the Node object `name` exists.
    pub(crate) fn has_node(&self, name: &str) -> bool {
        self.state().nodes.contains(name)
    }

    /// Whether the Node `name` exists with a stored `Ready=True`.
    pub(crate) fn node_ready(&self, name: &str) -> bool {
        let state = self.state();
        state.nodes.contains(name) && !state.not_ready.contains(name)
    }

    /// The Application `namespace/name`, if cached.
    pub(crate) fn application(&self, namespace: &str, name: &str) -> Option<Document> {
        self.state().applications.get(&format!("{namespace}/{name}")).map(|placed| placed.object.clone())
    }

    /// Replaces a whole collection with a fresh list; answers the nodes each item concerns.
    pub(crate) fn replace(&self, collection: Collection, objects: Vec<Document>) -> Vec<Item> {
        let mut state = self.state();
        let stale: Vec<String> = match collection {
            Collection::Applications => state.applications.keys().cloned().collect(),
            Collection::Secrets => state.secrets.keys().cloned().collect(),
            Collection::Nodes => state.nodes.iter().cloned().collect(),
        };
        for id in stale {
            state.remove(collection, &id);
        }
        let items = objects.into_iter().map(|object| state.put(collection, object)).collect();
        state.synced.insert(collection.name());
        items
    }

    /// Records a change; answers the nodes it concerns.
    pub(crate) fn apply(&self, collection: Collection, event: &WatchEvent) -> Item {
        let object: Document = Arc::clone(event.shared());
        let mut state = self.state();
        match event {
            WatchEvent::Added(_) | WatchEvent::Modified(_) => state.put(collection, object),
            WatchEvent::Deleted(_) => {
                let id = id_of(&object);
                let keys = state.keys(collection, &id);
                state.remove(collection, &id);
                Item { id, keys }
            }
        }
    }

    /// What node `node` should run now: its Applications and exactly the Secrets they
    /// reference, with the signature of that state.
    pub(crate) fn desired(&self, node: &str) -> DesiredState {
        let state = self.state();
        let mut applications = Vec::new();
        let mut wanted = BTreeSet::new();
        for id in state.by_node.get(node).into_iter().flatten() {
            if let Some(placed) = state.applications.get(id) {
                applications.push(placed.object.clone());
                wanted.extend(placed.secrets.iter().cloned());
            }
        }
        let secrets: Vec<Document> = wanted.iter().filter_map(|id| state.secrets.get(id).cloned()).collect();
        let departures = state.departures.get(node).copied().unwrap_or_default();
        // The other pushers and the feeds wait on the lock; the signature needs none of it.
        drop(state);
        let signature = signature(&applications, &secrets, departures);
        DesiredState { applications, secrets, tokens: Vec::new(), signature }
    }
}

impl Collection {
    fn name(self) -> &'static str {
        match self {
            Collection::Applications => "applications",
            Collection::Secrets => "secrets",
            Collection::Nodes => "nodes",
        }
    }
}

impl State {
    fn put(&mut self, collection: Collection, object: Document) -> Item {
        let id = id_of(&object);
        match collection {
            Collection::Applications => {
                let left = self.applications.get(&id).and_then(|placed| placed.node.clone());
                self.remove(collection, &id);
                let node = bound_node(&object).map(str::to_owned);
                if let Some(left) = left.filter(|left| node.as_ref() != Some(left)) {
                    *self.departures.entry(left).or_default() += 1;
                }
                let secrets = referenced_secrets(&object);
                if let Some(node) = &node {
                    self.by_node.entry(node.clone()).or_default().insert(id.clone());
                    for secret in &secrets {
                        *self.users.entry(secret.clone()).or_default().entry(node.clone()).or_default() += 1;
                    }
                }
                self.applications.insert(id.clone(), Placed { object, node, secrets });
            }
            Collection::Secrets => {
                self.secrets.insert(id.clone(), object);
            }
            Collection::Nodes => {
                let name = meta_str(&object, "name").to_owned();
                let ready = object
                    .get("status")
                    .and_then(|status| status.get("conditions"))
                    .and_then(Value::as_array)
                    .and_then(|conditions| {
                        conditions.iter().find(|c| {
                            c.get("type").and_then(Value::as_str)
                                == Some(kayra_api::kinds::ConditionType::Ready.as_str())
                        })
                    })
                    .and_then(|ready| ready.get("status"))
                    .and_then(Value::as_str)
                    == Some("True");
                if ready {
                    self.not_ready.remove(&name);
                } else {
                    self.not_ready.insert(name.clone());
                }
                self.nodes.insert(name);
            }
        }
        let keys = self.keys(collection, &id);
        Item { id, keys }
    }

    fn remove(&mut self, collection: Collection, id: &str) {
        match collection {
            Collection::Applications => {
                let Some(placed) = self.applications.remove(id) else { return };
                let Some(node) = placed.node else { return };
                if let Some(ids) = self.by_node.get_mut(&node) {
                    ids.remove(id);
                    if ids.is_empty() {
                        self.by_node.remove(&node);
                    }
                }
                for secret in placed.secrets {
                    let Some(users) = self.users.get_mut(&secret) else { continue };
                    if let Some(count) = users.get_mut(&node) {
                        *count -= 1;
                        if *count == 0 {
                            users.remove(&node);
                        }
                    }
                    if users.is_empty() {
                        self.users.remove(&secret);
                    }
                }
            }
            Collection::Secrets => {
                self.secrets.remove(id);
            }
            Collection::Nodes => {
                self.nodes.remove(id.trim_start_matches('/'));
                self.not_ready.remove(id.trim_start_matches('/'));
            }
        }
    }

    /// The nodes an item of `collection` concerns, as loop keys.
    fn keys(&self, collection: Collection, id: &str) -> Vec<Key> {
        match collection {
            Collection::Applications => self
                .applications
                .get(id)
                .and_then(|placed| placed.node.as_deref())
                .map(|node| vec![Key::new(node)])
                .unwrap_or_default(),
            Collection::Secrets => {
                let mut nodes: Vec<Key> =
                    self.users.get(id).into_iter().flat_map(|users| users.keys()).map(Key::new).collect();
                nodes.sort();
                nodes
            }
            Collection::Nodes => vec![Key::new(id.trim_start_matches('/'))],
        }
    }
}

/// `namespace/name` (`/name` for cluster-scoped objects), the id feeds know items by.
fn id_of(object: &Object) -> String {
    format!("{}/{}", meta_str(object, "namespace"), meta_str(object, "name"))
}

/// The Secrets (`namespace/name`) an Application's environment names.
fn referenced_secrets(object: &Object) -> BTreeSet<String> {
    let namespace = meta_str(object, "namespace");
    let env = object.get("spec").and_then(|spec| spec.get("env")).and_then(Value::as_array);
    env.into_iter()
        .flatten()
        .filter_map(|var| var.pointer("/secretRef/name").and_then(Value::as_str))
        .filter(|name| !name.is_empty())
        .map(|name| format!("{namespace}/{name}"))
        .collect()
}

/// A digest over what a desired state contains: each object's identity, uid and version of
/// what the node acts on (an Application's generation and whether it is being deleted, a
/// Secret's resourceVersion, as Secrets have no generation), and how many Applications left the
/// node (`departures`). A status-only change leaves it as it was; a deletion, a re-creation
/// under the same name, or an Application unbound and bound to the node again changes it.
pub(crate) fn signature(applications: &[Document], secrets: &[Document], departures: u64) -> String {
    let mut parts = BTreeMap::new();
    if departures > 0 {
        parts.insert("departures".to_owned(), departures.to_string());
    }
    for application in applications {
        let generation =
            application.get("metadata").and_then(|m| m.get("generation")).and_then(Value::as_i64);
        let deleting = !meta_str(application, "deletionTimestamp").is_empty();
        parts.insert(
            format!("a {}", id_of(application)),
            format!("{} {} {deleting}", meta_str(application, "uid"), generation.unwrap_or_default()),
        );
    }
    for secret in secrets {
        parts.insert(
            format!("s {}", id_of(secret)),
            format!("{} {}", meta_str(secret, "uid"), meta_str(secret, "resourceVersion")),
        );
    }
    let mut digest = ring::digest::Context::new(&ring::digest::SHA256);
    for (id, version) in &parts {
        digest.update(id.as_bytes());
        digest.update(b"\0");
        digest.update(version.as_bytes());
        digest.update(b"\n");
    }
    hex(digest.finish().as_ref())
}

/// `bytes` in lower-case hexadecimal.
pub(crate) fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut text = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        text.push(char::from(DIGITS[usize::from(byte >> 4)]));
        text.push(char::from(DIGITS[usize::from(byte & 0xf)]));
    }
    text
}

/// One collection as the push loop follows it: feeding the cache and mapping each change to
/// the nodes it concerns.
pub(crate) struct CacheFollower {
    pub(crate) collection: Collection,
    pub(crate) cache: Arc<Cache>,
}

impl Follower for CacheFollower {
    fn listed(&self, objects: Vec<Arc<Object>>) -> Vec<Item> {
        self.cache.replace(self.collection, objects)
    }

    fn changed(&self, event: &WatchEvent) -> Option<Item> {
        Some(self.cache.apply(self.collection, event))
    }
}

#[cfg(test)]
mod tests;
