//! `POST /apis/authorization.<domain>/v1/check`: the RBAC decision an app asks Kayra for, about
//! a request to its own API, from the same engine that decides every request to Kayra.
//!
//! The subject is the caller itself; or the end user whose bearer `token` the app forwards
//! (Kayra authenticates it); or an explicit `user` and `groups`, which only a caller that may
//! create `subjectaccessreviews.authorization.k8s.io` (ask about others, as in Kubernetes) may
//! name.

use axum::http::{Method, StatusCode};
use axum::response::Response;
use kayra_authn::Identity;
use serde::Deserialize;
use serde_json::json;

use crate::error::ApiError;
use crate::handlers::json_response;
use crate::state::ApiState;

/// The request body.
#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct Check {
    /// The API group the request is for: a registered API's name, any other group, or empty
    /// for the core group.
    api: String,
    /// The namespace, for namespaced resources.
    namespace: Option<String>,
    /// The resource.
    resource: String,
    /// The subresource, if any.
    subresource: Option<String>,
    /// The object's name, if one is addressed.
    name: Option<String>,
    /// The verb.
    verb: String,
    /// An end user's bearer token to decide for.
    token: Option<String>,
    /// A user to decide for.
    user: Option<String>,
    /// That user's groups.
    groups: Vec<String>,
}

pub(crate) async fn serve(
    state: &ApiState,
    caller: &Identity,
    method: &Method,
    body: &[u8],
) -> Result<Response, ApiError> {
    if method != Method::POST {
        return Err(ApiError::MethodNotAllowed);
    }
    let group = format!("authorization.{}", state.scheme.domain());
    let may_check = kayra_authz::Action::Resource {
        verb: "create".to_owned(),
        api: group.clone(),
        resource: "check".to_owned(),
        namespace: None,
        name: None,
    };
    if !state.allows(caller, &may_check) {
        return Err(ApiError::Forbidden(may_check.refusal(&caller.user)));
    }
    let check: Check = serde_json::from_slice(body)
        .map_err(|error| ApiError::BadRequest(format!("the check is not valid: {error}")))?;
    for (field, value) in [("resource", &check.resource), ("verb", &check.verb)] {
        if value.is_empty() {
            return Err(ApiError::BadRequest(format!("{field} is required")));
        }
    }
    let subject = match (&check.token, &check.user) {
        (Some(_), Some(_)) => {
            return Err(ApiError::BadRequest("name a token or a user, not both".to_owned()));
        }
        (Some(token), None) => match crate::bearer(state, token).await {
            Some(identity) => identity,
            None => {
                let body = json!({"allowed": false, "reason": "the token does not authenticate"});
                return Ok(json_response(StatusCode::OK, &body, &[]));
            }
        },
        (None, Some(user)) => {
            let on_behalf = kayra_authz::Action::Resource {
                verb: "create".to_owned(),
                api: "authorization.k8s.io".to_owned(),
                resource: "subjectaccessreviews".to_owned(),
                namespace: None,
                name: None,
            };
            if !state.allows(caller, &on_behalf) {
                return Err(ApiError::Forbidden(format!(
                    "User \"{}\" may not check on others' behalf: that needs create on subjectaccessreviews.authorization.k8s.io",
                    caller.user
                )));
            }
            Identity::new(user.clone(), String::new(), check.groups.clone())
        }
        (None, None) if !check.groups.is_empty() => {
            return Err(ApiError::BadRequest("groups need a user".to_owned()));
        }
        (None, None) => caller.clone(),
    };
    let resource = match &check.subresource {
        Some(sub) if !sub.is_empty() => format!("{}/{sub}", check.resource),
        _ => check.resource.clone(),
    };
    let action = kayra_authz::Action::Resource {
        verb: check.verb.clone(),
        api: check.api.clone(),
        resource,
        namespace: check.namespace.clone().filter(|n| !n.is_empty()),
        name: check.name.clone().filter(|n| !n.is_empty()),
    };
    let allowed = state.allows(&subject, &action);
    let reason = if allowed {
        format!("RBAC allows {} to {} it", subject.user, check.verb)
    } else {
        format!("no RBAC rule lets {} {} it", subject.user, check.verb)
    };
    Ok(json_response(StatusCode::OK, &json!({"allowed": allowed, "reason": reason}), &[]))
}
