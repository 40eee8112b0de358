//! The scheduling queue: an unschedulable Application waits for a relevant change, then backs
//! off.

use super::*;
use crate::model::AppInfo;
use crate::plugins::priority::PrioritySort;

/// Pops by namespace and name.
struct ById;

impl QueueSort for ById {
    fn compare(&self, a: &AppInfo, b: &AppInfo) -> Ordering {
        a.id.cmp(&b.id)
    }
}

fn by_id() -> Queue {
    Queue::new(Arc::new(ById))
}

fn app(name: &str, generation: i64) -> App {
    let mut app = AppInfo::new("demo", name);
    app.generation = generation;
    Arc::new(app)
}

fn names(entries: &[Entry]) -> Vec<&str> {
    entries.iter().map(|e| e.app.name.as_str()).collect()
}

#[test]
fn unschedulable_applications_wait_for_a_relevant_change_then_back_off() {
    let mut queue = by_id();
    let object = Arc::new(Object::new());
    queue.upsert(app("b", 1), object.clone());
    queue.upsert(app("a", 1), object.clone());
    let start = Instant::now();
    let (popped, _) = queue.pop(start, 10);
    assert_eq!(names(&popped), ["a", "b"]);
    assert!(queue.pop(start, 10).0.is_empty(), "in flight is not popped twice");
    queue.failed("demo/a", start);
    queue.remove("demo/b");
    // Its own status write (same generation) does not wake it.
    queue.upsert(app("a", 1), object.clone());
    assert!(queue.pop(start + Duration::from_secs(5), 10).0.is_empty());
    // A relevant change does, once the backoff (1s after one failure) has passed.
    queue.move_unschedulable();
    let (popped, next) = queue.pop(start, 10);
    assert!(popped.is_empty());
    assert_eq!(next, Some(start + INITIAL_BACKOFF));
    let (popped, _) = queue.pop(start + INITIAL_BACKOFF, 10);
    assert_eq!(names(&popped), ["a"]);
    // The backoff doubles, up to its cap.
    for _ in 0..10 {
        queue.failed("demo/a", start);
    }
    assert_eq!(queue.get("demo/a").and_then(|e| e.backoff_until), Some(start + MAX_BACKOFF));
    // A new spec wakes it at once (its backoff still holds); so does the flush.
    queue.upsert(app("a", 2), object.clone());
    assert_eq!(queue.get("demo/a").map(|e| e.stage), Some(Stage::Active));
    queue.failed("demo/a", start);
    let (popped, _) = queue.pop(start + FLUSH_AFTER, 10);
    assert_eq!(names(&popped), ["a"]);
    // A bound or finished Application leaves the queue.
    let mut bound = (*app("a", 2)).clone();
    bound.node = Some("n1".into());
    queue.upsert(Arc::new(bound), object);
    assert!(queue.is_empty());
}

#[test]
fn an_application_rewritten_while_it_waits_is_popped_once_and_its_old_places_do_not_pile_up() {
    let mut queue = Queue::new(Arc::new(PrioritySort));
    let object = Arc::new(Object::new());
    queue.upsert(app("a", 1), object.clone());
    for n in 0..100_000 {
        // Each version with another priority takes its new place in the order.
        let mut rewritten = (*app("a", 1)).clone();
        rewritten.priority = n % 3;
        queue.upsert(Arc::new(rewritten), object.clone());
        assert!(queue.ready.len() <= 2 * (queue.len() + 1024) + 1, "{} items", queue.ready.len());
    }
    let now = Instant::now();
    assert_eq!(names(&queue.pop(now, 10).0), ["a"]);
    assert!(queue.pop(now, 10).0.is_empty(), "popped once");
}

/// The queue as a plain list that every pop walks whole: what the indexed queue must answer.
#[derive(Default)]
struct Walked {
    entries: HashMap<String, Entry>,
}

impl Walked {
    fn upsert(&mut self, app: App, object: Arc<Object>) {
        if !app.wants_placement() {
            self.entries.remove(&app.id);
            return;
        }
        match self.entries.get_mut(&app.id) {
            Some(entry) => {
                let respecified = entry.app.generation != app.generation || entry.app.uid != app.uid;
                if entry.stage == Stage::Unschedulable && respecified {
                    entry.stage = Stage::Active;
                }
                entry.app = app;
                entry.object = object;
            }
            None => {
                self.entries.insert(app.id.clone(), Entry::new(app, object));
            }
        }
    }

    fn pop(&mut self, now: Instant, most: usize) -> (Vec<String>, Option<Instant>) {
        for entry in self.entries.values_mut() {
            if entry.stage == Stage::Unschedulable
                && entry.since.is_some_and(|since| now >= since + FLUSH_AFTER)
            {
                entry.stage = Stage::Active;
            }
        }
        let mut next: Option<Instant> = None;
        let mut ready: Vec<&Entry> = Vec::new();
        for entry in self.entries.values().filter(|e| e.stage == Stage::Active) {
            match entry.backoff_until {
                Some(until) if until > now => next = Some(next.map_or(until, |n| n.min(until))),
                _ => ready.push(entry),
            }
        }
        ready.sort_by(|a, b| PrioritySort.compare(&a.app, &b.app));
        let ready: Vec<String> = ready.iter().take(most).map(|entry| entry.app.id.clone()).collect();
        for id in &ready {
            self.entries.get_mut(id).expect("listed").stage = Stage::InFlight;
        }
        (ready, next)
    }

    fn failed(&mut self, id: &str, now: Instant) {
        if let Some(entry) = self.entries.get_mut(id) {
            entry.fail(now);
        }
    }

    fn set(&mut self, id: &str, from: Stage, to: Stage) {
        if let Some(entry) = self.entries.get_mut(id).filter(|e| e.stage == from) {
            entry.stage = to;
        }
    }
}

#[derive(Debug, Clone)]
enum Step {
    Upsert { app: usize, generation: i64, priority: i64, bound: bool },
    Remove(usize),
    MoveUnschedulable,
    Pop { after_ms: u64, most: usize },
    Failed(usize),
    Activate(usize),
    Retry(usize),
}

fn step() -> impl proptest::strategy::Strategy<Value = Step> {
    use proptest::prelude::*;
    prop_oneof![
        3 => (0..12usize, 1..3i64, 0..3i64, proptest::bool::weighted(0.1))
            .prop_map(|(app, generation, priority, bound)| Step::Upsert { app, generation, priority, bound }),
        1 => (0..12usize).prop_map(Step::Remove),
        1 => Just(Step::MoveUnschedulable),
        3 => (prop_oneof![Just(0u64), 0..3_000u64, Just(300_000u64)], 1..5usize)
            .prop_map(|(after_ms, most)| Step::Pop { after_ms, most }),
        2 => (0..12usize).prop_map(Step::Failed),
        1 => (0..12usize).prop_map(Step::Activate),
        1 => (0..12usize).prop_map(Step::Retry),
    ]
}

proptest::proptest! {
    /// Any run of queue operations, on a clock that only moves forward, pops what a walk of
    /// every waiting Application would, in the same order (priorities that change while an
    /// Application waits included), with the same next due time.
    #[test]
    fn the_indexed_queue_pops_what_a_walk_of_every_entry_would(steps in proptest::collection::vec(step(), 1..80)) {
        let (mut queue, mut walked) = (Queue::new(Arc::new(PrioritySort)), Walked::default());
        let object = Arc::new(Object::new());
        let mut now = Instant::now();
        let id = |n: usize| format!("demo/app-{n:02}");
        for step in steps {
            match step {
                Step::Upsert { app: n, generation, priority, bound } => {
                    let mut app = (*app(&format!("app-{n:02}"), generation)).clone();
                    app.priority = priority;
                    if bound {
                        app.node = Some("n1".into());
                    }
                    let app = Arc::new(app);
                    queue.upsert(app.clone(), object.clone());
                    walked.upsert(app, object.clone());
                }
                Step::Remove(n) => {
                    queue.remove(&id(n));
                    walked.entries.remove(&id(n));
                }
                Step::MoveUnschedulable => {
                    queue.move_unschedulable();
                    for entry in walked.entries.values_mut().filter(|e| e.stage == Stage::Unschedulable) {
                        entry.stage = Stage::Active;
                    }
                }
                Step::Pop { after_ms, most } => {
                    now += Duration::from_millis(after_ms);
                    let (popped, next) = queue.pop(now, most);
                    let popped: Vec<String> = popped.into_iter().map(|e| e.app.id.clone()).collect();
                    proptest::prop_assert_eq!((popped, next), walked.pop(now, most));
                }
                Step::Failed(n) => {
                    queue.failed(&id(n), now);
                    walked.failed(&id(n), now);
                }
                Step::Activate(n) => {
                    queue.activate(&id(n));
                    walked.set(&id(n), Stage::Unschedulable, Stage::Active);
                }
                Step::Retry(n) => {
                    queue.retry(&id(n));
                    walked.set(&id(n), Stage::InFlight, Stage::Active);
                }
            }
            let stages = |entries: &HashMap<String, Entry>| {
                let mut stages: Vec<(String, Stage)> =
                    entries.iter().map(|(id, e)| (id.clone(), e.stage)).collect();
                stages.sort_by(|a, b| a.0.cmp(&b.0));
                stages
            };
            proptest::prop_assert_eq!(stages(&queue.entries), stages(&walked.entries));
        }
    }
}
