//! Server-side printing: each Kind's table columns, computed from the object's JSON, and the
//! age format kubectl users know (`7s`, `3m12s`, `5h`, `2d`).

use serde_json::Value;

/// One column of a Kind's table.
#[derive(Debug, Clone, Copy)]
pub struct Column {
    /// The header, as kubectl prints it (upper-cased).
    pub name: &'static str,
    /// `string` or `integer`.
    pub type_: &'static str,
    /// `name` for the column that names the object, else empty.
    pub format: &'static str,
    /// What the column shows.
    pub description: &'static str,
    /// 0: always shown; 1: only with `-o wide`.
    pub priority: i32,
    /// The cell for one object; `now` is for ages.
    pub cell: fn(&Value, jiff::Timestamp) -> Value,
}

/// The `Name` column every Kind starts with.
pub const NAME: Column = Column {
    name: "Name",
    type_: "string",
    format: "name",
    description: "Name must be unique within a namespace.",
    priority: 0,
    cell: |object, _| Value::String(text(object, "metadata.name")),
};

/// The `Age` column: time since `metadata.creationTimestamp`.
pub const AGE: Column = Column {
    name: "Age",
    type_: "string",
    format: "",
    description: "CreationTimestamp is a timestamp representing the server time when this object was created.",
    priority: 0,
    cell: |object, now| Value::String(age_of(&text(object, "metadata.creationTimestamp"), now)),
};

/// The string at a dotted path, numbers and booleans printed; empty when absent.
pub fn text(object: &Value, path: &str) -> String {
    match path.split('.').try_fold(object, |at, step| at.get(step)) {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Number(number)) => number.to_string(),
        Some(Value::Bool(flag)) => flag.to_string(),
        _ => String::new(),
    }
}

/// In the list at the JSON pointer `list` (conditions, addresses), the `field` of the entry
/// whose `type` is `kind`.
pub fn field_of_typed_entry<'a>(object: &'a Value, list: &str, kind: &str, field: &str) -> Option<&'a str> {
    object
        .pointer(list)?
        .as_array()?
        .iter()
        .find(|entry| entry.get("type").and_then(Value::as_str) == Some(kind))?
        .get(field)?
        .as_str()
}

/// The string at a dotted path, or `<none>` as kubectl prints a missing value.
pub fn text_or_none(object: &Value, path: &str) -> Value {
    let value = text(object, path);
    Value::String(if value.is_empty() { "<none>".to_owned() } else { value })
}

/// The age of an RFC 3339 timestamp at `now`; `<unknown>` when there is none.
pub fn age_of(timestamp: &str, now: jiff::Timestamp) -> String {
    match timestamp.parse::<jiff::Timestamp>() {
        Ok(then) => human_duration((now.as_second() - then.as_second()).max(-1)),
        Err(_) => "<unknown>".to_owned(),
    }
}

/// Kubernetes' `HumanDuration`, to the second.
pub fn human_duration(seconds: i64) -> String {
    if seconds < 0 {
        return "<invalid>".to_owned();
    }
    let (minutes, hours, days) = (seconds / 60, seconds / 3600, seconds / 86_400);
    let years = days / 365;
    let pair = |big: i64, big_unit: &str, small: i64, small_unit: &str| {
        if small == 0 { format!("{big}{big_unit}") } else { format!("{big}{big_unit}{small}{small_unit}") }
    };
    if seconds < 120 {
        format!("{seconds}s")
    } else if minutes < 10 {
        pair(minutes, "m", seconds % 60, "s")
    } else if hours < 3 {
        format!("{minutes}m")
    } else if hours < 8 {
        pair(hours, "h", minutes % 60, "m")
    } else if hours < 48 {
        format!("{hours}h")
    } else if days < 8 {
        pair(days, "d", hours % 24, "h")
    } else if years < 2 {
        format!("{days}d")
    } else if years < 8 {
        pair(years, "y", days % 365, "d")
    } else {
        format!("{years}y")
    }
}

#[cfg(test)]
mod tests {
    use super::human_duration;

    #[test]
    fn ages_print_as_kubectl_users_know_them() {
        for (seconds, expect) in [
            (0, "0s"),
            (7, "7s"),
            (119, "119s"),
            (192, "3m12s"),
            (300, "5m"),
            (1500, "25m"),
            (4 * 3600 + 60, "4h1m"),
            (20 * 3600, "20h"),
            (3 * 86_400 + 3600, "3d1h"),
            (30 * 86_400, "30d"),
            (3 * 365 * 86_400 + 86_400, "3y1d"),
            (10 * 365 * 86_400, "10y"),
            (-5, "<invalid>"),
        ] {
            assert_eq!(human_duration(seconds), expect, "{seconds}");
        }
    }
}
