//! `PrioritySort`: the queue's order. Higher `spec.placement.priority` first; among equals the
//! older Application first, then by `namespace/name` so the order is total.

use std::cmp::Ordering;

use crate::framework::QueueSort;
use crate::model::AppInfo;

/// Orders waiting Applications by priority, then age.
#[derive(Debug, Clone, Copy)]
pub struct PrioritySort;

impl QueueSort for PrioritySort {
    fn compare(&self, a: &AppInfo, b: &AppInfo) -> Ordering {
        b.priority.cmp(&a.priority).then_with(|| a.created.cmp(&b.created)).then_with(|| a.id.cmp(&b.id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugins::testing::app;

    #[test]
    fn higher_priority_first_then_older_then_by_name() {
        let with = |name: &str, priority: i64, created: &str| {
            let mut a = app(name, &[]);
            a.priority = priority;
            a.created = created.to_owned();
            a
        };
        let mut queue = [
            with("late-high", 10, "2026-01-02T00:00:00Z"),
            with("early-low", 0, "2026-01-01T00:00:00Z"),
            with("b-early-high", 10, "2026-01-01T00:00:00Z"),
            with("a-early-high", 10, "2026-01-01T00:00:00Z"),
            with("negative", -5, "2025-01-01T00:00:00Z"),
        ];
        queue.sort_by(|a, b| PrioritySort.compare(a, b));
        let names: Vec<&str> = queue.iter().map(|a| a.name.as_str()).collect();
        assert_eq!(names, ["a-early-high", "b-early-high", "late-high", "early-low", "negative"]);
    }
}
