//! Server-side apply: an applied configuration merged onto the object by its Kind's schema (or
//! creating it), with its managers and conflicts decided by `kayra-merge`, then written as any
//! update or create is — carried over, defaulted, admitted, validated, compared-and-swapped.

use kayra_api::validation::FieldError;
use kayra_merge::error::MergeError;
use kayra_merge::operation::{self, Writer};
use serde_json::Value;

use crate::{
    Applied, ApplyOptions, Creation, Managed, Object, Part, RETRIES, Registry, RegistryError, Resource,
    WriteOptions, meta_str, parse_revision, scope,
};

impl Registry {
    /// Applies `config` (one object's configuration, with `apiVersion`, `kind` and its name)
    /// as `options.manager`: merged onto the object (or its status), what the manager applied
    /// before and no longer applies removed unless another manager claims it, and refused with
    /// the conflicts when it would change fields other managers own, unless forced. When the
    /// object does not exist, the apply creates it (not through a subresource), if `apply`
    /// allows. A `metadata.resourceVersion` in the configuration must be current.
    pub async fn apply(
        &self,
        resource: &Resource,
        namespace: Option<&str>,
        name: &str,
        config: Value,
        options: WriteOptions,
        apply: ApplyOptions,
    ) -> Result<Applied, RegistryError> {
        let text = |field: &str| config.get(field).and_then(Value::as_str).unwrap_or_default().to_owned();
        let (given_version, given_kind) = (text("apiVersion"), text("kind"));
        if given_version.is_empty() || given_kind.is_empty() {
            let group_version =
                if given_version.contains('/') { given_version } else { format!("/{given_version}") };
            return Err(RegistryError::BadRequest(format!(
                "invalid object type: {group_version}, Kind={given_kind}"
            )));
        }
        let config = self.body(resource, namespace, config)?;
        let given = meta_str(&config, "name");
        if given != name {
            return Err(RegistryError::BadRequest(format!(
                "the name of the object ({given}) does not match the name on the URL ({name})"
            )));
        }
        let expected = match meta_str(&config, "resourceVersion") {
            "" => None,
            rv => Some(parse_revision(rv)?),
        };
        let (time, api_version) = (self.now(), resource.api_version());
        let writer = Writer {
            manager: &options.manager.name,
            subresource: options.subresource(),
            api_version: &api_version,
            time: &time,
        };
        let schema = resource.strategy.merge_schema();
        let scope = scope(resource, options.part);
        let merged = |current: Option<&Object>| {
            operation::apply(schema, current, &config, &writer, scope, apply.force)
                .map_err(|error| refusal(resource, name, error))
        };
        for _ in 0..RETRIES {
            let replaced = self
                .replace(resource, namespace, name, expected, options.clone(), Managed::Applied, |current| {
                    merged(Some(current))
                })
                .await;
            match replaced {
                Err(RegistryError::NotFound { .. }) if options.part == Part::Main => {}
                replaced => return replaced.map(|object| Applied { object, created: false }),
            }
            if let Creation::Forbidden(message) = &apply.creation {
                return Err(RegistryError::Forbidden(message.clone()));
            }
            let uid = meta_str(&config, "uid");
            if !uid.is_empty() {
                return Err(RegistryError::Conflict {
                    resource: resource.qualified(),
                    name: name.to_owned(),
                    message: format!(
                        "uid mismatch: the provided object specified uid {uid}, and no existing object was found"
                    ),
                });
            }
            match self.insert(resource, namespace, merged(None)?, options.clone(), Managed::Applied).await {
                // Created by another writer meanwhile: apply onto it.
                Err(RegistryError::AlreadyExists { .. }) => continue,
                inserted => return inserted.map(|object| Applied { object, created: true }),
            }
        }
        Err(crate::stale(resource, name))
    }
}

/// A merge's refusal, in the registry's terms: conflicts name each field and manager; a
/// configuration that cannot be merged is invalid at the field named.
fn refusal(resource: &Resource, name: &str, error: MergeError) -> RegistryError {
    match error {
        MergeError::Conflicts { message, conflicts } => RegistryError::ApplyConflict {
            message,
            causes: conflicts
                .into_iter()
                .map(|conflict| (conflict.field, format!("conflict with {}", conflict.manager)))
                .collect(),
        },
        MergeError::Invalid { field, message } => RegistryError::Invalid {
            kind: resource.kind.clone(),
            name: name.to_owned(),
            causes: vec![FieldError {
                field,
                message: format!("Invalid value: {message}"),
                reason: "FieldValueInvalid",
            }],
        },
        other => RegistryError::BadRequest(other.to_string()),
    }
}
