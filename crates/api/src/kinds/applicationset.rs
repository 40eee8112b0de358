//! ApplicationSet: a set of Applications rendered from components, scaled and rolled out
//! together.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::application::{Application, ApplicationSpec, EnvVar};
use super::{Condition, Kind, duplicates, validate_conditions};
use crate::scheme::{FREEZE, FROZEN, HISTORY, KindInfo, NameRule, ROLLBACK, SCALE, STATUS, THAW, typed};
use crate::table::{Column, text_or_none};
use crate::validation::{FieldError, is_dns_label};

/// The label naming the set a child was rendered from, `fleet.<domain>/application-set`. It is
/// reserved: only the control plane sets, changes or removes it.
pub fn set_label(domain: &str) -> String {
    format!("fleet.{domain}/application-set")
}

/// The label naming the component a child was rendered from, `fleet.<domain>/component`;
/// reserved as [`set_label`] is.
pub fn component_label(domain: &str) -> String {
    format!("fleet.{domain}/component")
}

/// The annotation holding the hash of a child's rendered spec, `fleet.<domain>/appset-spec-hash`;
/// the set compares it, not the specs, to decide whether a child is up to date. Reserved as
/// [`set_label`] is.
pub fn spec_hash_annotation(domain: &str) -> String {
    format!("fleet.{domain}/appset-spec-hash")
}

/// The Kind an ApplicationSet's children name in their controller owner reference, whose
/// `apiVersion` is `fleet.<domain>/v1`.
pub const OWNER_KIND: &str = "ApplicationSet";

/// ApplicationSet expands its components into Applications named
/// `<set>-<component>[-<index>|-<node>]`, scales them, and rolls changes out.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApplicationSet {
    /// APIVersion defines the versioned schema of this representation of an object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    /// Kind is a string value representing the REST resource this object represents.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Standard object's metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// The components and how to roll them out.
    #[serde(default)]
    pub spec: ApplicationSetSpec,
    /// What the set has rendered and how far the rollout is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<ApplicationSetStatus>,
}

/// ApplicationSetSpec lists the components, what they share, and the rollout policy.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApplicationSetSpec {
    /// The components, each rendered into one or more Applications.
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    #[serde(default)]
    pub applications: Vec<Component>,
    /// Labels, annotations and environment every component gets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub common: Option<Common>,
    /// How the components are placed relative to each other.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<SetPlacement>,
    /// How changes roll out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollout: Option<Rollout>,
    /// Whether the set is frozen: its rollout is held (nothing is created, replaced or pruned;
    /// `Progressing=False` with reason `Frozen`) and its Applications are frozen with it, until
    /// thawed. Written only through the set's `freeze` and `thaw` subresources; an ordinary
    /// write that changes it is refused.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub frozen: bool,
}

/// One component of a set.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Component {
    /// The component's name, a DNS label unique in the set.
    pub name: String,
    /// Labels and annotations for the component's Applications.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<ComponentMetadata>,
    /// The Applications' spec.
    pub spec: ApplicationSpec,
    /// How many Applications the component has: a count, or one per matching node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale: Option<Scale>,
}

/// Labels and annotations for a component's Applications.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ComponentMetadata {
    /// Labels to add.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Annotations to add.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

/// A component's scale: exactly one of `replicas` and `nodeSpread`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Scale {
    /// How many Applications, named `<set>-<component>-<index>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i64>,
    /// One Application per node matching the selector, named `<set>-<component>-<node>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_spread: Option<NodeSpread>,
}

/// One Application per matching node.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeSpread {
    /// Labels a node must carry.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub node_selector: BTreeMap<String, String>,
}

/// What every component shares.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Common {
    /// Labels for every Application.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Annotations for every Application.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    /// Environment variables for every Application, before each component's own.
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<EnvVar>,
}

/// Placement across components.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SetPlacement {
    /// Empty, or `sameNode` to place every component on one node.
    #[serde(default)]
    pub mode: String,
}

/// How changes roll out.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Rollout {
    /// How many of the set's Applications may be unavailable at once while a change rolls out:
    /// a number, or a percentage of the Applications the set should have ("25%", rounded down).
    /// A set has no surge, so the budget is at least 1. Default "25%", as a Deployment's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_unavailable: Option<IntOrString>,
    /// Whether Applications no longer rendered are deleted; default true.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prune: Option<bool>,
}

/// ApplicationSetStatus is what the set has rendered and how far its rollout is.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApplicationSetStatus {
    /// A one-word summary.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// The `metadata.generation` this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// How many Applications the set should have.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub desired: Option<i64>,
    /// How many it has.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current: Option<i64>,
    /// How many are placed on a node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduled: Option<i64>,
    /// How many are ready (condition `Ready=True` on a Ready node, at their current generation).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready: Option<i64>,
    /// How many run the set's current template.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub updated: Option<i64>,
    /// Each Application of the set.
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub children: Vec<Child>,
    /// `Rendered`, `Initialized`, `Progressing` and `Converged`.
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

/// One Application of a set.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Child {
    /// The Application's name.
    pub name: String,
    /// The node it is on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// Its phase.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
}

/// `spec.rollout.maxUnavailable` when the set names none, as a Deployment's.
pub const DEFAULT_MAX_UNAVAILABLE: &str = "25%";

/// The rolling budget of a set that should have `desired` Applications: `maxUnavailable` as a
/// number, or as a percentage of `desired` rounded down (Kubernetes' IntOrString rule for an
/// unavailability budget); at least 1, since a set has no surge and could not roll at 0.
pub fn rolling_budget(max_unavailable: Option<&IntOrString>, desired: usize) -> usize {
    let default = IntOrString::String(DEFAULT_MAX_UNAVAILABLE.to_owned());
    let resolved = match max_unavailable.unwrap_or(&default) {
        IntOrString::Int(max) => usize::try_from(*max).unwrap_or(0),
        IntOrString::String(max) => percent(max).map_or(0, |percent| desired * percent / 100),
    };
    resolved.max(1)
}

/// The number of a percentage "N%" with N in 0..=100.
fn percent(text: &str) -> Option<usize> {
    text.strip_suffix('%')
        .filter(|digits| !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|digits| digits.parse().ok())
        .filter(|percent| *percent <= 100)
}

impl ApplicationSet {
    /// The index of the one component a `scale` subresource scales: the set must have exactly
    /// one component scaled by `replicas`. Answers why not otherwise.
    pub fn scaled_component(&self) -> Result<usize, String> {
        let replicated: Vec<usize> = self
            .spec
            .applications
            .iter()
            .enumerate()
            .filter(|(_, component)| component.scale.as_ref().is_some_and(|scale| scale.replicas.is_some()))
            .map(|(at, _)| at)
            .collect();
        match replicated.as_slice() {
            [one] => Ok(*one),
            [] => Err("the set has no component scaled by replicas (spec.applications[].scale.replicas); \
                       only a set with exactly one can be scaled"
                .to_owned()),
            many => Err(format!(
                "the set has {} components scaled by replicas ({}); only a set with exactly one can be scaled",
                many.len(),
                many.iter()
                    .map(|at| self.spec.applications[*at].name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
        }
    }
}

impl Kind for ApplicationSet {
    const OWNS_DEPENDENTS: bool = true;

    fn default_fields(&mut self) {
        let rollout = self.spec.rollout.get_or_insert_with(Rollout::default);
        rollout.prune.get_or_insert(true);
        rollout
            .max_unavailable
            .get_or_insert_with(|| IntOrString::String(DEFAULT_MAX_UNAVAILABLE.to_owned()));
        for component in &mut self.spec.applications {
            let mut application = Application { spec: component.spec.clone(), ..Application::default() };
            application.default_fields();
            component.spec = application.spec;
        }
    }

    fn validate(&self, _old: Option<&Self>) -> Vec<FieldError> {
        let mut errors = Vec::new();
        let spec = &self.spec;
        if spec.applications.is_empty() {
            errors.push(FieldError::required("spec.applications"));
        }
        errors.extend(duplicates("spec.applications", spec.applications.iter().map(|c| c.name.as_str())));
        for (at, component) in spec.applications.iter().enumerate() {
            let field = format!("spec.applications[{at}]");
            if !is_dns_label(&component.name) {
                errors.push(FieldError::invalid(
                    format!("{field}.name"),
                    format!("\"{}\"", component.name),
                    "must be a DNS label",
                ));
            }
            if component.spec.frozen {
                errors.push(FieldError::forbidden(
                    format!("{field}.spec.frozen"),
                    "a set's Applications are frozen with the set: POST .../applicationsets/<name>/freeze",
                ));
            }
            let application = Application { spec: component.spec.clone(), ..Application::default() };
            for error in application.validate(None) {
                errors.push(FieldError {
                    field: error.field.replacen("spec", &format!("{field}.spec"), 1),
                    ..error
                });
            }
            if let Some(scale) = &component.scale {
                match (scale.replicas, &scale.node_spread) {
                    (Some(_), Some(_)) => errors.push(FieldError::forbidden(
                        format!("{field}.scale"),
                        "set replicas or nodeSpread, not both",
                    )),
                    (Some(replicas), None) if replicas < 0 => {
                        errors.push(FieldError::invalid(
                            format!("{field}.scale.replicas"),
                            replicas,
                            "must be greater than or equal to 0",
                        ));
                    }
                    _ => {}
                }
            }
        }
        if let Some(mode) =
            spec.placement.as_ref().map(|p| p.mode.as_str()).filter(|m| !matches!(*m, "" | "sameNode"))
        {
            errors.push(FieldError::not_supported("spec.placement.mode", mode, &["", "sameNode"]));
        }
        match spec.rollout.as_ref().and_then(|r| r.max_unavailable.as_ref()) {
            Some(IntOrString::Int(max)) if *max < 0 => errors.push(FieldError::invalid(
                "spec.rollout.maxUnavailable",
                max,
                "must be greater than or equal to 0",
            )),
            Some(IntOrString::String(max)) if percent(max).is_none() => errors.push(FieldError::invalid(
                "spec.rollout.maxUnavailable",
                format!("\"{max}\""),
                "must be an integer or a percentage between 0% and 100% (\"25%\")",
            )),
            _ => {}
        }
        if let Some(status) = &self.status {
            errors.extend(validate_conditions("status.conditions", &status.conditions));
        }
        errors
    }
}

/// ApplicationSets as served in `fleet`, with the `scale` subresource `kubectl scale` uses.
pub(crate) fn kind_info(fleet: &str) -> KindInfo {
    KindInfo {
        short_names: &["appset", "appsets"],
        categories: &["all"],
        subresources: &[STATUS, SCALE, HISTORY, ROLLBACK, FREEZE, THAW],
        doors: &[FROZEN],
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
        ..KindInfo::v1(
            fleet,
            "ApplicationSet",
            "applicationsets",
            "applicationset",
            true,
            NameRule::Subdomain,
            typed::<ApplicationSet>(),
        )
    }
}
