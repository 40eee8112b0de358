//! The `token` subresource of an Application (and of the Pod that views it): a
//! `authentication.k8s.io/v1` TokenRequest minting a service-account token for it, what an
//! operator asks to see what a workload would present. The answer is the TokenRequest with
//! `status.token` and `status.expirationTimestamp`; the token is never logged or stored.

use kayra_api::validation::FieldError;
use kayra_api::verb::Verb;
use kayra_registry::RegistryError;
use serde_json::{Value, json};

use super::{Permitted, named, not_found_as};

/// The field naming the audiences.
const AUDIENCES: &str = "spec.audiences";

impl Permitted {
    /// Mints a token for the Application the request names as `request` (a TokenRequest)
    /// asks: for `spec.audiences` (the API's when empty), living `spec.expirationSeconds`
    /// (600 to 172800, one hour when absent). A token is always bound to the Application
    /// itself, so a `spec.boundObjectRef` is refused.
    pub async fn token_request(&self, request: &Value) -> Result<Value, RegistryError> {
        let target = self.target(Verb::Create, Some("token"))?;
        let (namespace, name) = (target.namespace.as_deref().unwrap_or_default(), named(target)?);
        let invalid = |field: &str, value: &dyn std::fmt::Display, why: &str| RegistryError::Invalid {
            kind: "TokenRequest".to_owned(),
            name: name.to_owned(),
            causes: vec![FieldError::invalid(field, value, why)],
        };
        if !request.is_object() {
            return Err(RegistryError::BadRequest(
                "the body is not a TokenRequest: not a JSON object".to_owned(),
            ));
        }
        if let Some(kind) = request.get("kind").and_then(Value::as_str)
            && kind != "TokenRequest"
        {
            return Err(RegistryError::BadRequest(format!("the body is a {kind}, not a TokenRequest")));
        }
        let spec = request.get("spec").cloned().unwrap_or_else(|| json!({}));
        if spec.get("boundObjectRef").is_some_and(|bound| !bound.is_null()) {
            return Err(invalid(
                "spec.boundObjectRef",
                &"{...}",
                "a token is always bound to the Application it is requested for",
            ));
        }
        let audiences = match spec.get("audiences") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(items)) => items
                .iter()
                .enumerate()
                .map(|(at, item)| {
                    item.as_str()
                        .map(str::to_owned)
                        .ok_or_else(|| invalid(&format!("{AUDIENCES}[{at}]"), item, "must be a string"))
                })
                .collect::<Result<_, _>>()?,
            Some(other) => return Err(invalid(AUDIENCES, other, "must be a list of strings")),
        };
        let expiration = match spec.get("expirationSeconds") {
            None | Some(Value::Null) => None,
            Some(seconds) => Some(
                seconds
                    .as_i64()
                    .ok_or_else(|| invalid("spec.expirationSeconds", seconds, "must be an integer"))?,
            ),
        };
        let layer = self.layer();
        let applications = layer
            .resource_named(&format!("fleet.{}", layer.scheme().domain()), "applications")
            .expect("the scheme serves Applications");
        let application = layer
            .registry()
            .get(applications, Some(namespace), name)
            .await
            .map_err(|error| not_found_as(target, name, error))?;
        let application = Value::Object(application);
        let minted =
            layer.mint_token(&application, &audiences, expiration).await.map_err(|error| match error {
                RegistryError::Invalid { kind, causes, .. } => {
                    RegistryError::Invalid { kind, name: name.to_owned(), causes }
                }
                other => other,
            })?;
        let claims_audiences = if audiences.is_empty() {
            layer.issuer_url().map(|url| vec![url.to_owned()]).unwrap_or_default()
        } else {
            audiences
        };
        let expires = jiff::Timestamp::from_second(minted.expires_at)
            .map(|at| at.strftime("%Y-%m-%dT%H:%M:%SZ").to_string())
            .unwrap_or_default();
        Ok(json!({
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "creationTimestamp": jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string(),
            },
            "spec": {
                "audiences": claims_audiences,
                "expirationSeconds": kayra_oidc::token::expiration(expiration).unwrap_or_default(),
            },
            "status": {"token": minted.token, "expirationTimestamp": expires},
        }))
    }
}
