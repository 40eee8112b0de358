//! What an Application's status says: its conditions, set with Kubernetes' transition times,
//! and whether a stored status contradicts the node's own.

use jiff::Timestamp;
use kayra_api::kinds::Condition;
use kayra_api::kinds::application::ApplicationStatus;

/// Whether the status stored for an Application says otherwise than the node's about what its
/// readers act on: its phase, and whether it is Ready.
pub(super) fn says_otherwise(stored: Option<&ApplicationStatus>, own: &ApplicationStatus) -> bool {
    let ready = |status: &ApplicationStatus| {
        status.conditions.iter().find(|condition| condition.type_ == "Ready").map(|c| c.status.clone())
    };
    stored.is_none_or(|stored| stored.phase != own.phase || ready(stored) != ready(own))
}

pub(super) fn rfc3339(at: Timestamp) -> String {
    format!("{at:.0}")
}

/// Sets the condition `type_`, moving its transition time only when its status changes.
pub(super) fn set_condition(
    status: &mut ApplicationStatus,
    type_: &str,
    value: bool,
    reason: &str,
    message: Option<&str>,
) {
    let word = if value { "True" } else { "False" };
    let now = rfc3339(Timestamp::now());
    match status.conditions.iter_mut().find(|condition| condition.type_ == type_) {
        Some(condition) => {
            if condition.status != word {
                condition.status = word.to_owned();
                condition.last_transition_time = Some(now);
            }
            condition.reason = Some(reason.to_owned());
            condition.message = message.map(str::to_owned);
        }
        None => status.conditions.push(Condition {
            type_: type_.to_owned(),
            status: word.to_owned(),
            reason: Some(reason.to_owned()),
            message: message.map(str::to_owned),
            last_transition_time: Some(now),
            observed_generation: None,
        }),
    }
}
