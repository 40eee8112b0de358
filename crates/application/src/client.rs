//! The client: how every caller acts on the application layer, as one identity. It
//! [`authorize`](Client::authorize)s a request and answers what the caller may then do (a
//! [`Permitted`]); its typed conveniences, for loops and the node session, authorize and act in
//! one call, through the same operations an HTTP request of that identity reaches.

use std::sync::Arc;

use kayra_api::scheme::KindInfo;
use kayra_api::verb::Verb;
use kayra_authn::Identity;
use kayra_registry::{
    Deleted, List, ListOptions, Object, Part, PatchKind, RegistryError, Resource, WatchOptions, WatchStream,
};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::ApplicationLayer;
use crate::authorization::Request;
use crate::options::{DeleteRequest, FieldValidation, WriteRequest};
use crate::permitted::Permitted;
use crate::permitted::read::Watch;
use crate::permitted::write::{Body, relabel};

/// A client of the application layer acting as one identity. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Client {
    layer: Arc<ApplicationLayer>,
    /// Shared by every permit the client answers, so that one costs no copy of it.
    identity: Arc<Identity>,
}

/// What the conveniences ask of a write: the control plane writes its Kinds' own shapes, so
/// there are no unknown fields to look for.
/// They name no manager: each write is recorded as the one the client's identity stands for.
const TYPED: WriteRequest = WriteRequest {
    dry_run: false,
    field_validation: FieldValidation::Ignore,
    field_manager: None,
    user_agent: None,
    force: false,
};

impl Client {
    pub(crate) fn new(layer: Arc<ApplicationLayer>, identity: Identity) -> Client {
        Client { layer, identity: Arc::new(identity) }
    }

    /// Who this client acts as.
    pub fn identity(&self) -> &Identity {
        &self.identity
    }

    /// The layer this client acts on.
    pub fn layer(&self) -> &Arc<ApplicationLayer> {
        &self.layer
    }

    /// Decides `request` for this client's identity: what it may then do, or `Forbidden`
    /// naming what was refused.
    pub fn authorize(&self, request: Request) -> Result<Permitted, RegistryError> {
        let request = request.decided();
        let scope = self.layer.authorize(&self.identity, &request)?;
        Ok(Permitted::new(self.clone(), request, scope))
    }

    /// The resource `plural` of `group` (empty for core), or `BadRequest`.
    pub fn resource(&self, group: &str, plural: &str) -> Result<Resource, RegistryError> {
        self.layer.resource_named(group, plural).cloned().ok_or_else(|| {
            RegistryError::BadRequest(format!("the server does not serve {plural} in group {group:?}"))
        })
    }

    /// A request of `verb` on `resource`'s objects.
    fn request(
        &self,
        verb: Verb,
        resource: &Resource,
        namespace: Option<&str>,
        name: Option<&str>,
    ) -> Result<Request, RegistryError> {
        Ok(Request::kind(verb, self.kind(resource)?, namespace, name))
    }

    fn kind(&self, resource: &Resource) -> Result<KindInfo, RegistryError> {
        self.layer.scheme().find(&resource.group, &resource.version, &resource.plural).cloned().ok_or_else(
            || {
                RegistryError::BadRequest(format!(
                    "the server does not serve {} in group {:?}",
                    resource.plural, resource.group
                ))
            },
        )
    }

    /// One object.
    pub async fn get(
        &self,
        resource: &Resource,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Object, RegistryError> {
        self.authorize(self.request(Verb::Get, resource, namespace, Some(name))?)?.get(None).await
    }

    /// One object, decoded into its Kind.
    pub async fn get_as<T: DeserializeOwned>(
        &self,
        resource: &Resource,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<T, RegistryError> {
        decode(self.get(resource, namespace, name).await?)
    }

    /// One page of a list.
    pub async fn list(
        &self,
        resource: &Resource,
        namespace: Option<&str>,
        options: &ListOptions,
    ) -> Result<List, RegistryError> {
        let request = self.request(Verb::List, resource, namespace, None)?;
        self.authorize(request.field_selector(options.field_selector.as_deref()))?.list(options).await
    }

    /// Every object, page after page.
    pub async fn list_all(
        &self,
        resource: &Resource,
        namespace: Option<&str>,
    ) -> Result<Vec<Object>, RegistryError> {
        Ok(self.list_all_with_revision(resource, namespace).await?.1)
    }

    /// Every object, page after page, with the revision the first page was read at (the later
    /// pages read at it too): where a watch that follows the list starts.
    pub async fn list_all_with_revision(
        &self,
        resource: &Resource,
        namespace: Option<&str>,
    ) -> Result<(u64, Vec<Object>), RegistryError> {
        self.authorize(self.request(Verb::List, resource, namespace, None)?)?.list_all().await
    }

    /// Every object as it is now, with the revision it was read at, for a follower that keeps
    /// them: each shared with the watch cache when the cache can answer, not copied.
    pub async fn list_shared_with_revision(
        &self,
        resource: &Resource,
        namespace: Option<&str>,
    ) -> Result<(u64, Vec<Arc<Object>>), RegistryError> {
        self.authorize(self.request(Verb::List, resource, namespace, None)?)?.list_shared().await
    }

    /// Every object, decoded into its Kind.
    pub async fn list_as<T: DeserializeOwned>(
        &self,
        resource: &Resource,
        namespace: Option<&str>,
    ) -> Result<Vec<T>, RegistryError> {
        self.list_all(resource, namespace).await?.into_iter().map(decode).collect()
    }

    /// Changes, as a watch of the REST API would deliver them.
    pub async fn watch(
        &self,
        resource: &Resource,
        options: &WatchOptions,
    ) -> Result<WatchStream, RegistryError> {
        let request = self.request(Verb::Watch, resource, options.namespace.as_deref(), None)?;
        let permitted = self.authorize(request.field_selector(options.field_selector.as_deref()))?;
        match permitted.watch(options).await? {
            Watch::Objects(stream) => Ok(stream),
            Watch::View { .. } => Err(RegistryError::BadRequest(format!(
                "{} are a view; watch what they view instead",
                resource.plural
            ))),
        }
    }

    /// Creates an object in `namespace`.
    pub async fn create(
        &self,
        resource: &Resource,
        namespace: Option<&str>,
        object: impl Serialize,
    ) -> Result<Object, RegistryError> {
        let permitted = self.authorize(self.request(Verb::Create, resource, namespace, None)?)?;
        Ok(permitted.create_body(encode(object)?, &TYPED, Body::Typed).await?.object)
    }

    /// Creates each of `objects` (a namespace and an object), as [`Client::create`] would
    /// each, and answers each in the order given. Those this identity may create, and that are
    /// admitted and valid, reach the store together, each still a create of its own
    /// ([`Registry::create_all`](kayra_registry::Registry::create_all)): for a loop that has
    /// several objects to write at once, such as the Events of one tick.
    pub async fn create_all(
        &self,
        resource: &Resource,
        objects: Vec<(Option<String>, Value)>,
    ) -> Vec<Result<Object, RegistryError>> {
        let mut answers: Vec<Option<Result<Object, RegistryError>>> = objects.iter().map(|_| None).collect();
        let mut permitted = Vec::with_capacity(objects.len());
        let mut writes = None;
        for (i, (namespace, object)) in objects.into_iter().enumerate() {
            let request = self.request(Verb::Create, resource, namespace.as_deref(), None);
            let permit = request.and_then(|request| self.authorize(request));
            match permit.and_then(|permit| permit.creating().map(|(r, kind)| (r.clone(), kind.clone()))) {
                Ok(stored) => {
                    writes.get_or_insert(stored);
                    permitted.push((i, namespace, object));
                }
                Err(refused) => answers[i] = Some(Err(refused)),
            }
        }
        if let Some((stored, kind)) = writes {
            for (_, _, object) in &permitted {
                self.layer.placement_current(&stored, Part::Main, Some(object)).await;
            }
            let options = self.layer.admitted(&self.identity, Part::Main, false);
            let (places, objects): (Vec<usize>, Vec<(Option<String>, Value)>) =
                permitted.into_iter().map(|(i, namespace, object)| (i, (namespace, object))).unzip();
            let written = self.layer.registry().create_all(&stored, objects, options).await;
            for (i, answer) in places.into_iter().zip(written) {
                answers[i] = Some(answer.map_err(|error| relabel(error, &kind)));
            }
        }
        answers.into_iter().map(|answer| answer.expect("every object is answered")).collect()
    }

    /// Replaces an object (everything but its status); `metadata.resourceVersion`, when set,
    /// must be current.
    pub async fn update(
        &self,
        resource: &Resource,
        namespace: Option<&str>,
        name: &str,
        object: impl Serialize,
    ) -> Result<Object, RegistryError> {
        self.replace(resource, namespace, name, None, object).await
    }

    /// Replaces an object's status through its `status` subresource.
    pub async fn update_status(
        &self,
        resource: &Resource,
        namespace: Option<&str>,
        name: &str,
        object: impl Serialize,
    ) -> Result<Object, RegistryError> {
        self.replace(resource, namespace, name, Some("status"), object).await
    }

    /// Replaces a certificate request's decision through its `approval` subresource: only
    /// `status.conditions` is taken from `object`.
    pub async fn update_approval(
        &self,
        resource: &Resource,
        name: &str,
        object: impl Serialize,
    ) -> Result<Object, RegistryError> {
        self.replace(resource, None, name, Some("approval"), object).await
    }

    /// Replaces an object, or the part of it `subresource` writes, authorized as `update` of
    /// that subresource.
    async fn replace(
        &self,
        resource: &Resource,
        namespace: Option<&str>,
        name: &str,
        subresource: Option<&str>,
        object: impl Serialize,
    ) -> Result<Object, RegistryError> {
        let mut request = self.request(Verb::Update, resource, namespace, Some(name))?;
        if let Some(subresource) = subresource {
            request = request.subresource(subresource);
        }
        Ok(self.authorize(request)?.update_body(encode(object)?, &TYPED, Body::Typed).await?.object)
    }

    /// Binds an Application to a Node through its `binding` subresource (authorized as
    /// `create` of `applications/binding`): `nodeName`, the Binding's annotations and
    /// condition `Scheduled=True` in one write; answers the bound Application.
    pub async fn bind(&self, namespace: &str, name: &str, binding: &Value) -> Result<Object, RegistryError> {
        let applications =
            self.resource(&format!("fleet.{}", self.layer.scheme().domain()), "applications")?;
        let request =
            self.request(Verb::Create, &applications, Some(namespace), Some(name))?.subresource("binding");
        self.authorize(request)?.bind(binding, false).await
    }

    /// Moves a scheduler-placed Application off its node, at `resource_version`: its binding
    /// and the scheduler's mark cleared in one binding write, which leaves `generation` as it
    /// was (authorized as `patch` of `applications`, admitted as a write of the object);
    /// answers the unbound Application.
    pub async fn unbind(
        &self,
        namespace: &str,
        name: &str,
        resource_version: &str,
    ) -> Result<Object, RegistryError> {
        let applications =
            self.resource(&format!("fleet.{}", self.layer.scheme().domain()), "applications")?;
        let request = self.request(Verb::Patch, &applications, Some(namespace), Some(name))?;
        self.authorize(request)?.unbind(resource_version).await
    }

    /// Freezes (`frozen`) or thaws an object through its `freeze` or `thaw` door (authorized
    /// as `create` of `<resource>/freeze`); answers the object written.
    pub async fn set_frozen(
        &self,
        resource: &Resource,
        namespace: Option<&str>,
        name: &str,
        frozen: bool,
    ) -> Result<Object, RegistryError> {
        let door = if frozen { "freeze" } else { "thaw" };
        let request = self.request(Verb::Create, resource, namespace, Some(name))?.subresource(door);
        let permitted = self.authorize(request)?;
        if frozen { permitted.freeze(false).await } else { permitted.thaw(false).await }
    }

    /// Patches an object.
    pub async fn patch(
        &self,
        resource: &Resource,
        namespace: Option<&str>,
        name: &str,
        kind: PatchKind,
        patch: &Value,
    ) -> Result<Object, RegistryError> {
        let permitted = self.authorize(self.request(Verb::Patch, resource, namespace, Some(name))?)?;
        let bytes = serde_json::to_vec(patch).expect("JSON values serialise");
        Ok(permitted.patch(kind, &bytes, &TYPED).await?.object)
    }

    /// Deletes an object.
    pub async fn delete(
        &self,
        resource: &Resource,
        namespace: Option<&str>,
        name: &str,
        options: &DeleteRequest,
    ) -> Result<Deleted, RegistryError> {
        self.authorize(self.request(Verb::Delete, resource, namespace, Some(name))?)?.delete(options).await
    }
}

/// The object a loop writes, as JSON. Its `metadata.managedFields` are left out: a loop writes
/// back what it read, maybe some versions ago, and the managers are what the store holds now
/// (they are the server's to keep; a request that sends them would replace them).
fn encode(object: impl Serialize) -> Result<Value, RegistryError> {
    let mut object = serde_json::to_value(object)
        .map_err(|error| RegistryError::BadRequest(format!("the object does not encode: {error}")))?;
    if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        metadata.remove("managedFields");
    }
    Ok(object)
}

fn decode<T: DeserializeOwned>(object: Object) -> Result<T, RegistryError> {
    serde_json::from_value(Value::Object(object)).map_err(|error| {
        RegistryError::BadRequest(format!("a stored object does not decode into its Kind: {error}"))
    })
}

#[cfg(test)]
mod tests;
