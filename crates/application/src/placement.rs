//! The fleet as admission reads it: each Node's allocatable, what the unfinished Applications
//! bound to each request, and which Service and Secrets each Application names. One task
//! follows the registry's watch caches of Nodes and Applications; admission reads the index
//! synchronously.
//!
//! Admission decides on what the index holds, so a write that placement admission decides
//! first waits until the index has caught up with the store (see [`FleetIndex::caught_up`]):
//! a Node created just before a pin to it is known to the pin, and an Application created just
//! before its Service is deleted holds the Service.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use kayra_admission::deletion_protection::{required_secrets, service_of};
use kayra_admission::node_placement::{requests, resources};
use kayra_admission::ports::{Fleet, Resources};
use kayra_api::kinds::application::bound_node;
use kayra_registry::{Registry, Resource, WatchEvent, WatchOptions, meta_str};
use kayra_store::Revision;
use tokio::sync::{Notify, watch};

/// The longest a write waits for the index to catch up with the store before it is decided on
/// what the index holds.
const CATCH_UP: Duration = Duration::from_secs(3);

/// How long the follower waits before watching again after its watches ended.
const REWATCH: Duration = Duration::from_millis(200);

/// Nodes and the Applications bound to them, following the store.
#[derive(Default)]
pub struct FleetIndex {
    state: Mutex<State>,
    reached: OnceLock<watch::Receiver<Revision>>,
    /// The highest revision a write has waited for the index to reach.
    wanted: Arc<AtomicU64>,
    wake: Arc<Notify>,
}

impl std::fmt::Debug for FleetIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FleetIndex").finish_non_exhaustive()
    }
}

#[derive(Default)]
struct State {
    nodes: HashMap<String, Resources>,
    bound: HashMap<(String, String), (String, Resources)>,
    requested: HashMap<String, Resources>,
    /// Each Application's Service and the Secrets it needs.
    names: HashMap<(String, String), (Option<String>, Vec<String>)>,
}

impl State {
    fn apply(&mut self, event: &WatchEvent, applications: bool) {
        let object = event.object();
        let name = meta_str(object, "name").to_owned();
        let deleted = matches!(event, WatchEvent::Deleted(_));
        if !applications {
            if deleted {
                self.nodes.remove(&name);
            } else {
                let allocatable = object.get("status").and_then(|status| status.get("allocatable"));
                self.nodes.insert(name, resources(allocatable));
            }
            return;
        }
        let key = (meta_str(object, "namespace").to_owned(), name);
        if deleted {
            self.names.remove(&key);
        } else {
            self.names.insert(key.clone(), (service_of(object).map(str::to_owned), required_secrets(object)));
        }
        if let Some((node, asked)) = self.bound.remove(&key) {
            let sum = self.requested.entry(node).or_default();
            *sum = add(*sum, asked, -1.0);
        }
        if deleted {
            return;
        }
        if let Some(node) = bound_node(object) {
            let asked = requests(object);
            let sum = self.requested.entry(node.to_owned()).or_default();
            *sum = add(*sum, asked, 1.0);
            self.bound.insert(key, (node.to_owned(), asked));
        }
    }
}

fn add(sum: Resources, asked: Resources, sign: f64) -> Resources {
    let side = |sum: Option<f64>, asked: Option<f64>| match (sum, asked) {
        (sum, None) => sum,
        (sum, Some(asked)) => Some(sum.unwrap_or(0.0) + sign * asked),
    };
    Resources { cpu: side(sum.cpu, asked.cpu), memory: side(sum.memory, asked.memory) }
}

impl Fleet for FleetIndex {
    fn allocatable(&self, node: &str) -> Option<Resources> {
        self.state.lock().expect("the fleet index lock is never held across a panic").nodes.get(node).copied()
    }

    fn requested_on(&self, node: &str, namespace: &str, name: &str) -> Resources {
        let state = self.state.lock().expect("the fleet index lock is never held across a panic");
        let sum = state.requested.get(node).copied().unwrap_or_default();
        match state.bound.get(&(namespace.to_owned(), name.to_owned())) {
            Some((bound, asked)) if bound == node => add(sum, *asked, -1.0),
            _ => sum,
        }
    }

    fn members(&self, namespace: &str, service: &str) -> Vec<String> {
        self.naming(namespace, |(joined, _)| joined.as_deref() == Some(service))
    }

    fn secret_users(&self, namespace: &str, secret: &str) -> Vec<String> {
        self.naming(namespace, |(_, secrets)| secrets.iter().any(|s| s == secret))
    }
}

impl FleetIndex {
    /// The sorted names of the Applications in `namespace` whose names match.
    fn naming(
        &self,
        namespace: &str,
        matches: impl Fn(&(Option<String>, Vec<String>)) -> bool,
    ) -> Vec<String> {
        let state = self.state.lock().expect("the fleet index lock is never held across a panic");
        let mut names: Vec<String> = state
            .names
            .iter()
            .filter(|((at, _), named)| at == namespace && matches(named))
            .map(|((_, name), _)| name.clone())
            .collect();
        names.sort();
        names
    }
}

impl FleetIndex {
    /// Waits (at most a few seconds) until the index holds every write the store had made when
    /// called, starting the follower on first use. Must be called inside a Tokio runtime.
    pub async fn caught_up(self: &Arc<Self>, registry: &Registry, nodes: &Resource, applications: &Resource) {
        let mut reached = self
            .reached
            .get_or_init(|| {
                let (sender, receiver) = watch::channel(0);
                let follower = Follower {
                    index: Arc::downgrade(self),
                    registry: registry.clone(),
                    nodes: nodes.clone(),
                    applications: applications.clone(),
                    reached: sender,
                    wanted: self.wanted.clone(),
                    wake: self.wake.clone(),
                };
                tokio::spawn(follower.run());
                receiver
            })
            .clone();
        let Ok(current) = registry.store().revision().await else { return };
        if *reached.borrow_and_update() >= current {
            return;
        }
        // The follower learns how far to go, and from then on follows the caches' progress
        // (which moves with every write to the store) until it gets there.
        self.wanted.fetch_max(current, Ordering::AcqRel);
        self.wake.notify_one();
        let wait = reached.wait_for(|reached| *reached >= current);
        if !matches!(tokio::time::timeout(CATCH_UP, wait).await, Ok(Ok(_))) {
            tracing::warn!(revision = current, "the fleet index did not catch up; deciding on what it holds");
        }
    }
}

/// The task that keeps an index current.
struct Follower {
    index: std::sync::Weak<FleetIndex>,
    registry: Registry,
    nodes: Resource,
    applications: Resource,
    reached: watch::Sender<Revision>,
    /// The revision writes wait for the index to reach.
    wanted: Arc<AtomicU64>,
    wake: Arc<Notify>,
}

impl Follower {
    async fn run(self) {
        loop {
            if self.index.strong_count() == 0 {
                return;
            }
            if let Err(error) = self.follow().await {
                tracing::debug!(%error, "the fleet index watches again");
            }
            tokio::time::sleep(REWATCH).await;
        }
    }

    /// Follows both resources from their current objects until a watch ends. Every event
    /// ready is applied under one lock, and the revision reached published once for them.
    async fn follow(&self) -> Result<(), kayra_registry::RegistryError> {
        let from_now = WatchOptions::default();
        let mut nodes = self.registry.watch(&self.nodes, &from_now).await?;
        let mut applications = self.registry.watch(&self.applications, &from_now).await?;
        let (Some(mut nodes_progress), Some(mut applications_progress)) =
            (nodes.cache_progress(), applications.cache_progress())
        else {
            return Ok(());
        };
        let mut fresh = State::default();
        let mut primed = false;
        loop {
            // Behind what a write waits for: the caches' progress, not only the events this
            // index selects, tells when the index has reached it.
            let behind = self.wanted.load(Ordering::Acquire) > *self.reached.borrow();
            let (event, of_applications) = tokio::select! {
                event = nodes.next() => (Some(event?), false),
                event = applications.next() => (Some(event?), true),
                () = self.wake.notified() => (None, false),
                Ok(()) = nodes_progress.changed(), if behind => (None, false),
                Ok(()) = applications_progress.changed(), if behind => (None, false),
                () = tokio::time::sleep(Duration::from_secs(1)) => (None, false),
            };
            let Some(index) = self.index.upgrade() else { return Ok(()) };
            let mut state = index.state.lock().expect("the fleet index lock is never held across a panic");
            if !primed {
                // A new watch starts with every current object: the index starts over with it.
                *state = std::mem::take(&mut fresh);
                primed = true;
            }
            if let Some(event) = event {
                state.apply(&event, of_applications);
            }
            while let Some(event) = nodes.try_next() {
                state.apply(&event?, false);
            }
            while let Some(event) = applications.try_next() {
                state.apply(&event?, true);
            }
            drop(state);
            self.reached.send_replace(nodes.revision().min(applications.revision()));
        }
    }
}

/// Whether a delete must wait for the index: deletes of the Services and Secrets that
/// Applications (in `applications`' group) name.
pub(crate) fn decided_by_references(applications: &Resource, resource: &Resource) -> bool {
    resource.group == applications.group && matches!(resource.plural.as_str(), "services" | "secrets")
}

/// Whether a write must wait for the index: writes of Applications themselves (their binding),
/// not of their status.
pub(crate) fn decided_by_placement(applications: &Resource, resource: &Resource, object_part: bool) -> bool {
    object_part && resource.group == applications.group && resource.plural == applications.plural
}

#[cfg(test)]
mod tests;
