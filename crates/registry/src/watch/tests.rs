//! Where a cached page's range of keys ends.

use super::prefix_end;

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
