//! The plan: from what a set renders and what exists, the writes that bring the one to the
//! other and the status that describes them. No IO.
//!
//! Init steps (components with `restartPolicy: Never`) run first, in declaration order, all
//! children of a step together; the rest wait until every child of the step has Succeeded. A
//! failed step holds the set until its generation changes. Under `placement.mode: sameNode` the
//! anchor (the first child of the first init step, else the lexically first child) is placed
//! first and the others follow it to its node. Services are written before the children that
//! join them. A changed child is updated in name order within the rolling budget: only a child
//! that is available (Ready, at its current generation, on a Ready node) costs one; creates
//! cost nothing. Owned children no longer rendered are pruned, and owned Services without
//! members. A frozen set does nothing but freeze its children (`Progressing=False`, reason
//! `Frozen`); once thawed, it thaws them before anything else moves.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kayra_api::kinds::application::{Application, Placement, bound_node};
use kayra_api::kinds::applicationset::{
    ApplicationSetStatus, Child as StatusChild, rolling_budget, spec_hash_annotation,
};
use kayra_api::kinds::service::ServicePort;
use kayra_api::kinds::{Condition, ConditionType};
use kayra_registry::Object;
use serde_json::Value;

use crate::render::{Node, Rendered, RenderedService, Rendering};

/// At most this many children are listed in a set's status.
pub const MAX_STATUS_CHILDREN: usize = 100;

/// The annotation recording the set generation an init child was created for: a failed one is
/// run again only for a newer generation.
pub fn attempt_annotation(domain: &str) -> String {
    format!("fleet.{domain}/appset-generation")
}

/// What the plan needs of an existing child the set owns.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Child {
    /// The spec hash it was written with.
    pub hash: Option<String>,
    /// Its labels.
    pub labels: BTreeMap<String, String>,
    /// The node it is bound to.
    pub node: Option<String>,
    /// Its phase.
    pub phase: Option<String>,
    /// Ready, at its current generation, on a Ready node.
    pub available: bool,
    /// The exit code of its last run.
    pub exit_code: Option<i64>,
    /// The set generation it was created for (init children).
    pub attempt: Option<i64>,
    /// It is being deleted.
    pub deleting: bool,
    /// It is frozen (`spec.frozen`).
    pub frozen: bool,
    /// Its node still reports it frozen (condition `Frozen=True`, on a Ready node): a thaw
    /// written is not done until its node says so.
    pub held: bool,
}

impl Child {
    /// The plan's view of a stored Application, over the nodes known.
    pub fn from_object(object: &Object, domain: &str, nodes: &BTreeMap<String, Node>) -> Child {
        let pointer = |pointer: &str| {
            let mut segments = pointer.trim_start_matches('/').split('/');
            let first = object.get(segments.next()?)?;
            segments.try_fold(first, |value, segment| value.get(segment))
        };
        let text = |at: &str| pointer(at).and_then(Value::as_str).map(str::to_owned);
        let annotation = |key: String| {
            pointer("/metadata/annotations")
                .and_then(|a| a.get(key))
                .and_then(Value::as_str)
                .map(str::to_owned)
        };
        let node = bound_node(object).map(str::to_owned);
        let holds = |type_: ConditionType| {
            pointer("/status/conditions")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .any(|c| c["type"] == type_.as_str() && c["status"] == "True")
        };
        let ready = holds(ConditionType::Ready);
        let generation = pointer("/metadata/generation").and_then(Value::as_i64);
        let observed = pointer("/status/observedGeneration").and_then(Value::as_i64);
        let node_ready = node.as_ref().and_then(|n| nodes.get(n)).is_some_and(|n| n.ready);
        Child {
            hash: annotation(spec_hash_annotation(domain)),
            labels: pointer("/metadata/labels")
                .and_then(Value::as_object)
                .map(|labels| {
                    labels.iter().filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned()))).collect()
                })
                .unwrap_or_default(),
            available: ready && node_ready && generation.is_some() && observed == generation,
            node,
            phase: text("/status/phase"),
            exit_code: pointer("/status/exitCode").and_then(Value::as_i64),
            attempt: annotation(attempt_annotation(domain)).and_then(|a| a.parse().ok()),
            deleting: pointer("/metadata/deletionTimestamp").is_some_and(|t| !t.is_null()),
            frozen: pointer("/spec/frozen").and_then(Value::as_bool).unwrap_or(false),
            held: holds(ConditionType::Frozen) && node_ready,
        }
    }
}

/// What the plan needs of a Service the set owns or renders.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ServiceState {
    /// The set is its controlling owner.
    pub owned: bool,
    /// Its ports.
    pub ports: Vec<ServicePort>,
    /// Some Application joins it.
    pub members: bool,
}

/// Everything the plan is made from.
#[derive(Debug, Clone)]
pub struct Input<'a> {
    /// The set's `metadata.generation`.
    pub generation: i64,
    /// What the set renders, or why it does not.
    pub rendering: Result<&'a Rendering, String>,
    /// `placement.mode: sameNode`.
    pub same_node: bool,
    /// `rollout.prune`.
    pub prune: bool,
    /// `rollout.maxUnavailable`.
    pub max_unavailable: Option<&'a IntOrString>,
    /// `spec.frozen`: the rollout is held and the children are frozen with the set.
    pub frozen: bool,
    /// The children the set owns, by name.
    pub children: &'a BTreeMap<String, Child>,
    /// The Services the set owns or renders, by name.
    pub services: &'a BTreeMap<String, ServiceState>,
    /// The status stored now.
    pub previous: Option<&'a ApplicationSetStatus>,
    /// Now, for conditions that change.
    pub now: &'a str,
}

/// One write.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// Create the Service.
    CreateService(RenderedService),
    /// Set the ports of an owned Service.
    UpdateServicePorts {
        /// The Service.
        name: String,
        /// Its ports.
        ports: Vec<ServicePort>,
    },
    /// Delete an owned Service no longer rendered and without members.
    DeleteService(String),
    /// Create the Application.
    Create(Box<Application>),
    /// Replace an Application's labels, spec-hash annotation and spec with these.
    Update(Box<Application>),
    /// Delete the Application.
    Delete(String),
    /// Freeze (`true`) or thaw the Application through its door, in place.
    Freeze {
        /// The Application.
        name: String,
        /// Frozen or thawed.
        frozen: bool,
    },
}

/// The writes and the status.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// The writes, in order.
    pub steps: Vec<Step>,
    /// The status after them.
    pub status: ApplicationSetStatus,
}

/// Plans one pass.
pub fn plan(input: &Input<'_>) -> Plan {
    let children = input.children;
    let previous = input.previous.cloned().unwrap_or_default();
    let rendering = match &input.rendering {
        Ok(rendering) => *rendering,
        Err(message) => {
            // Nothing destructive: the last counts stay, only the conditions say why.
            let mut status = ApplicationSetStatus { observed_generation: Some(input.generation), ..previous };
            let conditions = vec![
                condition("Rendered", false, "RenderError", message),
                condition(ConditionType::Converged.as_str(), false, "RenderError", "the set does not render"),
            ];
            finish(&mut status, conditions, input);
            return Plan { steps: Vec::new(), status };
        }
    };
    let mut steps = Vec::new();
    let rendered_names: BTreeSet<&str> = rendering.children.iter().map(Rendered::name).collect();
    let init_names: BTreeSet<&str> =
        rendering.children.iter().filter(|r| r.init_step.is_some()).map(Rendered::name).collect();
    let step_count = rendering.children.iter().filter_map(|r| r.init_step).max().map_or(0, |last| last + 1);

    let anchor = rendering
        .children
        .iter()
        .find(|r| r.init_step == Some(0))
        .or_else(|| rendering.children.iter().min_by(|a, b| a.name().cmp(b.name())))
        .map(Rendered::name);
    let anchor_node = anchor.and_then(|a| children.get(a)).and_then(|c| c.node.clone());
    let mut awaiting_anchor = false;
    // The node a rendered child goes to: its own pin, the anchor's under sameNode, or none
    // (the scheduler's choice); `None` when it must wait for the anchor.
    let mut target = |r: &Rendered| -> Option<Option<String>> {
        if !input.same_node || Some(r.name()) == anchor || r.pinned {
            return Some(r.node().map(str::to_owned));
        }
        match &anchor_node {
            Some(node) => Some(Some(node.clone())),
            None => {
                awaiting_anchor = true;
                None
            }
        }
    };

    // Init steps.
    let mut initialized = true;
    let mut init_failed: Option<String> = None;
    let mut waiting_on: Option<String> = None;
    for step in 0..step_count {
        let mut done = true;
        for r in rendering.children.iter().filter(|r| r.init_step == Some(step)) {
            let name = r.name();
            let Some(node) = target(r) else {
                done = false;
                continue;
            };
            match children.get(name) {
                None => {
                    let mut application = with_node(r, node);
                    application
                        .metadata
                        .annotations
                        .get_or_insert_with(BTreeMap::new)
                        .insert(attempt_annotation(domain_of(r)), input.generation.to_string());
                    steps.push(Step::Create(Box::new(application)));
                    done = false;
                }
                Some(child) if child.deleting => done = false,
                Some(child) if child.hash.as_deref() != Some(r.hash.as_str()) => {
                    steps.push(Step::Delete(name.to_owned()));
                    done = false;
                }
                Some(child) if child.phase.as_deref() == Some("Failed") => {
                    if child.attempt.is_some_and(|attempt| attempt < input.generation) {
                        steps.push(Step::Delete(name.to_owned()));
                    } else if init_failed.is_none() {
                        let code = child.exit_code.map_or_else(|| "unknown".to_owned(), |c| c.to_string());
                        init_failed = Some(format!(
                            "init step {} ({}): Application {name} failed with exit code {code}",
                            step + 1,
                            r.component
                        ));
                    }
                    done = false;
                }
                Some(child) if child.phase.as_deref() == Some("Succeeded") => {}
                Some(_) => done = false,
            }
            if !done && waiting_on.is_none() {
                waiting_on = Some(format!("init step {} ({})", step + 1, r.component));
            }
        }
        if !done {
            initialized = false;
            break;
        }
    }

    let mains: Vec<&Rendered> = {
        let mut mains: Vec<&Rendered> = rendering.children.iter().filter(|r| r.init_step.is_none()).collect();
        mains.sort_by(|a, b| a.name().cmp(b.name()));
        mains
    };
    let budget = rolling_budget(input.max_unavailable, mains.len());
    let mut held = false;
    if initialized {
        for service in &rendering.services {
            match input.services.get(&service.name) {
                None => steps.push(Step::CreateService(service.clone())),
                Some(state) if state.owned && !same_ports(&state.ports, &service.ports) => {
                    steps.push(Step::UpdateServicePorts {
                        name: service.name.clone(),
                        ports: service.ports.clone(),
                    })
                }
                Some(_) => {}
            }
        }
        let mut unavailable = mains
            .iter()
            .filter(|r| !children.get(r.name()).is_some_and(|c| c.available && !c.deleting))
            .count();
        for r in &mains {
            let Some(node) = target(r) else { continue };
            match children.get(r.name()) {
                None => steps.push(Step::Create(Box::new(with_node(r, node)))),
                Some(child) if child.deleting => {}
                Some(child) => {
                    let node_differs = node.is_some() && child.node != node;
                    let spec_differs = child.hash.as_deref() != Some(r.hash.as_str()) || node_differs;
                    // The set owns the labels it renders; others added to a child stay.
                    let labels_differ =
                        labels(r).iter().any(|(key, value)| child.labels.get(key) != Some(value));
                    if !spec_differs && !labels_differ {
                        continue;
                    }
                    let application = Box::new(with_node(r, node.or_else(|| child.node.clone())));
                    if !spec_differs || !child.available {
                        steps.push(Step::Update(application));
                    } else if unavailable < budget {
                        unavailable += 1;
                        steps.push(Step::Update(application));
                    } else {
                        held = true;
                    }
                }
            }
        }
    }

    if input.prune {
        for (name, child) in children {
            if !rendered_names.contains(name.as_str()) && !child.deleting {
                steps.push(Step::Delete(name.clone()));
            }
        }
        let rendered_services: BTreeSet<&str> = rendering.services.iter().map(|s| s.name.as_str()).collect();
        for (name, service) in input.services {
            if service.owned && !service.members && !rendered_services.contains(name.as_str()) {
                steps.push(Step::DeleteService(name.clone()));
            }
        }
    }

    // A frozen set holds everything but freezing its children; a thawed one thaws them, and
    // moves nothing else until their nodes say they go on (and whether they are ready).
    let doors: Vec<Step> = children
        .iter()
        .filter(|(_, child)| !child.deleting && child.frozen != input.frozen)
        .map(|(name, _)| Step::Freeze { name: name.clone(), frozen: input.frozen })
        .collect();
    let thawing =
        !input.frozen && (!doors.is_empty() || children.values().any(|child| child.held && !child.deleting));
    if input.frozen || thawing {
        steps = doors;
    }

    // Status.
    let is_main = |name: &str| !init_names.contains(name);
    let main_children = || children.iter().filter(|(name, _)| is_main(name));
    let desired = mains.len();
    let current = main_children().count();
    let ready = main_children().filter(|(_, c)| c.available).count();
    let updated = mains
        .iter()
        .filter(|r| {
            children.get(r.name()).is_some_and(|c| {
                c.hash.as_deref() == Some(r.hash.as_str())
                    && (!input.same_node
                        || r.node().is_some()
                        || anchor_node.is_none()
                        || c.node == anchor_node)
            })
        })
        .count();
    let scheduled = main_children().filter(|(_, c)| c.node.is_some()).count();
    let mut conditions = vec![condition(
        "Rendered",
        true,
        "Expanded",
        &format!(
            "{} Applications and {} Services rendered",
            rendering.children.len(),
            rendering.services.len()
        ),
    )];
    if step_count > 0 {
        conditions.push(match (&init_failed, initialized) {
            (Some(message), _) => condition("Initialized", false, "InitFailed", message),
            (None, true) => condition("Initialized", true, "Initialized", "every init step succeeded"),
            (None, false) => condition(
                "Initialized",
                false,
                "Initializing",
                &format!("waiting for {}", waiting_on.as_deref().unwrap_or("the init steps")),
            ),
        });
    }
    let converged = !input.frozen
        && !thawing
        && initialized
        && !awaiting_anchor
        && !held
        && steps.is_empty()
        && desired == current
        && current == ready
        && ready == updated;
    let counts = format!("{updated} of {desired} updated, {ready} ready");
    let (converged_condition, progressing) = if converged {
        (
            condition(
                ConditionType::Converged.as_str(),
                true,
                "Converged",
                &format!("{desired} Applications run the current template"),
            ),
            condition("Progressing", true, "Complete", "the set runs its current template"),
        )
    } else if input.frozen {
        let message = format!("the set is frozen: its rollout is held and its Applications frozen; {counts}");
        (
            condition(ConditionType::Converged.as_str(), false, "Frozen", &message),
            condition(ConditionType::Progressing.as_str(), false, "Frozen", &message),
        )
    } else if thawing {
        let message = format!("thawing the set's Applications before its rollout resumes; {counts}");
        (
            condition(ConditionType::Converged.as_str(), false, "Thawing", &message),
            condition(ConditionType::Progressing.as_str(), true, "Thawing", &message),
        )
    } else if let Some(message) = &init_failed {
        (
            condition(ConditionType::Converged.as_str(), false, "InitFailed", message),
            condition("Progressing", false, "InitFailed", message),
        )
    } else {
        let (reason, message) = if !initialized {
            ("Initializing", format!("waiting for {}", waiting_on.as_deref().unwrap_or("the init steps")))
        } else if awaiting_anchor {
            ("AwaitingAnchor", format!("waiting for {} to be placed on a node", anchor.unwrap_or_default()))
        } else if held {
            ("RolloutHeld", format!("{counts}; at most {budget} may be unavailable at once"))
        } else {
            ("Progressing", counts.clone())
        };
        (
            condition(ConditionType::Converged.as_str(), false, reason, &message),
            condition("Progressing", true, "RollingOut", &counts),
        )
    };
    conditions.push(progressing);
    conditions.push(converged_condition);
    let mut listed: Vec<StatusChild> = children
        .iter()
        .take(MAX_STATUS_CHILDREN)
        .map(|(name, c)| StatusChild {
            name: name.clone(),
            node: c.node.clone(),
            phase: Some(c.phase.clone().unwrap_or_else(|| "Pending".to_owned())),
        })
        .collect();
    listed.sort_by(|a, b| a.name.cmp(&b.name));
    let count = |n: usize| Some(i64::try_from(n).unwrap_or(i64::MAX));
    let mut status = ApplicationSetStatus {
        phase: None,
        observed_generation: Some(input.generation),
        desired: count(desired),
        current: count(current),
        scheduled: count(scheduled),
        ready: count(ready),
        updated: count(updated),
        children: listed,
        conditions: Vec::new(),
    };
    finish(&mut status, conditions, input);
    Plan { steps, status }
}

/// Stamps the conditions (keeping the transition time of one whose status did not change) and
/// the phase: the reason of the first False condition, else Ready.
fn finish(status: &mut ApplicationSetStatus, mut conditions: Vec<Condition>, input: &Input<'_>) {
    let before = input.previous.map(|p| p.conditions.as_slice()).unwrap_or_default();
    for condition in &mut conditions {
        condition.observed_generation = Some(input.generation);
        condition.last_transition_time = Some(
            before
                .iter()
                .find(|b| b.type_ == condition.type_ && b.status == condition.status)
                .and_then(|b| b.last_transition_time.clone())
                .unwrap_or_else(|| input.now.to_owned()),
        );
    }
    status.phase = Some(
        conditions
            .iter()
            .filter(|c| c.type_ != "Progressing")
            .find(|c| c.status == "False")
            .and_then(|c| c.reason.clone())
            .unwrap_or_else(|| "Ready".to_owned()),
    );
    status.conditions = conditions;
}

fn condition(type_: &str, status: bool, reason: &str, message: &str) -> Condition {
    Condition {
        type_: type_.to_owned(),
        status: if status { "True" } else { "False" }.to_owned(),
        reason: Some(reason.to_owned()),
        message: Some(message.to_owned()),
        last_transition_time: None,
        observed_generation: None,
    }
}

fn labels(r: &Rendered) -> BTreeMap<String, String> {
    r.application.metadata.labels.clone().unwrap_or_default()
}

/// The domain a rendered child's annotations are spelled in.
fn domain_of(r: &Rendered) -> &str {
    r.application
        .api_version
        .as_deref()
        .and_then(|v| v.strip_prefix("fleet."))
        .and_then(|v| v.strip_suffix("/v1"))
        .unwrap_or_default()
}

/// The rendered Application, bound to `node` when one is given.
fn with_node(r: &Rendered, node: Option<String>) -> Application {
    let mut application = r.application.clone();
    if let Some(node) = node {
        application.spec.placement.get_or_insert_with(Placement::default).node_name = Some(node);
    }
    application
}

/// Ports equal as a Service stores them: protocol TCP when unset, and a port with no target
/// targets its own number.
fn same_ports(stored: &[ServicePort], rendered: &[ServicePort]) -> bool {
    let key = |p: &ServicePort| {
        let target = match (&p.target_name, p.target_port) {
            (Some(name), _) => name.clone(),
            (None, target) => target.unwrap_or(p.port).to_string(),
        };
        (p.name.clone(), p.port, target, p.protocol.clone().unwrap_or_else(|| "TCP".into()))
    };
    stored.len() == rendered.len() && stored.iter().zip(rendered).all(|(a, b)| key(a) == key(b))
}

#[cfg(test)]
mod tests;
