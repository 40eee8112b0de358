//! Writes: create, update (of the object or its `status` or `approval`), patch, server-side
//! apply, delete and delete-collection, each admitted as the caller, with `fieldValidation` applied to fields the
//! Kind does not have and invalid objects named by `Kind.group`, as Kubernetes names them.

use kayra_api::scheme::KindInfo;
use kayra_api::verb::Verb;
use kayra_registry::{
    ApplyOptions, Creation, Deleted, ListOptions, Object, Part, PatchKind, RegistryError, Resource, meta_str,
};
use serde_json::Value;

use super::{Permitted, named};
use crate::authorization::Request;
use crate::options::{Applied, DeleteRequest, FieldValidation, WriteRequest, Written};

/// What a delete-collection deleted.
#[derive(Debug, Clone, PartialEq)]
pub struct DeletedCollection {
    /// The revision the collection was listed at.
    pub resource_version: String,
    /// Each object deleted, or marked for deletion while its finalizers remain.
    pub items: Vec<Object>,
}

/// Whether a write's body is decoded as its Kind before it is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Body {
    /// Sent by a client: decoded, and its unknown fields treated as `fieldValidation` says.
    Sent,
    /// Serialised from the Kind's own shape by the control plane: nothing to find.
    Typed,
}

impl Permitted {
    /// Creates the object `body` in the request's namespace.
    pub async fn create(&self, body: Value, options: &WriteRequest) -> Result<Written, RegistryError> {
        self.create_body(body, options, Body::Sent).await
    }

    /// Replaces the object the request names — everything but its status, or, on the `status`
    /// or `approval` subresource, only that — with `body`. A `metadata.resourceVersion` in
    /// `body` must be current.
    pub async fn update(&self, body: Value, options: &WriteRequest) -> Result<Written, RegistryError> {
        self.update_body(body, options, Body::Sent).await
    }

    /// The resource a create under this permit writes, and its Kind.
    pub(crate) fn creating(&self) -> Result<(&Resource, &KindInfo), RegistryError> {
        let target = self.target(Verb::Create, None)?;
        Ok((self.stored(target)?, &target.kind))
    }

    pub(crate) async fn create_body(
        &self,
        body: Value,
        options: &WriteRequest,
        sent: Body,
    ) -> Result<Written, RegistryError> {
        let target = self.target(Verb::Create, None)?;
        options.check()?;
        let resource = self.stored(target)?;
        let warnings = decode(&target.kind, &body, sent, options.field_validation)?;
        let layer = self.layer();
        let mut write =
            layer.write_options(self.identity(), resource, Part::Main, Some(&body), options.dry_run).await;
        write.manager.name = options.manager(self.identity());
        let object = layer
            .registry()
            .create(resource, target.namespace.as_deref(), body, write)
            .await
            .map_err(|error| relabel(error, &target.kind))?;
        Ok(Written { object, warnings })
    }

    pub(crate) async fn update_body(
        &self,
        body: Value,
        options: &WriteRequest,
        sent: Body,
    ) -> Result<Written, RegistryError> {
        let part = self.written_part(Verb::Update)?;
        let target = self.target(Verb::Update, subresource(part))?;
        options.check()?;
        let (resource, name) = (self.stored(target)?, named(target)?);
        let warnings = decode(&target.kind, &body, sent, options.field_validation)?;
        let layer = self.layer();
        let mut write =
            layer.write_options(self.identity(), resource, part, Some(&body), options.dry_run).await;
        write.manager.name = options.manager(self.identity());
        let object = layer
            .registry()
            .update(resource, target.namespace.as_deref(), name, body, write)
            .await
            .map_err(|error| relabel(error, &target.kind))?;
        Ok(Written { object, warnings })
    }

    /// Applies `patch` (a merge or JSON patch) to the object the request names, or to its
    /// `status` or `approval`, and writes the result.
    pub async fn patch(
        &self,
        kind: PatchKind,
        patch: &[u8],
        options: &WriteRequest,
    ) -> Result<Written, RegistryError> {
        let part = self.written_part(Verb::Patch)?;
        let target = self.target(Verb::Patch, subresource(part))?;
        options.check_patch()?;
        let (resource, name) = (self.stored(target)?, named(target)?);
        let layer = self.layer();
        let namespace = target.namespace.as_deref();
        let warnings = match options.field_validation {
            FieldValidation::Ignore => Vec::new(),
            validation => match layer.registry().get(resource, namespace, name).await {
                Ok(current) => patched_unknown_fields(&target.kind, current, kind, patch, validation)?,
                // The patch answers for a missing object itself.
                Err(_) => Vec::new(),
            },
        };
        let mut write = layer.write_options(self.identity(), resource, part, None, options.dry_run).await;
        write.manager.name = options.manager(self.identity());
        let object = layer
            .registry()
            .patch(resource, namespace, name, kind, patch, write)
            .await
            .map_err(|error| relabel(error, &target.kind))?;
        Ok(Written { object, warnings })
    }

    /// Applies `config` (server-side apply: a patch of the object the request names, or of its
    /// status) as the request's `fieldManager`, which it must name. The object is created when
    /// it does not exist and the caller may also `create` it; an apply that would change
    /// fields other managers own is refused with each of them, unless forced.
    pub async fn apply(&self, config: Value, options: &WriteRequest) -> Result<Applied, RegistryError> {
        let part = self.written_part(Verb::Patch)?;
        let target = self.target(Verb::Patch, subresource(part))?;
        options.check_apply()?;
        let (resource, name) = (self.stored(target)?, named(target)?);
        let warnings = decode(&target.kind, &config, Body::Sent, options.field_validation)?;
        let namespace = target.namespace.as_deref();
        // Creating is a create: the caller must be allowed it beside the patch.
        let create = Request::kind(Verb::Create, target.kind.clone(), namespace, Some(name));
        let creation = match self.client().authorize(create) {
            Ok(_) => Creation::Allowed,
            Err(refusal) => Creation::Forbidden(refusal.to_string()),
        };
        let layer = self.layer();
        let mut write = layer.write_options(self.identity(), resource, part, None, options.dry_run).await;
        write.manager.name = options.manager(self.identity());
        let applied = layer
            .registry()
            .apply(resource, namespace, name, config, write, ApplyOptions { force: options.force, creation })
            .await
            .map_err(|error| relabel(error, &target.kind))?;
        Ok(Applied { object: applied.object, warnings, created: applied.created })
    }

    /// Deletes the object the request names, or marks it for deletion while finalizers remain.
    pub async fn delete(&self, options: &DeleteRequest) -> Result<Deleted, RegistryError> {
        let target = self.target(Verb::Delete, None)?;
        let (resource, name) = (self.stored(target)?, named(target)?);
        let layer = self.layer();
        let delete = layer.delete_options(self.identity(), resource, options).await;
        layer.registry().delete(resource, target.namespace.as_deref(), name, &delete).await
    }

    /// Deletes every object of the collection that `selection`'s label and field selectors
    /// match, each as [`Permitted::delete`] would (one already gone is skipped).
    pub async fn delete_collection(
        &self,
        selection: &ListOptions,
        options: &DeleteRequest,
    ) -> Result<DeletedCollection, RegistryError> {
        let target = self.target(Verb::DeleteCollection, None)?;
        let resource = self.stored(target)?;
        let layer = self.layer();
        let registry = layer.registry();
        let mut selection = ListOptions {
            label_selector: selection.label_selector.clone(),
            field_selector: selection.field_selector.clone(),
            ..ListOptions::default()
        };
        let mut listed = Vec::new();
        let resource_version = loop {
            let page = registry.list(resource, target.namespace.as_deref(), &selection).await?;
            listed.extend(page.items);
            match page.continue_token {
                Some(token) => selection.continue_token = Some(token),
                None => break page.resource_version,
            }
        };
        let delete = layer.delete_options(self.identity(), resource, options).await;
        let mut items = Vec::with_capacity(listed.len());
        for item in listed {
            let namespace = Some(meta_str(&item, "namespace")).filter(|namespace| !namespace.is_empty());
            match registry.delete(resource, namespace, meta_str(&item, "name"), &delete).await {
                Ok(Deleted::Gone(object) | Deleted::Pending(object)) => items.push(object),
                Err(RegistryError::NotFound { .. }) => {}
                Err(error) => return Err(error),
            }
        }
        Ok(DeletedCollection { resource_version, items })
    }

    /// The part of the object an update or patch of this request writes.
    fn written_part(&self, verb: Verb) -> Result<Part, RegistryError> {
        let subresource = self.kind_target().and_then(|target| target.subresource.as_deref());
        match subresource {
            None => Ok(Part::Main),
            Some("status") => Ok(Part::Status),
            Some("approval") => Ok(Part::Approval),
            Some(other) => Err(self.misused(verb, Some(other))),
        }
    }
}

/// The subresource a part is written through.
fn subresource(part: Part) -> Option<&'static str> {
    match part {
        Part::Main => None,
        Part::Status => Some("status"),
        Part::Approval => Some("approval"),
        Part::Binding => Some("binding"),
        Part::Door(door) => Some(door),
    }
}

/// Decodes a sent `object` as its Kind (a value of the wrong type is refused, whatever
/// `validation` says) and answers its fields the Kind does not have as `validation` treats them:
/// an error naming every one (`Strict`), a warning each (`Warn`), or nothing (`Ignore`).
fn decode(
    kind: &KindInfo,
    object: &Value,
    sent: Body,
    validation: FieldValidation,
) -> Result<Vec<String>, RegistryError> {
    if sent == Body::Typed {
        return Ok(Vec::new());
    }
    if !object.is_object() {
        return Err(cannot_handle(kind, "the body is not a JSON object"));
    }
    let unknown = kind.behaviour.unknown_fields(object).map_err(|error| cannot_handle(kind, &error))?;
    treat_unknown(kind, &unknown, validation)
}

/// The fields a patch would add that the Kind does not have: the patch applied to `current`,
/// then its unknown fields, as `validation` treats them. A patch that does not apply warns of
/// nothing (the write itself refuses it).
fn patched_unknown_fields(
    kind: &KindInfo,
    current: Object,
    patch_kind: PatchKind,
    patch: &[u8],
    validation: FieldValidation,
) -> Result<Vec<String>, RegistryError> {
    let mut document = Value::Object(current);
    let applied = match patch_kind {
        PatchKind::Merge => serde_json::from_slice::<Value>(patch)
            .map(|patch| json_patch::merge(&mut document, &patch))
            .is_ok(),
        PatchKind::Json => serde_json::from_slice::<json_patch::Patch>(patch)
            .ok()
            .is_some_and(|patch| json_patch::patch(&mut document, &patch).is_ok()),
    };
    if !applied {
        return Ok(Vec::new());
    }
    match kind.behaviour.normalize(&document) {
        Ok((_, unknown)) => treat_unknown(kind, &unknown, validation),
        Err(_) => Ok(Vec::new()),
    }
}

fn treat_unknown(
    kind: &KindInfo,
    unknown: &[String],
    validation: FieldValidation,
) -> Result<Vec<String>, RegistryError> {
    let described = || unknown.iter().map(|field| format!("unknown field \"{field}\"")).collect::<Vec<_>>();
    match validation {
        FieldValidation::Ignore => Ok(Vec::new()),
        _ if unknown.is_empty() => Ok(Vec::new()),
        FieldValidation::Strict => {
            Err(cannot_handle(kind, &format!("strict decoding error: {}", described().join(", "))))
        }
        FieldValidation::Warn => Ok(described()),
    }
}

/// A body that does not decode as its Kind, worded as Kubernetes words it.
pub fn cannot_handle(kind: &KindInfo, error: &str) -> RegistryError {
    RegistryError::BadRequest(format!(
        "{} in version \"{}\" cannot be handled as a {}: {error}",
        kind.kind, kind.version, kind.kind
    ))
}

/// An invalid object named by `Kind.group`, as Kubernetes names it.
pub(crate) fn relabel(error: RegistryError, kind: &KindInfo) -> RegistryError {
    match error {
        RegistryError::Invalid { kind: named, name, causes } if !kind.group.is_empty() => {
            RegistryError::Invalid { kind: format!("{named}.{}", kind.group), name, causes }
        }
        other => other,
    }
}
