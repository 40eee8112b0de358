//! A mode's steps rendered and sent in order, the first failing one named, and empty, unknown
//! or broken modes refused.

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
    let Outcome::Failed(reason) = run(&config, &context, &runner).await else { panic!("a 500 is a failure") };
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
        let context = StepContext { registration: &registration, subscription: &subscription, gateway: "" };
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
