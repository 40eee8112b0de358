//! An object's history and its rollback: `GET .../<resource>/<name>/history` (authorized as
//! `get` on `<resource>/history`) lists the spec states the registry keeps of it as Revisions,
//! and `POST .../<resource>/<name>/rollback` (authorized as `create` on `<resource>/rollback`
//! *and* `update` on the object, since it is one) writes one of them again, admitted as the
//! caller's update of the object would be.

use kayra_api::kinds::revision::{REVISION_KIND, RollbackRequest};
use kayra_api::verb::Verb;
use kayra_registry::{HistoryEntry, Object, Part, RegistryError, meta_str};
use serde_json::{Value, json};

use super::{Permitted, named, not_found_as};
use crate::authorization::Request;

/// An object's history, oldest first, as Revisions.
#[derive(Debug, Clone, PartialEq)]
pub struct Revisions {
    /// The object's resourceVersion when its history was read.
    pub resource_version: String,
    /// One `Revision` per spec state kept, oldest first.
    pub items: Vec<Object>,
}

impl Permitted {
    /// The history of the object the request names.
    pub async fn history(&self) -> Result<Revisions, RegistryError> {
        let target = self.target(Verb::Get, Some("history"))?;
        let (resource, name) = (self.stored(target)?, named(target)?);
        let namespace = target.namespace.as_deref();
        let history = self
            .layer()
            .registry()
            .history(resource, namespace, name)
            .await
            .map_err(|error| not_found_as(target, name, error))?;
        let object = &history.object;
        let items = history.entries.iter().map(|entry| revision(object, entry)).collect();
        Ok(Revisions { resource_version: meta_str(object, "resourceVersion").to_owned(), items })
    }

    /// Writes again the spec state `request` names (a `RollbackRequest`) to the object the
    /// request names; answers the object written. The caller must also be allowed to update
    /// the object. A dry run writes nothing.
    pub async fn rollback(&self, request: &Value, dry_run: bool) -> Result<Object, RegistryError> {
        let target = self.target(Verb::Create, Some("rollback"))?;
        let (resource, name) = (self.stored(target)?, named(target)?);
        let namespace = target.namespace.as_deref();
        let asked: RollbackRequest = serde_json::from_value(request.clone()).map_err(|error| {
            RegistryError::BadRequest(format!("the body is not a RollbackRequest: {error}"))
        })?;
        let to = asked.revision().map_err(|cause| RegistryError::Invalid {
            kind: "RollbackRequest".to_owned(),
            name: name.to_owned(),
            causes: vec![cause],
        })?;
        // A rollback is a write of the object: its writer needs the update it amounts to.
        self.client().authorize(Request::kind(Verb::Update, target.kind.clone(), namespace, Some(name)))?;
        let layer = self.layer();
        let options = layer.write_options(self.identity(), resource, Part::Main, None, dry_run).await;
        layer
            .registry()
            .rollback(resource, namespace, name, to, options)
            .await
            .map_err(|error| not_found_as(target, name, error))
    }
}

/// One history entry of `object` as a Revision.
fn revision(object: &Object, entry: &HistoryEntry) -> Object {
    let name = meta_str(object, "name");
    let namespace = Some(meta_str(object, "namespace")).filter(|namespace| !namespace.is_empty());
    let mut revision = json!({
        "apiVersion": object.get("apiVersion").cloned().unwrap_or(Value::Null),
        "kind": REVISION_KIND,
        "metadata": {"name": format!("{name}-{}", entry.revision), "creationTimestamp": entry.time},
        "revision": entry.revision.to_string(),
        "generation": entry.generation,
        "state": entry.state,
    });
    if let Some(namespace) = namespace {
        revision["metadata"]["namespace"] = json!(namespace);
    }
    if let Some(user) = &entry.user {
        revision["user"] = json!(user);
    }
    if let Some(cause) = &entry.change_cause {
        revision["changeCause"] = json!(cause);
    }
    match revision {
        Value::Object(revision) => revision,
        _ => Object::new(),
    }
}
