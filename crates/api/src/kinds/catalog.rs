//! The API catalog's Kinds, in the flat snake_case JSON their users write: ApiRegistration, an
//! API group that exists in this deployment's platform and region, run by the team that owns
//! it; and Subscription, a namespace's use of one. Their rules live in `kayra-catalog`.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::Kind;
use crate::scheme::{Behaviour, KindInfo, NameRule, Subresource, typed};
use crate::table::{Column, text};
use crate::verb::Verb;

/// ApiRegistration declares that an API group exists in this platform and region. Kayra never
/// implements the API it names; the owning team runs it and is told of new builds through the
/// reconciler.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct ApiRegistration {
    /// The API group, a lowercase DNS name of at least two labels (`compute.example.com`): the
    /// registration's identity everywhere.
    pub name: String,
    /// A single-label alias for display and step templates (`compute`); never an address.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub short_name: String,
    /// The instance's platform, stamped on create whatever the request says.
    pub platform: String,
    /// The instance's region, stamped on create whatever the request says.
    pub region: String,
    /// Whether the API is in service.
    pub active: bool,
    /// Whether the API calls out to others.
    pub upstream: bool,
    /// Whether others call into the API.
    pub downstream: bool,
    /// The owning team.
    pub owner: String,
    /// What the API is for.
    pub description: String,
    /// Registrations this one needs, possibly in other platforms and regions.
    pub depends_on: Vec<DependencyRef>,
    /// The build subscribers reconcile to; minted on create when none is given, and by
    /// `PUT .../sync`.
    pub sync_id: String,
    /// The key into `reconciler.mode` in `kayra.yaml` that says how subscribers are reconciled.
    pub mode: String,
    /// While a canary rollout is pending: the only namespaces reconciled. Only the sync
    /// endpoint sets or clears it.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub canary_namespaces: Vec<String>,
}

/// A registration named by its scope and name.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct DependencyRef {
    /// The platform it lives in.
    pub platform: String,
    /// The region it lives in.
    pub region: String,
    /// Its name.
    pub name: String,
}

impl ApiRegistration {
    /// This registration as a dependency names it.
    pub fn reference(&self) -> DependencyRef {
        DependencyRef {
            platform: self.platform.clone(),
            region: self.region.clone(),
            name: self.name.clone(),
        }
    }
}

/// Subscription is a namespace's use of a registered API, named after the API; the
/// reconciler records how far it got.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct Subscription {
    /// The registration's name.
    pub api: String,
    /// Whether the namespace wants to be reconciled.
    pub active: bool,
    /// The namespace, from the request path.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    /// What the reconciler last did.
    #[serde(flatten)]
    pub status: SubscriptionState,
}

/// How far a subscription's reconciliation got.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct SubscriptionState {
    /// `pending` (never reconciled), `success` or `error`.
    pub state: String,
    /// The build the namespace is reconciled to.
    pub current_sync_id: String,
    /// The build it should be reconciled to.
    pub expected_sync_id: String,
    /// Why the last attempt failed.
    pub message: String,
    /// When the last attempt ended (RFC 3339); empty before the first.
    pub last_attempt: String,
}

impl Subscription {
    /// A new subscription of `namespace` to `api`, not yet reconciled.
    pub fn new(namespace: &str, api: &str, active: bool) -> Subscription {
        Subscription {
            api: api.to_owned(),
            active,
            namespace: namespace.to_owned(),
            status: SubscriptionState { state: "pending".to_owned(), ..SubscriptionState::default() },
        }
    }

    /// Whether the subscription still waits for its first reconciliation.
    pub fn awaiting_activation(&self) -> bool {
        self.status.last_attempt.is_empty() && self.status.current_sync_id.is_empty()
    }

    /// Whether it is reconciled to `registration`'s build.
    pub fn synced(&self, registration: &ApiRegistration) -> bool {
        !registration.sync_id.is_empty() && self.status.current_sync_id == registration.sync_id
    }
}

impl Kind for ApiRegistration {}

impl Kind for Subscription {}

/// The catalog's Kinds, as discovery, OpenAPI and tables describe them; the catalog serves
/// them (not the registry).
pub(crate) fn kind_infos(domain: &str) -> [KindInfo; 2] {
    let kind = |kind: &'static str,
                plural: &'static str,
                singular: &'static str,
                namespaced: bool,
                subresources: &'static [Subresource],
                columns: &'static [Column],
                behaviour: Arc<dyn Behaviour>| KindInfo {
        subresources,
        columns,
        // What the catalog's routes serve: no patch, no deletecollection.
        verbs: &[Verb::Create, Verb::Delete, Verb::Get, Verb::List, Verb::Update, Verb::Watch],
        catalog: true,
        ..KindInfo::v1(
            &format!("catalog.{domain}"),
            kind,
            plural,
            singular,
            namespaced,
            NameRule::Path,
            behaviour,
        )
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
