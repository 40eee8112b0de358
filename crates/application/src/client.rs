//! The in-process client: how loops and the node session read and write, under an explicit
//! identity, through the same authorization and admission as an HTTP request, without HTTP.

use std::sync::Arc;

use kayra_authn::Identity;
use kayra_authz::Action;
use kayra_registry::{
    Admit, DeleteOptions, Deleted, List, ListOptions, Object, Part, PatchKind, RegistryError, Resource,
    WatchOptions, WatchStream, WriteOptions,
};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::ApplicationLayer;

/// A client of the application layer acting as one identity. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Client {
    control: Arc<ApplicationLayer>,
    identity: Identity,
}

impl Client {
    pub(crate) fn new(control: Arc<ApplicationLayer>, identity: Identity) -> Client {
        Client { control, identity }
    }

    /// Who this client acts as.
    pub fn identity(&self) -> &Identity {
        &self.identity
    }

    /// The layer this client acts on.
    pub fn control(&self) -> &Arc<ApplicationLayer> {
        &self.control
    }

    /// The resource `plural` of `group` (empty for core), or `NotFound`.
    pub fn resource(&self, group: &str, plural: &str) -> Result<Resource, RegistryError> {
        self.control.resource_named(group, plural).cloned().ok_or_else(|| {
            RegistryError::BadRequest(format!("the server does not serve {plural} in group {group:?}"))
        })
    }

    fn authorize(
        &self,
        verb: &str,
        resource: &Resource,
        subresource: Option<&str>,
        namespace: Option<&str>,
        name: Option<&str>,
    ) -> Result<(), RegistryError> {
        let plural = match subresource {
            Some(subresource) => format!("{}/{subresource}", resource.plural),
            None => resource.plural.clone(),
        };
        let action = Action::Resource {
            verb: verb.to_owned(),
            api: resource.group.clone(),
            resource: plural,
            namespace: namespace.filter(|_| resource.namespaced).map(str::to_owned),
            name: name.map(str::to_owned),
        };
        if self.control.allows(&self.identity, &action) {
            return Ok(());
        }
        Err(RegistryError::Forbidden(action.refusal(&self.identity.user)))
    }

    async fn write_options(&self, resource: &Resource, part: Part, object: Option<&Value>) -> WriteOptions {
        self.control.placement_current(resource, part, object).await;
        WriteOptions { dry_run: false, part, admit: Admit::by(self.control.admission(&self.identity)) }
    }

    /// One object.
    pub async fn get(
        &self,
        resource: &Resource,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Object, RegistryError> {
        self.authorize("get", resource, None, namespace, Some(name))?;
        self.control.registry().get(resource, namespace, name).await
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
        self.authorize("list", resource, None, namespace, None)?;
        self.control.registry().list(resource, namespace, options).await
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
        let (mut revision, mut objects) = (None, Vec::new());
        let mut options = ListOptions { limit: Some(500), ..ListOptions::default() };
        loop {
            let page = self.list(resource, namespace, &options).await?;
            revision.get_or_insert_with(|| page.resource_version.parse().unwrap_or_default());
            objects.extend(page.items);
            match page.continue_token {
                Some(token) => options.continue_token = Some(token),
                None => return Ok((revision.unwrap_or_default(), objects)),
            }
        }
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
        self.authorize("watch", resource, None, options.namespace.as_deref(), None)?;
        self.control.registry().watch(resource, options).await
    }

    /// Creates an object in `namespace`.
    pub async fn create(
        &self,
        resource: &Resource,
        namespace: Option<&str>,
        object: impl Serialize,
    ) -> Result<Object, RegistryError> {
        self.authorize("create", resource, None, namespace, None)?;
        let body = encode(object)?;
        let options = self.write_options(resource, Part::Main, Some(&body)).await;
        self.control.registry().create(resource, namespace, body, options).await
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
        self.replace(resource, namespace, name, Part::Main, object).await
    }

    /// Replaces an object's status through its `status` subresource.
    pub async fn update_status(
        &self,
        resource: &Resource,
        namespace: Option<&str>,
        name: &str,
        object: impl Serialize,
    ) -> Result<Object, RegistryError> {
        self.replace(resource, namespace, name, Part::Status, object).await
    }

    /// Replaces a certificate request's decision through its `approval` subresource: only
    /// `status.conditions` is taken from `object`.
    pub async fn update_approval(
        &self,
        resource: &Resource,
        name: &str,
        object: impl Serialize,
    ) -> Result<Object, RegistryError> {
        self.replace(resource, None, name, Part::Approval, object).await
    }

    /// Replaces `part` of an object, authorized as `update` of that part.
    async fn replace(
        &self,
        resource: &Resource,
        namespace: Option<&str>,
        name: &str,
        part: Part,
        object: impl Serialize,
    ) -> Result<Object, RegistryError> {
        let subresource = match part {
            Part::Main => None,
            Part::Status => Some("status"),
            Part::Approval => Some("approval"),
            Part::Binding => Some("binding"),
        };
        self.authorize("update", resource, subresource, namespace, Some(name))?;
        let body = encode(object)?;
        let options = self.write_options(resource, part, Some(&body)).await;
        self.control.registry().update(resource, namespace, name, body, options).await
    }

    /// Binds an Application to a Node through its `binding` subresource (authorized as
    /// `create` of `applications/binding`): `nodeName`, the Binding's annotations and
    /// condition `Scheduled=True` in one write; answers the bound Application.
    pub async fn bind(&self, namespace: &str, name: &str, binding: &Value) -> Result<Object, RegistryError> {
        let applications =
            self.resource(&format!("fleet.{}", self.control.scheme().domain()), "applications")?;
        self.authorize("create", &applications, Some("binding"), Some(namespace), Some(name))?;
        crate::binding::bind(&self.control, &self.identity, namespace, name, binding, false).await
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
            self.resource(&format!("fleet.{}", self.control.scheme().domain()), "applications")?;
        self.authorize("patch", &applications, None, Some(namespace), Some(name))?;
        crate::binding::unbind(&self.control, &self.identity, namespace, name, resource_version).await
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
        self.authorize("patch", resource, None, namespace, Some(name))?;
        let bytes = serde_json::to_vec(patch).expect("JSON values serialise");
        self.control
            .registry()
            .patch(
                resource,
                namespace,
                name,
                kind,
                &bytes,
                self.write_options(resource, Part::Main, None).await,
            )
            .await
    }

    /// Options of a delete by this client, without preconditions or policy: admitted as this
    /// client's identity.
    pub fn delete_options(&self) -> DeleteOptions {
        DeleteOptions::new(Admit::by(self.control.admission(&self.identity)))
    }

    /// Deletes an object.
    pub async fn delete(
        &self,
        resource: &Resource,
        namespace: Option<&str>,
        name: &str,
        options: &DeleteOptions,
    ) -> Result<Deleted, RegistryError> {
        self.authorize("delete", resource, None, namespace, Some(name))?;
        self.control.references_current(resource).await;
        let options =
            DeleteOptions { admit: Admit::by(self.control.admission(&self.identity)), ..options.clone() };
        self.control.registry().delete(resource, namespace, name, &options).await
    }
}

fn encode(object: impl Serialize) -> Result<Value, RegistryError> {
    serde_json::to_value(object)
        .map_err(|error| RegistryError::BadRequest(format!("the object does not encode: {error}")))
}

fn decode<T: DeserializeOwned>(object: Object) -> Result<T, RegistryError> {
    serde_json::from_value(Value::Object(object)).map_err(|error| {
        RegistryError::BadRequest(format!("a stored object does not decode into its Kind: {error}"))
    })
}

#[cfg(test)]
mod tests;
