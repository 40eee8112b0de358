//! The OpenAPI v3 schemas of the Kinds, as one source for what `/openapi/v3` publishes and for
//! how server-side apply merges objects: each Kind's schema with every definition it refers
//! to, and Kubernetes' list and map markers (`x-kubernetes-list-type`,
//! `x-kubernetes-list-map-keys`, `x-kubernetes-map-type`) where they belong.
//!
//! Kayra's own Kinds declare their markers on their fields. The builtin shapes come from
//! `k8s-openapi`, whose schemas carry none, so [`mark_builtin_definitions`] adds Kubernetes' own
//! to the definitions the served Kinds use (a list it does not name stays atomic, which is what
//! Kubernetes marks almost all of them).

use serde_json::{Map, Value, json};

use crate::scheme::KindInfo;

/// A Kind's schema: its root (a reference into `definitions`, or the schema itself) and
/// every definition it refers to, marked.
#[derive(Debug, Clone)]
pub struct KindSchema {
    /// The root schema.
    pub root: Value,
    /// The named schemas it refers to, by name.
    pub definitions: Map<String, Value>,
}

/// The schema of `kind`, as published in its group's OpenAPI v3 document.
pub fn kind_schema(kind: &KindInfo) -> KindSchema {
    let mut generator = schemars::generate::SchemaSettings::openapi3().into_generator();
    let root = kind.behaviour.schema(&mut generator).to_value();
    let mut definitions: Map<String, Value> = generator.take_definitions(true).into_iter().collect();
    mark_builtin_definitions(&mut definitions);
    KindSchema { root, definitions }
}

/// Kubernetes' markers on the `k8s-openapi` definitions Kayra serves: for each definition,
/// property and what Kubernetes declares there.
const BUILTIN_MARKERS: &[(&str, &str, Marker)] = &[
    (META, "finalizers", Marker::Set),
    (META, "ownerReferences", Marker::Map(&["uid"])),
    (META, "managedFields", Marker::Atomic),
    (LABEL_SELECTOR, "matchExpressions", Marker::Atomic),
    ("io.k8s.api.core.v1.NamespaceSpec", "finalizers", Marker::Atomic),
    ("io.k8s.api.core.v1.NamespaceStatus", "conditions", Marker::Map(&["type"])),
    ("io.k8s.api.core.v1.NodeSpec", "podCIDRs", Marker::Set),
    ("io.k8s.api.core.v1.NodeSpec", "taints", Marker::Atomic),
    ("io.k8s.api.core.v1.NodeStatus", "addresses", Marker::Map(&["type"])),
    ("io.k8s.api.core.v1.NodeStatus", "conditions", Marker::Map(&["type"])),
    ("io.k8s.api.core.v1.NodeStatus", "images", Marker::Atomic),
    ("io.k8s.api.core.v1.NodeStatus", "volumesAttached", Marker::Atomic),
    ("io.k8s.api.core.v1.NodeStatus", "volumesInUse", Marker::Atomic),
    ("io.k8s.api.core.v1.PodSpec", "containers", Marker::Map(&["name"])),
    ("io.k8s.api.core.v1.PodSpec", "initContainers", Marker::Map(&["name"])),
    ("io.k8s.api.core.v1.PodSpec", "tolerations", Marker::Atomic),
    ("io.k8s.api.core.v1.PodSpec", "volumes", Marker::Map(&["name"])),
    ("io.k8s.api.core.v1.PodStatus", "conditions", Marker::Map(&["type"])),
    ("io.k8s.api.core.v1.Container", "env", Marker::Map(&["name"])),
    ("io.k8s.api.core.v1.Container", "ports", Marker::Map(&["containerPort", "protocol"])),
    ("io.k8s.api.certificates.v1.CertificateSigningRequestSpec", "groups", Marker::Atomic),
    ("io.k8s.api.certificates.v1.CertificateSigningRequestSpec", "usages", Marker::Atomic),
    ("io.k8s.api.certificates.v1.CertificateSigningRequestStatus", "conditions", Marker::Map(&["type"])),
];

/// The definitions whose whole object is one leaf, as Kubernetes marks them
/// (`+structType=atomic`).
const ATOMIC_DEFINITIONS: &[&str] = &[LABEL_SELECTOR];

/// The defaults Kubernetes declares on the keys of the lists above.
const BUILTIN_DEFAULTS: &[(&str, &str, &str)] = &[("io.k8s.api.core.v1.ContainerPort", "protocol", "TCP")];

const META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";
const LABEL_SELECTOR: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.LabelSelector";

/// A list marker.
#[derive(Debug, Clone, Copy)]
enum Marker {
    Atomic,
    Set,
    Map(&'static [&'static str]),
}

/// Adds Kubernetes' markers to the builtin definitions among `definitions` (those it does not
/// hold are left alone; a marker already there is kept).
pub fn mark_builtin_definitions(definitions: &mut Map<String, Value>) {
    for (definition, property, marker) in BUILTIN_MARKERS {
        let Some(schema) = property_mut(definitions, definition, property) else { continue };
        if schema.contains_key("x-kubernetes-list-type") {
            continue;
        }
        match marker {
            Marker::Atomic => {
                schema.insert("x-kubernetes-list-type".into(), json!("atomic"));
            }
            Marker::Set => {
                schema.insert("x-kubernetes-list-type".into(), json!("set"));
            }
            Marker::Map(keys) => {
                schema.insert("x-kubernetes-list-type".into(), json!("map"));
                schema.insert("x-kubernetes-list-map-keys".into(), json!(keys));
            }
        }
    }
    for definition in ATOMIC_DEFINITIONS {
        if let Some(Value::Object(schema)) = definitions.get_mut(*definition) {
            schema.entry("x-kubernetes-map-type").or_insert_with(|| json!("atomic"));
        }
    }
    for (definition, property, default) in BUILTIN_DEFAULTS {
        if let Some(schema) = property_mut(definitions, definition, property) {
            schema.entry("default").or_insert_with(|| json!(default));
        }
    }
}

fn property_mut<'a>(
    definitions: &'a mut Map<String, Value>,
    definition: &str,
    property: &str,
) -> Option<&'a mut Map<String, Value>> {
    definitions.get_mut(definition)?.get_mut("properties")?.get_mut(property)?.as_object_mut()
}

#[cfg(test)]
mod tests;
