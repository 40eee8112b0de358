//! The scheduler's view of the fleet: every Node, and every Application bound to one with what
//! it holds there, indexed for the questions plugins ask (what is requested on a node, which
//! placed Applications a label selector picks). Kept current change by change from the
//! store's watch, and by the scheduler's own reservations between a decision and its bind
//! (made and undone by the `SnapshotReservation` reserve plugin).

use std::collections::{BTreeMap, BTreeSet};

use foldhash::HashMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use crate::model::{App, NodeInfo, Resources};

/// What is placed on one node.
#[derive(Debug, Clone, Default)]
pub struct Usage {
    /// The sum of the requests of the unfinished Applications on the node.
    pub requested: Resources,
    /// The same sum, with unset requests counted as kube-scheduler's scoring defaults.
    pub scoring: Resources,
    /// The ids of the Applications on the node.
    pub apps: BTreeSet<String>,
}

/// Every Node and every placed, unfinished Application.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    nodes: BTreeMap<String, NodeInfo>,
    usage: HashMap<String, Usage>,
    placed: HashMap<String, (String, App)>,
    /// `namespace` → `label key` → `label value` → ids of placed Applications.
    labels: HashMap<String, HashMap<String, HashMap<String, BTreeSet<String>>>>,
    /// `namespace` → ids of placed Applications.
    namespaces: HashMap<String, BTreeSet<String>>,
    /// Placed Applications with a required anti-affinity term: their rules protect them from
    /// newcomers too.
    anti_affine: BTreeSet<String>,
    /// Those Applications by what their terms' `matchLabels` ask of a newcomer: the namespace a
    /// term looks in, and one label pair of its selector.
    anti_index: HashMap<(String, String, String), BTreeSet<String>>,
    /// Those with a term that has no `matchLabels` (checked against every newcomer).
    anti_unindexed: BTreeSet<String>,
    /// Decided and not yet bound: node by Application id. A watch or list that still shows
    /// them unbound keeps their reservation.
    reserved: HashMap<String, String>,
}

impl AsMut<Snapshot> for Snapshot {
    fn as_mut(&mut self) -> &mut Snapshot {
        self
    }
}

impl Snapshot {
    /// Every node, by name.
    pub fn nodes(&self) -> &BTreeMap<String, NodeInfo> {
        &self.nodes
    }

    /// What is placed on `node`.
    pub fn usage(&self, node: &str) -> Option<&Usage> {
        self.usage.get(node)
    }

    /// The node and Application of a placed id.
    pub fn placed(&self, id: &str) -> Option<&(String, App)> {
        self.placed.get(id)
    }

    /// The ids of every placed Application.
    pub fn usage_ids(&self) -> impl Iterator<Item = &String> {
        self.placed.keys()
    }

    /// Placed Applications with a required anti-affinity term, with their nodes.
    pub fn anti_affine(&self) -> impl Iterator<Item = &(String, App)> {
        self.anti_affine.iter().filter_map(|id| self.placed.get(id))
    }

    /// The placed Applications whose required anti-affinity terms may pick `app`: a superset,
    /// found through the index, each once and in id order.
    pub fn anti_affine_for(&self, app: &crate::model::AppInfo) -> Vec<&(String, App)> {
        let mut ids: BTreeSet<&String> = self.anti_unindexed.iter().collect();
        for (key, value) in &app.labels {
            let slot = (app.namespace.clone(), key.clone(), value.clone());
            ids.extend(self.anti_index.get(&slot).into_iter().flatten());
        }
        ids.into_iter().filter_map(|id| self.placed.get(id)).collect()
    }

    /// The index slots of a placed Application's required anti-affinity terms; `None` when a
    /// term has no `matchLabels` to index it by.
    fn anti_slots(app: &crate::model::AppInfo) -> Option<Vec<(String, String, String)>> {
        let terms = app
            .affinity
            .workload_anti_affinity
            .as_ref()
            .and_then(|anti| anti.required_during_scheduling_ignored_during_execution.as_ref())?;
        let mut slots = Vec::new();
        for term in terms {
            let (key, value) = term
                .label_selector
                .as_ref()
                .and_then(|s| s.match_labels.as_ref())
                .and_then(|m| m.iter().next())?;
            let namespaces = match term.namespaces.as_deref() {
                Some(list) if !list.is_empty() => list.to_vec(),
                _ => vec![app.namespace.clone()],
            };
            slots.extend(namespaces.into_iter().map(|ns| (ns, key.clone(), value.clone())));
        }
        Some(slots)
    }

    /// Adds or replaces a node; answers whether the change may let something fit that did not
    /// (a node silent for longer than `heartbeat_timeout` counted as unreachable).
    pub fn put_node(&mut self, node: NodeInfo, heartbeat_timeout: Option<std::time::Duration>) -> bool {
        let relevant =
            self.nodes.get(&node.name).is_none_or(|old| old.relevant_change(&node, heartbeat_timeout));
        self.nodes.insert(node.name.clone(), node);
        relevant
    }

    /// Removes a node (what is placed on it stays counted until it goes).
    pub fn remove_node(&mut self, name: &str) {
        self.nodes.remove(name);
    }

    /// Replaces every node.
    pub fn replace_nodes(&mut self, nodes: Vec<NodeInfo>) {
        self.nodes = nodes.into_iter().map(|node| (node.name.clone(), node)).collect();
    }

    /// Records an Application: counted on its node when bound and unfinished, forgotten
    /// otherwise. Answers whether capacity or rules on some node were freed by the change.
    pub fn put_app(&mut self, app: &App) -> bool {
        let freed = self.remove_app(&app.id);
        if let Some(node) = app.node.as_deref().filter(|_| !app.finished) {
            self.assume(app, node);
        }
        freed && (app.node.is_none() || app.finished)
    }

    /// Counts `app` on `node`: a placement decided (the scheduler's reservation) or seen.
    pub fn assume(&mut self, app: &App, node: &str) {
        self.remove_app(&app.id);
        let usage = self.usage.entry(node.to_owned()).or_default();
        usage.requested = usage.requested.plus(app.requests);
        usage.scoring = usage.scoring.plus(app.scoring_requests());
        usage.apps.insert(app.id.clone());
        let by_key = self.labels.entry(app.namespace.clone()).or_default();
        for (key, value) in &app.labels {
            by_key.entry(key.clone()).or_default().entry(value.clone()).or_default().insert(app.id.clone());
        }
        self.namespaces.entry(app.namespace.clone()).or_default().insert(app.id.clone());
        if app
            .affinity
            .workload_anti_affinity
            .as_ref()
            .and_then(|anti| anti.required_during_scheduling_ignored_during_execution.as_ref())
            .is_some_and(|terms| !terms.is_empty())
        {
            self.anti_affine.insert(app.id.clone());
            match Snapshot::anti_slots(app) {
                Some(slots) => {
                    for slot in slots {
                        self.anti_index.entry(slot).or_default().insert(app.id.clone());
                    }
                }
                None => {
                    self.anti_unindexed.insert(app.id.clone());
                }
            }
        }
        self.placed.insert(app.id.clone(), (node.to_owned(), app.clone()));
    }

    /// Reserves `node` for `app` between the decision and its bind: counted there, and kept
    /// while the store still shows it unbound.
    pub fn reserve(&mut self, app: &App, node: &str) {
        self.assume(app, node);
        self.reserved.insert(app.id.clone(), node.to_owned());
    }

    /// Undoes the reservation of `node` for `app`. Only the reservation is undone: a newer
    /// version seen meanwhile (a pin its author wrote) is where the Application really is.
    pub fn unreserve(&mut self, app: &App, node: &str) {
        self.reserved.remove(&app.id);
        let reserved = self
            .placed
            .get(&app.id)
            .is_some_and(|(at, placed)| at == node && placed.resource_version == app.resource_version);
        if reserved {
            self.remove_app(&app.id);
        }
    }

    /// Whether a decision for `id` waits for its bind.
    pub fn is_reserved(&self, id: &str) -> bool {
        self.reserved.contains_key(id)
    }

    /// Ends the reservation of a bound Application: from now on the store says where it is.
    pub fn finish_binding(&mut self, id: &str) {
        self.reserved.remove(id);
    }

    /// Forgets a placed Application (a reservation undone, or an Application gone, finished
    /// or unbound); answers whether it was counted.
    pub fn remove_app(&mut self, id: &str) -> bool {
        let Some((node, app)) = self.placed.remove(id) else { return false };
        if let Some(usage) = self.usage.get_mut(&node) {
            usage.requested = usage.requested.minus(app.requests);
            usage.scoring = usage.scoring.minus(app.scoring_requests());
            usage.apps.remove(id);
            if usage.apps.is_empty() {
                self.usage.remove(&node);
            }
        }
        if let Some(by_key) = self.labels.get_mut(&app.namespace) {
            for (key, value) in &app.labels {
                if let Some(by_value) = by_key.get_mut(key) {
                    if let Some(ids) = by_value.get_mut(value) {
                        ids.remove(id);
                        if ids.is_empty() {
                            by_value.remove(value);
                        }
                    }
                    if by_value.is_empty() {
                        by_key.remove(key);
                    }
                }
            }
            if by_key.is_empty() {
                self.labels.remove(&app.namespace);
            }
        }
        if let Some(ids) = self.namespaces.get_mut(&app.namespace) {
            ids.remove(id);
            if ids.is_empty() {
                self.namespaces.remove(&app.namespace);
            }
        }
        if self.anti_affine.remove(id) {
            self.anti_unindexed.remove(id);
            for slot in Snapshot::anti_slots(&app).unwrap_or_default() {
                if let Some(ids) = self.anti_index.get_mut(&slot) {
                    ids.remove(id);
                    if ids.is_empty() {
                        self.anti_index.remove(&slot);
                    }
                }
            }
        }
        true
    }

    /// The placed Applications in `namespaces` that `selector` picks, with their nodes. A
    /// selector with `matchLabels` is answered from the label index.
    pub fn select<'a>(
        &'a self,
        namespaces: &'a [String],
        selector: &'a LabelSelector,
    ) -> impl Iterator<Item = &'a (String, App)> + 'a {
        namespaces.iter().flat_map(move |namespace| {
            let first = selector.match_labels.as_ref().and_then(|labels| labels.iter().next());
            let candidates: Box<dyn Iterator<Item = &String>> = match first {
                Some((key, value)) => Box::new(
                    self.labels
                        .get(namespace)
                        .and_then(|by_key| by_key.get(key))
                        .and_then(|by_value| by_value.get(value))
                        .into_iter()
                        .flatten(),
                ),
                None => Box::new(self.namespaces.get(namespace).into_iter().flatten()),
            };
            candidates
                .filter_map(|id| self.placed.get(id))
                .filter(move |(_, app)| crate::plugins::selects(selector, &app.labels))
        })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::model::AppInfo;

    fn app(name: &str, node: Option<&str>, cpu: i64, labels: &[(&str, &str)]) -> App {
        let mut app = AppInfo::new("demo", name);
        app.node = node.map(str::to_owned);
        app.requests = Resources { cpu, memory: 0 };
        app.labels = labels.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
        Arc::new(app)
    }

    #[test]
    fn placed_applications_are_counted_on_their_node_until_they_finish_move_or_go() {
        let mut snapshot = Snapshot::default();
        assert!(!snapshot.put_app(&app("a", Some("n1"), 500, &[("app", "web")])));
        snapshot.put_app(&app("b", Some("n1"), 250, &[("app", "db")]));
        snapshot.put_app(&app("pending", None, 999, &[("app", "web")]));
        assert_eq!(snapshot.usage("n1").map(|u| u.requested.cpu), Some(750));
        let selector = LabelSelector {
            match_labels: Some([("app".to_owned(), "web".to_owned())].into()),
            ..LabelSelector::default()
        };
        let namespaces = vec!["demo".to_owned()];
        let picked: Vec<&str> =
            snapshot.select(&namespaces, &selector).map(|(_, a)| a.name.as_str()).collect();
        assert_eq!(picked, ["a"]);
        // Moving it frees n1.
        assert!(snapshot.put_app(&app("a", None, 500, &[("app", "web")])));
        assert_eq!(snapshot.usage("n1").map(|u| u.requested.cpu), Some(250));
        assert_eq!(snapshot.select(&namespaces, &selector).count(), 0);
        let mut finished = (*app("b", Some("n1"), 250, &[])).clone();
        finished.finished = true;
        assert!(snapshot.put_app(&Arc::new(finished)), "a finished Application frees what it held");
        assert!(snapshot.usage("n1").is_none());
    }
}
