//! The plugins, one module each, and the matching rules several share: label selectors over
//! Applications, node selector requirements over Node labels, tolerations over taints.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{NodeSelectorRequirement, Taint, Toleration};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

pub mod default_binder;
pub mod node_affinity;
pub mod node_schedulable;
pub mod priority;
pub mod resources_fit;
pub mod snapshot_reservation;
pub mod taint_toleration;
pub mod workload_affinity;

/// Whether a label selector picks an object with `labels`: every `matchLabels` pair and every
/// `matchExpressions` requirement (`In`, `NotIn`, `Exists`, `DoesNotExist`) holds. An empty
/// selector picks everything.
pub fn selects(selector: &LabelSelector, labels: &BTreeMap<String, String>) -> bool {
    let pairs = selector.match_labels.iter().flatten().all(|(key, value)| labels.get(key) == Some(value));
    pairs
        && selector.match_expressions.iter().flatten().all(|requirement| {
            let values = requirement.values.as_deref().unwrap_or_default();
            let label = labels.get(&requirement.key);
            match requirement.operator.as_str() {
                "In" => label.is_some_and(|value| values.contains(value)),
                "NotIn" => label.is_none_or(|value| !values.contains(value)),
                "Exists" => label.is_some(),
                "DoesNotExist" => label.is_none(),
                _ => false,
            }
        })
}

/// Whether node labels meet a node selector requirement, with every Kubernetes operator: `Gt`
/// and `Lt` compare the label and the one value as integers.
pub fn meets(requirement: &NodeSelectorRequirement, labels: &BTreeMap<String, String>) -> bool {
    let values = requirement.values.as_deref().unwrap_or_default();
    let label = labels.get(&requirement.key);
    let compare = |wanted: fn(i64, i64) -> bool| {
        let (Some(label), Some(value)) = (label, values.first()) else { return false };
        match (label.parse::<i64>(), value.parse::<i64>()) {
            (Ok(label), Ok(value)) => wanted(label, value),
            _ => false,
        }
    };
    match requirement.operator.as_str() {
        "In" => label.is_some_and(|value| values.contains(value)),
        "NotIn" => label.is_none_or(|value| !values.contains(value)),
        "Exists" => label.is_some(),
        "DoesNotExist" => label.is_none(),
        "Gt" => compare(|label, value| label > value),
        "Lt" => compare(|label, value| label < value),
        _ => false,
    }
}

/// Whether a toleration tolerates a taint, as Kubernetes decides: the effect is the same or
/// the toleration names none; an empty key with `Exists` tolerates every taint; otherwise the
/// keys are equal and, with `Equal` (the default), the values too.
pub fn tolerates(toleration: &Toleration, taint: &Taint) -> bool {
    let effect = toleration.effect.as_deref().unwrap_or_default();
    if !effect.is_empty() && effect != taint.effect {
        return false;
    }
    let key = toleration.key.as_deref().unwrap_or_default();
    let operator = toleration.operator.as_deref().unwrap_or("Equal");
    if key.is_empty() {
        return operator == "Exists";
    }
    if key != taint.key {
        return false;
    }
    match operator {
        "Exists" => true,
        "Equal" | "" => {
            toleration.value.as_deref().unwrap_or_default() == taint.value.as_deref().unwrap_or_default()
        }
        _ => false,
    }
}

/// Whether some toleration of `tolerations` tolerates `taint`.
pub fn tolerated(tolerations: &[Toleration], taint: &Taint) -> bool {
    tolerations.iter().any(|toleration| tolerates(toleration, taint))
}

/// kube-scheduler's reason for a taint nothing tolerates: `node(s) had untolerated taint
/// {key: value}`.
pub fn untolerated(taint: &Taint) -> String {
    format!("node(s) had untolerated taint {{{}: {}}}", taint.key, taint.value.as_deref().unwrap_or_default())
}

/// A taint, as the tests and the implicit node-condition taints write it.
pub fn taint(key: &str, value: &str, effect: &str) -> Taint {
    Taint {
        key: key.to_owned(),
        value: Some(value.to_owned()).filter(|v| !v.is_empty()),
        effect: effect.to_owned(),
        time_added: None,
    }
}

#[cfg(test)]
pub(crate) mod testing {
    //! Builders the plugin tests share.

    use std::sync::Arc;

    use crate::model::{App, AppInfo, NodeInfo, Resources};
    use crate::snapshot::Snapshot;

    /// A node with 4 cores and 8 GiB.
    pub(crate) fn node(name: &str, labels: &[(&str, &str)]) -> NodeInfo {
        NodeInfo::new(name, Resources { cpu: 4000, memory: 8 << 30 }, labels)
    }

    /// An Application in namespace `demo`.
    pub(crate) fn app(name: &str, labels: &[(&str, &str)]) -> AppInfo {
        let mut app = AppInfo::new("demo", name);
        app.labels = labels.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
        app
    }

    /// `app` placed on `node`.
    pub(crate) fn on(mut app: AppInfo, node: &str) -> App {
        app.node = Some(node.to_owned());
        Arc::new(app)
    }

    /// A snapshot of `nodes` with `placed` on them.
    pub(crate) fn snapshot(nodes: Vec<NodeInfo>, placed: Vec<App>) -> Snapshot {
        let mut snapshot = Snapshot::default();
        snapshot.replace_nodes(nodes);
        for app in placed {
            snapshot.put_app(&app);
        }
        snapshot
    }

    /// A `json!` value decoded into a Kubernetes shape.
    pub(crate) fn shape<T: serde::de::DeserializeOwned>(value: serde_json::Value) -> T {
        serde_json::from_value(value).expect("the test's shape decodes")
    }
}

#[cfg(test)]
mod tests;
