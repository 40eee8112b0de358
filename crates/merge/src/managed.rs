//! `metadata.managedFields`: who manages which fields of an object, one entry per manager,
//! operation and subresource (and, for an updater, per apiVersion), decoded from and encoded
//! to Kubernetes' `ManagedFieldsEntry` list.

use std::cmp::Ordering;

use serde_json::{Map, Value, json};

use crate::set::FieldSet;

/// How a manager came to own its fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Operation {
    /// By server-side apply: the fields are what it applied.
    Apply,
    /// By any other write: the fields are what it changed.
    Update,
}

impl Operation {
    /// The word on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Apply => "Apply",
            Operation::Update => "Update",
        }
    }
}

/// One manager's fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The manager's name (`kubectl`, `kayra-scheduler`).
    pub manager: String,
    /// Apply or Update.
    pub operation: Operation,
    /// The `group/version` the fields are named in.
    pub api_version: String,
    /// When the manager last changed the object (RFC 3339, in seconds), when known.
    pub time: Option<String>,
    /// The subresource written through (`status`, `scale`), or empty.
    pub subresource: String,
    /// The fields.
    pub fields: FieldSet,
}

impl Entry {
    /// Whether this entry is the one `other` would be recorded in: the same manager, operation
    /// and subresource, and for an updater the same apiVersion.
    pub fn same_manager(&self, other: &Entry) -> bool {
        self.manager == other.manager
            && self.operation == other.operation
            && self.subresource == other.subresource
            && (self.operation == Operation::Apply || self.api_version == other.api_version)
    }

    /// The manager as a conflict names it: `"kubectl"`, `"kubectl" with subresource "scale"
    /// using fleet.example.com/v1` (an updater with its apiVersion).
    pub fn describe(&self) -> String {
        let mut described = format!("{:?}", self.manager);
        if !self.subresource.is_empty() {
            described.push_str(&format!(" with subresource {:?}", self.subresource));
        }
        if self.operation == Operation::Update {
            described.push_str(&format!(" using {}", self.api_version));
        }
        described
    }

    fn encode(&self) -> Value {
        let mut entry = json!({
            "manager": self.manager,
            "operation": self.operation.as_str(),
            "apiVersion": self.api_version,
            "fieldsType": "FieldsV1",
            "fieldsV1": self.fields.to_fields_v1(),
        });
        if let Some(time) = &self.time {
            entry["time"] = json!(time);
        }
        if !self.subresource.is_empty() {
            entry["subresource"] = json!(self.subresource);
        }
        entry
    }

    fn decode(at: usize, value: &Value) -> Result<Entry, String> {
        let Value::Object(entry) = value else {
            return Err(format!("metadata.managedFields[{at}] must be an object"));
        };
        let text = |field: &str| entry.get(field).and_then(Value::as_str).unwrap_or_default().to_owned();
        let operation = match text("operation").as_str() {
            "Apply" => Operation::Apply,
            "Update" => Operation::Update,
            other => {
                return Err(format!(
                    "metadata.managedFields[{at}].operation: Unsupported value: {other:?}: supported values: \"Apply\", \"Update\""
                ));
            }
        };
        let api_version = text("apiVersion");
        if api_version.is_empty() {
            return Err(format!("metadata.managedFields[{at}].apiVersion: Required value"));
        }
        match entry.get("fieldsType").and_then(Value::as_str) {
            None | Some("FieldsV1") => {}
            Some(other) => {
                return Err(format!(
                    "metadata.managedFields[{at}].fieldsType: Unsupported value: {other:?}: supported values: \"FieldsV1\""
                ));
            }
        }
        let fields = match entry.get("fieldsV1") {
            None | Some(Value::Null) => FieldSet::new(),
            Some(fields) => FieldSet::from_fields_v1(fields)
                .map_err(|error| format!("metadata.managedFields[{at}].{error}"))?,
        };
        Ok(Entry {
            manager: text("manager"),
            operation,
            api_version,
            time: entry.get("time").and_then(Value::as_str).map(str::to_owned),
            subresource: text("subresource"),
            fields,
        })
    }
}

/// An object's managers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ManagedFields {
    entries: Vec<Entry>,
}

/// How many `Update` entries an object keeps before the oldest are folded together, as
/// kube-apiserver bounds them.
pub const MAX_UPDATE_MANAGERS: usize = 10;

/// The manager the oldest updates are folded into.
pub const ANCIENT_CHANGES: &str = "ancient-changes";

impl ManagedFields {
    /// No managers.
    pub fn new() -> ManagedFields {
        ManagedFields::default()
    }

    /// The managers of `metadata.managedFields` (absent or `null`: none). A malformed entry is
    /// refused, naming it.
    pub fn decode(value: Option<&Value>) -> Result<ManagedFields, String> {
        match value {
            None | Some(Value::Null) => Ok(ManagedFields::new()),
            Some(Value::Array(entries)) => {
                let entries = entries
                    .iter()
                    .enumerate()
                    .map(|(at, entry)| Entry::decode(at, entry))
                    .collect::<Result<Vec<_>, _>>()?;
                Ok(ManagedFields { entries })
            }
            Some(_) => Err("metadata.managedFields must be a list".to_owned()),
        }
    }

    /// The list to store as `metadata.managedFields`, in kube-apiserver's order (appliers
    /// first, then by time, manager, apiVersion and subresource); `None` when there is no
    /// manager, so that the field is left out.
    pub fn encode(&self) -> Option<Value> {
        if self.entries.is_empty() {
            return None;
        }
        let mut entries: Vec<&Entry> = self.entries.iter().collect();
        entries.sort_by(|a, b| order(a, b));
        Some(Value::Array(entries.into_iter().map(Entry::encode).collect()))
    }

    /// Every manager.
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// Whether there is no manager.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub(crate) fn entries_mut(&mut self) -> &mut Vec<Entry> {
        &mut self.entries
    }

    /// The entry `like` would be recorded in, if there is one.
    pub(crate) fn find(&self, like: &Entry) -> Option<&Entry> {
        self.entries.iter().find(|entry| entry.same_manager(like))
    }

    /// Sets `entry` as its manager's, replacing the one there was.
    pub(crate) fn put(&mut self, entry: Entry) {
        match self.entries.iter_mut().find(|existing| existing.same_manager(&entry)) {
            Some(existing) => *existing = entry,
            None => self.entries.push(entry),
        }
    }

    /// Drops the managers left with no field.
    pub(crate) fn drop_empty(&mut self) {
        self.entries.retain(|entry| !entry.fields.is_empty());
    }

    /// Keeps at most [`MAX_UPDATE_MANAGERS`] `Update` entries: while there are more, the oldest
    /// of an apiVersion becomes [`ANCIENT_CHANGES`] and every other old one of that apiVersion
    /// is folded into it (taking its time). Appliers are never folded; entries of different
    /// apiVersions never merge, so the count may stay above the bound.
    pub(crate) fn cap_updates(&mut self) {
        let updates = self.entries.iter().filter(|entry| entry.operation == Operation::Update).count();
        if updates <= MAX_UPDATE_MANAGERS {
            return;
        }
        let mut excess = updates - MAX_UPDATE_MANAGERS;
        let (mut old, kept): (Vec<Entry>, Vec<Entry>) = std::mem::take(&mut self.entries)
            .into_iter()
            .partition(|entry| entry.operation == Operation::Update);
        self.entries = kept;
        old.sort_by(|a, b| a.time.cmp(&b.time).then_with(|| a.manager.cmp(&b.manager)));
        let mut recent = Vec::new();
        let mut ancient: Vec<Entry> = Vec::new();
        for entry in old {
            let already = ancient.iter().position(|bucket| bucket.api_version == entry.api_version);
            if excess == 0 {
                recent.push(entry);
                continue;
            }
            match already {
                Some(at) => {
                    let bucket = &mut ancient[at];
                    bucket.fields = bucket.fields.union(&entry.fields);
                    bucket.time = entry.time.clone();
                    excess -= 1;
                }
                None if entry.manager == ANCIENT_CHANGES && entry.subresource.is_empty() => {
                    ancient.push(entry)
                }
                None => {
                    ancient.push(Entry {
                        manager: ANCIENT_CHANGES.to_owned(),
                        subresource: String::new(),
                        ..entry
                    });
                }
            }
        }
        self.entries.extend(ancient);
        self.entries.extend(recent);
    }
}

/// The stored (encoded) managers after a write by `writer` (its entry as it is recorded,
/// without fields) that `changed` and `removed`: only the entries the write touches are
/// decoded and encoded again, the rest kept as they are. `None` when that does not suffice (an
/// entry that does not read, or more updaters than kept, whose fold reads them all).
pub(crate) fn updated_encoded(
    entries: Vec<Value>,
    writer: &Entry,
    changed: &FieldSet,
    removed: &FieldSet,
) -> Option<Vec<Value>> {
    let taken = changed.union(removed);
    let mut kept = Vec::with_capacity(entries.len() + 1);
    let mut before = FieldSet::new();
    let mut recorded = false;
    for (at, mut raw) in entries.into_iter().enumerate() {
        let text = |field: &str| raw.get(field).and_then(Value::as_str).unwrap_or_default();
        let same = text("manager") == writer.manager
            && text("operation") == writer.operation.as_str()
            && text("subresource") == writer.subresource
            && text("apiVersion") == writer.api_version;
        let fields = raw.get("fieldsV1").and_then(Value::as_object)?;
        if same && changed.within_fields_v1(fields) && !removed.meets_fields_v1(fields) {
            // The writer changed only what it already manages: its fields stay, its time moves.
            raw["time"] = Value::String(writer.time.clone().unwrap_or_default());
            kept.push(raw);
            recorded = true;
        } else if same {
            before = FieldSet::from_fields_v1(raw.get("fieldsV1")?).ok()?;
        } else if !taken.meets_fields_v1(fields) {
            kept.push(raw);
        } else {
            let mut entry = Entry::decode(at, &raw).ok()?;
            entry.fields = entry.fields.difference(&taken);
            if !entry.fields.is_empty() {
                kept.push(entry.encode());
            }
        }
    }
    let fields = before.union(changed).difference(removed);
    if !recorded && !fields.is_empty() {
        kept.push(Entry { fields, ..writer.clone() }.encode());
    }
    if kept.iter().filter(|entry| entry["operation"] == "Update").count() > MAX_UPDATE_MANAGERS {
        return None;
    }
    let key = |entry: &Value| {
        let text = |field: &str| entry.get(field).and_then(Value::as_str).unwrap_or_default().to_owned();
        (
            text("operation") != "Apply",
            entry.get("time").and_then(Value::as_str).map(str::to_owned),
            text("manager"),
            text("apiVersion"),
            text("subresource"),
        )
    };
    kept.sort_by_cached_key(key);
    Some(kept)
}

fn order(a: &Entry, b: &Entry) -> Ordering {
    a.operation
        .cmp(&b.operation)
        .then_with(|| a.time.cmp(&b.time))
        .then_with(|| a.manager.cmp(&b.manager))
        .then_with(|| a.api_version.cmp(&b.api_version))
        .then_with(|| a.subresource.cmp(&b.subresource))
}

/// Whether a request's `metadata.managedFields` asks to clear them: an empty list, or a list
/// of one empty entry, as kube-apiserver reads `[]` and `[{}]`.
pub fn asks_reset(value: &Value) -> bool {
    match value {
        Value::Array(entries) => match entries.as_slice() {
            [] => true,
            [Value::Object(entry)] => entry.is_empty(),
            _ => false,
        },
        _ => false,
    }
}

/// The `metadata` map of an object, when it has one.
pub(crate) fn metadata(object: &Map<String, Value>) -> Option<&Map<String, Value>> {
    object.get("metadata").and_then(Value::as_object)
}
