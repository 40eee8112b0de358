//! A resource of the registry as a loop's feed: listed and watched through a [`Client`], each
//! object mapped to the loop keys it concerns.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use kayra_loop::Key;
use kayra_loop::source::{Change, Changes, Feed, FeedError, Item, ListWatch, Listed};
use kayra_registry::{Object, RegistryError, Resource, WatchEvent, WatchOptions, WatchStream, meta_str};

use crate::client::Client;

/// Maps an object to the loop keys it concerns.
pub type Mapper = Arc<dyn Fn(&Object) -> Vec<Key> + Send + Sync>;

/// The part of an object a loop cares about; a change that leaves it as it was is no change.
pub type Projection = Arc<dyn Fn(&Object) -> serde_json::Value + Send + Sync>;

/// The object's own key: `namespace/name`, or `name`.
pub fn own_key(object: &Object) -> Vec<Key> {
    vec![Key::object(Some(meta_str(object, "namespace")), meta_str(object, "name"))]
}

/// The key of the object's controlling owner of Kind `kind` (its `ownerReferences` entry with
/// `controller: true`), in the object's namespace: how a child's change reaches its parent's loop.
pub fn controller_owner(kind: &'static str) -> Mapper {
    Arc::new(move |object: &Object| {
        let namespace = meta_str(object, "namespace");
        let owners = object.get("metadata").and_then(|metadata| metadata.get("ownerReferences"));
        owners
            .and_then(serde_json::Value::as_array)
            .into_iter()
            .flatten()
            .filter(|owner| owner["controller"] == true && owner["kind"] == kind)
            .filter_map(|owner| owner["name"].as_str())
            .map(|name| Key::object(Some(namespace), name))
            .collect()
    })
}

/// The key of the cluster-scoped object whose name a string field of the object holds (a JSON
/// pointer such as `/spec/placement/nodeName`): how an Application's change reaches its node's loop.
pub fn named_by(pointer: &'static str) -> Mapper {
    Arc::new(move |object: &Object| {
        field(object, pointer)
            .and_then(serde_json::Value::as_str)
            .filter(|name| !name.is_empty())
            .map(Key::new)
            .into_iter()
            .collect()
    })
}

/// The value at a JSON pointer of plain segments (`/spec/placement/nodeName`), read in place.
fn field<'a>(object: &'a Object, pointer: &str) -> Option<&'a serde_json::Value> {
    let mut segments = pointer.trim_start_matches('/').split('/');
    let first = object.get(segments.next()?)?;
    segments.try_fold(first, |value, segment| value.get(segment))
}

/// What a loop does with a resource it follows: with a list, and with each change after it.
/// A loop that keeps its own copy of the resource (the scheduler's snapshot, the set loop's
/// caches) takes both into the copy here.
pub trait Follower: Send + Sync + 'static {
    /// A list: from now on the resource is exactly `objects`. Answers each one's item.
    fn listed(&self, objects: Vec<Arc<Object>>) -> Vec<Item>;
    /// One change after it. Answers its item, or `None` when it changed nothing the loop
    /// cares about (it is passed on as progress).
    fn changed(&self, event: &WatchEvent) -> Option<Item>;
}

/// One resource, listed and watched as `client`, each list and change handed to a [`Follower`].
pub struct FollowFeed<F> {
    client: Client,
    resource: Resource,
    follower: Arc<F>,
}

impl<F> std::fmt::Debug for FollowFeed<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FollowFeed").field("resource", &self.resource.plural).finish_non_exhaustive()
    }
}

impl<F: Follower> FollowFeed<F> {
    /// `resource` as `client` sees it, followed by `follower`.
    pub fn new(client: Client, resource: Resource, follower: Arc<F>) -> FollowFeed<F> {
        FollowFeed { client, resource, follower }
    }

    /// The feed as a loop source.
    pub fn source(client: Client, resource: Resource, follower: Arc<F>) -> ListWatch {
        ListWatch::new(FollowFeed::new(client, resource, follower))
    }
}

/// A registry error as a feed's: a revision too old to watch from means listing again.
pub fn feed_error(error: RegistryError) -> FeedError {
    match error {
        RegistryError::Expired { .. } => FeedError::Expired,
        other => FeedError::Failed(other.to_string()),
    }
}

#[async_trait::async_trait]
impl<F: Follower> Feed for FollowFeed<F> {
    async fn list(&self) -> Result<Listed, FeedError> {
        let (revision, objects) =
            self.client.list_shared_with_revision(&self.resource, None).await.map_err(feed_error)?;
        Ok(Listed { revision, items: self.follower.listed(objects) })
    }

    async fn watch(&self, after: u64) -> Result<Box<dyn Changes>, FeedError> {
        let options = WatchOptions { resource_version: Some(after.to_string()), ..WatchOptions::default() };
        let stream = self.client.watch(&self.resource, &options).await.map_err(feed_error)?;
        Ok(Box::new(FollowChanges { stream, follower: self.follower.clone() }))
    }
}

struct FollowChanges<F> {
    stream: WatchStream,
    follower: Arc<F>,
}

#[async_trait::async_trait]
impl<F: Follower> Changes for FollowChanges<F> {
    async fn next(&mut self) -> Option<Result<Change, FeedError>> {
        // A stream cut off mid-way (the registry closes one that falls behind) resumes from its
        // last revision; only a watch that cannot start from there lists again.
        let event = match self.stream.next().await {
            Ok(event) => event,
            Err(error) => return Some(Err(FeedError::Failed(error.to_string()))),
        };
        let revision = self.stream.revision();
        Some(Ok(match (self.follower.changed(&event), &event) {
            (None, _) => Change::Progress(revision),
            (Some(item), WatchEvent::Deleted(_)) => Change::Delete { item, revision },
            (Some(item), _) => Change::Put { item, revision },
        }))
    }
}

/// A resource followed with no copy of it: each object mapped to the loop keys it concerns.
pub struct ResourceFeed {
    map: Mapper,
    relevant: Option<Relevant>,
}

/// What a feed that passes on only relevant changes remembers: each object's projection as
/// last listed or changed.
#[derive(Clone)]
struct Relevant {
    project: Projection,
    last: Arc<Mutex<HashMap<String, serde_json::Value>>>,
}

impl Relevant {
    /// Remembers `object`'s projection; answers whether it differs from the one remembered.
    fn changed(&self, id: &str, object: &Object) -> bool {
        let projected = (self.project)(object);
        let mut last = self.last.lock().expect("the feed's lock is never held across a panic");
        last.insert(id.to_owned(), projected.clone()).is_none_or(|before| before != projected)
    }

    fn forget(&self, id: &str) {
        self.last.lock().expect("the feed's lock is never held across a panic").remove(id);
    }
}

impl ResourceFeed {
    /// A loop source over `resource` as `client` sees it, each object mapped by `map`.
    pub fn mapped(client: Client, resource: Resource, map: Mapper) -> ListWatch {
        FollowFeed::source(client, resource, Arc::new(ResourceFeed { map, relevant: None }))
    }

    /// A loop source over `resource`, mapping each object to its own key.
    pub fn objects(client: Client, resource: Resource) -> ListWatch {
        ResourceFeed::mapped(client, resource, Arc::new(own_key))
    }

    /// A loop source over `resource`, each object mapped by `map`, passing on only the objects
    /// that appear, go, or change what `project` shows of them (a Lease's owners, not its
    /// renewals).
    pub fn mapped_when(client: Client, resource: Resource, map: Mapper, project: Projection) -> ListWatch {
        let feed = ResourceFeed { map, relevant: Some(Relevant { project, last: Arc::default() }) };
        FollowFeed::source(client, resource, Arc::new(feed))
    }

    /// A loop source over `resource` mapping every change to `key`.
    pub fn all_to(client: Client, resource: Resource, key: Key) -> ListWatch {
        ResourceFeed::mapped(client, resource, Arc::new(move |_: &Object| vec![key.clone()]))
    }

    /// A loop source over `resource` mapping to `key` every object that appears, goes, or
    /// changes what `project` shows of it (a Node's addresses, not its heartbeats).
    pub fn all_to_when(client: Client, resource: Resource, key: Key, project: Projection) -> ListWatch {
        let feed = ResourceFeed {
            map: Arc::new(move |_: &Object| vec![key.clone()]),
            relevant: Some(Relevant { project, last: Arc::default() }),
        };
        FollowFeed::source(client, resource, Arc::new(feed))
    }
}

/// An object's item in a loop's feed: its `namespace/name` and the keys `map` gives it.
fn item(map: &Mapper, object: &Object) -> Item {
    Item { id: format!("{}/{}", meta_str(object, "namespace"), meta_str(object, "name")), keys: map(object) }
}

impl Follower for ResourceFeed {
    fn listed(&self, objects: Vec<Arc<Object>>) -> Vec<Item> {
        let items: Vec<Item> = objects.iter().map(|object| item(&self.map, object)).collect();
        if let Some(relevant) = &self.relevant {
            let listed = items
                .iter()
                .zip(&objects)
                .map(|(item, object)| (item.id.clone(), (relevant.project)(object)));
            *relevant.last.lock().expect("the feed's lock is never held across a panic") = listed.collect();
        }
        items
    }

    fn changed(&self, event: &WatchEvent) -> Option<Item> {
        let object = event.object();
        let item = item(&self.map, object);
        match (event, &self.relevant) {
            (WatchEvent::Deleted(_), relevant) => {
                relevant.iter().for_each(|relevant| relevant.forget(&item.id));
                Some(item)
            }
            (_, Some(relevant)) if !relevant.changed(&item.id, object) => None,
            _ => Some(item),
        }
    }
}

#[cfg(test)]
mod tests;
