//! Reconciling one subscriber: the registration's mode names an ordered list of HTTP steps in
//! `reconciler.mode.<name>.steps`; each is rendered with Go text/template syntax over
//! `.Registration`, `.Subscription` (`ShortName`, `Namespace`, `Api`), `.SyncID` and `.Gateway`,
//! sent through the [`StepRunner`] port, and must answer an accepted status. The first step
//! that fails stops the run and is named in the outcome.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::{ApiRegistration, Subscription};

/// How long a step may take when its mode says nothing.
pub const DEFAULT_STEP_TIMEOUT: Duration = Duration::from_secs(30);

/// The `reconciler` section of the controller's configuration.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ReconcilerConfig {
    /// Where registered APIs are reachable: `<gateway_url>/apis/<api>/...`.
    pub gateway_url: Option<String>,
    /// The modes a registration may name.
    pub mode: BTreeMap<String, Mode>,
}

/// How a subscriber is reconciled: its steps, in order. No steps only records the sync.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Mode {
    /// The steps.
    pub steps: Vec<Step>,
}

/// One HTTP request of a mode; every text field is a template.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Step {
    /// What failures call the step; `step <n>` when empty.
    pub name: String,
    /// The HTTP method; `POST` when empty.
    pub method: String,
    /// The URL.
    pub url: String,
    /// Request headers.
    pub headers: BTreeMap<String, String>,
    /// The request body.
    pub body: String,
    /// The statuses that count as success; any 2xx when empty.
    pub accept: Vec<u16>,
    /// How long it may take (`10s`, `1m`); [`DEFAULT_STEP_TIMEOUT`] when empty.
    pub timeout: String,
}

/// A rendered step, ready to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepRequest {
    /// The HTTP method.
    pub method: String,
    /// The URL.
    pub url: String,
    /// Request headers.
    pub headers: BTreeMap<String, String>,
    /// The body.
    pub body: String,
    /// How long it may take.
    pub timeout: Duration,
}

/// Sends rendered steps: the reconciler's only way out.
#[async_trait::async_trait]
pub trait StepRunner: Send + Sync {
    /// Sends `request` within its timeout; answers the response status, or why there was none.
    async fn send(&self, request: &StepRequest) -> Result<u16, String>;
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Every step succeeded (or there were none): the subscriber is at the sync_id.
    Success,
    /// A step failed, or the mode is unknown: the subscriber stays where it was.
    Failed(String),
}

/// What a mode's templates see.
pub struct StepContext<'a> {
    /// The registration reconciled against.
    pub registration: &'a ApiRegistration,
    /// The subscriber.
    pub subscription: &'a Subscription,
    /// The gateway's URL, empty when unset.
    pub gateway: &'a str,
}

impl StepContext<'_> {
    fn value(&self) -> gtmpl::Value {
        let object = |fields: Vec<(&str, gtmpl::Value)>| {
            gtmpl::Value::Object(
                fields.into_iter().map(|(k, v)| (k.to_owned(), v)).collect::<HashMap<_, _>>(),
            )
        };
        let text = |value: &str| gtmpl::Value::String(value.to_owned());
        let registration = self.registration;
        object(vec![
            (
                "Registration",
                object(vec![
                    ("Name", text(&registration.name)),
                    ("ShortName", text(&registration.short_name)),
                    ("Platform", text(&registration.platform)),
                    ("Region", text(&registration.region)),
                    ("Owner", text(&registration.owner)),
                    ("Description", text(&registration.description)),
                    ("Active", gtmpl::Value::Bool(registration.active)),
                    ("Upstream", gtmpl::Value::Bool(registration.upstream)),
                    ("Downstream", gtmpl::Value::Bool(registration.downstream)),
                    ("SyncID", text(&registration.sync_id)),
                    ("Mode", text(&registration.mode)),
                ]),
            ),
            (
                "Subscription",
                object(vec![
                    ("ShortName", text(&registration.short_name)),
                    ("Namespace", text(&self.subscription.namespace)),
                    ("Api", text(&self.subscription.api)),
                    ("Active", gtmpl::Value::Bool(self.subscription.active)),
                ]),
            ),
            ("SyncID", text(&registration.sync_id)),
            ("Gateway", text(self.gateway)),
        ])
    }
}

/// Renders one template.
fn render(template: &str, context: &gtmpl::Context) -> Result<String, String> {
    let mut parsed = gtmpl::Template::default();
    parsed.parse(template).map_err(|error| format!("template {template:?}: {error}"))?;
    parsed.render(context).map_err(|error| format!("template {template:?}: {error}"))
}

/// Renders a step for `context`.
pub fn render_step(step: &Step, context: &StepContext<'_>) -> Result<StepRequest, String> {
    let context = gtmpl::Context::from(context.value());
    let timeout = match step.timeout.as_str() {
        "" => DEFAULT_STEP_TIMEOUT,
        text => {
            parse_duration(text).ok_or_else(|| format!("timeout {text:?} is not a duration such as 10s"))?
        }
    };
    let method = if step.method.is_empty() { "POST".to_owned() } else { step.method.to_ascii_uppercase() };
    let mut headers = BTreeMap::new();
    for (name, value) in &step.headers {
        headers.insert(name.clone(), render(value, &context)?);
    }
    Ok(StepRequest {
        method,
        url: render(&step.url, &context)?,
        headers,
        body: render(&step.body, &context)?,
        timeout,
    })
}

/// `90s`, `2m`, `1h`, `500ms`.
fn parse_duration(text: &str) -> Option<Duration> {
    let split = text.find(|c: char| !c.is_ascii_digit())?;
    let (number, unit) = text.split_at(split);
    let number: u64 = number.parse().ok()?;
    match unit {
        "ms" => Some(Duration::from_millis(number)),
        "s" => Some(Duration::from_secs(number)),
        "m" => Some(Duration::from_secs(number.checked_mul(60)?)),
        "h" => Some(Duration::from_secs(number.checked_mul(3600)?)),
        _ => None,
    }
}

/// Runs the registration's mode for one subscriber.
pub async fn run(config: &ReconcilerConfig, context: &StepContext<'_>, runner: &dyn StepRunner) -> Outcome {
    if context.registration.mode.is_empty() {
        // A registration that names no mode only records the sync.
        return Outcome::Success;
    }
    let Some(mode) = config.mode.get(&context.registration.mode) else {
        return Outcome::Failed(format!(
            "mode {:?} is not configured under reconciler.mode",
            context.registration.mode
        ));
    };
    for (at, step) in mode.steps.iter().enumerate() {
        let name = if step.name.is_empty() { format!("step {}", at + 1) } else { step.name.clone() };
        let request = match render_step(step, context) {
            Ok(request) => request,
            Err(reason) => return Outcome::Failed(format!("{name}: {reason}")),
        };
        match runner.send(&request).await {
            Ok(status) if accepted(step, status) => {}
            Ok(status) => {
                return Outcome::Failed(format!(
                    "{name}: {} {} answered {status}",
                    request.method, request.url
                ));
            }
            Err(reason) => {
                return Outcome::Failed(format!("{name}: {} {}: {reason}", request.method, request.url));
            }
        }
    }
    Outcome::Success
}

fn accepted(step: &Step, status: u16) -> bool {
    if step.accept.is_empty() { (200..300).contains(&status) } else { step.accept.contains(&status) }
}

#[cfg(test)]
mod tests;
