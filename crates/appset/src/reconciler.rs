//! The set's loop: list-and-watch caches of ApplicationSets, Applications, Nodes and
//! Services, and a reconcile per set that renders, plans and writes the plan's steps and
//! status through the application layer.
//!
//! The caches are what the plans are made from (no list per reconcile). What the loop writes
//! goes into them at once, so that the next pass counts an update it has just made as
//! unavailable even before the watch brings it back; an older version arriving later never
//! replaces a newer one.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use kayra_api::kinds::ConditionType;
use kayra_api::kinds::application::bound_node;
use kayra_api::kinds::applicationset::{ApplicationSet, OWNER_KIND, component_label, set_label};
use kayra_application::client::Client;
use kayra_application::feed::{FollowFeed, Follower};
use kayra_application::options::DeleteRequest;
use kayra_loop::runtime::Loop;
use kayra_loop::source::Item;
use kayra_loop::{Action, Key, ReconcileError, Reconciler};
use kayra_registry::{Deleted, Object, RegistryError, Resource, WatchEvent, meta_str};
use serde_json::{Value, json};

use crate::Error;
use crate::plan::{Child, Input, ServiceState, Step, plan};
use crate::render::{Node, Owner, render};

/// How soon a pass that lost a race (a conflict, a cache not yet listed) runs again.
const SOON: Duration = Duration::from_millis(100);

/// The ApplicationSet loop.
#[derive(Clone)]
pub struct SetLoop {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for SetLoop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SetLoop").field("domain", &self.inner.domain).finish_non_exhaustive()
    }
}

struct Inner {
    client: Client,
    domain: String,
    sets: Resource,
    applications: Resource,
    nodes: Resource,
    services: Resource,
    cache: Mutex<Cache>,
}

/// The collections the loop follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Collection {
    Sets = 0,
    Applications = 1,
    Nodes = 2,
    Services = 3,
}

#[derive(Default)]
struct Cache {
    sets: HashMap<String, Arc<Object>>,
    applications: HashMap<String, Arc<Object>>,
    /// Application ids by the `namespace/name` of the set their controller reference names.
    owned: HashMap<String, BTreeSet<String>>,
    /// The sets with children bound to each node, by node name: each child's id and its set.
    children_on: HashMap<String, HashMap<String, String>>,
    nodes: BTreeMap<String, Node>,
    services: HashMap<String, Arc<Object>>,
    synced: [bool; 4],
}

fn id_of(object: &Object) -> String {
    format!("{}/{}", meta_str(object, "namespace"), meta_str(object, "name"))
}

fn revision(object: &Object) -> u64 {
    meta_str(object, "resourceVersion").parse().unwrap_or_default()
}

/// The `namespace/name` of the set that controls `object`, if one does.
fn controller(object: &Object) -> Option<(String, String)> {
    let owners = object.get("metadata")?.get("ownerReferences")?.as_array()?;
    let owner = owners.iter().find(|o| o["controller"] == true && o["kind"] == OWNER_KIND)?;
    Some((
        format!("{}/{}", meta_str(object, "namespace"), owner["name"].as_str()?),
        owner["uid"].as_str().unwrap_or_default().to_owned(),
    ))
}

/// The node an Application is bound to, and the set that controls it, when it has both.
fn placed_child(object: &Object) -> Option<(String, String)> {
    let node = bound_node(object)?;
    let (set, _) = controller(object)?;
    Some((node.to_owned(), set))
}

fn node_of(object: &Object) -> Node {
    let labels = object
        .get("metadata")
        .and_then(|m| m.get("labels"))
        .and_then(Value::as_object)
        .map(|l| l.iter().filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned()))).collect())
        .unwrap_or_default();
    let spec = object.get("spec");
    let status = object.get("status");
    Node {
        name: meta_str(object, "name").to_owned(),
        labels,
        schedulable: !spec.and_then(|s| s.get("unschedulable")).and_then(Value::as_bool).unwrap_or(false),
        ready: status
            .and_then(|s| s.get("conditions"))
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .any(|c| c["type"] == ConditionType::Ready.as_str() && c["status"] == "True"),
    }
}

impl Cache {
    /// Records an object unless a newer version is already held; answers whether it did.
    fn put(&mut self, collection: Collection, object: Arc<Object>) -> bool {
        let id = id_of(&object);
        match collection {
            Collection::Sets => keep_newer(&mut self.sets, id, object),
            Collection::Services => keep_newer(&mut self.services, id, object),
            Collection::Applications => {
                let before = self.applications.get(&id).cloned();
                let (owner, placed) = (controller(&object), placed_child(&object));
                if !keep_newer(&mut self.applications, id.clone(), object) {
                    return false;
                }
                if let Some(before) = before {
                    self.forget_child(&id, &before);
                }
                if let Some((set, _)) = owner {
                    self.owned.entry(set).or_default().insert(id.clone());
                }
                if let Some((node, set)) = placed {
                    self.children_on.entry(node).or_default().insert(id, set);
                }
                true
            }
            Collection::Nodes => {
                let node = node_of(&object);
                let changed = self.nodes.get(&node.name) != Some(&node);
                self.nodes.insert(node.name.clone(), node);
                changed
            }
        }
    }

    fn remove(&mut self, collection: Collection, object: &Object) {
        let id = id_of(object);
        match collection {
            Collection::Sets => {
                self.sets.remove(&id);
            }
            Collection::Services => {
                self.services.remove(&id);
            }
            Collection::Applications => {
                if let Some(before) = self.applications.remove(&id) {
                    self.forget_child(&id, &before);
                }
            }
            Collection::Nodes => {
                self.nodes.remove(meta_str(object, "name"));
            }
        }
    }

    /// Drops what the indexes hold of Application `id` as it was in `before`.
    fn forget_child(&mut self, id: &str, before: &Object) {
        if let Some((set, _)) = controller(before)
            && let Some(ids) = self.owned.get_mut(&set)
        {
            ids.remove(id);
            if ids.is_empty() {
                self.owned.remove(&set);
            }
        }
        if let Some((node, _)) = placed_child(before)
            && let Some(children) = self.children_on.get_mut(&node)
        {
            children.remove(id);
            if children.is_empty() {
                self.children_on.remove(&node);
            }
        }
    }

    /// The sets a node's change concerns: those spreading over nodes or placing children on it.
    fn sets_of_node(&self, node: &str) -> Vec<Key> {
        let mut keys: BTreeSet<String> = self
            .sets
            .iter()
            .filter(|(_, set)| {
                set.get("spec")
                    .and_then(|s| s.get("applications"))
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .any(|c| c.pointer("/scale/nodeSpread").is_some_and(|s| !s.is_null()))
            })
            .map(|(id, _)| id.clone())
            .collect();
        keys.extend(self.children_on.get(node).into_iter().flat_map(|children| children.values().cloned()));
        keys.into_iter().map(Key::new).collect()
    }
}

fn keep_newer(map: &mut HashMap<String, Arc<Object>>, id: String, object: Arc<Object>) -> bool {
    if map.get(&id).is_some_and(|held| revision(held) > revision(&object)) {
        return false;
    }
    map.insert(id, object);
    true
}

impl SetLoop {
    /// The loop, acting as `client`.
    pub fn new(client: Client) -> Result<SetLoop, RegistryError> {
        let domain = client.layer().scheme().domain().to_owned();
        let fleet = format!("fleet.{domain}");
        Ok(SetLoop {
            inner: Arc::new(Inner {
                sets: client.resource(&fleet, "applicationsets")?,
                applications: client.resource(&fleet, "applications")?,
                nodes: client.resource("", "nodes")?,
                services: client.resource(&fleet, "services")?,
                client,
                domain,
                cache: Mutex::default(),
            }),
        })
    }

    /// The loop over every set, fed by the four caches.
    pub fn into_loop(self) -> Loop {
        let feed = |collection: Collection, resource: &Resource| {
            let follower = CacheFollower { set_loop: self.clone(), collection };
            FollowFeed::source(self.inner.client.clone(), resource.clone(), Arc::new(follower))
        };
        let inner = &self.inner;
        let sources = [
            feed(Collection::Sets, &inner.sets),
            feed(Collection::Applications, &inner.applications),
            feed(Collection::Nodes, &inner.nodes),
            feed(Collection::Services, &inner.services),
        ];
        let mut lp =
            Loop::new("applicationsets", self.clone()).concurrency(4).resync(Duration::from_secs(60));
        for source in sources {
            lp = lp.source(source);
        }
        lp
    }

    fn cache(&self) -> MutexGuard<'_, Cache> {
        self.inner.cache.lock().expect("the set loop's cache lock is never held across a panic")
    }

    /// The loop keys an object's change concerns.
    fn keys(&self, collection: Collection, object: &Object, changed: bool) -> Vec<Key> {
        match collection {
            Collection::Sets => vec![Key::new(id_of(object))],
            Collection::Applications => {
                controller(object).map(|(set, _)| Key::new(set)).into_iter().collect()
            }
            // Only a change the sets care about (labels, cordon, readiness) names them; a
            // heartbeat names none, and the source queues what the last change named once more.
            Collection::Nodes if changed => self.cache().sets_of_node(meta_str(object, "name")),
            Collection::Nodes => Vec::new(),
            Collection::Services => {
                if let Some((set, _)) = controller(object) {
                    return vec![Key::new(set)];
                }
                // A Service the set joins rather than owns: the sets its name could be rendered by.
                let (namespace, name) = (meta_str(object, "namespace"), meta_str(object, "name"));
                self.cache()
                    .sets
                    .values()
                    .filter(|set| meta_str(set, "namespace") == namespace)
                    .filter(|set| name.starts_with(&format!("{}-", meta_str(set, "name"))))
                    .map(|set| Key::new(id_of(set)))
                    .collect()
            }
        }
    }

    /// One pass over one set.
    async fn pass(&self, key: &Key) -> Result<Action, Error> {
        let domain = &self.inner.domain;
        let namespace = key.namespace().unwrap_or_default().to_owned();
        let name = key.name().to_owned();
        let (set_object, children, nodes, services) = {
            let cache = self.cache();
            if cache.synced != [true; 4] {
                return Ok(Action::RequeueAfter(SOON));
            }
            let Some(set) = cache.sets.get(key.as_str()).cloned() else { return Ok(Action::AwaitChange) };
            let uid = meta_str(&set, "uid").to_owned();
            let children: BTreeMap<String, Arc<Object>> = cache
                .owned
                .get(key.as_str())
                .into_iter()
                .flatten()
                .filter_map(|id| cache.applications.get(id))
                .filter(|app| controller(app).is_some_and(|(_, owner)| owner == uid))
                .map(|app| (meta_str(app, "name").to_owned(), app.clone()))
                .collect();
            let nodes = cache.nodes.clone();
            let services: Vec<Arc<Object>> =
                cache.services.values().filter(|s| meta_str(s, "namespace") == namespace).cloned().collect();
            (set, children, nodes, services)
        };
        // A set being deleted is the garbage collector's.
        if set_object.get("metadata").and_then(|m| m.get("deletionTimestamp")).is_some_and(|t| !t.is_null()) {
            return Ok(Action::AwaitChange);
        }
        let set: ApplicationSet = serde::Deserialize::deserialize(&*set_object).map_err(Error::Decode)?;
        let owner = Owner {
            domain: domain.clone(),
            namespace: namespace.clone(),
            name: name.clone(),
            uid: meta_str(&set_object, "uid").to_owned(),
        };
        let node_list: Vec<Node> = nodes.values().cloned().collect();
        let rendering = render(&set, &owner, &node_list);
        let states: BTreeMap<String, Child> = children
            .iter()
            .map(|(name, app)| (name.clone(), Child::from_object(app, domain, &nodes)))
            .collect();
        let rendered_services: BTreeSet<&str> = match &rendering {
            Ok(rendering) => rendering.services.iter().map(|s| s.name.as_str()).collect(),
            Err(_) => BTreeSet::new(),
        };
        let service_states: BTreeMap<String, ServiceState> = {
            let cache = self.cache();
            services
                .iter()
                .filter_map(|service| {
                    let service_name = meta_str(service, "name");
                    let owned =
                        controller(service).is_some_and(|(set, uid)| set == key.as_str() && uid == owner.uid);
                    if !owned && !rendered_services.contains(service_name) {
                        return None;
                    }
                    let members = owned
                        && !rendered_services.contains(service_name)
                        && cache.applications.values().any(|app| {
                            meta_str(app, "namespace") == namespace
                                && app.get("spec").and_then(|s| s.get("serviceName")).and_then(Value::as_str)
                                    == Some(service_name)
                        });
                    let ports = service
                        .get("spec")
                        .and_then(|s| s.get("ports"))
                        .cloned()
                        .and_then(|p| serde_json::from_value(p).ok())
                        .unwrap_or_default();
                    Some((service_name.to_owned(), ServiceState { owned, ports, members }))
                })
                .collect()
        };
        let rollout = set.spec.rollout.clone().unwrap_or_default();
        let now = jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string();
        let message;
        let planned = plan(&Input {
            generation: set.metadata.generation.unwrap_or(0),
            rendering: match &rendering {
                Ok(rendering) => Ok(rendering),
                Err(error) => {
                    message = error.to_string();
                    Err(message.clone())
                }
            },
            same_node: set.spec.placement.as_ref().is_some_and(|p| p.mode == "sameNode"),
            prune: rollout.prune.unwrap_or(true),
            max_unavailable: rollout.max_unavailable.as_ref(),
            frozen: set.spec.frozen,
            children: &states,
            services: &service_states,
            previous: set.status.as_ref(),
            now: &now,
        });
        // Every step is tried: one that fails (a node without room for a pinned child) does
        // not keep the others or the status from being written; the pass then backs off.
        let mut lost_race = false;
        let mut failed = None;
        for step in planned.steps {
            match self.apply(step, &owner, &children, &services).await {
                Ok(()) => {}
                Err(RegistryError::Conflict { .. } | RegistryError::NotFound { .. }) => lost_race = true,
                // Ours arrives through the watch; one that is not ours is never adopted.
                Err(RegistryError::AlreadyExists { .. }) => {}
                Err(error) => {
                    failed.get_or_insert(error);
                }
            }
        }
        if set.status.as_ref() != Some(&planned.status) {
            let mut object = (*set_object).clone();
            object
                .insert("status".into(), serde_json::to_value(&planned.status).expect("a status serialises"));
            match self.inner.client.update_status(&self.inner.sets, Some(&namespace), &name, &object).await {
                Ok(written) => {
                    self.cache().put(Collection::Sets, Arc::new(written));
                }
                Err(RegistryError::Conflict { .. } | RegistryError::NotFound { .. }) => lost_race = true,
                Err(error) => {
                    failed.get_or_insert(error);
                }
            }
        }
        if let Some(error) = failed {
            return Err(Error::Registry(error));
        }
        Ok(if lost_race { Action::RequeueAfter(SOON) } else { Action::AwaitChange })
    }

    /// Writes one step and records what was written in the cache.
    async fn apply(
        &self,
        step: Step,
        owner: &Owner,
        children: &BTreeMap<String, Arc<Object>>,
        services: &[Arc<Object>],
    ) -> Result<(), RegistryError> {
        let client = &self.inner.client;
        let namespace = Some(owner.namespace.as_str());
        match step {
            Step::CreateService(service) => {
                let component = service.name.strip_prefix(&format!("{}-", owner.name)).unwrap_or_default();
                let object = json!({
                    "apiVersion": format!("fleet.{}/v1", owner.domain), "kind": "Service",
                    "metadata": {
                        "name": service.name, "namespace": owner.namespace,
                        "labels": {set_label(&owner.domain): owner.name, component_label(&owner.domain): component},
                        "ownerReferences": [owner.reference()],
                    },
                    "spec": {"ports": service.ports},
                });
                let written = client.create(&self.inner.services, namespace, &object).await?;
                self.cache().put(Collection::Services, Arc::new(written));
            }
            Step::UpdateServicePorts { name, ports } => {
                let Some(stored) = services.iter().find(|s| meta_str(s, "name") == name) else {
                    return Ok(());
                };
                let mut object = (**stored).clone();
                let spec = object.entry("spec").or_insert_with(|| json!({}));
                spec["ports"] = serde_json::to_value(ports).expect("ports serialise");
                let written = client.update(&self.inner.services, namespace, &name, &object).await?;
                self.cache().put(Collection::Services, Arc::new(written));
            }
            Step::DeleteService(name) => {
                self.delete(&self.inner.services, Collection::Services, namespace, &name).await?;
            }
            Step::Create(application) => {
                let written = client.create(&self.inner.applications, namespace, &*application).await?;
                self.cache().put(Collection::Applications, Arc::new(written));
            }
            Step::Update(application) => {
                let name = application.metadata.name.clone().unwrap_or_default();
                let Some(stored) = children.get(&name) else { return Ok(()) };
                let mut object = (**stored).clone();
                let metadata = object.entry("metadata").or_insert_with(|| json!({}));
                let labels = metadata
                    .as_object_mut()
                    .expect("metadata is an object")
                    .entry("labels")
                    .or_insert_with(|| json!({}));
                if !labels.is_object() {
                    *labels = json!({});
                }
                for (key, value) in application.metadata.labels.iter().flatten() {
                    labels[key] = json!(value);
                }
                let annotations = metadata
                    .as_object_mut()
                    .expect("metadata is an object")
                    .entry("annotations")
                    .or_insert_with(|| json!({}));
                for (key, value) in application.metadata.annotations.iter().flatten() {
                    annotations[key] = json!(value);
                }
                // Whether a child is frozen is the set's door's to say, never a template's.
                let frozen = stored.get("spec").and_then(|spec| spec.get("frozen")).cloned();
                let mut spec = serde_json::to_value(&application.spec).expect("a spec serialises");
                if let (Some(frozen), Some(spec)) = (frozen, spec.as_object_mut()) {
                    spec.insert("frozen".into(), frozen);
                }
                object.insert("spec".into(), spec);
                let written = client.update(&self.inner.applications, namespace, &name, &object).await?;
                self.cache().put(Collection::Applications, Arc::new(written));
            }
            Step::Delete(name) => {
                self.delete(&self.inner.applications, Collection::Applications, namespace, &name).await?;
            }
            Step::Freeze { name, frozen } => {
                let written = client.set_frozen(&self.inner.applications, namespace, &name, frozen).await?;
                self.cache().put(Collection::Applications, Arc::new(written));
            }
        }
        Ok(())
    }

    async fn delete(
        &self,
        resource: &Resource,
        collection: Collection,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<(), RegistryError> {
        match self.inner.client.delete(resource, namespace, name, &DeleteRequest::default()).await? {
            Deleted::Gone(object) => self.cache().remove(collection, &object),
            Deleted::Pending(object) => {
                self.cache().put(collection, Arc::new(object));
            }
        }
        Ok(())
    }
}

#[async_trait::async_trait]
impl Reconciler for SetLoop {
    async fn reconcile(&self, key: &Key) -> Result<Action, ReconcileError> {
        use tracing::Instrument;
        match self.pass(key).instrument(tracing::debug_span!("applicationset", set = %key)).await {
            Ok(action) => Ok(action),
            Err(Error::Decode(error)) => {
                tracing::warn!(set = %key, %error, "the set does not decode; waiting for it to change");
                Ok(Action::AwaitChange)
            }
            Err(error) => Err(error.into()),
        }
    }
}

/// A collection as the loop follows it, into its cache.
struct CacheFollower {
    set_loop: SetLoop,
    collection: Collection,
}

impl Follower for CacheFollower {
    fn listed(&self, objects: Vec<Arc<Object>>) -> Vec<Item> {
        let set_loop = &self.set_loop;
        {
            let mut cache = set_loop.cache();
            match self.collection {
                Collection::Sets => cache.sets.clear(),
                Collection::Applications => {
                    cache.applications.clear();
                    cache.owned.clear();
                }
                Collection::Nodes => cache.nodes.clear(),
                Collection::Services => cache.services.clear(),
            }
            for object in &objects {
                cache.put(self.collection, Arc::clone(object));
            }
            cache.synced[self.collection as usize] = true;
        }
        objects
            .iter()
            .map(|object| Item { id: id_of(object), keys: set_loop.keys(self.collection, object, true) })
            .collect()
    }

    fn changed(&self, event: &WatchEvent) -> Option<Item> {
        let object = event.object();
        let id = id_of(object);
        Some(match event {
            WatchEvent::Deleted(_) => {
                let keys = self.set_loop.keys(self.collection, object, true);
                self.set_loop.cache().remove(self.collection, object);
                Item { id, keys }
            }
            WatchEvent::Added(_) | WatchEvent::Modified(_) => {
                let changed = self.set_loop.cache().put(self.collection, Arc::clone(event.shared()));
                let keys = self.set_loop.keys(self.collection, object, changed);
                Item { id, keys }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn child(name: &str, set: &str, node: Option<&str>, revision: u64) -> Arc<Object> {
        let mut spec = json!({"command": ["/bin/true"]});
        if let Some(node) = node {
            spec["placement"] = json!({"nodeName": node});
        }
        let object = json!({"metadata": {"name": name, "namespace": "default", "resourceVersion": revision.to_string(),
                            "ownerReferences": [{"kind": OWNER_KIND, "name": set, "uid": "u", "controller": true}]},
                            "spec": spec});
        Arc::new(object.as_object().unwrap().clone())
    }

    fn sets(cache: &Cache, node: &str) -> Vec<String> {
        cache.sets_of_node(node).iter().map(|key| key.as_str().to_owned()).collect()
    }

    #[test]
    fn a_node_names_the_sets_whose_children_it_holds_as_they_come_move_and_go() {
        let mut cache = Cache::default();
        cache.put(Collection::Applications, child("web-0", "web", None, 1));
        cache.put(Collection::Applications, child("db-0", "db", Some("n1"), 2));
        assert_eq!(sets(&cache, "n1"), ["default/db"]);
        cache.put(Collection::Applications, child("web-0", "web", Some("n1"), 3));
        assert_eq!(sets(&cache, "n1"), ["default/db", "default/web"]);
        // Moved: the old node no longer names the set, the new one does.
        cache.put(Collection::Applications, child("db-0", "db", Some("n2"), 4));
        assert_eq!(
            (sets(&cache, "n1"), sets(&cache, "n2")),
            (vec!["default/web".to_owned()], vec!["default/db".to_owned()])
        );
        // An older version arriving late changes nothing.
        cache.put(Collection::Applications, child("db-0", "db", Some("n1"), 2));
        assert_eq!(sets(&cache, "n1"), ["default/web"]);
        cache.remove(Collection::Applications, &child("web-0", "web", Some("n1"), 5));
        assert!(sets(&cache, "n1").is_empty());
        assert!(!cache.children_on.contains_key("n1") && !cache.owned.contains_key("default/web"));
    }
}
