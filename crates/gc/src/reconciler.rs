//! The garbage collector's loop: one key per owner (`namespace/set`), woken by changes to sets
//! and to the Applications and Services naming one in a controller owner reference.

use std::time::Duration;

use kayra_api::kinds::applicationset::{OWNER_KIND, component_label, set_label, spec_hash_annotation};
use kayra_application::client::Client;
use kayra_application::feed::{ResourceFeed, controller_owner};
use kayra_application::options::DeleteRequest;
use kayra_loop::runtime::Loop;
use kayra_loop::{Action, Key, ReconcileError, Reconciler};
use kayra_registry::{Object, PatchKind, RegistryError, Resource, finalizers, meta_str};
use serde_json::{Value, json};

use crate::decision::{Dependent, DependentKind, Owner, Step, decide};

/// How often every owner is looked at with nothing changed.
const RESYNC: Duration = Duration::from_secs(600);

/// How soon an owner is looked at again when a dependent could not be deleted yet (a Service
/// still joined by Applications that are not the owner's).
const HELD: Duration = Duration::from_secs(5);

/// Deletes and releases ApplicationSets' dependents.
pub struct GarbageCollector {
    client: Client,
    sets: Resource,
    applications: Resource,
    services: Resource,
    marks: Marks,
    deletions: GcMetrics,
}

/// Dependents the collector deleted, by Kind.
pub type GcMetrics =
    prometheus_client::metrics::family::Family<DeletedLabels, prometheus_client::metrics::counter::Counter>;

/// The Kind of a deleted dependent.
#[derive(Debug, Clone, PartialEq, Eq, Hash, prometheus_client::encoding::EncodeLabelSet)]
pub struct DeletedLabels {
    pub(crate) kind: &'static str,
}

/// Registers the collectors' series in `registry`: `kayra_gc_deletions_total{kind}`, shared by
/// this collector and the Node Leases' ([`crate::node_leases`]).
pub fn register_metrics(registry: &mut prometheus_client::registry::Registry) -> GcMetrics {
    let deletions = GcMetrics::default();
    registry.sub_registry_with_prefix("kayra_gc").register(
        "deletions",
        "Dependents of a deleted owner (an ApplicationSet's Applications and Services, a Node's Lease) the garbage collector deleted, by Kind",
        deletions.clone(),
    );
    deletions
}

/// The reserved labels and annotation a released dependent loses.
struct Marks {
    labels: [String; 2],
    annotation: String,
}

impl std::fmt::Debug for GarbageCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GarbageCollector").finish_non_exhaustive()
    }
}

impl GarbageCollector {
    /// The collector, acting as `client` (which must read sets, and read, delete and patch
    /// sets, Applications and Services).
    pub fn new(client: Client) -> Result<GarbageCollector, RegistryError> {
        let domain = client.layer().scheme().domain().to_owned();
        let fleet = format!("fleet.{domain}");
        Ok(GarbageCollector {
            sets: client.resource(&fleet, "applicationsets")?,
            applications: client.resource(&fleet, "applications")?,
            services: client.resource(&fleet, "services")?,
            marks: Marks {
                labels: [set_label(&domain), component_label(&domain)],
                annotation: spec_hash_annotation(&domain),
            },
            client,
            deletions: GcMetrics::default(),
        })
    }

    /// The same collector, counting what it deletes in `deletions`.
    pub fn with_metrics(mut self, deletions: GcMetrics) -> GarbageCollector {
        self.deletions = deletions;
        self
    }

    /// The loop: one key per set, woken by the sets and by their dependents.
    pub fn into_loop(self) -> Loop {
        let sets = ResourceFeed::objects(self.client.clone(), self.sets.clone());
        let dependents = |resource: &Resource| {
            ResourceFeed::mapped(self.client.clone(), resource.clone(), controller_owner(OWNER_KIND))
        };
        let (applications, services) = (dependents(&self.applications), dependents(&self.services));
        Loop::new("garbage-collector", self).source(sets).source(applications).source(services).resync(RESYNC)
    }

    fn resource(&self, kind: DependentKind) -> &Resource {
        match kind {
            DependentKind::Application => &self.applications,
            DependentKind::Service => &self.services,
        }
    }

    /// The objects of `kind` in `namespace` whose controller reference names set `set`.
    async fn dependents(
        &self,
        kind: DependentKind,
        namespace: &str,
        set: &str,
    ) -> Result<Vec<(Dependent, Object)>, RegistryError> {
        let objects = self.client.list_all(self.resource(kind), Some(namespace)).await?;
        Ok(objects
            .into_iter()
            .filter_map(|object| {
                let reference = controller_reference(&object).filter(|r| r["name"] == set)?.clone();
                let dependent = Dependent {
                    kind,
                    name: meta_str(&object, "name").to_owned(),
                    uid: meta_str(&object, "uid").to_owned(),
                    owner_uid: reference["uid"].as_str().unwrap_or_default().to_owned(),
                    terminating: !meta_str(&object, "deletionTimestamp").is_empty(),
                    blocks_owner: reference["blockOwnerDeletion"] == true,
                };
                Some((dependent, object))
            })
            .collect())
    }

    /// Deletes one dependent (exactly the one seen); answers whether it is held by something
    /// else for now.
    async fn delete(
        &self,
        key: &Key,
        kind: DependentKind,
        name: &str,
        uid: &str,
    ) -> Result<bool, RegistryError> {
        let options = DeleteRequest {
            uid: Some(uid.to_owned()),
            propagation_policy: Some("Background".to_owned()),
            ..DeleteRequest::default()
        };
        match self.client.delete(self.resource(kind), key.namespace(), name, &options).await {
            Ok(_) => {
                let kind_name = match kind {
                    DependentKind::Application => "Application",
                    DependentKind::Service => "Service",
                };
                self.deletions.get_or_create(&DeletedLabels { kind: kind_name }).inc();
                tracing::info!(set = %key, dependent = name, ?kind, "deleted a dependent of a set that is gone or going");
                Ok(false)
            }
            Err(RegistryError::NotFound { .. }) => Ok(false),
            Err(RegistryError::Conflict { message, .. }) => {
                tracing::debug!(set = %key, dependent = name, %message, "a dependent cannot be deleted yet");
                Ok(true)
            }
            Err(error) => Err(error),
        }
    }

    /// Releases one dependent: its reference to the set, the reserved labels and the spec hash
    /// go, on the version seen (a conflict retries the whole pass).
    async fn release(&self, key: &Key, kind: DependentKind, object: &Object) -> Result<(), RegistryError> {
        let references: Vec<Value> = object
            .get("metadata")
            .and_then(|metadata| metadata.get("ownerReferences"))
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|reference| !(reference["kind"] == OWNER_KIND && reference["name"] == key.name()))
            .cloned()
            .collect();
        let labels: serde_json::Map<String, Value> =
            self.marks.labels.iter().map(|label| (label.clone(), Value::Null)).collect();
        let patch = json!({"metadata": {
            "resourceVersion": meta_str(object, "resourceVersion"),
            "ownerReferences": if references.is_empty() { Value::Null } else { Value::Array(references) },
            "labels": labels,
            "annotations": {self.marks.annotation.clone(): null},
        }});
        let name = meta_str(object, "name");
        match self.client.patch(self.resource(kind), key.namespace(), name, PatchKind::Merge, &patch).await {
            Ok(_) => {
                tracing::info!(set = %key, dependent = name, ?kind, "released a dependent of a set deleted with orphan propagation");
                Ok(())
            }
            Err(RegistryError::NotFound { .. }) => Ok(()),
            Err(error) => Err(error),
        }
    }

    /// Removes `finalizer` from the set, on the version seen.
    async fn finish(&self, key: &Key, set: &Object, finalizer: &str) -> Result<(), RegistryError> {
        let left: Vec<String> = finalizers(set).into_iter().filter(|f| f != finalizer).collect();
        let patch =
            json!({"metadata": {"resourceVersion": meta_str(set, "resourceVersion"), "finalizers": left}});
        match self.client.patch(&self.sets, key.namespace(), key.name(), PatchKind::Merge, &patch).await {
            Ok(_) | Err(RegistryError::NotFound { .. }) => {
                tracing::info!(set = %key, finalizer, "the set's dependents are done with; removed its finalizer");
                Ok(())
            }
            Err(error) => Err(error),
        }
    }
}

/// An object's controller owner reference to an ApplicationSet.
fn controller_reference(object: &Object) -> Option<&Value> {
    object
        .get("metadata")?
        .get("ownerReferences")?
        .as_array()?
        .iter()
        .find(|reference| reference["controller"] == true && reference["kind"] == OWNER_KIND)
}

#[async_trait::async_trait]
impl Reconciler for GarbageCollector {
    async fn reconcile(&self, key: &Key) -> Result<Action, ReconcileError> {
        let Some(namespace) = key.namespace() else { return Ok(Action::AwaitChange) };
        // Dependents first, then the owner: a set made again after the dependents were read
        // has another uid, so what was read of an older one is never taken for its own.
        let mut seen = self.dependents(DependentKind::Application, namespace, key.name()).await?;
        seen.extend(self.dependents(DependentKind::Service, namespace, key.name()).await?);
        let set = match self.client.get(&self.sets, Some(namespace), key.name()).await {
            Ok(set) => Some(set),
            Err(RegistryError::NotFound { .. }) => None,
            Err(error) => return Err(error.into()),
        };
        let owner = set.as_ref().map(|set| Owner {
            uid: meta_str(set, "uid").to_owned(),
            terminating: !meta_str(set, "deletionTimestamp").is_empty(),
            finalizers: finalizers(set),
        });
        let dependents: Vec<Dependent> = seen.iter().map(|(dependent, _)| dependent.clone()).collect();
        let mut held = false;
        for step in decide(owner.as_ref(), &dependents) {
            match step {
                Step::Delete(kind, name, uid) => held |= self.delete(key, kind, &name, &uid).await?,
                Step::Release(kind, name) => {
                    let found = seen.iter().find(|(d, _)| d.kind == kind && d.name == name);
                    if let Some((_, object)) = found {
                        self.release(key, kind, object).await?;
                    }
                }
                Step::RemoveFinalizer(finalizer) => {
                    if let Some(set) = &set {
                        self.finish(key, set, finalizer).await?;
                    }
                }
            }
        }
        Ok(if held { Action::RequeueAfter(HELD) } else { Action::AwaitChange })
    }
}

#[cfg(test)]
mod tests;
