//! The scheme: every Kind Kayra serves, with the names, scope, subresources, selectable
//! fields and table columns that discovery, routing and printing need.

use std::marker::PhantomData;
use std::sync::Arc;

use serde_json::Value;

use crate::codec;
use crate::kinds::Kind;
use crate::kinds::application::Application;
use crate::kinds::applicationset::ApplicationSet;
use crate::kinds::rbac::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use crate::kinds::secret::Secret;
use crate::kinds::service::Service;
use crate::table::{AGE, Column, NAME, field_of_typed_entry, text, text_or_none};
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

/// The `scale` subresource of an ApplicationSet: an `autoscaling/v1` Scale read, replaced and
/// patched there sets the replicas of the set's one replicated component (`kubectl scale`).
pub const SCALE: Subresource = Subresource {
    name: "scale",
    verbs: &[Verb::Get, Verb::Patch, Verb::Update],
    response: Some(("autoscaling", "v1", "Scale")),
};

/// A certificate request's approval subresource: read, replaced and patched.
pub const APPROVAL: Subresource =
    Subresource { name: "approval", verbs: &[Verb::Get, Verb::Patch, Verb::Update], response: None };

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
    fn validate(&self, object: &Value, old: Option<&Value>) -> Vec<FieldError>;

    /// The Kind's schema, registering what it refers to with the generator.
    fn schema(&self, generator: &mut schemars::SchemaGenerator) -> schemars::Schema;

    /// Whether a deleted object must wait before it goes: while `metadata.finalizers` is not
    /// empty, and for a namespace while `spec.finalizers` is not.
    fn finalizing(&self, object: &Value) -> bool {
        object.pointer("/metadata/finalizers").and_then(Value::as_array).is_some_and(|f| !f.is_empty())
    }

    /// What marks an object whose deletion waits.
    fn mark_deleting(&self, object: &mut Value) {
        let _ = object;
    }

    /// When the object ceases to exist by itself, if ever.
    fn expires_at(&self, object: &Value) -> Option<jiff::Timestamp> {
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

/// A namespace is deleted in two steps: marked `Terminating` while its contents are deleted,
/// then gone once the `kubernetes` finalizer in `spec.finalizers` is removed.
struct NamespaceBehaviour(Typed<k8s_openapi::api::core::v1::Namespace>);

impl Behaviour for NamespaceBehaviour {
    fn normalize(&self, object: &Value) -> Result<(Value, Vec<String>), String> {
        self.0.normalize(object)
    }

    fn unknown_fields(&self, object: &Value) -> Result<Vec<String>, String> {
        self.0.unknown_fields(object)
    }

    fn validate(&self, object: &Value, old: Option<&Value>) -> Vec<FieldError> {
        self.0.validate(object, old)
    }

    fn schema(&self, generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        self.0.schema(generator)
    }

    fn finalizing(&self, object: &Value) -> bool {
        let spec =
            object.pointer("/spec/finalizers").and_then(Value::as_array).is_some_and(|f| !f.is_empty());
        spec || self.0.finalizing(object)
    }

    fn mark_deleting(&self, object: &mut Value) {
        if let Some(map) = object.as_object_mut() {
            let status = map.entry("status").or_insert_with(|| Value::Object(Default::default()));
            if let Some(status) = status.as_object_mut() {
                status.insert("phase".into(), Value::String("Terminating".into()));
            }
        }
    }
}

/// The behaviour of a typed Kind.
struct Typed<T>(PhantomData<fn() -> T>);

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

    fn validate(&self, object: &Value, old: Option<&Value>) -> Vec<FieldError> {
        // Decoded from the borrowed JSON: no copy of the object is made first.
        let decode = |value: &Value| T::deserialize(value);
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

    fn expires_at(&self, object: &Value) -> Option<jiff::Timestamp> {
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

    fn owns_dependents(&self) -> bool {
        T::OWNS_DEPENDENTS
    }
}

fn typed<T: Kind>() -> Arc<dyn Behaviour> {
    Arc::new(Typed::<T>(PhantomData))
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
    /// (`SelfSubjectAccessReview`, `SelfSubjectReview`).
    pub review: bool,
    /// Whether the Kind belongs to the API catalog, which serves it with its own rules (and
    /// stores it under its own keys) instead of the registry.
    pub catalog: bool,
    /// Decoding, defaults, validation and schema.
    pub behaviour: Arc<dyn Behaviour>,
}

impl std::fmt::Debug for KindInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{} {}", self.group, self.version, self.kind)
    }
}

/// The catalog's Kinds, as discovery, OpenAPI and tables describe them.
fn catalog_kinds(domain: &str) -> [KindInfo; 2] {
    use crate::kinds::catalog::{ApiRegistration, Subscription};
    let kind = |kind: &'static str,
                plural: &'static str,
                singular: &'static str,
                namespaced: bool,
                subresources: &'static [Subresource],
                columns: &'static [Column],
                behaviour: Arc<dyn Behaviour>| KindInfo {
        group: format!("catalog.{domain}"),
        version: "v1",
        kind,
        plural,
        singular,
        short_names: &[],
        categories: &[],
        namespaced,
        subresources,
        field_labels: &[],
        columns,
        // What the catalog's routes serve: no patch, no deletecollection.
        verbs: &[Verb::Create, Verb::Delete, Verb::Get, Verb::List, Verb::Update, Verb::Watch],
        builtin: false,
        view_of: None,
        create_keeps_status: false,
        review: false,
        catalog: true,
        names: NameRule::Path,
        behaviour,
    };
    [
        kind(
            "ApiRegistration",
            "apiregistrations",
            "apiregistration",
            false,
            &[
                // A sync is asked for with a PUT; status and the stored document are read.
                Subresource { name: "sync", verbs: &[Verb::Update], response: None },
                Subresource { name: "status", verbs: &[Verb::Get], response: None },
                Subresource { name: "openapi.json", verbs: &[Verb::Get], response: None },
            ],
            &[
                Column {
                    name: "Short",
                    type_: "string",
                    format: "",
                    description: "The short name",
                    priority: 0,
                    cell: |o, _| Value::String(text(o, "short_name")),
                },
                Column {
                    name: "Owner",
                    type_: "string",
                    format: "",
                    description: "The owning team",
                    priority: 0,
                    cell: |o, _| Value::String(text(o, "owner")),
                },
                Column {
                    name: "Active",
                    type_: "string",
                    format: "",
                    description: "Whether the API is in service",
                    priority: 0,
                    cell: |o, _| Value::String(text(o, "active")),
                },
                Column {
                    name: "Sync",
                    type_: "string",
                    format: "",
                    description: "The build subscribers reconcile to",
                    priority: 0,
                    cell: |o, _| Value::String(text(o, "sync_id")),
                },
            ],
            typed::<ApiRegistration>(),
        ),
        kind(
            "Subscription",
            "subscriptions",
            "subscription",
            true,
            &[],
            &[
                Column {
                    name: "State",
                    type_: "string",
                    format: "",
                    description: "What the reconciler last did",
                    priority: 0,
                    cell: |o, _| Value::String(text(o, "state")),
                },
                Column {
                    name: "Current",
                    type_: "string",
                    format: "",
                    description: "The build the namespace is at",
                    priority: 0,
                    cell: |o, _| Value::String(text(o, "current_sync_id")),
                },
                Column {
                    name: "Expected",
                    type_: "string",
                    format: "",
                    description: "The build it should be at",
                    priority: 0,
                    cell: |o, _| Value::String(text(o, "expected_sync_id")),
                },
            ],
            typed::<Subscription>(),
        ),
    ]
}

/// A review Kind: create-only, answered at once.
fn review(
    group: &str,
    kind: &'static str,
    plural: &'static str,
    singular: &'static str,
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
        namespaced: false,
        subresources: &[],
        field_labels: &[],
        columns: &[],
        verbs: &[Verb::Create],
        builtin: true,
        view_of: None,
        create_keeps_status: false,
        review: true,
        catalog: false,
        names: NameRule::Path,
        behaviour,
    }
}

impl KindInfo {
    /// Whether objects of the Kind are kept in the store (views and reviews are not).
    pub fn stored(&self) -> bool {
        self.view_of.is_none() && !self.review && !self.catalog
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
    /// The Kinds of a deployment whose domain is `domain` (so `fleet.<domain>`).
    pub fn new(domain: &str) -> Scheme {
        let fleet = format!("fleet.{domain}");
        let authorization = format!("authorization.{domain}");
        let rbac = |kind: &'static str,
                    plural: &'static str,
                    singular: &'static str,
                    namespaced: bool,
                    behaviour: Arc<dyn Behaviour>| KindInfo {
            group: authorization.clone(),
            version: "v1",
            kind,
            plural,
            singular,
            short_names: &[],
            categories: &[],
            namespaced,
            subresources: &[],
            field_labels: &[],
            columns: &[],
            verbs: ALL_VERBS,
            builtin: false,
            view_of: None,
            create_keeps_status: false,
            review: false,
            catalog: false,
            names: NameRule::Path,
            behaviour,
        };
        let mut kinds = vec![
            KindInfo {
                group: String::new(),
                version: "v1",
                kind: "Namespace",
                plural: "namespaces",
                singular: "namespace",
                short_names: &["ns"],
                categories: &[],
                namespaced: false,
                subresources: &[STATUS],
                field_labels: &["status.phase"],
                columns: &[Column {
                    name: "Status",
                    type_: "string",
                    format: "",
                    description: "The status of the namespace",
                    priority: 0,
                    cell: |o, _| Value::String(text(o, "status.phase")),
                }],
                verbs: NAMESPACE_VERBS,
                builtin: true,
                view_of: None,
                create_keeps_status: false,
                review: false,
                catalog: false,
                names: NameRule::Label,
                behaviour: Arc::new(NamespaceBehaviour(Typed(PhantomData))),
            },
            KindInfo {
                group: String::new(),
                version: "v1",
                kind: "Node",
                plural: "nodes",
                singular: "node",
                short_names: &["no"],
                categories: &[],
                namespaced: false,
                subresources: &[STATUS],
                field_labels: &["spec.unschedulable"],
                columns: &[
                    Column {
                        name: "Status",
                        type_: "string",
                        format: "",
                        description: "The node's readiness",
                        priority: 0,
                        cell: node_status,
                    },
                    Column {
                        name: "Roles",
                        type_: "string",
                        format: "",
                        description: "The roles of the node",
                        priority: 0,
                        cell: |_, _| Value::String("<none>".into()),
                    },
                    Column {
                        name: "Version",
                        type_: "string",
                        format: "",
                        description: "Agent version reported by the node",
                        priority: 0,
                        cell: |o, _| Value::String(text(o, "status.nodeInfo.kubeletVersion")),
                    },
                    Column {
                        name: "Internal-IP",
                        type_: "string",
                        format: "",
                        description: "The node's internal address",
                        priority: 1,
                        cell: node_internal_ip,
                    },
                    Column {
                        name: "OS-Image",
                        type_: "string",
                        format: "",
                        description: "OS image reported by the node",
                        priority: 1,
                        cell: |o, _| text_or_none(o, "status.nodeInfo.osImage"),
                    },
                    Column {
                        name: "Kernel-Version",
                        type_: "string",
                        format: "",
                        description: "Kernel version reported by the node",
                        priority: 1,
                        cell: |o, _| text_or_none(o, "status.nodeInfo.kernelVersion"),
                    },
                ],
                verbs: ALL_VERBS,
                builtin: true,
                view_of: None,
                create_keeps_status: true,
                review: false,
                catalog: false,
                names: NameRule::Subdomain,
                behaviour: typed::<k8s_openapi::api::core::v1::Node>(),
            },
            KindInfo {
                group: String::new(),
                version: "v1",
                kind: "Event",
                plural: "events",
                singular: "event",
                short_names: &["ev"],
                categories: &[],
                namespaced: true,
                subresources: &[],
                field_labels: &[
                    "involvedObject.kind",
                    "involvedObject.namespace",
                    "involvedObject.name",
                    "involvedObject.uid",
                    "involvedObject.apiVersion",
                    "involvedObject.resourceVersion",
                    "involvedObject.fieldPath",
                    "reason",
                    "reportingComponent",
                    "source",
                    "type",
                ],
                columns: &[
                    Column {
                        name: "Last Seen",
                        type_: "string",
                        format: "",
                        description: "Time since the event was last seen",
                        priority: 0,
                        cell: |o, now| Value::String(crate::table::age_of(&text(o, "lastTimestamp"), now)),
                    },
                    Column {
                        name: "Type",
                        type_: "string",
                        format: "",
                        description: "Normal or Warning",
                        priority: 0,
                        cell: |o, _| Value::String(text(o, "type")),
                    },
                    Column {
                        name: "Reason",
                        type_: "string",
                        format: "",
                        description: "Why the event happened",
                        priority: 0,
                        cell: |o, _| Value::String(text(o, "reason")),
                    },
                    Column {
                        name: "Object",
                        type_: "string",
                        format: "",
                        description: "The object the event is about",
                        priority: 0,
                        cell: |o, _| {
                            Value::String(format!(
                                "{}/{}",
                                text(o, "involvedObject.kind").to_lowercase(),
                                text(o, "involvedObject.name")
                            ))
                        },
                    },
                    Column {
                        name: "Message",
                        type_: "string",
                        format: "",
                        description: "What happened",
                        priority: 0,
                        cell: |o, _| Value::String(text(o, "message")),
                    },
                ],
                verbs: ALL_VERBS,
                builtin: true,
                view_of: None,
                create_keeps_status: false,
                review: false,
                catalog: false,
                names: NameRule::Subdomain,
                behaviour: typed::<k8s_openapi::api::core::v1::Event>(),
            },
            KindInfo {
                group: String::new(),
                version: "v1",
                kind: "Pod",
                plural: "pods",
                singular: "pod",
                short_names: &["po"],
                categories: &["all"],
                namespaced: true,
                subresources: &[LOG, EVICTION, BINDING],
                field_labels: &["spec.nodeName", "status.phase", "status.podIP"],
                columns: &[
                    Column {
                        name: "Ready",
                        type_: "string",
                        format: "",
                        description: "Ready containers",
                        priority: 0,
                        cell: |o, _| {
                            Value::String(
                                if o.pointer("/status/containerStatuses/0/ready").and_then(Value::as_bool)
                                    == Some(true)
                                {
                                    "1/1"
                                } else {
                                    "0/1"
                                }
                                .into(),
                            )
                        },
                    },
                    Column {
                        name: "Status",
                        type_: "string",
                        format: "",
                        description: "Why the pod's container waits or ended, or the pod's phase",
                        priority: 0,
                        cell: |o, _| Value::String(crate::view::printed_status(o)),
                    },
                    Column {
                        name: "Restarts",
                        type_: "integer",
                        format: "",
                        description: "Container restarts",
                        priority: 0,
                        cell: |o, _| {
                            o.pointer("/status/containerStatuses/0/restartCount")
                                .cloned()
                                .unwrap_or(Value::from(0))
                        },
                    },
                    Column {
                        name: "IP",
                        type_: "string",
                        format: "",
                        description: "The pod's address",
                        priority: 1,
                        cell: |o, _| text_or_none(o, "status.podIP"),
                    },
                    Column {
                        name: "Node",
                        type_: "string",
                        format: "",
                        description: "The node the pod runs on",
                        priority: 1,
                        cell: |o, _| text_or_none(o, "spec.nodeName"),
                    },
                ],
                verbs: &[Verb::Get, Verb::List, Verb::Watch],
                builtin: true,
                view_of: Some(("applications", crate::view::pod_from_application)),
                create_keeps_status: false,
                review: false,
                catalog: false,
                names: NameRule::Subdomain,
                behaviour: typed::<k8s_openapi::api::core::v1::Pod>(),
            },
            KindInfo {
                group: fleet.clone(),
                version: "v1",
                kind: "Application",
                plural: "applications",
                singular: "application",
                short_names: &["app", "apps"],
                categories: &["all"],
                namespaced: true,
                subresources: &[STATUS, LOG, BINDING],
                field_labels: &["spec.placement.nodeName", "spec.serviceName", "status.phase"],
                columns: &[
                    Column {
                        name: "Phase",
                        type_: "string",
                        format: "",
                        description: "The process's phase",
                        priority: 0,
                        cell: |o, _| text_or_none(o, "status.phase"),
                    },
                    Column {
                        name: "Node",
                        type_: "string",
                        format: "",
                        description: "The node the process runs on",
                        priority: 0,
                        cell: |o, _| text_or_none(o, "spec.placement.nodeName"),
                    },
                    Column {
                        name: "Restarts",
                        type_: "integer",
                        format: "",
                        description: "How many times the process was restarted",
                        priority: 0,
                        cell: |o, _| o.pointer("/status/restarts").cloned().unwrap_or(Value::from(0)),
                    },
                    Column {
                        name: "Command",
                        type_: "string",
                        format: "",
                        description: "The program and its arguments",
                        priority: 1,
                        cell: application_command,
                    },
                    Column {
                        name: "Address",
                        type_: "string",
                        format: "",
                        description: "Where the process is reachable",
                        priority: 1,
                        cell: |o, _| text_or_none(o, "status.address"),
                    },
                ],
                verbs: ALL_VERBS,
                builtin: false,
                view_of: None,
                create_keeps_status: false,
                review: false,
                catalog: false,
                names: NameRule::Subdomain,
                behaviour: typed::<Application>(),
            },
            KindInfo {
                group: fleet.clone(),
                version: "v1",
                kind: "ApplicationSet",
                plural: "applicationsets",
                singular: "applicationset",
                short_names: &["appset", "appsets"],
                categories: &["all"],
                namespaced: true,
                subresources: &[STATUS, SCALE],
                field_labels: &["status.phase"],
                columns: &[
                    Column {
                        name: "Ready",
                        type_: "string",
                        format: "",
                        description: "Applications ready, of those the set should have",
                        priority: 0,
                        cell: |o, _| {
                            let count = |field: &str| o.pointer(field).and_then(Value::as_i64).unwrap_or(0);
                            Value::from(format!("{}/{}", count("/status/ready"), count("/status/desired")))
                        },
                    },
                    Column {
                        name: "Up-to-date",
                        type_: "integer",
                        format: "",
                        description: "Applications running the set's current template",
                        priority: 0,
                        cell: |o, _| o.pointer("/status/updated").cloned().unwrap_or(Value::from(0)),
                    },
                    Column {
                        name: "Phase",
                        type_: "string",
                        format: "",
                        description: "The set's phase",
                        priority: 1,
                        cell: |o, _| text_or_none(o, "status.phase"),
                    },
                ],
                verbs: ALL_VERBS,
                builtin: false,
                view_of: None,
                create_keeps_status: false,
                review: false,
                catalog: false,
                names: NameRule::Subdomain,
                behaviour: typed::<ApplicationSet>(),
            },
            KindInfo {
                group: fleet.clone(),
                version: "v1",
                kind: "Service",
                plural: "services",
                singular: "service",
                short_names: &["svc"],
                categories: &["all"],
                namespaced: true,
                subresources: &[STATUS],
                field_labels: &[],
                columns: &[
                    Column {
                        name: "Cluster-IP",
                        type_: "string",
                        format: "",
                        description: "The Service's virtual address",
                        priority: 0,
                        cell: |o, _| text_or_none(o, "spec.clusterIP"),
                    },
                    Column {
                        name: "Port(s)",
                        type_: "string",
                        format: "",
                        description: "The Service's ports",
                        priority: 0,
                        cell: service_ports,
                    },
                    Column {
                        name: "Endpoints",
                        type_: "integer",
                        format: "",
                        description: "How many ready members the Service has",
                        priority: 1,
                        cell: |o, _| {
                            let endpoints = o.pointer("/status/endpoints").and_then(Value::as_array);
                            Value::from(endpoints.map_or(0, Vec::len))
                        },
                    },
                ],
                verbs: ALL_VERBS,
                builtin: false,
                view_of: None,
                create_keeps_status: false,
                review: false,
                catalog: false,
                names: NameRule::Label,
                behaviour: typed::<Service>(),
            },
            KindInfo {
                group: fleet,
                version: "v1",
                kind: "Secret",
                plural: "secrets",
                singular: "secret",
                short_names: &[],
                categories: &[],
                namespaced: true,
                subresources: &[],
                field_labels: &["type"],
                columns: &[
                    Column {
                        name: "Type",
                        type_: "string",
                        format: "",
                        description: "The type of the Secret",
                        priority: 0,
                        cell: |o, _| Value::String(text(o, "type")),
                    },
                    Column {
                        name: "Data",
                        type_: "integer",
                        format: "",
                        description: "How many keys the Secret holds",
                        priority: 0,
                        cell: |o, _| {
                            Value::from(o.get("data").and_then(Value::as_object).map_or(0, |d| d.len()))
                        },
                    },
                ],
                verbs: ALL_VERBS,
                builtin: false,
                view_of: None,
                create_keeps_status: false,
                review: false,
                catalog: false,
                names: NameRule::Subdomain,
                behaviour: typed::<Secret>(),
            },
            rbac("Role", "roles", "role", true, typed::<Role>()),
            rbac("RoleBinding", "rolebindings", "rolebinding", true, typed::<RoleBinding>()),
            rbac("ClusterRole", "clusterroles", "clusterrole", false, typed::<ClusterRole>()),
            rbac(
                "ClusterRoleBinding",
                "clusterrolebindings",
                "clusterrolebinding",
                false,
                typed::<ClusterRoleBinding>(),
            ),
            KindInfo {
                group: "certificates.k8s.io".to_owned(),
                version: "v1",
                kind: "CertificateSigningRequest",
                plural: "certificatesigningrequests",
                singular: "certificatesigningrequest",
                short_names: &["csr"],
                categories: &[],
                namespaced: false,
                // `approval` writes only the Approved and Denied conditions (kubectl
                // certificate approve|deny); `status` is the signer's: the certificate and Failed.
                subresources: &[APPROVAL, STATUS],
                field_labels: &["spec.signerName"],
                columns: &[
                    AGE,
                    Column {
                        name: "SignerName",
                        type_: "string",
                        format: "",
                        description: "The signer the request is for",
                        priority: 0,
                        cell: |o, _| Value::String(text(o, "spec.signerName")),
                    },
                    Column {
                        name: "Requestor",
                        type_: "string",
                        format: "",
                        description: "Who asked",
                        priority: 0,
                        cell: |o, _| Value::String(text(o, "spec.username")),
                    },
                    Column {
                        name: "RequestedDuration",
                        type_: "string",
                        format: "",
                        description: "How long the certificate is asked to be valid",
                        priority: 0,
                        cell: |o, _| match o.pointer("/spec/expirationSeconds").and_then(Value::as_i64) {
                            Some(seconds) => Value::String(crate::table::human_duration(seconds)),
                            None => Value::String("<none>".into()),
                        },
                    },
                    Column {
                        name: "Condition",
                        type_: "string",
                        format: "",
                        description: "Approved, Denied, Failed or Pending, and Issued once signed",
                        priority: 0,
                        cell: csr_condition,
                    },
                ],
                verbs: ALL_VERBS,
                builtin: true,
                view_of: None,
                create_keeps_status: false,
                review: false,
                catalog: false,
                names: NameRule::Subdomain,
                behaviour: typed::<k8s_openapi::api::certificates::v1::CertificateSigningRequest>(),
            },
            review(
                "authorization.k8s.io",
                "SelfSubjectAccessReview",
                "selfsubjectaccessreviews",
                "selfsubjectaccessreview",
                typed::<k8s_openapi::api::authorization::v1::SelfSubjectAccessReview>(),
            ),
            review(
                "authorization.k8s.io",
                "SelfSubjectRulesReview",
                "selfsubjectrulesreviews",
                "selfsubjectrulesreview",
                typed::<k8s_openapi::api::authorization::v1::SelfSubjectRulesReview>(),
            ),
            review(
                "authentication.k8s.io",
                "SelfSubjectReview",
                "selfsubjectreviews",
                "selfsubjectreview",
                typed::<k8s_openapi::api::authentication::v1::SelfSubjectReview>(),
            ),
        ];
        kinds.extend(catalog_kinds(domain));
        Scheme { domain: domain.to_owned(), kinds }
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

fn csr_condition(object: &Value, _: jiff::Timestamp) -> Value {
    let decided: Vec<String> = object
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .map(|conditions| {
            conditions
                .iter()
                .filter(|c| c.get("status").and_then(Value::as_str) == Some("True"))
                .filter_map(|c| c.get("type").and_then(Value::as_str).map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    let issued = object.pointer("/status/certificate").and_then(Value::as_str).is_some_and(|c| !c.is_empty());
    let mut condition = if decided.is_empty() { "Pending".to_owned() } else { decided.join(",") };
    if issued {
        condition.push_str(",Issued");
    }
    Value::String(condition)
}

fn node_status(object: &Value, _: jiff::Timestamp) -> Value {
    let ready = field_of_typed_entry(object, "/status/conditions", "Ready", "status")
        .map(|status| if status == "True" { "Ready" } else { "NotReady" })
        .unwrap_or("Unknown");
    let cordoned = object.pointer("/spec/unschedulable").and_then(Value::as_bool).unwrap_or(false);
    Value::String(if cordoned { format!("{ready},SchedulingDisabled") } else { ready.to_owned() })
}

fn node_internal_ip(object: &Value, _: jiff::Timestamp) -> Value {
    let address =
        field_of_typed_entry(object, "/status/addresses", "InternalIP", "address").unwrap_or("<none>");
    Value::String(address.to_owned())
}

fn application_command(object: &Value, _: jiff::Timestamp) -> Value {
    let words = |pointer: &str| -> Vec<String> {
        object
            .pointer(pointer)
            .and_then(Value::as_array)
            .map(|list| list.iter().filter_map(Value::as_str).map(str::to_owned).collect())
            .unwrap_or_default()
    };
    let mut argv = words("/spec/command");
    argv.extend(words("/spec/args"));
    Value::String(argv.join(" "))
}

fn service_ports(object: &Value, _: jiff::Timestamp) -> Value {
    let ports: Vec<String> = object
        .pointer("/spec/ports")
        .and_then(Value::as_array)
        .map(|ports| {
            ports
                .iter()
                .map(|p| {
                    format!(
                        "{}/{}",
                        text(p, "port"),
                        p.get("protocol").and_then(Value::as_str).unwrap_or("TCP")
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    Value::String(if ports.is_empty() { "<none>".to_owned() } else { ports.join(",") })
}

#[cfg(test)]
mod tests;
