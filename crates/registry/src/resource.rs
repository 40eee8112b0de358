//! What the registry must know about a Kind, and the hooks through which a Kind adds its own
//! defaults and rules.

use std::sync::{Arc, LazyLock};

use kayra_merge::schema::Schema;
use serde_json::Value;

use kayra_api::scheme::Door;
use kayra_api::validation::FieldError;

use crate::Object;

/// One resource the registry serves: a Kind in one group and version, and how it is stored.
#[derive(Clone)]
pub struct Resource {
    /// The API group; empty for the core group.
    pub group: String,
    /// The version served.
    pub version: String,
    /// The Kind, as in `kind:`.
    pub kind: String,
    /// The lowercase plural used in paths.
    pub plural: String,
    /// Whether objects live in a namespace.
    pub namespaced: bool,
    /// Whether `status` is a subresource: writes to the object leave it alone, and only
    /// writes to `/status` change it.
    pub status_subresource: bool,
    /// Fields beyond `metadata.name` and `metadata.namespace` that field selectors may use.
    pub field_labels: Vec<&'static str>,
    /// The Kind's defaults and rules.
    pub strategy: Arc<dyn Strategy>,
}

impl std::fmt::Debug for Resource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Resource")
            .field("group", &self.group)
            .field("plural", &self.plural)
            .finish_non_exhaustive()
    }
}

impl Resource {
    /// `group/version`, or `version` for the core group.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() { self.version.clone() } else { format!("{}/{}", self.group, self.version) }
    }

    /// `plural.group`, or `plural` for the core group: how errors name the resource.
    pub fn qualified(&self) -> String {
        if self.group.is_empty() { self.plural.clone() } else { format!("{}.{}", self.plural, self.group) }
    }

    /// The folder of the store all this resource's objects live under.
    pub(crate) fn store_prefix(&self, root: &str) -> String {
        let group = if self.group.is_empty() { "core" } else { &self.group };
        format!("{root}{group}/{}/", self.plural)
    }
}

/// A Kind's own behaviour on writes.
pub trait Strategy: Send + Sync {
    /// Fills the Kind's defaults into a new or updated object.
    fn default(&self, object: &mut Object) {
        let _ = object;
    }

    /// Checks the object (and, on update, what it replaces); answers every offending field.
    fn validate(&self, object: &Object, old: Option<&Object>) -> Vec<FieldError> {
        let _ = (object, old);
        Vec::new()
    }

    /// Whether something must still happen before a deleted object may go: by default, that
    /// `metadata.finalizers` is not empty.
    fn finalizing(&self, object: &Object) -> bool {
        !crate::object::finalizers(object).is_empty()
    }

    /// Marks an object whose deletion waits on finalizers (a namespace's phase, say).
    fn mark_deleting(&self, object: &mut Object) {
        let _ = object;
    }

    /// Whether the Kind owns dependents the garbage collector deletes or releases with it: a
    /// delete's propagation policy then becomes the `foregroundDeletion` or `orphan` finalizer.
    /// For any other Kind the policy is accepted and changes nothing.
    fn owns_dependents(&self) -> bool {
        false
    }

    /// Adjusts the `status` a write of the object (not of its status) carries over from `old`:
    /// what the write made untrue goes. By default it is carried as it is.
    fn carried_status(&self, old: &Object, object: &mut Object) {
        let _ = (old, object);
    }

    /// Whether a create may set `status` although it is a subresource (a node registers with
    /// its status). By default a create starts without one.
    fn create_keeps_status(&self) -> bool {
        false
    }

    /// When the object ceases to exist by itself: the store deletes it then, through a lease.
    fn expires_at(&self, object: &Object) -> Option<std::time::SystemTime> {
        let _ = object;
        None
    }

    /// The shape objects of the Kind merge by under server-side apply, and by which every
    /// write's `metadata.managedFields` are recorded. By default nothing is known: maps merge
    /// key by key and lists are atomic.
    fn merge_schema(&self) -> &Schema {
        static UNTYPED: LazyLock<Schema> = LazyLock::new(Schema::untyped);
        &UNTYPED
    }

    /// Whether the last spec states of each object are kept (see `Registry::history`).
    fn keeps_history(&self) -> bool {
        false
    }

    /// The fields only a door subresource writes: an ordinary write that changes one is
    /// refused, naming the door.
    fn doors(&self) -> &[Door] {
        &[]
    }

    /// Adjusts an object restored from its history from the current one: what the control
    /// plane decided since stays. By default nothing.
    fn restored(&self, current: &Object, restored: &mut Object) {
        let _ = (current, restored);
    }

    /// Checks an object's name; the default accepts DNS subdomains.
    fn validate_name(&self, name: &str) -> Option<String> {
        (!kayra_api::validation::is_dns_subdomain(name)).then(|| {
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', \
             and must start and end with an alphanumeric character"
                .to_owned()
        })
    }
}

/// A Kind with no rules beyond the registry's own.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoRules;

impl Strategy for NoRules {}

/// Reads a field of an object by a dotted path, for strategies and selectors.
pub fn path<'a>(object: &'a Object, dotted: &str) -> Option<&'a Value> {
    let mut steps = dotted.split('.');
    let first = object.get(steps.next()?)?;
    steps.try_fold(first, |at, step| at.get(step))
}
