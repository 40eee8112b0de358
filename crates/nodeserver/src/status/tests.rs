//! What a node reports is merged into an Application's status: the control plane's conditions
//! stay, the node's replace its own, and transition times move only on a change.

use kayra_api::kinds::application::ApplicationStatus;

use super::*;

#[test]
fn the_scheduled_condition_stays_and_the_rest_is_the_nodes() {
    let object: Object = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "status": {"phase": "Pending", "conditions": [
            {"type": "Scheduled", "status": "True", "reason": "Bound"},
            {"type": "Ready", "status": "False"},
        ]},
    }))
    .expect("an object");
    let report = ApplicationReport {
        status: ApplicationStatus {
            phase: Some("Running".into()),
            conditions: vec![
                Condition { type_: "Ready".into(), status: "True".into(), ..Condition::default() },
                Condition { type_: "Scheduled".into(), status: "False".into(), ..Condition::default() },
            ],
            ..ApplicationStatus::default()
        },
        ..ApplicationReport::default()
    };
    let status = merged_status(&object, &report);
    assert_eq!(status["phase"], "Running");
    assert_eq!(status["conditions"][0], json!({"type": "Scheduled", "status": "True", "reason": "Bound"}));
    assert_eq!(status["conditions"][1]["type"], "Ready");
    assert_eq!(status["conditions"].as_array().map(Vec::len), Some(2));
}

#[test]
fn ready_keeps_its_transition_time_while_it_stays_true() {
    let stored = json!({"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"});
    assert_eq!(
        ready_condition(Some(&stored), "2026-02-02T00:00:00Z")["lastTransitionTime"],
        "2026-01-01T00:00:00Z"
    );
    let unknown = json!({"type": "Ready", "status": "Unknown", "lastTransitionTime": "2026-01-01T00:00:00Z"});
    let ready = ready_condition(Some(&unknown), "2026-02-02T00:00:00Z");
    assert_eq!(
        (ready["lastTransitionTime"].as_str(), ready["lastHeartbeatTime"].as_str()),
        (Some("2026-02-02T00:00:00Z"), Some("2026-02-02T00:00:00Z"))
    );
}
