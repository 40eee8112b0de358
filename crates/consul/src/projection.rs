//! The projection's copy of the fleet: a loop that follows Services, Applications and Nodes
//! through the application layer's watch caches, keeps the three Kinds in memory, and recomputes
//! the one Service a change concerns (every Service when a Node's address, readiness or uid
//! changes, or when a Kind is listed again), and the signal held queries wait on.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, RwLock, RwLockReadGuard};

use k8s_openapi::api::core::v1::Node;
use kayra_api::kinds::application::Application;
use kayra_api::kinds::service::Service;
use kayra_application::client::Client;
use kayra_application::feed::{FollowFeed, Follower as Follows};
use kayra_loop::runtime::Loop;
use kayra_loop::source::{Fixed, Item};
use kayra_loop::{Action, Key, ReconcileError, Reconciler};
use kayra_registry::{Object, RegistryError, WatchEvent, meta_str};
use serde_json::Value;
use tokio::sync::watch;

use crate::model::{NamespaceView, Snapshot, consul_nodes};

/// The key that stands for every Service: a Node's change may concern any of them.
const EVERY_SERVICE: &str = "*";

/// What the projection serves, kept current by its loop; cheap to clone.
#[derive(Debug, Clone)]
pub struct Projection {
    snapshot: Arc<RwLock<Snapshot>>,
    changes: watch::Sender<u64>,
}

impl Default for Projection {
    fn default() -> Projection {
        Projection { snapshot: Arc::default(), changes: watch::channel(0).0 }
    }
}

impl Projection {
    /// What is served now.
    pub fn snapshot(&self) -> RwLockReadGuard<'_, Snapshot> {
        self.snapshot.read().expect("the snapshot's lock is never held across a panic")
    }

    /// A receiver told of every change, for a held query to wait on.
    pub fn changes(&self) -> watch::Receiver<u64> {
        self.changes.subscribe()
    }

    /// Whether the loop has read the fleet once.
    pub fn ready(&self) -> bool {
        self.snapshot().base_index > 0
    }

    /// Changes the snapshot; tells the held queries when `change` says it changed anything.
    fn publish(&self, change: impl FnOnce(&mut Snapshot) -> bool) {
        let mut snapshot = self.snapshot.write().expect("the snapshot's lock is never held across a panic");
        let changed = change(&mut snapshot);
        drop(snapshot);
        if changed {
            self.changes.send_modify(|generation| *generation += 1);
        }
    }

    /// The loop keeping the projection current, reading as `client` (which must list and watch
    /// Services, Applications and Nodes).
    pub fn follow(&self, client: Client) -> Result<Loop, RegistryError> {
        let fleet_group = format!("fleet.{}", client.layer().scheme().domain());
        let fleet = Arc::new(Mutex::new(Fleet::default()));
        let follower = |which| Arc::new(Follower { fleet: fleet.clone(), which });
        let sources = [
            (client.resource(&fleet_group, "services")?, Which::Services),
            (client.resource(&fleet_group, "applications")?, Which::Applications),
            (client.resource("", "nodes")?, Which::Nodes),
        ];
        // Every Service once at start, so that an empty fleet is served too.
        let mut lp =
            Loop::new("consul-projection", Recompute { projection: self.clone(), fleet: fleet.clone() })
                .source(Fixed::new([Key::new(EVERY_SERVICE)]));
        for (resource, which) in sources {
            lp = lp.source(FollowFeed::source(client.clone(), resource, follower(which)));
        }
        // One pass at a time: each changes the snapshot the next one reads.
        Ok(lp.concurrency(1))
    }
}

/// The three Kinds as the projection last saw them, with the Services' members by Service.
#[derive(Debug, Default)]
struct Fleet {
    services: HashMap<(String, String), Service>,
    members: HashMap<(String, String), BTreeMap<String, Application>>,
    /// Which Service each member joins, by namespace and name.
    joins: HashMap<(String, String), String>,
    nodes: BTreeMap<String, Node>,
    /// What of each Node is served (see [`served`]), to tell a heartbeat from a change.
    served: HashMap<String, Value>,
    /// The highest revision seen: the index of what changes next.
    revision: u64,
}

impl Fleet {
    fn saw(&mut self, object: &Object) {
        let revision = meta_str(object, "resourceVersion").parse().unwrap_or(0);
        self.revision = self.revision.max(revision);
    }

    /// Takes in one Application; answers the Services it left and joined.
    fn application(&mut self, application: Option<Application>, namespace: &str, name: &str) -> Vec<Key> {
        let place = (namespace.to_owned(), name.to_owned());
        let mut touched = Vec::new();
        if let Some(left) = self.joins.remove(&place) {
            let key = (namespace.to_owned(), left);
            if let Some(members) = self.members.get_mut(&key) {
                members.remove(name);
                if members.is_empty() {
                    self.members.remove(&key);
                }
            }
            touched.push(service_key(namespace, &key.1));
        }
        if let Some(application) = application
            && let Some(service) = application.spec.service_name.clone()
        {
            touched.push(service_key(namespace, &service));
            self.joins.insert(place, service.clone());
            self.members
                .entry((namespace.to_owned(), service))
                .or_default()
                .insert(name.to_owned(), application);
        }
        touched
    }
}

fn service_key(namespace: &str, service: &str) -> Key {
    Key::new(format!("{namespace}/{service}"))
}

/// What of a Node the projection serves: its addresses, its readiness and its uid.
fn served(node: &Object) -> Value {
    let status = node.get("status");
    let ready = status
        .and_then(|status| status.get("conditions"))
        .and_then(Value::as_array)
        .and_then(|conditions| conditions.iter().find(|c| c["type"] == "Ready"))
        .map(|ready| ready["status"].clone());
    serde_json::json!([
        status.and_then(|status| status.get("addresses")),
        ready,
        node.get("metadata").and_then(|m| m.get("uid")),
    ])
}

#[derive(Debug, Clone, Copy)]
enum Which {
    Services,
    Applications,
    Nodes,
}

/// Takes one Kind's lists and changes into the fleet's copy.
struct Follower {
    fleet: Arc<Mutex<Fleet>>,
    which: Which,
}

impl Follower {
    fn fleet(&self) -> MutexGuard<'_, Fleet> {
        self.fleet.lock().expect("the fleet's lock is never held across a panic")
    }
}

fn decode<T: serde::de::DeserializeOwned>(object: &Object) -> Option<T> {
    serde::Deserialize::deserialize(object).ok()
}

fn id(object: &Object) -> String {
    format!("{}/{}", meta_str(object, "namespace"), meta_str(object, "name"))
}

impl Follows for Follower {
    /// The Kind is exactly `objects` now: every Service is recomputed.
    fn listed(&self, objects: Vec<Arc<Object>>) -> Vec<Item> {
        let mut fleet = self.fleet();
        match self.which {
            Which::Services => fleet.services.clear(),
            Which::Applications => {
                fleet.members.clear();
                fleet.joins.clear();
            }
            Which::Nodes => {
                fleet.nodes.clear();
                fleet.served.clear();
            }
        }
        let mut items = Vec::with_capacity(objects.len());
        for object in &objects {
            fleet.saw(object);
            let (namespace, name) =
                (meta_str(object, "namespace").to_owned(), meta_str(object, "name").to_owned());
            match self.which {
                Which::Services => {
                    if let Some(service) = decode::<Service>(object) {
                        fleet.services.insert((namespace, name), service);
                    }
                }
                Which::Applications => {
                    fleet.application(decode(object), &namespace, &name);
                }
                Which::Nodes => {
                    if let Some(node) = decode::<Node>(object) {
                        fleet.served.insert(name.clone(), served(object));
                        fleet.nodes.insert(name, node);
                    }
                }
            }
            items.push(Item { id: id(object), keys: vec![Key::new(EVERY_SERVICE)] });
        }
        items
    }

    fn changed(&self, event: &WatchEvent) -> Option<Item> {
        let object = event.object();
        let gone = matches!(event, WatchEvent::Deleted(_));
        let mut fleet = self.fleet();
        fleet.saw(object);
        let (namespace, name) =
            (meta_str(object, "namespace").to_owned(), meta_str(object, "name").to_owned());
        let keys = match self.which {
            Which::Services => {
                let key = (namespace.clone(), name.clone());
                match decode::<Service>(object).filter(|_| !gone) {
                    Some(service) => fleet.services.insert(key, service),
                    None => fleet.services.remove(&key),
                };
                vec![service_key(&namespace, &name)]
            }
            Which::Applications => {
                let application = if gone { None } else { decode(object) };
                fleet.application(application, &namespace, &name)
            }
            Which::Nodes => {
                let after = (!gone).then(|| served(object));
                // A heartbeat changes nothing served: it is progress, no work.
                if fleet.served.get(&name) == after.as_ref() {
                    return None;
                }
                match (decode::<Node>(object).filter(|_| !gone), after) {
                    (Some(node), Some(after)) => {
                        fleet.served.insert(name.clone(), after);
                        fleet.nodes.insert(name, node);
                    }
                    _ => {
                        fleet.served.remove(&name);
                        fleet.nodes.remove(&name);
                    }
                }
                vec![Key::new(EVERY_SERVICE)]
            }
        };
        Some(Item { id: id(object), keys })
    }
}

/// Recomputes what a key names from the fleet's copy.
struct Recompute {
    projection: Projection,
    fleet: Arc<Mutex<Fleet>>,
}

#[async_trait::async_trait]
impl Reconciler for Recompute {
    async fn reconcile(&self, key: &Key) -> Result<Action, ReconcileError> {
        let fleet = self.fleet.lock().expect("the fleet's lock is never held across a panic");
        let revision = fleet.revision.max(1);
        // Only a Node's change, or a list, names every Service: then the Nodes are read again.
        let every = key.as_str() == EVERY_SERVICE;
        let nodes = every.then(|| consul_nodes(fleet.nodes.values()));
        self.projection.publish(|snapshot| {
            let mut changed = false;
            if snapshot.base_index == 0 {
                snapshot.base_index = revision;
                snapshot.nodes_index = revision;
                changed = true;
            }
            if let Some(nodes) = nodes
                && snapshot.nodes != nodes
            {
                snapshot.nodes = nodes;
                snapshot.nodes_index = revision;
                changed = true;
            }
            let base = snapshot.base_index;
            let wanted: Vec<(String, String)> = match key.as_str().split_once('/') {
                Some((namespace, service)) => vec![(namespace.to_owned(), service.to_owned())],
                None => {
                    // Every Service there is, and every one served before (to drop those gone).
                    let mut all: BTreeSet<(String, String)> = fleet.services.keys().cloned().collect();
                    for (namespace, view) in &snapshot.namespaces {
                        all.extend(view.services.keys().map(|service| (namespace.clone(), service.clone())));
                    }
                    all.into_iter().collect()
                }
            };
            for (namespace, service) in wanted {
                let place = (namespace.clone(), service.clone());
                let members: Vec<&Application> =
                    fleet.members.get(&place).map(|members| members.values().collect()).unwrap_or_default();
                let view = snapshot.namespaces.entry(namespace).or_insert_with(|| NamespaceView {
                    catalog_index: base,
                    health_index: base,
                    ..NamespaceView::default()
                });
                let nodes = &snapshot.nodes;
                let (catalog, health) = (view.catalog_index, view.health_index);
                view.update(&service, fleet.services.get(&place), &members, nodes, revision);
                changed |= view.catalog_index != catalog || view.health_index != health;
            }
            changed
        });
        Ok(Action::AwaitChange)
    }
}
