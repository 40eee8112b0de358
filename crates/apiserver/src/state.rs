//! What every request handler shares: the scheme, the registry and one registry resource per
//! Kind, the OpenAPI documents, and the authenticators.

use std::collections::HashMap;
use std::sync::Arc;

use kayra_api::scheme::{Behaviour, KindInfo, NameRule, Scheme};
use kayra_api::validation::FieldError;
use kayra_registry::{Admission, Object, Registry, Resource, Strategy};
use serde_json::Value;

use crate::openapi::Documents;
use kayra_authn::TokenFile;

/// The shared state of the API.
pub struct ApiState {
    pub(crate) scheme: Arc<Scheme>,
    pub(crate) registry: Registry,
    resources: HashMap<(String, &'static str, &'static str), Resource>,
    pub(crate) openapi: Documents,
    pub(crate) tokens: Arc<TokenFile>,
    pub(crate) server_address: String,
    rbac: std::sync::RwLock<Arc<kayra_authz::Rbac>>,
    pub(crate) audit: Option<Arc<crate::audit::AuditLog>>,
    pub(crate) catalog: Option<Arc<kayra_catalog::Catalog>>,
}

impl ApiState {
    /// State for `scheme` over `registry`, authenticating bearer tokens against `tokens`;
    /// `server_address` is what legacy discovery advertises.
    pub fn new(
        scheme: Arc<Scheme>,
        registry: Registry,
        tokens: Arc<TokenFile>,
        server_address: String,
    ) -> ApiState {
        let resources = scheme
            .kinds()
            .iter()
            .map(|kind| ((kind.group.clone(), kind.version, kind.plural), resource(kind)))
            .collect();
        let openapi = Documents::build(&scheme);
        let rbac = std::sync::RwLock::new(Arc::new(kayra_authz::Rbac::default()));
        ApiState {
            scheme,
            registry,
            resources,
            openapi,
            tokens,
            server_address,
            rbac,
            audit: None,
            catalog: None,
        }
    }

    /// The registry resource serving a Kind.
    pub(crate) fn resource(&self, kind: &KindInfo) -> &Resource {
        self.resources
            .get(&(kind.group.clone(), kind.version, kind.plural))
            .expect("every Kind of the scheme has a resource")
    }

    /// The registry resource serving a Kind, for callers outside the HTTP surface.
    pub fn resource_for(&self, kind: &KindInfo) -> &Resource {
        self.resource(kind)
    }

    /// Serves the API catalog from `catalog`.
    pub fn with_catalog(mut self, catalog: Arc<kayra_catalog::Catalog>) -> ApiState {
        self.catalog = Some(catalog);
        self
    }

    /// The API catalog this state serves, if any.
    pub fn catalog(&self) -> Option<Arc<kayra_catalog::Catalog>> {
        self.catalog.clone()
    }

    /// Audits every mutating request to `log`.
    pub fn with_audit_log(mut self, log: crate::audit::AuditLog) -> ApiState {
        self.audit = Some(Arc::new(log));
        self
    }

    /// Replaces the RBAC index every request is decided by. Until the first one is set only
    /// `system:masters` may do anything.
    pub fn set_rbac(&self, rbac: kayra_authz::Rbac) {
        *self.rbac.write().expect("rbac lock poisoned") = Arc::new(rbac);
    }

    /// Whether `identity` may do `action`.
    pub(crate) fn allows(&self, identity: &kayra_authn::Identity, action: &kayra_authz::Action) -> bool {
        self.rbac().allows(&caller(identity), action)
    }

    /// The current RBAC index.
    pub(crate) fn rbac(&self) -> Arc<kayra_authz::Rbac> {
        self.rbac.read().expect("rbac lock poisoned").clone()
    }

    /// What `identity` may store: the standard admission chain over the current RBAC index.
    pub(crate) fn admission(&self, identity: &kayra_authn::Identity) -> Arc<dyn Admission> {
        kayra_admission::Chain::standard(self.scheme.domain(), self.rbac()).for_caller(caller(identity))
    }

    /// The identity of a bootstrap token, read from its Secret; `None` when there is none,
    /// it expired, or the secret half does not match.
    pub(crate) async fn bootstrap_token(
        &self,
        token: &kayra_authn::bootstrap::Token,
    ) -> Option<kayra_authn::Identity> {
        use kayra_api::kinds::secret::{
            BOOTSTRAP_TOKEN_NAMESPACE, BOOTSTRAP_TOKEN_TYPE, Secret, bootstrap_token_name,
        };
        let kind = self.scheme.find(&format!("fleet.{}", self.scheme.domain()), "v1", "secrets")?;
        let name = bootstrap_token_name(&token.id);
        let object =
            self.registry.get(self.resource(kind), Some(BOOTSTRAP_TOKEN_NAMESPACE), &name).await.ok()?;
        let secret: Secret = serde_json::from_value(Value::Object(object)).ok()?;
        let for_authentication = secret.text("usage-bootstrap-authentication").as_deref() == Some("true");
        if secret.type_.as_deref() != Some(BOOTSTRAP_TOKEN_TYPE) || !for_authentication {
            return None;
        }
        let expires: jiff::Timestamp = secret.text("expiration")?.parse().ok()?;
        let stored = kayra_authn::bootstrap::Stored {
            id: secret.text("token-id")?,
            secret_digest: secret.text("token-secret-sha256")?,
            expires: expires.into(),
            extra_groups: secret
                .text("auth-extra-groups")
                .unwrap_or_default()
                .split(',')
                .filter(|group| !group.is_empty())
                .map(str::to_owned)
                .collect(),
        };
        kayra_authn::bootstrap::authenticate(token, &stored, std::time::SystemTime::now())
    }

    /// The scheme.
    pub fn scheme(&self) -> &Scheme {
        &self.scheme
    }

    /// The registry.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }
}

pub(crate) fn caller(identity: &kayra_authn::Identity) -> kayra_authz::Caller {
    kayra_authz::Caller { user: identity.user.clone(), groups: identity.groups.clone() }
}

fn resource(kind: &KindInfo) -> Resource {
    Resource {
        group: kind.group.clone(),
        version: kind.version.to_owned(),
        kind: kind.kind.to_owned(),
        plural: kind.plural.to_owned(),
        namespaced: kind.namespaced,
        status_subresource: kind.has_status(),
        field_labels: kind.field_labels.to_vec(),
        strategy: Arc::new(KindStrategy {
            behaviour: kind.behaviour.clone(),
            names: kind.names,
            create_keeps_status: kind.create_keeps_status,
        }),
    }
}

/// A Kind's rules, as the registry asks for them.
struct KindStrategy {
    behaviour: Arc<dyn Behaviour>,
    names: NameRule,
    create_keeps_status: bool,
}

impl Strategy for KindStrategy {
    fn default(&self, object: &mut Object) {
        if let Ok((Value::Object(normalized), _)) = self.behaviour.normalize(&Value::Object(object.clone())) {
            *object = normalized;
        }
    }

    fn validate(&self, object: &Object, old: Option<&Object>) -> Vec<FieldError> {
        let old = old.map(|old| Value::Object(old.clone()));
        self.behaviour.validate(&Value::Object(object.clone()), old.as_ref())
    }

    fn validate_name(&self, name: &str) -> Option<String> {
        self.names.check(name)
    }

    fn create_keeps_status(&self) -> bool {
        self.create_keeps_status
    }

    fn finalizing(&self, object: &Object) -> bool {
        self.behaviour.finalizing(&Value::Object(object.clone()))
    }

    fn expires_at(&self, object: &Object) -> Option<std::time::SystemTime> {
        let expires = self.behaviour.expires_at(&Value::Object(object.clone()))?;
        Some(std::time::SystemTime::from(expires))
    }

    fn mark_deleting(&self, object: &mut Object) {
        let mut value = Value::Object(std::mem::take(object));
        self.behaviour.mark_deleting(&mut value);
        if let Value::Object(map) = value {
            *object = map;
        }
    }
}
