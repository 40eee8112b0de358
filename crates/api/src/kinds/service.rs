//! Service: a stable name for the Applications that join it.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{Kind, duplicates};
use crate::scheme::{HISTORY, KindInfo, NameRule, ROLLBACK, STATUS, typed};
use crate::table::{Column, text, text_or_none};
use crate::validation::{FieldError, is_dns_label};

/// Service gives the Applications whose `spec.serviceName` names it one stable name and set
/// of ports.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Service {
    /// APIVersion defines the versioned schema of this representation of an object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    /// Kind is a string value representing the REST resource this object represents.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Standard object's metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// The ports the Service exposes.
    #[serde(default)]
    pub spec: ServiceSpec,
    /// Where the Service's ready members can be reached, as the control plane last saw them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<ServiceStatus>,
}

/// The observed state of a Service: its endpoints. Only the control plane writes it, through
/// the `status` subresource.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ServiceStatus {
    /// One entry per ready member: an Application whose `spec.serviceName` names this Service,
    /// whose `Ready` condition is `True`, and that is bound to a Node with an address. Ordered
    /// by application name.
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["application"]))]
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub endpoints: Vec<ServiceEndpoint>,
}

/// One ready member of a Service and where it listens.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ServiceEndpoint {
    /// The member Application's name (in the Service's namespace).
    pub application: String,
    /// The Node the member runs on.
    pub node: String,
    /// The Node's address (its `InternalIP`, else its first reported address).
    pub address: String,
    /// The Service's ports as this member serves them, in the order of `spec.ports`; a port
    /// whose `targetName` the member does not declare is left out.
    #[schemars(extend("x-kubernetes-list-type" = "atomic"))]
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ports: Vec<EndpointPort>,
}

/// One Service port, resolved on one member.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EndpointPort {
    /// The Service port's name, when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The port number the member listens on: the Service port's `targetPort`, else the
    /// member's declared port named `targetName`, else the Service port's `port`.
    pub port: i64,
    /// `TCP` or `UDP`, as the Service port says.
    pub protocol: String,
}

/// The ports a Service exposes.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ServiceSpec {
    /// The virtual address of the Service, when it has one.
    #[serde(default, rename = "clusterIP", skip_serializing_if = "Option::is_none")]
    pub cluster_ip: Option<String>,
    /// The ports; with more than one, each must be named.
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["port", "protocol"]))]
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ports: Vec<ServicePort>,
    /// Free-form tags, served as the Service's tags in Consul's shape: where an ingress such as
    /// Traefik reads its routing (`traefik.enable=true`, `traefik.http.routers.web.rule=...`).
    #[schemars(extend("x-kubernetes-list-type" = "set"))]
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
    /// String metadata, served as the Service's `Meta` in Consul's shape.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub meta: BTreeMap<String, String>,
}

/// The most tags a Service carries (Consul's own bound on a service's tags is looser; a fleet's
/// routing needs a few dozen).
pub const MAX_TAGS: usize = 64;
/// The longest tag, in bytes: a Traefik rule fits with room.
pub const MAX_TAG_BYTES: usize = 512;
/// The most `meta` entries, as Consul bounds a service's metadata.
pub const MAX_META: usize = 64;
/// The longest `meta` key, in bytes, as Consul bounds it.
pub const MAX_META_KEY_BYTES: usize = 128;
/// The longest `meta` value, in bytes, as Consul bounds it.
pub const MAX_META_VALUE_BYTES: usize = 512;

/// One port of a Service.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ServicePort {
    /// The port's name; required when the Service has several ports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The port the Service listens on, 1 to 65535.
    pub port: i64,
    /// The members' port number; defaults to `port`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_port: Option<i64>,
    /// The name of a port the members declare, instead of a number.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_name: Option<String>,
    #[schemars(extend("default" = "TCP"))]
    /// `TCP` (the default) or `UDP`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<String>,
}

impl Kind for Service {
    /// A rollback restores the ports, tags and meta the author wrote; the Service keeps the
    /// address it has now.
    fn restored(current: &serde_json::Map<String, Value>, restored: &mut serde_json::Map<String, Value>) {
        let address = current.get("spec").and_then(|spec| spec.get("clusterIP")).cloned();
        let Some(spec) = restored.get_mut("spec").and_then(Value::as_object_mut) else { return };
        match address {
            Some(address) => spec.insert("clusterIP".into(), address),
            None => spec.remove("clusterIP"),
        };
    }

    fn default_fields(&mut self) {
        for port in &mut self.spec.ports {
            port.protocol.get_or_insert_with(|| "TCP".to_owned());
            if port.target_name.is_none() {
                port.target_port.get_or_insert(port.port);
            }
        }
    }

    fn validate(&self, _old: Option<&Self>) -> Vec<FieldError> {
        let ports = &self.spec.ports;
        let mut errors = Vec::new();
        for (at, port) in ports.iter().enumerate() {
            let field = format!("spec.ports[{at}]");
            if !(1..=65535).contains(&port.port) {
                errors.push(FieldError::invalid(
                    format!("{field}.port"),
                    port.port,
                    "must be between 1 and 65535, inclusive",
                ));
            }
            if let Some(target) = port.target_port.filter(|target| !(1..=65535).contains(target)) {
                errors.push(FieldError::invalid(
                    format!("{field}.targetPort"),
                    target,
                    "must be between 1 and 65535, inclusive",
                ));
            }
            if port.target_port.is_some() && port.target_name.is_some() && port.target_port != Some(port.port)
            {
                errors.push(FieldError::forbidden(
                    format!("{field}.targetName"),
                    "may not be set together with targetPort",
                ));
            }
            match port.name.as_deref() {
                None | Some("") if ports.len() > 1 => {
                    errors.push(FieldError::required(format!("{field}.name")))
                }
                Some(name) if !name.is_empty() && !is_dns_label(name) => {
                    errors.push(FieldError::invalid(
                        format!("{field}.name"),
                        format!("\"{name}\""),
                        "must be a DNS label",
                    ));
                }
                _ => {}
            }
            if let Some(protocol) = port.protocol.as_deref().filter(|p| !matches!(*p, "TCP" | "UDP")) {
                errors.push(FieldError::not_supported(
                    format!("{field}.protocol"),
                    protocol,
                    &["TCP", "UDP"],
                ));
            }
        }
        errors.extend(duplicates(
            "spec.ports",
            ports.iter().filter_map(|port| port.name.as_deref()).filter(|n| !n.is_empty()),
        ));
        let numbers: Vec<String> = ports
            .iter()
            .map(|port| format!("{}/{}", port.port, port.protocol.as_deref().unwrap_or("TCP")))
            .collect();
        errors.extend(duplicates("spec.ports", numbers.iter().map(String::as_str)));
        errors.extend(tags_and_meta(&self.spec));
        errors
    }
}

/// The bounds on `spec.tags` and `spec.meta`: how many, how long, and in what form.
fn tags_and_meta(spec: &ServiceSpec) -> Vec<FieldError> {
    let mut errors = Vec::new();
    if spec.tags.len() > MAX_TAGS {
        errors.push(FieldError::too_many("spec.tags", spec.tags.len(), MAX_TAGS));
    }
    for (at, tag) in spec.tags.iter().enumerate() {
        let field = format!("spec.tags[{at}]");
        if tag.is_empty() {
            errors.push(FieldError::invalid(field, "\"\"", "a tag may not be empty"));
        } else if tag.len() > MAX_TAG_BYTES {
            errors.push(FieldError::too_long(field, MAX_TAG_BYTES));
        } else if tag.chars().any(char::is_control) {
            errors.push(FieldError::invalid(
                field,
                format!("{tag:?}"),
                "a tag may not hold control characters",
            ));
        } else if tag.starts_with('=') {
            errors.push(FieldError::invalid(
                field,
                format!("{tag:?}"),
                "a key=value tag needs a key before '='",
            ));
        }
    }
    errors.extend(duplicates("spec.tags", spec.tags.iter().map(String::as_str)));
    if spec.meta.len() > MAX_META {
        errors.push(FieldError::too_many("spec.meta", spec.meta.len(), MAX_META));
    }
    for (key, value) in &spec.meta {
        let field = format!("spec.meta[{key}]");
        let well_formed = key.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        if key.is_empty() || key.len() > MAX_META_KEY_BYTES || !well_formed {
            errors.push(FieldError::invalid(
                field.clone(),
                format!("{key:?}"),
                "a meta key is 1 to 128 letters, digits, '-' or '_'",
            ));
        }
        if value.len() > MAX_META_VALUE_BYTES {
            errors.push(FieldError::too_long(field, MAX_META_VALUE_BYTES));
        }
    }
    errors
}

/// Services as served in `fleet`, named by a DNS label.
pub(crate) fn kind_info(fleet: &str) -> KindInfo {
    KindInfo {
        short_names: &["svc"],
        categories: &["all"],
        subresources: &[STATUS, HISTORY, ROLLBACK],
        columns: &[
            Column {
                name: "Cluster-IP",
                type_: "string",
                format: "",
                description: "The Service's virtual address",
                priority: 0,
                cell: |o, _| text_or_none(o, "spec.clusterIP"),
            },
            Column {
                name: "Port(s)",
                type_: "string",
                format: "",
                description: "The Service's ports",
                priority: 0,
                cell: service_ports,
            },
            Column {
                name: "Endpoints",
                type_: "integer",
                format: "",
                description: "How many ready members the Service has",
                priority: 1,
                cell: |o, _| {
                    let endpoints = o.pointer("/status/endpoints").and_then(Value::as_array);
                    Value::from(endpoints.map_or(0, Vec::len))
                },
            },
        ],
        ..KindInfo::v1(fleet, "Service", "services", "service", true, NameRule::Label, typed::<Service>())
    }
}

fn service_ports(object: &Value, _: jiff::Timestamp) -> Value {
    let ports: Vec<String> = object
        .pointer("/spec/ports")
        .and_then(Value::as_array)
        .map(|ports| {
            ports
                .iter()
                .map(|p| {
                    format!(
                        "{}/{}",
                        text(p, "port"),
                        p.get("protocol").and_then(Value::as_str).unwrap_or("TCP")
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    Value::String(if ports.is_empty() { "<none>".to_owned() } else { ports.join(",") })
}

#[cfg(test)]
mod tests;
