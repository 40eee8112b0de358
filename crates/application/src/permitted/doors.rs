//! The doors of a Kind's spec: fields only a subresource of their own writes (the reference's
//! `UpdateThrough`), so that using them is a permission of its own. `POST .../<name>/freeze`
//! sets `spec.frozen` and `POST .../<name>/thaw` clears it, both authorized as `create` on
//! `<resource>/freeze`; any other write that changes the field is refused by the registry,
//! naming the door. The write is the object's, admitted as the caller's (a set's child is the
//! set's: its door is the set's own freeze).

use kayra_api::verb::Verb;
use kayra_registry::{Object, Part, RegistryError};
use serde_json::Value;

use super::{Permitted, named, not_found_as};

impl Permitted {
    /// Freezes the object the request names (`spec.frozen: true`); answers the object written.
    /// Freezing what is frozen writes nothing.
    pub async fn freeze(&self, dry_run: bool) -> Result<Object, RegistryError> {
        self.through_door("freeze", true, dry_run).await
    }

    /// Thaws the object the request names (`spec.frozen` cleared); answers the object written.
    pub async fn thaw(&self, dry_run: bool) -> Result<Object, RegistryError> {
        self.through_door("thaw", false, dry_run).await
    }

    /// Sets the flag the door `subresource` writes to `raised`.
    async fn through_door(
        &self,
        subresource: &str,
        raised: bool,
        dry_run: bool,
    ) -> Result<Object, RegistryError> {
        let target = self.target(Verb::Create, Some(subresource))?;
        let (resource, name) = (self.stored(target)?, named(target)?);
        let door =
            target.kind.door(subresource).ok_or_else(|| self.misused(Verb::Create, Some(subresource)))?;
        let through = door
            .subresources
            .iter()
            .copied()
            .find(|sub| *sub == subresource)
            .ok_or_else(|| self.misused(Verb::Create, Some(subresource)))?;
        let layer = self.layer();
        let options =
            layer.write_options(self.identity(), resource, Part::Door(through), None, dry_run).await;
        let pointer = door.pointer;
        let set = |current: &Object| -> Result<Object, RegistryError> {
            let mut document = Value::Object(current.clone());
            let Some((parent, field)) = pointer.rsplit_once('/') else { return Ok(current.clone()) };
            if let Some(parent) = document.pointer_mut(parent).and_then(Value::as_object_mut) {
                match raised {
                    true => parent.insert(field.to_owned(), Value::Bool(true)),
                    false => parent.remove(field),
                };
            }
            match document {
                Value::Object(object) => Ok(object),
                _ => Ok(current.clone()),
            }
        };
        layer
            .registry()
            .update_with(resource, target.namespace.as_deref(), name, None, options, set)
            .await
            .map_err(|error| not_found_as(target, name, error))
    }
}
