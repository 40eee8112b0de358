//! The runtime's own small rules; its behaviour with real processes is tested in `tests/it`.

use super::*;

#[test]
fn only_uuid_shaped_uids_name_directories() {
    for (uid, safe) in [
        ("1f0e6a2c-8d7e-4b1a-9f3e-0a1b2c3d4e5f", true),
        ("", false),
        ("../etc", false),
        ("a/b", false),
        ("x y", false),
    ] {
        assert_eq!(is_safe_uid(uid), safe, "{uid:?}");
    }
}
