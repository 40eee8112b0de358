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
mod tests {
    use std::sync::Mutex;

    use super::*;

    /// Answers the statuses it was given, in order, recording each request.
    struct Recorder {
        answers: Mutex<Vec<Result<u16, String>>>,
        sent: Mutex<Vec<StepRequest>>,
    }

    #[async_trait::async_trait]
    impl StepRunner for Recorder {
        async fn send(&self, request: &StepRequest) -> Result<u16, String> {
            self.sent.lock().unwrap().push(request.clone());
            self.answers.lock().unwrap().remove(0)
        }
    }

    fn recorder(answers: Vec<Result<u16, String>>) -> Recorder {
        Recorder { answers: Mutex::new(answers), sent: Mutex::new(Vec::new()) }
    }

    fn config() -> ReconcilerConfig {
        let yaml = r#"{
            "gateway_url": "http://gateway:8080",
            "mode": {
                "trigger": {"steps": [
                    {"name": "notify", "method": "post", "url": "{{ .Gateway }}/apis/{{ .Subscription.Api }}/v1/namespaces/{{ .Subscription.Namespace }}/syncs",
                     "headers": {"X-Sync": "{{ .SyncID }}"}, "body": "{\"short\": \"{{ .Subscription.ShortName }}\"}", "timeout": "5s"},
                    {"name": "verify", "method": "GET", "url": "{{ .Gateway }}/apis/{{ .Registration.Name }}/v1/health", "accept": [200, 204]}
                ]},
                "api": {},
                "broken": {"steps": [{"url": "{{ .Nope.Field }}"}]}
            }
        }"#;
        serde_json::from_str(yaml).unwrap()
    }

    fn registration(mode: &str) -> ApiRegistration {
        ApiRegistration {
            name: "compute.example.com".into(),
            short_name: "compute".into(),
            sync_id: "build-7".into(),
            mode: mode.into(),
            ..ApiRegistration::default()
        }
    }

    #[tokio::test]
    async fn steps_are_rendered_and_sent_in_order() {
        let config = config();
        let registration = registration("trigger");
        let subscription = Subscription::new("sre", "compute.example.com", true);
        let context = StepContext {
            registration: &registration,
            subscription: &subscription,
            gateway: "http://gateway:8080",
        };
        let runner = recorder(vec![Ok(202), Ok(204)]);
        assert_eq!(run(&config, &context, &runner).await, Outcome::Success);
        let sent = runner.sent.lock().unwrap();
        assert_eq!(sent[0].method, "POST");
        assert_eq!(sent[0].url, "http://gateway:8080/apis/compute.example.com/v1/namespaces/sre/syncs");
        assert_eq!(sent[0].headers["X-Sync"], "build-7");
        assert_eq!(sent[0].body, r#"{"short": "compute"}"#);
        assert_eq!(sent[0].timeout, Duration::from_secs(5));
        assert_eq!((sent[1].method.as_str(), sent[1].timeout), ("GET", DEFAULT_STEP_TIMEOUT));
    }

    #[tokio::test]
    async fn the_first_failing_step_is_named_and_ends_the_run() {
        let config = config();
        let registration = registration("trigger");
        let subscription = Subscription::new("sre", "compute.example.com", true);
        let context = StepContext {
            registration: &registration,
            subscription: &subscription,
            gateway: "http://gateway:8080",
        };

        let runner = recorder(vec![Ok(500)]);
        let Outcome::Failed(reason) = run(&config, &context, &runner).await else {
            panic!("a 500 is a failure")
        };
        assert!(
            reason.starts_with("notify: POST http://gateway:8080/apis/") && reason.ends_with("answered 500"),
            "{reason}"
        );
        assert_eq!(runner.sent.lock().unwrap().len(), 1, "later steps are not sent");

        let runner = recorder(vec![Ok(200), Ok(201)]);
        let Outcome::Failed(reason) = run(&config, &context, &runner).await else {
            panic!("201 is not accepted")
        };
        assert!(reason.starts_with("verify:"), "{reason}");

        let runner = recorder(vec![Err("connection refused".into())]);
        let Outcome::Failed(reason) = run(&config, &context, &runner).await else { panic!() };
        assert!(reason.ends_with("connection refused"), "{reason}");
    }

    #[tokio::test]
    async fn empty_unknown_and_broken_modes() {
        let config = config();
        let subscription = Subscription::new("sre", "compute.example.com", true);
        let runner = recorder(Vec::new());
        for (mode, expected) in [
            ("", None),
            ("api", None),
            ("missing", Some("is not configured")),
            ("broken", Some("step 1: template")),
        ] {
            let registration = registration(mode);
            let context =
                StepContext { registration: &registration, subscription: &subscription, gateway: "" };
            match (run(&config, &context, &runner).await, expected) {
                (Outcome::Success, None) => {}
                (Outcome::Failed(reason), Some(part)) => assert!(reason.contains(part), "{mode}: {reason}"),
                (outcome, _) => panic!("{mode}: {outcome:?}"),
            }
        }
        assert!(runner.sent.lock().unwrap().is_empty(), "nothing is sent for them");
        assert_eq!(parse_duration("1500ms"), Some(Duration::from_millis(1500)));
        assert_eq!(parse_duration("2m"), Some(Duration::from_secs(120)));
        assert_eq!(parse_duration("soon"), None);
    }
}
