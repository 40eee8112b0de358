//! Where a cached page's range of keys ends, and what a cache keeps of the objects written for it.

use serde_json::json;

use super::prefix_end;
use super::written::{WRITTEN, Written};
use crate::Object;

#[test]
fn a_prefix_ends_just_after_every_key_that_starts_with_it() {
    assert_eq!(prefix_end("/registry/apps/ns/").as_deref(), Some("/registry/apps/ns0"));
    assert_eq!(prefix_end("/registry/apps/").as_deref(), Some("/registry/apps0"));
    for key in ["/registry/apps/ns/a", "/registry/apps/ns/\u{7f}", "/registry/apps/ns/zzz"] {
        assert!(key < prefix_end("/registry/apps/ns/").unwrap().as_str(), "{key}");
    }
    assert!("/registry/apps/ns0" >= prefix_end("/registry/apps/ns/").unwrap().as_str());
    assert_eq!(prefix_end(""), None, "an empty prefix has no end");
    assert_eq!(prefix_end("/registry/é"), None, "past ASCII every key is compared instead");
}

#[test]
fn a_written_object_is_kept_only_for_a_change_still_to_come() {
    let object = |size: i64| -> Object { serde_json::from_value(json!({"spec": {"size": size}})).unwrap() };
    let mut written = Written::default();
    written.offer("a", 5, object(1));
    written.offer("b", 7, object(2));
    assert_eq!(written.take("b", 6), None, "b's write comes later");
    assert_eq!(written.take("a", 5), Some(object(1)));
    assert_eq!(written.take("a", 5), None, "taken once");
    written.offer("c", 6, object(3));
    assert!(!written.objects.contains_key("c"), "a change at 6 was applied already: kept for nothing");
    assert_eq!(written.take("b", 7), Some(object(2)));
    written.offer("d", 9, object(4));
    assert_eq!(written.take("d", 10), None, "the change at 9 went by unasked (an older write is dropped)");
    assert!(written.objects.is_empty());
    written.offer("e", 12, object(5));
    written.offer("f", 20, object(6));
    written.listed(15);
    assert_eq!(written.objects.keys().collect::<Vec<_>>(), ["f"], "the list holds what was written up to it");
    for i in 0..WRITTEN as u64 {
        written.offer(&format!("k{i}"), 100 + i, object(0));
    }
    written.offer("last", 100_000, object(7));
    assert!(!written.objects.contains_key("last"), "bounded");
}
