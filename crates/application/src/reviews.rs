//! Questions about authorization, answered at once and never stored: a caller's reviews of
//! itself (`SelfSubjectAccessReview` for `kubectl auth can-i`, `SelfSubjectRulesReview` for
//! `can-i --list`, `SelfSubjectReview` for `kubectl auth whoami`), and the RBAC decision an app
//! asks for about a request to its own API (`POST /apis/authorization.<domain>/v1/check`).
//!
//! `check` decides for the caller itself; or for the end user whose bearer token the app
//! forwards (authenticated by the caller's adapter); or for an explicit `user` and `groups`,
//! which only a caller that may create `subjectaccessreviews.authorization.k8s.io` (ask about
//! others, as in Kubernetes) may name.

use kayra_api::kinds::check::Check;
use kayra_api::verb::Verb;
use kayra_authn::Identity;
use kayra_authz::Action;
use kayra_registry::RegistryError;
use serde_json::{Value, json};

use crate::authorization::Target;
use crate::caller;
use crate::permitted::Permitted;
use crate::permitted::write::cannot_handle;

impl Permitted {
    /// Answers the review `object` (a `SelfSubjectAccessReview`, `SelfSubjectRulesReview` or
    /// `SelfSubjectReview` from the caller about itself, or a `TokenReview` of a
    /// service-account token): the object with its `status`.
    pub async fn review(&self, mut object: Value) -> Result<Value, RegistryError> {
        let target = self.target(Verb::Create, None)?;
        if !target.kind.review {
            return Err(self.misused(Verb::Create, None));
        }
        if !object.is_object() {
            return Err(cannot_handle(&target.kind, "the body is not a JSON object"));
        }
        target.kind.behaviour.unknown_fields(&object).map_err(|error| cannot_handle(&target.kind, &error))?;
        object["metadata"] =
            json!({"creationTimestamp": jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string()});
        let identity = self.identity();
        let text = |value: &Value, field: &str| {
            value.get(field).and_then(Value::as_str).unwrap_or_default().to_owned()
        };
        let layer = self.layer();
        if target.kind.kind == "TokenReview" {
            let token = object.pointer("/spec/token").and_then(Value::as_str).unwrap_or_default().to_owned();
            if token.is_empty() {
                return Err(RegistryError::Invalid {
                    kind: "TokenReview".to_owned(),
                    name: String::new(),
                    causes: vec![kayra_api::validation::FieldError::required("spec.token")],
                });
            }
            let audiences: Vec<String> = object
                .pointer("/spec/audiences")
                .and_then(Value::as_array)
                .map(|items| items.iter().filter_map(Value::as_str).map(str::to_owned).collect())
                .unwrap_or_default();
            object["status"] = layer.token_review_status(&token, &audiences).await;
            // The answer does not carry the token back.
            if let Some(spec) = object.get_mut("spec").and_then(Value::as_object_mut) {
                spec.remove("token");
            }
            return Ok(object);
        }
        object["status"] = match target.kind.kind {
            "SelfSubjectAccessReview" => {
                let spec = object.get("spec").cloned().unwrap_or_else(|| json!({}));
                let action = match (spec.get("resourceAttributes"), spec.get("nonResourceAttributes")) {
                    (Some(attributes), _) => {
                        let resource = match text(attributes, "subresource").as_str() {
                            "" => text(attributes, "resource"),
                            sub => format!("{}/{sub}", text(attributes, "resource")),
                        };
                        let optional = |field: &str| Some(text(attributes, field)).filter(|v| !v.is_empty());
                        Action::Resource {
                            verb: text(attributes, "verb"),
                            api: text(attributes, "group"),
                            resource,
                            namespace: optional("namespace"),
                            name: optional("name"),
                        }
                    }
                    (None, Some(attributes)) => {
                        Action::NonResource { verb: text(attributes, "verb"), path: text(attributes, "path") }
                    }
                    (None, None) => {
                        return Err(RegistryError::BadRequest(
                            "spec.resourceAttributes or spec.nonResourceAttributes is required".to_owned(),
                        ));
                    }
                };
                // As Kubernetes answers: a grant says what allowed it; a plain denial (no rule
                // allows it) has no reason, so that `kubectl auth can-i` prints a bare `no`.
                if layer.allows(identity, &action) {
                    json!({"allowed": true, "reason": "allowed by RBAC"})
                } else {
                    json!({"allowed": false})
                }
            }
            "SelfSubjectRulesReview" => {
                let namespace =
                    object.pointer("/spec/namespace").and_then(Value::as_str).filter(|n| !n.is_empty());
                let rules = layer.rbac().rules_for(&caller(identity), namespace);
                let resource_rules: Vec<Value> = rules
                    .iter()
                    .filter(|rule| !rule.resources.is_empty())
                    .map(|rule| {
                        json!({"verbs": rule.verbs, "apiGroups": rule.apis, "resources": rule.resources, "resourceNames": rule.resource_names})
                    })
                    .collect();
                let non_resource_rules: Vec<Value> = rules
                    .iter()
                    .filter(|rule| !rule.non_resource_urls.is_empty())
                    .map(|rule| json!({"verbs": rule.verbs, "nonResourceURLs": rule.non_resource_urls}))
                    .collect();
                json!({"resourceRules": resource_rules, "nonResourceRules": non_resource_rules, "incomplete": false})
            }
            _ => {
                json!({"userInfo": {"username": identity.user, "uid": identity.uid, "groups": identity.groups}})
            }
        };
        Ok(object)
    }

    /// Answers `/check`: whether RBAC lets its subject make the request `check` describes.
    /// `forwarded` is the identity `check.token` authenticates as, when it names a token and
    /// the token authenticates.
    pub fn check(&self, check: &Check, forwarded: Option<Identity>) -> Result<Value, RegistryError> {
        if self.request().verb != Verb::Create || !matches!(self.request().target, Target::Check) {
            return Err(RegistryError::Forbidden("the request was not authorized to check".to_owned()));
        }
        for (field, value) in [("resource", &check.resource), ("verb", &check.verb)] {
            if value.is_empty() {
                return Err(RegistryError::BadRequest(format!("{field} is required")));
            }
        }
        let caller = self.identity();
        let layer = self.layer();
        let subject = match (&check.token, &check.user) {
            (Some(_), Some(_)) => {
                return Err(RegistryError::BadRequest("name a token or a user, not both".to_owned()));
            }
            (Some(_), None) => match forwarded {
                Some(identity) => identity,
                None => return Ok(json!({"allowed": false, "reason": "the token does not authenticate"})),
            },
            (None, Some(user)) => {
                let on_behalf = Action::Resource {
                    verb: Verb::Create.as_str().to_owned(),
                    api: "authorization.k8s.io".to_owned(),
                    resource: "subjectaccessreviews".to_owned(),
                    namespace: None,
                    name: None,
                };
                if !layer.allows(caller, &on_behalf) {
                    return Err(RegistryError::Forbidden(format!(
                        "User \"{}\" may not check on others' behalf: that needs create on subjectaccessreviews.authorization.k8s.io",
                        caller.user
                    )));
                }
                Identity::new(user.clone(), String::new(), check.groups.clone())
            }
            (None, None) if !check.groups.is_empty() => {
                return Err(RegistryError::BadRequest("groups need a user".to_owned()));
            }
            (None, None) => caller.clone(),
        };
        let resource = match &check.subresource {
            Some(sub) if !sub.is_empty() => format!("{}/{sub}", check.resource),
            _ => check.resource.clone(),
        };
        let action = Action::Resource {
            verb: check.verb.clone(),
            api: check.api.clone(),
            resource,
            namespace: check.namespace.clone().filter(|n| !n.is_empty()),
            name: check.name.clone().filter(|n| !n.is_empty()),
        };
        let allowed = layer.allows(&subject, &action);
        let reason = if allowed {
            format!("RBAC allows {} to {} it", subject.user, check.verb)
        } else {
            format!("no RBAC rule lets {} {} it", subject.user, check.verb)
        };
        Ok(json!({"allowed": allowed, "reason": reason}))
    }
}
