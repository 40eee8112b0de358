//! The bridge from the scheme's Kinds to the registry's generic strategy: each Kind's defaults,
//! validation, naming rule, deletion behaviour, merge schema (its published OpenAPI schema),
//! history and doors, as the registry asks for them.

use std::sync::{Arc, OnceLock};

use kayra_api::scheme::{Behaviour, Door, KindInfo, NameRule};
use kayra_api::validation::FieldError;
use kayra_merge::schema::Schema;
use kayra_registry::{Object, Resource, Strategy};
use serde_json::Value;

/// The registry resource serving a Kind.
pub(crate) fn resource(kind: &KindInfo) -> Resource {
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
            kind: kind.clone(),
            merge_schema: OnceLock::new(),
            keeps_history: kind.keeps_history(),
            doors: kind.doors,
        }),
    }
}

/// A Kind's rules, as the registry asks for them.
struct KindStrategy {
    behaviour: Arc<dyn Behaviour>,
    names: NameRule,
    create_keeps_status: bool,
    /// The Kind, whose published schema is its merge schema.
    kind: KindInfo,
    /// The merge schema, read from the published schema at the Kind's first write.
    merge_schema: OnceLock<Schema>,
    keeps_history: bool,
    doors: &'static [Door],
}

impl Strategy for KindStrategy {
    fn default(&self, object: &mut Object) {
        // The object is lent to the behaviour as JSON and taken back, not copied.
        let value = Value::Object(std::mem::take(object));
        match self.behaviour.normalize(&value) {
            Ok((Value::Object(normalized), _)) => *object = normalized,
            _ => {
                if let Value::Object(original) = value {
                    *object = original;
                }
            }
        }
    }

    fn validate(&self, object: &Object, old: Option<&Object>) -> Vec<FieldError> {
        self.behaviour.validate(object, old)
    }

    fn validate_name(&self, name: &str) -> Option<String> {
        self.names.check(name)
    }

    fn merge_schema(&self) -> &Schema {
        self.merge_schema.get_or_init(|| {
            let published = kayra_api::openapi::kind_schema(&self.kind);
            Schema::from_openapi(&published.definitions, &published.root).expect(
                "a Kind's published schema refers only to definitions it publishes, and marks its lists",
            )
        })
    }

    fn create_keeps_status(&self) -> bool {
        self.create_keeps_status
    }

    fn finalizing(&self, object: &Object) -> bool {
        self.behaviour.finalizing(object)
    }

    fn expires_at(&self, object: &Object) -> Option<std::time::SystemTime> {
        let expires = self.behaviour.expires_at(object)?;
        Some(std::time::SystemTime::from(expires))
    }

    fn owns_dependents(&self) -> bool {
        self.behaviour.owns_dependents()
    }

    fn carried_status(&self, old: &Object, object: &mut Object) {
        self.behaviour.carried_status(old, object);
    }

    fn keeps_history(&self) -> bool {
        self.keeps_history
    }

    fn doors(&self) -> &[Door] {
        self.doors
    }

    fn restored(&self, current: &Object, restored: &mut Object) {
        self.behaviour.restored(current, restored);
    }

    fn mark_deleting(&self, object: &mut Object) {
        let mut value = Value::Object(std::mem::take(object));
        self.behaviour.mark_deleting(&mut value);
        if let Value::Object(map) = value {
            *object = map;
        }
    }
}

#[cfg(test)]
mod tests;
