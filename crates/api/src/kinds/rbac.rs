//! Role-based access control: Roles and ClusterRoles name what may be done; RoleBindings and
//! ClusterRoleBindings grant them to users, groups and service accounts.

use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::Kind;
use crate::scheme::{Behaviour, KindInfo, NameRule, typed};
use crate::validation::FieldError;

/// One permission: verbs on resources of API groups (optionally only some names), or verbs on
/// non-resource URLs.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PolicyRule {
    /// API groups: Kayra's own, `""` for core, any registered API's name, or `*`.
    #[schemars(extend("x-kubernetes-list-type" = "atomic"))]
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub apis: Vec<String>,
    /// Resources, `resource/subresource`, `resource/*`, `*/subresource` or `*`.
    #[schemars(extend("x-kubernetes-list-type" = "atomic"))]
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<String>,
    /// When set, only objects with these names.
    #[schemars(extend("x-kubernetes-list-type" = "atomic"))]
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resource_names: Vec<String>,
    /// get, list, watch, create, update, patch, delete, deletecollection, or `*`.
    #[schemars(extend("x-kubernetes-list-type" = "atomic"))]
    #[serde(default)]
    pub verbs: Vec<String>,
    /// Paths that are not resources (`/healthz`, `/logs/*`); only in ClusterRoles.
    #[schemars(extend("x-kubernetes-list-type" = "atomic"))]
    #[serde(default, rename = "nonResourceURLs", skip_serializing_if = "Vec::is_empty")]
    pub non_resource_urls: Vec<String>,
}

/// Role grants permissions within its namespace.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Role {
    /// APIVersion defines the versioned schema of this representation of an object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    /// Kind is a string value representing the REST resource this object represents.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Standard object's metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// The permissions.
    #[schemars(extend("x-kubernetes-list-type" = "set"))]
    #[serde(default)]
    pub rules: Vec<PolicyRule>,
}

/// ClusterRole grants permissions across the cluster (through a ClusterRoleBinding) or within
/// one namespace (through a RoleBinding).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterRole {
    /// APIVersion defines the versioned schema of this representation of an object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    /// Kind is a string value representing the REST resource this object represents.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Standard object's metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// The permissions.
    #[schemars(extend("x-kubernetes-list-type" = "set"))]
    #[serde(default)]
    pub rules: Vec<PolicyRule>,
}

/// Who a binding grants its role to.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Subject {
    /// `User`, `Group` or `ServiceAccount`.
    pub kind: String,
    /// The user's, group's or service account's name.
    pub name: String,
    /// The service account's namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

/// The role a binding grants.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RoleRef {
    /// `Role` or `ClusterRole`.
    pub kind: String,
    /// The role's name.
    pub name: String,
}

/// RoleBinding grants a Role (or a ClusterRole) within its namespace.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RoleBinding {
    /// APIVersion defines the versioned schema of this representation of an object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    /// Kind is a string value representing the REST resource this object represents.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Standard object's metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// Who is granted the role.
    #[schemars(extend("x-kubernetes-list-type" = "set"))]
    #[serde(default)]
    pub subjects: Vec<Subject>,
    /// The role granted.
    #[serde(default)]
    pub role_ref: RoleRef,
}

/// ClusterRoleBinding grants a ClusterRole across the cluster.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterRoleBinding {
    /// APIVersion defines the versioned schema of this representation of an object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    /// Kind is a string value representing the REST resource this object represents.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Standard object's metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// Who is granted the role.
    #[schemars(extend("x-kubernetes-list-type" = "set"))]
    #[serde(default)]
    pub subjects: Vec<Subject>,
    /// The role granted; always a ClusterRole.
    #[serde(default)]
    pub role_ref: RoleRef,
}

fn validate_rules(rules: &[PolicyRule], cluster: bool) -> Vec<FieldError> {
    let mut errors = Vec::new();
    for (at, rule) in rules.iter().enumerate() {
        let field = format!("rules[{at}]");
        if rule.verbs.is_empty() {
            errors.push(FieldError::required(format!("{field}.verbs")));
        }
        match (rule.resources.is_empty(), rule.non_resource_urls.is_empty()) {
            (true, true) => errors.push(FieldError::required(format!("{field}.resources"))),
            (false, false) => errors.push(FieldError::forbidden(
                format!("{field}.nonResourceURLs"),
                "a rule names resources or non-resource URLs, not both",
            )),
            (true, false) if !cluster => errors.push(FieldError::forbidden(
                format!("{field}.nonResourceURLs"),
                "only ClusterRoles grant non-resource URLs",
            )),
            (false, true) if rule.apis.is_empty() => {
                errors.push(FieldError::required(format!("{field}.apis")))
            }
            _ => {}
        }
        for (n, url) in rule.non_resource_urls.iter().enumerate() {
            if !(url == "*" || url.starts_with('/')) || url[..url.len().saturating_sub(1)].contains('*') {
                errors.push(FieldError::invalid(
                    format!("{field}.nonResourceURLs[{n}]"),
                    format!("\"{url}\""),
                    "must be an absolute path, optionally ending in '*', or '*'",
                ));
            }
        }
    }
    errors
}

fn validate_binding(
    subjects: &[Subject],
    role_ref: &RoleRef,
    cluster: bool,
    old: Option<&RoleRef>,
) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let kinds: &[&str] = if cluster { &["ClusterRole"] } else { &["Role", "ClusterRole"] };
    if !kinds.contains(&role_ref.kind.as_str()) {
        errors.push(FieldError::not_supported("roleRef.kind", &role_ref.kind, kinds));
    }
    if role_ref.name.is_empty() {
        errors.push(FieldError::required("roleRef.name"));
    }
    if let Some(old) = old
        && old != role_ref
    {
        errors.push(FieldError::forbidden("roleRef", "cannot change roleRef"));
    }
    for (at, subject) in subjects.iter().enumerate() {
        let field = format!("subjects[{at}]");
        if !matches!(subject.kind.as_str(), "User" | "Group" | "ServiceAccount") {
            errors.push(FieldError::not_supported(
                format!("{field}.kind"),
                &subject.kind,
                &["User", "Group", "ServiceAccount"],
            ));
        }
        if subject.name.is_empty() {
            errors.push(FieldError::required(format!("{field}.name")));
        }
        if subject.kind == "ServiceAccount"
            && subject.namespace.as_deref().unwrap_or_default().is_empty()
            && cluster
        {
            errors.push(FieldError::required(format!("{field}.namespace")));
        }
    }
    errors
}

impl Kind for Role {
    fn validate(&self, _old: Option<&Self>) -> Vec<FieldError> {
        validate_rules(&self.rules, false)
    }
}

impl Kind for ClusterRole {
    fn validate(&self, _old: Option<&Self>) -> Vec<FieldError> {
        validate_rules(&self.rules, true)
    }
}

impl Kind for RoleBinding {
    fn validate(&self, old: Option<&Self>) -> Vec<FieldError> {
        validate_binding(&self.subjects, &self.role_ref, false, old.map(|o| &o.role_ref))
    }
}

impl Kind for ClusterRoleBinding {
    fn validate(&self, old: Option<&Self>) -> Vec<FieldError> {
        validate_binding(&self.subjects, &self.role_ref, true, old.map(|o| &o.role_ref))
    }
}

/// The four RBAC Kinds as served in `authorization`: fully served, no table of their own, named
/// by any path segment (`system:node`).
pub(crate) fn kind_infos(authorization: &str) -> [KindInfo; 4] {
    let rbac = |kind: &'static str,
                plural: &'static str,
                singular: &'static str,
                namespaced: bool,
                behaviour: Arc<dyn Behaviour>| {
        KindInfo::v1(authorization, kind, plural, singular, namespaced, NameRule::Path, behaviour)
    };
    [
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
    ]
}
