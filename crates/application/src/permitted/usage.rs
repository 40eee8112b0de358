//! Reads of what workloads and nodes consume: an Application's `metrics` subresource (its last
//! cumulative sample) and the `metrics.k8s.io` NodeMetrics and PodMetrics (rates over the last
//! two samples), each joined to the stored object it is about, so that what does not exist is
//! not found and a label selector selects by the object's labels.

use std::collections::{BTreeMap, HashMap};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kayra_api::kinds::usage::{
    ApplicationMetrics, ContainerMetrics, METRICS_GROUP, METRICS_VERSION, NodeMetrics, PodMetrics,
};
use kayra_api::verb::Verb;
use kayra_registry::{ListOptions, Object, RegistryError, Resource, meta_str};
use serde_json::{Value, json};

use super::{Permitted, named, not_found_as};
use crate::authorization::KindTarget;
use crate::usage::{Rate, Samples, go_duration};

impl Permitted {
    /// Every usage sample of the sessions this replica holds, for the replica that asked.
    pub async fn session_usage(&self) -> Result<Vec<Samples>, RegistryError> {
        match &self.request().target {
            crate::authorization::Target::SessionUsage => {}
            _ => return Err(self.misused(Verb::Get, Some("sessionusage"))),
        }
        Ok(match self.layer().usage_source() {
            Some(source) => source.held().await,
            None => Vec::new(),
        })
    }

    /// The `ApplicationMetrics` of the Application the request names: its last usage sample,
    /// cumulative since the process started. Not found until its node has reported one for
    /// this Application (this uid).
    pub async fn application_metrics(&self) -> Result<Value, RegistryError> {
        let target = self.target(Verb::Get, Some("metrics"))?;
        let (namespace, name) = (target.namespace.as_deref().unwrap_or_default(), named(target)?);
        let application = self
            .layer()
            .registry()
            .get(self.stored(target)?, Some(namespace), name)
            .await
            .map_err(|error| not_found_as(target, name, error))?;
        let uid = meta_str(&application, "uid");
        let samples = match self.layer().usage_source() {
            Some(source) => source.application(namespace, name).await.filter(|s| s.latest.uid == uid),
            None => None,
        };
        let Some(Samples { node, latest, .. }) = samples else {
            return Err(RegistryError::NotMeasured {
                resource: format!("{}.{}/metrics", target.kind.plural, target.kind.group),
                name: name.to_owned(),
                message: format!(
                    "application {namespace}/{name} has no usage sample yet: its node reports one \
                     with every heartbeat once the process runs"
                ),
            });
        };
        let metrics = ApplicationMetrics {
            api_version: Some(target.kind.api_version()),
            kind: Some("ApplicationMetrics".to_owned()),
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                namespace: Some(namespace.to_owned()),
                uid: Some(uid.to_owned()),
                ..ObjectMeta::default()
            },
            node,
            timestamp: latest.timestamp,
            cpu_microseconds: latest.cpu_usage_usec,
            cpu_throttled_microseconds: latest.cpu_throttled_usec,
            memory_bytes: latest.memory_bytes,
            memory_peak_bytes: latest.memory_peak_bytes,
            pids: latest.pids,
            oom_kills: latest.oom_kills,
        };
        Ok(serde_json::to_value(metrics).expect("ApplicationMetrics serializes"))
    }

    /// The NodeMetrics or PodMetrics the request names: not found while the node or
    /// Application does not exist, or its node has not reported the two samples a rate needs.
    pub async fn usage(&self) -> Result<Value, RegistryError> {
        let target = self.usage_target(Verb::Get)?;
        let name = named(target)?;
        let namespace = target.namespace.as_deref();
        let source = self.source_resource(target)?;
        let object = self
            .layer()
            .registry()
            .get(source, namespace, name)
            .await
            .map_err(|error| not_found_as(target, name, error))?;
        let samples = match (self.layer().usage_source(), namespace) {
            (None, _) => None,
            (Some(usage), Some(namespace)) => usage.application(namespace, name).await,
            (Some(usage), None) => usage.node(name).await,
        };
        let uid = meta_str(&object, "uid");
        let rate = samples
            .filter(|samples| namespace.is_none() || samples.latest.uid == uid)
            .and_then(|samples| samples.rate());
        match rate {
            Some(rate) => Ok(self.reading(target, &object, &rate)),
            None => Err(RegistryError::NotMeasured {
                resource: format!("{}.{METRICS_GROUP}", target.kind.plural),
                name: name.to_owned(),
                message: format!(
                    "{}.{METRICS_GROUP} \"{name}\" not found: its node has not yet reported the two \
                     usage samples a rate needs",
                    target.kind.plural
                ),
            }),
        }
    }

    /// The NodeMetricsList or PodMetricsList of what the request addresses whose object matches
    /// `label_selector`: one item for each that has a rate, in name order.
    pub async fn usage_list(&self, label_selector: Option<&str>) -> Result<Value, RegistryError> {
        let target = self.usage_target(Verb::List)?;
        let namespace = target.namespace.as_deref();
        let options = ListOptions {
            label_selector: label_selector.filter(|s| !s.is_empty()).map(str::to_owned),
            ..ListOptions::default()
        };
        let objects =
            self.layer().registry().list(self.source_resource(target)?, namespace, &options).await?;
        let samples = match (self.layer().usage_source(), target.kind.namespaced) {
            (None, _) => Vec::new(),
            (Some(usage), true) => usage.applications(namespace).await,
            (Some(usage), false) => usage.nodes().await,
        };
        let by_name: HashMap<(&str, &str), &Samples> = samples
            .iter()
            .map(|samples| match target.kind.namespaced {
                true => ((samples.latest.namespace.as_str(), samples.latest.name.as_str()), samples),
                false => (("", samples.node.as_str()), samples),
            })
            .collect();
        let items: Vec<Value> = objects
            .items
            .iter()
            .filter_map(|object| {
                let key = match target.kind.namespaced {
                    true => (meta_str(object, "namespace"), meta_str(object, "name")),
                    false => ("", meta_str(object, "name")),
                };
                let samples = by_name.get(&key)?;
                let same_run = !target.kind.namespaced || samples.latest.uid == meta_str(object, "uid");
                let rate = samples.rate().filter(|_| same_run)?;
                Some(self.reading(target, object, &rate))
            })
            .collect();
        Ok(json!({
            "kind": format!("{}List", target.kind.kind),
            "apiVersion": format!("{METRICS_GROUP}/{METRICS_VERSION}"),
            "metadata": {},
            "items": items,
        }))
    }

    /// The target of a usage read of `verb`.
    fn usage_target(&self, verb: Verb) -> Result<&KindTarget, RegistryError> {
        let target = self.target(verb, None)?;
        if !target.kind.usage {
            return Err(self.misused(verb, None));
        }
        Ok(target)
    }

    /// The stored Kind a usage reading is about: Nodes for NodeMetrics, Applications for
    /// PodMetrics.
    fn source_resource(&self, target: &KindTarget) -> Result<&Resource, RegistryError> {
        let layer = self.layer();
        let fleet = format!("fleet.{}", layer.scheme().domain());
        let (group, plural) = match target.kind.namespaced {
            true => (fleet.as_str(), "applications"),
            false => ("", "nodes"),
        };
        layer.resource_named(group, plural).ok_or_else(|| {
            RegistryError::BadRequest(format!("the scheme serves no {plural} to read the usage of"))
        })
    }

    /// The NodeMetrics or PodMetrics of `object` at `rate`.
    fn reading(&self, target: &KindTarget, object: &Object, rate: &Rate) -> Value {
        let labels = object
            .get("metadata")
            .and_then(|metadata| metadata.get("labels"))
            .and_then(|labels| serde_json::from_value::<BTreeMap<String, String>>(labels.clone()).ok());
        let name = meta_str(object, "name").to_owned();
        let metadata = ObjectMeta {
            name: Some(name.clone()),
            namespace: target.kind.namespaced.then(|| meta_str(object, "namespace").to_owned()),
            labels,
            creation_timestamp: Some(Time(jiff::Timestamp::now())),
            ..ObjectMeta::default()
        };
        let usage: BTreeMap<String, String> = [
            ("cpu".to_owned(), format!("{}n", rate.nanocores)),
            ("memory".to_owned(), rate.memory_bytes.to_string()),
        ]
        .into();
        let (api_version, kind) = (Some(target.kind.api_version()), Some(target.kind.kind.to_owned()));
        let (timestamp, window) = (rate.at.to_string(), go_duration(rate.window));
        let value = match target.kind.namespaced {
            true => serde_json::to_value(PodMetrics {
                api_version,
                kind,
                metadata,
                timestamp,
                window,
                containers: vec![ContainerMetrics { name, usage }],
            }),
            false => {
                serde_json::to_value(NodeMetrics { api_version, kind, metadata, timestamp, window, usage })
            }
        };
        value.expect("metrics shapes serialize")
    }
}
