//! The scheduling queue: an unschedulable Application waits for a relevant change, then backs
//! off.

use super::*;
use crate::model::AppInfo;

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
    let mut queue = Queue::default();
    let object = Arc::new(Object::new());
    let by_name = |a: &Entry, b: &Entry| a.app.name.cmp(&b.app.name);
    queue.upsert(app("b", 1), object.clone());
    queue.upsert(app("a", 1), object.clone());
    let start = Instant::now();
    let (popped, _) = queue.pop(start, 10, by_name);
    assert_eq!(names(&popped), ["a", "b"]);
    assert!(queue.pop(start, 10, by_name).0.is_empty(), "in flight is not popped twice");
    queue.failed("demo/a", start);
    queue.remove("demo/b");
    // Its own status write (same generation) does not wake it.
    queue.upsert(app("a", 1), object.clone());
    assert!(queue.pop(start + Duration::from_secs(5), 10, by_name).0.is_empty());
    // A relevant change does, once the backoff (1s after one failure) has passed.
    queue.move_unschedulable();
    let (popped, next) = queue.pop(start, 10, by_name);
    assert!(popped.is_empty());
    assert_eq!(next, Some(start + INITIAL_BACKOFF));
    let (popped, _) = queue.pop(start + INITIAL_BACKOFF, 10, by_name);
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
    let (popped, _) = queue.pop(start + FLUSH_AFTER, 10, by_name);
    assert_eq!(names(&popped), ["a"]);
    // A bound or finished Application leaves the queue.
    let mut bound = (*app("a", 2)).clone();
    bound.node = Some("n1".into());
    queue.upsert(Arc::new(bound), object);
    assert!(queue.is_empty());
}
