//! The scheme: every Kind Kayra serves, with the names, scope, subresources, selectable
//! fields and table columns that discovery, routing and printing need.
//!
//! Each Kind's own module in [`crate::kinds`] (and [`crate::view`] for the Pod view) describes
//! how it is served; [`Scheme::new`] lists them, in discovery order.

use std::marker::PhantomData;
use std::sync::Arc;

use serde_json::{Map, Value};

use crate::codec;
use crate::kinds::{self, Kind};
use crate::table::{AGE, Column, NAME};
use crate::validation::{FieldError, is_dns_label, is_dns_subdomain};
use crate::verb::Verb;

/// Every verb a fully served resource answers.
pub const ALL_VERBS: &[Verb] = &Verb::ALL;

/// What may be done with namespaces: everything but deleting them all at once.
pub const NAMESPACE_VERBS: &[Verb] =
    &[Verb::Create, Verb::Delete, Verb::Get, Verb::List, Verb::Patch, Verb::Update, Verb::Watch];

/// A subresource of a Kind and the verbs it serves, as discovery advertises them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Subresource {
    /// Its name, after the object's (`status`).
    pub name: &'static str,
    /// The verbs served; any other is refused with 405.
    pub verbs: &'static [Verb],
    /// The group, version and Kind it takes and answers, when not the object's own
    /// (`pods/eviction` takes a `policy/v1` Eviction).
    pub response: Option<(&'static str, &'static str, &'static str)>,
}

/// The status subresource: read, replaced and patched.
pub const STATUS: Subresource =
    Subresource { name: "status", verbs: &[Verb::Get, Verb::Patch, Verb::Update], response: None };

/// The `log` subresource: the output of an Application's process, streamed from its node.
pub const LOG: Subresource = Subresource { name: "log", verbs: &[Verb::Get], response: None };

/// The `eviction` subresource of a Pod: a `policy/v1` Eviction created there asks for the
/// Application to be placed elsewhere (what `kubectl drain` does to each pod).
pub const EVICTION: Subresource =
    Subresource { name: "eviction", verbs: &[Verb::Create], response: Some(("policy", "v1", "Eviction")) };

/// The `binding` subresource of an Application, and of the Pod that views it: a `v1` Binding
/// created there places it on a Node and marks it `Scheduled` in one write (what a scheduler
/// does).
pub const BINDING: Subresource =
    Subresource { name: "binding", verbs: &[Verb::Create], response: Some(("", "v1", "Binding")) };

/// The `token` subresource of an Application, and of the Pod that views it: an
/// `authentication.k8s.io/v1` TokenRequest created there mints a service-account token for it.
pub const TOKEN: Subresource = Subresource {
    name: "token",
    verbs: &[Verb::Create],
    response: Some(("authentication.k8s.io", "v1", "TokenRequest")),
};

/// The `scale` subresource of an ApplicationSet: an `autoscaling/v1` Scale read, replaced and
/// patched there sets the replicas of the set's one replicated component (`kubectl scale`).
pub const SCALE: Subresource = Subresource {
    name: "scale",
    verbs: &[Verb::Get, Verb::Patch, Verb::Update],
    response: Some(("autoscaling", "v1", "Scale")),
};

/// The `metrics` subresource of an Application: what its process consumed so far, from the
/// last usage sample its node reported (an `ApplicationMetrics`).
pub const METRICS: Subresource = Subresource { name: "metrics", verbs: &[Verb::Get], response: None };

/// The `exec` subresource of an Application, and of the Pod that views it: a command run
/// beside the process, as its user, in its cgroup, with its environment (`kubectl exec`, `cp`).
/// Like the other streams it is a connection upgraded to a stream protocol, authorized as
/// `create` whatever the method (see [`STREAMS`]).
pub const EXEC: Subresource = Subresource { name: "exec", verbs: &[Verb::Create, Verb::Get], response: None };

/// The `attach` subresource: the process's own output, and its stdin when its spec asks for
/// one (`kubectl attach`).
pub const ATTACH: Subresource =
    Subresource { name: "attach", verbs: &[Verb::Create, Verb::Get], response: None };

/// The `portforward` subresource: connections to the ports the Application declares, on its
/// node's loopback address (`kubectl port-forward`).
pub const PORTFORWARD: Subresource =
    Subresource { name: "portforward", verbs: &[Verb::Create, Verb::Get], response: None };

/// The subresources that are streams to a running process rather than reads or writes of an
/// object: whatever the HTTP method (kubectl upgrades a `GET` to WebSocket and falls back to a
/// `POST` for SPDY), each is the `create` of a session, as kube-apiserver 1.35 decides it.
pub const STREAMS: [&str; 3] = [EXEC.name, ATTACH.name, PORTFORWARD.name];

/// A certificate request's approval subresource: read, replaced and patched.
pub const APPROVAL: Subresource =
    Subresource { name: "approval", verbs: &[Verb::Get, Verb::Patch, Verb::Update], response: None };

/// The `history` subresource of a Kind that keeps history: the last spec states of the object,
/// a core `v1` List of [`Revision`](crate::kinds::revision::Revision)s.
pub const HISTORY: Subresource =
    Subresource { name: "history", verbs: &[Verb::Get], response: Some(("", "v1", "List")) };

/// The `rollback` subresource of a Kind that keeps history: a
/// [`RollbackRequest`](crate::kinds::revision::RollbackRequest) created there restores the spec
/// of one revision of the history, answered with the object written.
pub const ROLLBACK: Subresource = Subresource { name: "rollback", verbs: &[Verb::Create], response: None };

/// The `freeze` door: creating there sets the Kind's [`FROZEN`] field, answered with the object
/// written.
pub const FREEZE: Subresource = Subresource { name: "freeze", verbs: &[Verb::Create], response: None };

/// The `thaw` door: creating there clears the Kind's [`FROZEN`] field, answered with the object
/// written.
pub const THAW: Subresource = Subresource { name: "thaw", verbs: &[Verb::Create], response: None };

/// A field of a Kind's spec that only its door subresources write (the reference's
/// `UpdateThrough`): an ordinary create, update or patch that changes it is refused, naming the
/// door, so that the permission to use the door can be granted on its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Door {
    /// The field, dotted, as field errors name it (`spec.frozen`).
    pub field: &'static str,
    /// The same field as a JSON pointer (`/spec/frozen`).
    pub pointer: &'static str,
    /// The subresources that write it (`freeze` sets it, `thaw` clears it).
    pub subresources: &'static [&'static str],
    /// The subresource every one of them is authorized as: both `freeze` and `thaw` are
    /// `create` on `<resource>/freeze`.
    pub permission: &'static str,
}

/// `spec.frozen`, written only through `freeze` (set) and `thaw` (cleared).
pub const FROZEN: Door = Door {
    field: "spec.frozen",
    pointer: "/spec/frozen",
    subresources: &["freeze", "thaw"],
    permission: "freeze",
};

/// A Kind's behaviour on its JSON form: decoding, defaults, validation and schema.
pub trait Behaviour: Send + Sync {
    /// Decodes the object into its shape, fills defaults, and answers it as JSON again with
    /// the paths of the fields the Kind does not have (dropped from the answer).
    fn normalize(&self, object: &Value) -> Result<(Value, Vec<String>), String>;

    /// The paths of the fields the Kind does not have, as [`normalize`](Self::normalize)
    /// answers them, without building the normalised object; a value of the wrong type is an
    /// error as there.
    fn unknown_fields(&self, object: &Value) -> Result<Vec<String>, String> {
        self.normalize(object).map(|(_, unknown)| unknown)
    }

    /// Checks the object (and on update what it replaces); a value of the wrong type is an
    /// error too.
    fn validate(&self, object: &Map<String, Value>, old: Option<&Map<String, Value>>) -> Vec<FieldError>;

    /// The Kind's schema, registering what it refers to with the generator.
    fn schema(&self, generator: &mut schemars::SchemaGenerator) -> schemars::Schema;

    /// Whether a deleted object must wait before it goes: while `metadata.finalizers` is not
    /// empty, and for a namespace while `spec.finalizers` is not.
    fn finalizing(&self, object: &Map<String, Value>) -> bool {
        object
            .get("metadata")
            .and_then(|m| m.get("finalizers"))
            .and_then(Value::as_array)
            .is_some_and(|f| !f.is_empty())
    }

    /// What marks an object whose deletion waits.
    fn mark_deleting(&self, object: &mut Value) {
        let _ = object;
    }

    /// When the object ceases to exist by itself, if ever.
    fn expires_at(&self, object: &Map<String, Value>) -> Option<jiff::Timestamp> {
        let _ = object;
        None
    }

    /// Adjusts the `status` a write of the object carries over from `old` (see
    /// [`Kind::carried_status`]).
    fn carried_status(
        &self,
        old: &serde_json::Map<String, Value>,
        object: &mut serde_json::Map<String, Value>,
    ) {
        let _ = (old, object);
    }

    /// Adjusts an object restored from its history from the current one (see
    /// [`Kind::restored`]).
    fn restored(
        &self,
        current: &serde_json::Map<String, Value>,
        restored: &mut serde_json::Map<String, Value>,
    ) {
        let _ = (current, restored);
    }

    /// Whether [`expires_at`](Self::expires_at) can answer a time for some object of the Kind.
    fn may_expire(&self) -> bool {
        false
    }

    /// Whether the Kind owns dependents the garbage collector deletes or releases with it (see
    /// [`Kind::OWNS_DEPENDENTS`]).
    fn owns_dependents(&self) -> bool {
        false
    }
}

/// The behaviour of a typed Kind: decoded into its shape, defaulted and validated there.
pub(crate) struct Typed<T>(PhantomData<fn() -> T>);

impl<T: Kind> Typed<T> {
    /// The behaviour of `T`.
    pub(crate) const fn new() -> Typed<T> {
        Typed(PhantomData)
    }
}

impl<T: Kind> Behaviour for Typed<T> {
    fn normalize(&self, object: &Value) -> Result<(Value, Vec<String>), String> {
        let decoded = codec::decode::<T>(object)?;
        let mut typed = decoded.object;
        typed.default_fields();
        Ok((codec::encode(&typed), decoded.unknown))
    }

    fn unknown_fields(&self, object: &Value) -> Result<Vec<String>, String> {
        codec::decode::<T>(object).map(|decoded| decoded.unknown)
    }

    fn validate(&self, object: &Map<String, Value>, old: Option<&Map<String, Value>>) -> Vec<FieldError> {
        // Decoded from the borrowed JSON: no copy of the object is made first.
        let decode = |value: &Map<String, Value>| T::deserialize(value);
        match (decode(object), old.map(decode).transpose()) {
            (Ok(object), Ok(old)) => object.validate(old.as_ref()),
            (Err(error), _) | (_, Err(error)) => {
                vec![FieldError::invalid("", "<object>", &error.to_string())]
            }
        }
    }

    fn schema(&self, generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        generator.subschema_for::<T>()
    }

    fn expires_at(&self, object: &Map<String, Value>) -> Option<jiff::Timestamp> {
        if !T::MAY_EXPIRE {
            return None;
        }
        T::deserialize(object).ok()?.expires_at()
    }

    fn may_expire(&self) -> bool {
        T::MAY_EXPIRE
    }

    fn carried_status(
        &self,
        old: &serde_json::Map<String, Value>,
        object: &mut serde_json::Map<String, Value>,
    ) {
        T::carried_status(old, object);
    }

    fn restored(
        &self,
        current: &serde_json::Map<String, Value>,
        restored: &mut serde_json::Map<String, Value>,
    ) {
        T::restored(current, restored);
    }

    fn owns_dependents(&self) -> bool {
        T::OWNS_DEPENDENTS
    }
}

/// The behaviour of `T`, shared.
pub(crate) fn typed<T: Kind>() -> Arc<dyn Behaviour> {
    Arc::new(Typed::<T>::new())
}

/// A read-only view: the plural of the Kind it is derived from, and how one of those objects
/// appears.
pub type View = (&'static str, fn(&Value) -> Value);

/// Which names a Kind accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameRule {
    /// A DNS subdomain (most Kinds).
    Subdomain,
    /// A DNS label (namespaces).
    Label,
    /// Anything that is a single path segment: no `/`, `%`, and not `.` or `..` (role names
    /// such as `system:node` carry colons).
    Path,
}

impl NameRule {
    /// Why `name` is refused, if it is.
    pub fn check(self, name: &str) -> Option<String> {
        match self {
            NameRule::Subdomain if !is_dns_subdomain(name) => Some(
                "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and \
                 must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is \
                 '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
                    .to_owned(),
            ),
            NameRule::Label if !is_dns_label(name) => Some(
                "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must \
                 start and end with an alphanumeric character (e.g. 'my-name', or '123-abc', regex used for \
                 validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
                    .to_owned(),
            ),
            NameRule::Path if name.is_empty() || name == "." || name == ".." || name.contains(['/', '%']) || name.len() > 253 => {
                Some("may not be '.' or '..' and may not contain '/' or '%'".to_owned())
            }
            _ => None,
        }
    }
}

/// One Kind as served.
#[derive(Clone)]
pub struct KindInfo {
    /// The API group; empty for core.
    pub group: String,
    /// The version.
    pub version: &'static str,
    /// The Kind.
    pub kind: &'static str,
    /// The plural resource name used in paths.
    pub plural: &'static str,
    /// The singular name.
    pub singular: &'static str,
    /// Short names (`app`).
    pub short_names: &'static [&'static str],
    /// Categories (`all`).
    pub categories: &'static [&'static str],
    /// Whether objects live in namespaces.
    pub namespaced: bool,
    /// Subresources served (`status`), each with its verbs.
    pub subresources: &'static [Subresource],
    /// The fields of the spec only a door subresource writes.
    pub doors: &'static [Door],
    /// Fields beyond `metadata.name` and `metadata.namespace` that field selectors may use.
    pub field_labels: &'static [&'static str],
    /// Table columns after `Name`; `Age` is appended unless the Kind shows its own time.
    pub columns: &'static [Column],
    /// The verbs served.
    pub verbs: &'static [Verb],
    /// Whether the Kind has kubectl's builtin shape, so strategic merge patch applies.
    pub builtin: bool,
    /// Which names the Kind accepts.
    pub names: NameRule,
    /// For a read-only view: the plural of the Kind (in `fleet.<domain>`) it is derived from,
    /// and how one of those objects appears.
    pub view_of: Option<View>,
    /// Whether a create may set `status` (a node registers with its status); otherwise
    /// `status` is the status subresource's alone and a create starts without it.
    pub create_keeps_status: bool,
    /// Whether the Kind is a review: created to ask a question, answered at once, never stored
    /// (`SelfSubjectAccessReview`, `SelfSubjectReview`, the RBAC `Check` apps ask for).
    pub review: bool,
    /// Whether the Kind belongs to the API catalog, which serves it with its own rules (and
    /// stores it under its own keys) instead of the registry.
    pub catalog: bool,
    /// Whether the Kind is a reading of the nodes' usage samples (`metrics.k8s.io`), kept in
    /// memory where the node's session is held and never stored.
    pub usage: bool,
    /// Decoding, defaults, validation and schema.
    pub behaviour: Arc<dyn Behaviour>,
}

impl std::fmt::Debug for KindInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{} {}", self.group, self.version, self.kind)
    }
}

impl KindInfo {
    /// A Kind named `kind` (`plural`, `singular`) in `group` at `v1`, stored by the registry and
    /// served with every verb, with none of the rest — no subresources, columns, short names,
    /// categories or selectable fields —, not builtin, not a view, review, catalog or usage Kind: what
    /// each Kind's definition starts from and changes.
    pub(crate) fn v1(
        group: &str,
        kind: &'static str,
        plural: &'static str,
        singular: &'static str,
        namespaced: bool,
        names: NameRule,
        behaviour: Arc<dyn Behaviour>,
    ) -> KindInfo {
        KindInfo {
            group: group.to_owned(),
            version: "v1",
            kind,
            plural,
            singular,
            short_names: &[],
            categories: &[],
            namespaced,
            subresources: &[],
            doors: &[],
            field_labels: &[],
            columns: &[],
            verbs: ALL_VERBS,
            builtin: false,
            view_of: None,
            create_keeps_status: false,
            review: false,
            catalog: false,
            usage: false,
            names,
            behaviour,
        }
    }

    /// Whether objects of the Kind are kept in the store (views and reviews are not).
    pub fn stored(&self) -> bool {
        self.view_of.is_none() && !self.review && !self.catalog && !self.usage
    }

    /// `group/version`, or `v1` for core.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_owned()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// Whether `status` is a subresource.
    pub fn has_status(&self) -> bool {
        self.subresource("status").is_some()
    }

    /// The subresource called `name`, when the Kind has one.
    pub fn subresource(&self, name: &str) -> Option<&Subresource> {
        self.subresources.iter().find(|sub| sub.name == name)
    }

    /// Whether the Kind keeps the last spec states of each object (it serves `history` and
    /// `rollback`).
    pub fn keeps_history(&self) -> bool {
        self.subresource(HISTORY.name).is_some()
    }

    /// The door the subresource `name` writes through, when it is one.
    pub fn door(&self, name: &str) -> Option<&Door> {
        self.doors.iter().find(|door| door.subresources.contains(&name))
    }

    /// The full table columns: `Name`, the Kind's own, `Age` (unless the Kind places it itself
    /// or shows its own time).
    pub fn table_columns(&self) -> Vec<Column> {
        let mut columns = vec![NAME];
        columns.extend_from_slice(self.columns);
        if !self.columns.iter().any(|column| matches!(column.name, "Last Seen" | "Age")) {
            columns.push(AGE);
        }
        columns
    }
}

/// Every Kind served by one deployment.
#[derive(Debug, Clone)]
pub struct Scheme {
    domain: String,
    kinds: Vec<KindInfo>,
}

impl Scheme {
    /// The Kinds of a deployment whose domain is `domain` (so `fleet.<domain>`), core first.
    pub fn new(domain: &str) -> Scheme {
        let fleet = format!("fleet.{domain}");
        let authorization = format!("authorization.{domain}");
        let mut served = vec![
            kinds::core::namespace(),
            kinds::core::node(),
            kinds::core::event(),
            crate::view::pod(),
            kinds::application::kind_info(&fleet),
            kinds::applicationset::kind_info(&fleet),
            kinds::service::kind_info(&fleet),
            kinds::secret::kind_info(&fleet),
        ];
        served.extend(kinds::rbac::kind_infos(&authorization));
        served.push(kinds::check::kind_info(&authorization));
        served.push(kinds::csr::kind_info());
        served.push(kinds::lease::kind_info());
        served.extend(kinds::core::reviews());
        served.extend(kinds::catalog::kind_infos(domain));
        // Last: kubectl maps a plural to the first group serving it, and `pods` and `nodes`
        // must stay core's.
        served.extend(kinds::usage::kind_infos());
        Scheme { domain: domain.to_owned(), kinds: served }
    }

    /// The deployment's domain.
    pub fn domain(&self) -> &str {
        &self.domain
    }

    /// Every Kind, core first.
    pub fn kinds(&self) -> &[KindInfo] {
        &self.kinds
    }

    /// The Kind served at `group`/`version` under `plural`.
    pub fn find(&self, group: &str, version: &str, plural: &str) -> Option<&KindInfo> {
        self.kinds.iter().find(|k| k.group == group && k.version == version && k.plural == plural)
    }

    /// The group-versions served, in discovery order (core first), each with its Kinds.
    pub fn group_versions(&self) -> Vec<(String, &'static str, Vec<&KindInfo>)> {
        let mut out: Vec<(String, &'static str, Vec<&KindInfo>)> = Vec::new();
        for kind in &self.kinds {
            match out.iter_mut().find(|(g, v, _)| *g == kind.group && *v == kind.version) {
                Some((_, _, kinds)) => kinds.push(kind),
                None => out.push((kind.group.clone(), kind.version, vec![kind])),
            }
        }
        out
    }
}

#[cfg(test)]
mod tests;
