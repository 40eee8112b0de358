//! Events: what the loops tell operators about the objects they work on, as core `v1` Events
//! (`kubectl get events`, `kubectl describe`).
//!
//! An Event that repeats (same object, type, reason, message and source) within its time to
//! live updates the Event it wrote before: `count` grows, `lastTimestamp` and `series` move, as
//! client-go's correlator and `events.k8s.io` do, so a crash loop keeps one Event and not one
//! per restart.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};

use jiff::Timestamp;
use kayra_api::kinds::core::{EVENT_TTL, EventType};
use kayra_registry::{PatchKind, RegistryError, meta_str};
use serde_json::{Value, json};

use crate::client::Client;

/// How many distinct Events a recorder remembers; past it, the least recently seen is forgotten
/// and its next repeat starts a new Event.
const REMEMBERED: usize = 4096;

/// The object an Event is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Involved {
    /// Its `apiVersion`.
    pub api_version: String,
    /// Its Kind.
    pub kind: String,
    /// Its namespace; empty for a cluster-scoped object.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// Its uid, when known: `kubectl describe` finds an object's Events by it.
    pub uid: String,
}

/// Whether an Event is routine or something an operator should look at: its `type`, as the
/// recorder's callers name it.
pub type Severity = EventType;

/// Something that happened, for [`Recorder::record_all`]: an Event to record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Occurrence {
    /// The object it is about.
    pub involved: Involved,
    /// Routine, or for an operator to look at.
    pub severity: Severity,
    /// Why, in one word (`Scheduled`, `FailedScheduling`).
    pub reason: String,
    /// What happened, for a person.
    pub message: String,
}

/// An Event to create: not a repeat of one written before.
struct NewEvent {
    /// What makes it the same Event as a later repeat.
    key: String,
    namespace: String,
    event: Value,
    now: Timestamp,
}

/// Writes Events as one component of the control plane.
#[derive(Debug, Clone)]
pub struct Recorder {
    client: Client,
    component: String,
    host: Option<String>,
    seen: Arc<Seen>,
}

impl Recorder {
    /// A recorder writing through `client`, naming `component` as the Events' source.
    pub fn new(client: Client, component: impl Into<String>) -> Recorder {
        Recorder { client, component: component.into(), host: None, seen: Arc::default() }
    }

    /// A recorder for what `component` on node `host` reports, as kubelet records its Events
    /// (`source.host`), written through `client`: an Event about an Application is then also
    /// one about its Pod there. It shares this recorder's memory of recent Events, so a repeat
    /// is counted however many recorders a node's reports pass through.
    pub fn on_node(&self, client: Client, component: impl Into<String>, host: impl Into<String>) -> Recorder {
        Recorder { client, component: component.into(), host: Some(host.into()), seen: self.seen.clone() }
    }

    /// Records one Event about `involved`, in its namespace (`default` for cluster-scoped
    /// objects, as Kubernetes does); a repeat within the Event's time to live counts on the
    /// Event written before.
    pub async fn record(
        &self,
        involved: &Involved,
        severity: Severity,
        reason: &str,
        message: &str,
    ) -> Result<(), RegistryError> {
        let occurrence = Occurrence {
            involved: involved.clone(),
            severity,
            reason: reason.to_owned(),
            message: message.to_owned(),
        };
        let Some(new) = self.count_repeat(&occurrence).await? else { return Ok(()) };
        let resource = self.client.resource("", "events")?;
        let created = self.client.create(&resource, Some(&new.namespace), new.event).await?;
        self.seen.wrote(new.key, meta_str(&created, "name").to_owned(), new.now);
        Ok(())
    }

    /// Records each of `occurrences` as [`Recorder::record`] would, and answers each in the
    /// order given: repeats count on the Events written before, and the new Events are
    /// created together ([`Client::create_all`]), so those of one moment share the store's
    /// work.
    pub async fn record_all(&self, occurrences: Vec<Occurrence>) -> Vec<Result<(), RegistryError>> {
        let mut answers: Vec<Option<Result<(), RegistryError>>> = occurrences.iter().map(|_| None).collect();
        let mut new = Vec::new();
        let mut keys = HashSet::new();
        let mut later = Vec::new();
        for (i, occurrence) in occurrences.iter().enumerate() {
            match self.count_repeat(occurrence).await {
                Ok(Some(event)) if keys.insert(event.key.clone()) => new.push((i, event)),
                // A second occurrence of an Event new in this batch repeats the first.
                Ok(Some(_)) => later.push(i),
                Ok(None) => answers[i] = Some(Ok(())),
                Err(error) => answers[i] = Some(Err(error)),
            }
        }
        match self.client.resource("", "events") {
            Ok(resource) => {
                let objects =
                    new.iter().map(|(_, event)| (Some(event.namespace.clone()), event.event.clone()));
                let created = self.client.create_all(&resource, objects.collect()).await;
                for ((i, event), created) in new.into_iter().zip(created) {
                    answers[i] = Some(created.map(|created| {
                        self.seen.wrote(event.key, meta_str(&created, "name").to_owned(), event.now);
                    }));
                }
            }
            Err(error) => {
                let message = error.to_string();
                for (i, _) in new {
                    answers[i] = Some(Err(RegistryError::BadRequest(message.clone())));
                }
            }
        }
        for i in later {
            let Occurrence { involved, severity, reason, message } = &occurrences[i];
            answers[i] = Some(self.record(involved, *severity, reason, message).await);
        }
        answers.into_iter().map(|answer| answer.expect("every occurrence is answered")).collect()
    }

    /// Counts `occurrence` on the Event written for it before, when it is a repeat within that
    /// Event's time to live; otherwise answers the new Event to create.
    async fn count_repeat(&self, occurrence: &Occurrence) -> Result<Option<NewEvent>, RegistryError> {
        let Occurrence { involved, severity, reason, message } = occurrence;
        let namespace = if involved.namespace.is_empty() { "default" } else { involved.namespace.as_str() };
        let key = self.key(involved, *severity, reason, message);
        let now = Timestamp::now();
        if let Some(repeat) = self.seen.repeat(&key, now) {
            let resource = self.client.resource("", "events")?;
            let patch = json!({
                "count": repeat.count,
                "lastTimestamp": seconds(now),
                "series": {"count": repeat.count, "lastObservedTime": microseconds(now)},
            });
            let patched =
                self.client.patch(&resource, Some(namespace), &repeat.name, PatchKind::Merge, &patch).await;
            match patched {
                Ok(_) => return Ok(None),
                // Expired or deleted since: the repeat starts a new Event.
                Err(RegistryError::NotFound { .. }) => self.seen.forget(&key),
                Err(error) => return Err(error),
            }
        }
        let mut event = json!({
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"generateName": format!("{}.", involved.name), "namespace": namespace},
            "involvedObject": {
                "apiVersion": involved.api_version, "kind": involved.kind,
                "name": involved.name, "namespace": involved.namespace,
            },
            "reason": reason, "message": message,
            "type": severity.as_str(),
            "source": {"component": self.component},
            "firstTimestamp": seconds(now), "lastTimestamp": seconds(now), "count": 1,
        });
        if !involved.uid.is_empty() {
            event["involvedObject"]["uid"] = json!(involved.uid);
        }
        if let Some(host) = &self.host {
            event["source"]["host"] = json!(host);
        }
        Ok(Some(NewEvent { key, namespace: namespace.to_owned(), event, now }))
    }

    /// What makes two Events the same one: the object, what happened, and who says so.
    fn key(&self, involved: &Involved, severity: Severity, reason: &str, message: &str) -> String {
        let host = self.host.as_deref().unwrap_or_default();
        [
            self.component.as_str(),
            host,
            &involved.api_version,
            &involved.kind,
            &involved.namespace,
            &involved.name,
            &involved.uid,
            severity.as_str(),
            reason,
            message,
        ]
        .join("\u{0}")
    }
}

/// A recorder's memory of the Events it wrote lately, by what makes them the same; when full,
/// the least recently seen is forgotten, found in order rather than by a scan of them all.
#[derive(Debug, Default)]
struct Seen {
    events: Mutex<Recent>,
}

#[derive(Debug, Default)]
struct Recent {
    by_key: HashMap<String, Written>,
    /// Each key by when it was last seen, as a count of the uses of the memory.
    by_use: BTreeMap<u64, String>,
    uses: u64,
}

/// One Event a recorder wrote: its name, how often it happened and when it last did.
#[derive(Debug, Clone)]
struct Written {
    name: String,
    count: u64,
    last: Timestamp,
    /// Its place in [`Recent::by_use`].
    used: u64,
}

/// A repeat of a remembered Event: the Event to update and its count with this occurrence.
#[derive(Debug, PartialEq, Eq)]
struct Repeat {
    name: String,
    count: u64,
}

impl Recent {
    fn remove(&mut self, key: &str) -> Option<Written> {
        let written = self.by_key.remove(key)?;
        self.by_use.remove(&written.used);
        Some(written)
    }

    /// The next place in the order of use, given to `key`.
    fn use_now(&mut self, key: &str) -> u64 {
        self.uses += 1;
        self.by_use.insert(self.uses, key.to_owned());
        self.uses
    }
}

impl Seen {
    fn events(&self) -> std::sync::MutexGuard<'_, Recent> {
        self.events.lock().expect("the recent events' lock is never held across a panic")
    }

    /// Counts one more occurrence of the Event under `key`, when it was written within its
    /// time to live.
    fn repeat(&self, key: &str, now: Timestamp) -> Option<Repeat> {
        let mut events = self.events();
        let events = &mut *events;
        let mut written = events.remove(key)?;
        if now.duration_since(written.last) >= EVENT_TTL {
            return None;
        }
        written.count += 1;
        written.last = now;
        written.used = events.use_now(key);
        let repeat = Repeat { name: written.name.clone(), count: written.count };
        events.by_key.insert(key.to_owned(), written);
        Some(repeat)
    }

    fn wrote(&self, key: String, name: String, now: Timestamp) {
        let mut events = self.events();
        if events.remove(&key).is_none() {
            // The least recently seen go first: those past their time to live, then, while
            // the memory is still full, those seen longest ago.
            while let Some((_, oldest)) = events.by_use.first_key_value()
                && (events.by_key.len() >= REMEMBERED
                    || events.by_key.get(oldest).is_some_and(|w| now.duration_since(w.last) >= EVENT_TTL))
            {
                let oldest = oldest.clone();
                events.remove(&oldest);
            }
        }
        let used = events.use_now(&key);
        events.by_key.insert(key, Written { name, count: 1, last: now, used });
    }

    fn forget(&self, key: &str) {
        self.events().remove(key);
    }
}

/// A timestamp as `firstTimestamp` and `lastTimestamp` carry it: whole seconds.
fn seconds(at: Timestamp) -> String {
    at.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// A timestamp as `series.lastObservedTime` carries it: a `MicroTime`.
fn microseconds(at: Timestamp) -> String {
    kayra_api::clock::micro_time(at)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(second: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + second).unwrap()
    }

    #[test]
    fn a_repeat_within_the_time_to_live_counts_on_the_event_written_before() {
        let seen = Seen::default();
        assert_eq!(seen.repeat("crash", at(0)), None, "nothing written yet");
        seen.wrote("crash".into(), "app.1".into(), at(0));
        assert_eq!(seen.repeat("crash", at(10)), Some(Repeat { name: "app.1".into(), count: 2 }));
        assert_eq!(seen.repeat("crash", at(20)), Some(Repeat { name: "app.1".into(), count: 3 }));
        assert_eq!(seen.repeat("other", at(20)), None, "another event is not a repeat");
        let past = 20 + EVENT_TTL.as_secs();
        assert_eq!(seen.repeat("crash", at(past)), None, "an hour after the last one, a new event");
        assert_eq!(seen.repeat("crash", at(past + 1)), None, "and the old one is forgotten");
    }

    #[test]
    fn the_memory_is_bounded_and_forgets_the_least_recently_seen() {
        let seen = Seen::default();
        let at = |millisecond: i64| Timestamp::from_millisecond(1_800_000_000_000 + millisecond).unwrap();
        for i in 0..REMEMBERED {
            seen.wrote(format!("event-{i}"), format!("e.{i}"), at(i as i64));
        }
        assert!(seen.repeat("event-0", at(5000)).is_some(), "seen again, so now the most recent");
        seen.wrote("one-more".into(), "e.more".into(), at(5001));
        assert_eq!(seen.events().by_key.len(), REMEMBERED);
        assert!(seen.repeat("event-1", at(5002)).is_none(), "the least recently seen went");
        assert!(seen.repeat("event-0", at(5002)).is_some());
        assert!(seen.repeat("one-more", at(5002)).is_some());
        seen.forget("one-more");
        let events = seen.events();
        assert_eq!(
            events.by_use.len(),
            events.by_key.len(),
            "every remembered Event has one place in the order"
        );
        assert!(events.by_use.values().all(|key| events.by_key.contains_key(key)));
    }

    #[tokio::test]
    async fn events_recorded_together_each_count_as_one_recorded_alone_would() {
        use std::sync::Arc;
        let store = Arc::new(kayra_store::mvcc::MvccStore::in_memory(Default::default()).unwrap());
        let registry =
            kayra_registry::Registry::new(store, Arc::new(kayra_api::clock::SystemClock), "/registry/");
        let scheme = Arc::new(kayra_api::scheme::Scheme::new("example.com"));
        let control = Arc::new(crate::ApplicationLayer::new(scheme, registry));
        let client = control.client(crate::controller_identity("test"));
        let namespaces = client.resource("", "namespaces").unwrap();
        let namespace = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "demo"}});
        client.create(&namespaces, None, namespace).await.unwrap();
        let recorder = Recorder::new(client.clone(), "kayra-test");
        let occurrence = |name: &str, message: &str| Occurrence {
            involved: Involved {
                api_version: "fleet.example.com/v1".into(),
                kind: "Application".into(),
                namespace: "demo".into(),
                name: name.into(),
                uid: format!("uid-{name}"),
            },
            severity: Severity::Normal,
            reason: "Scheduled".into(),
            message: message.into(),
        };
        let a = occurrence("a", "on n1");
        recorder.record(&a.involved, a.severity, &a.reason, &a.message).await.unwrap();
        let batch = vec![a, occurrence("b", "on n2"), occurrence("c", "on n3"), occurrence("b", "on n2")];
        for answer in recorder.record_all(batch).await {
            answer.unwrap();
        }
        let events = client.resource("", "events").unwrap();
        let mut counts: Vec<(String, i64)> = client
            .list_all(&events, Some("demo"))
            .await
            .unwrap()
            .iter()
            .map(|event| {
                let name = event["involvedObject"]["name"].as_str().unwrap().to_owned();
                (name, event["count"].as_i64().unwrap())
            })
            .collect();
        counts.sort();
        let expected = [("a".to_owned(), 2), ("b".to_owned(), 2), ("c".to_owned(), 1)];
        assert_eq!(counts, expected, "a repeat of an earlier Event and one within the batch both count");
    }

    #[test]
    fn microtimes_carry_microseconds() {
        assert_eq!(microseconds(at(0)), "2027-01-15T08:00:00.000000Z");
        assert_eq!(seconds(at(0)), "2027-01-15T08:00:00Z");
    }
}
