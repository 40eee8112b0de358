//! The RBAC decision apps ask Kayra for, `POST /apis/authorization.<domain>/v1/check`: what
//! they ask, and how the scheme lists it beside the other create-only resources (as Kubernetes
//! lists its reviews), so that discovery and `kayra-cli apis` show it.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::Kind;
use crate::scheme::{KindInfo, NameRule, typed};
use crate::verb::Verb;

/// Check asks whether a subject may make a request to an API, by the same RBAC rules that
/// decide every request to Kayra; the answer is `{"allowed": <bool>, "reason": <text>}`. The
/// subject is the caller itself; or the end user whose bearer `token` an app forwards; or a
/// named `user` (and `groups`), which only a caller that may create
/// `subjectaccessreviews.authorization.k8s.io` may ask about.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct Check {
    /// The API group the request is for: a registered API's name, any other group, or empty
    /// for the core group.
    pub api: String,
    /// The namespace, for namespaced resources.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// The resource. Required.
    pub resource: String,
    /// The subresource, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subresource: Option<String>,
    /// The object's name, if one is addressed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The verb. Required.
    pub verb: String,
    /// An end user's bearer token to decide for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    /// A user to decide for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// That user's groups.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<String>,
}

impl Kind for Check {}

/// The check as served in `authorization`: cluster-scoped, only created, answered at once and
/// never stored.
pub(crate) fn kind_info(authorization: &str) -> KindInfo {
    KindInfo {
        verbs: &[Verb::Create],
        review: true,
        ..KindInfo::v1(authorization, "Check", "check", "check", false, NameRule::Path, typed::<Check>())
    }
}
