//! Lists: selectors, pagination, resourceVersion semantics, and pages that stay consistent
//! while objects come and go.

use std::collections::BTreeSet;

use kayra_registry::{ListOptions, RegistryError};
use kayra_store::Store;
use proptest::prelude::*;
use serde_json::json;

use super::{World, meta, unadmitted, unadmitted_delete, widget, world};

async fn seed(w: &World, names: &[(&str, &str, &str)]) {
    for (namespace, name, tier) in names {
        let mut body = widget(name, 1);
        body["metadata"]["labels"] = json!({"tier": tier});
        w.registry.create(&w.widgets, Some(namespace), body, unadmitted()).await.unwrap();
    }
}

fn names(list: &kayra_registry::List) -> Vec<String> {
    list.items.iter().map(|item| meta(item, "name").as_str().unwrap().to_owned()).collect()
}

#[tokio::test]
async fn lists_filter_by_namespace_labels_and_fields() {
    let w = world().await;
    seed(
        &w,
        &[("default", "a", "web"), ("default", "b", "db"), ("team-a", "c", "web"), ("default", "d", "web")],
    )
    .await;
    let list = |namespace: Option<&'static str>, labels: &str, fields: &str| {
        let options = ListOptions {
            label_selector: Some(labels.to_owned()),
            field_selector: Some(fields.to_owned()),
            ..ListOptions::default()
        };
        let (registry, widgets) = (w.registry.clone(), w.widgets.clone());
        async move { registry.list(&widgets, namespace, &options).await }
    };
    assert_eq!(names(&list(Some("default"), "", "").await.unwrap()), ["a", "b", "d"]);
    assert_eq!(names(&list(None, "", "").await.unwrap()), ["a", "b", "d", "c"], "namespace, then name");
    assert_eq!(names(&list(None, "tier=web", "").await.unwrap()), ["a", "d", "c"]);
    assert_eq!(names(&list(None, "tier notin (web)", "").await.unwrap()), ["b"]);
    assert_eq!(names(&list(None, "", "metadata.name=c").await.unwrap()), ["c"]);
    assert_eq!(names(&list(None, "", "metadata.namespace=team-a").await.unwrap()), ["c"]);
    assert_eq!(names(&list(Some("default"), "tier=web", "metadata.name!=a").await.unwrap()), ["d"]);
    assert_eq!(names(&list(None, "", "spec.size=1").await.unwrap()).len(), 4);
    let unsupported = list(None, "", "status.bogus=x").await;
    assert!(
        matches!(unsupported, Err(RegistryError::BadRequest(ref m)) if m == "field label not supported: status.bogus")
    );
    assert!(matches!(list(None, "tier in (web", "").await, Err(RegistryError::BadRequest(_))));
}

#[tokio::test]
async fn pages_carry_a_token_and_the_count_of_what_remains() {
    let w = world().await;
    let all: Vec<(&str, String, &str)> = (0..8).map(|i| ("default", format!("w{i}"), "web")).collect();
    let seeded: Vec<(&str, &str, &str)> =
        all.iter().map(|(ns, name, tier)| (*ns, name.as_str(), *tier)).collect();
    seed(&w, &seeded).await;
    let mut options = ListOptions { limit: Some(3), ..ListOptions::default() };
    let mut seen = Vec::new();
    let mut remaining = Vec::new();
    let mut versions = BTreeSet::new();
    loop {
        let page = w.registry.list(&w.widgets, Some("default"), &options).await.unwrap();
        seen.extend(names(&page));
        remaining.push(page.remaining_item_count);
        versions.insert(page.resource_version.clone());
        // A write between pages does not show up in a list read at one revision.
        w.registry
            .create(&w.widgets, Some("default"), widget(&format!("late{}", seen.len()), 1), unadmitted())
            .await
            .unwrap();
        match page.continue_token {
            Some(token) => options.continue_token = Some(token),
            None => break,
        }
    }
    assert_eq!(seen, (0..8).map(|i| format!("w{i}")).collect::<Vec<_>>());
    assert_eq!(remaining, [Some(5), Some(2), None]);
    assert_eq!(versions.len(), 1, "every page is read at the first page's revision");

    let filtered =
        ListOptions { limit: Some(2), label_selector: Some("tier=web".into()), ..ListOptions::default() };
    let page = w.registry.list(&w.widgets, Some("default"), &filtered).await.unwrap();
    assert_eq!((page.items.len(), page.remaining_item_count, page.continue_token.is_some()), (2, None, true));

    let exact = ListOptions { limit: Some(8), ..ListOptions::default() };
    let page = w.registry.list(&w.widgets, Some("default"), &exact).await.unwrap();
    assert!(page.continue_token.is_some(), "the late objects are still to come");
    let bogus = ListOptions { continue_token: Some("garbage".into()), ..ListOptions::default() };
    assert!(matches!(w.registry.list(&w.widgets, None, &bogus).await, Err(RegistryError::BadRequest(_))));
    let mixed = ListOptions {
        continue_token: page.continue_token.clone(),
        resource_version: Some("5".into()),
        ..ListOptions::default()
    };
    assert!(matches!(
        w.registry.list(&w.widgets, Some("default"), &mixed).await,
        Err(RegistryError::BadRequest(_))
    ));
}

#[tokio::test]
async fn a_token_older_than_history_expires_with_a_fresh_one() {
    let w = world().await;
    seed(&w, &[("default", "a", "x"), ("default", "b", "x"), ("default", "c", "x")]).await;
    let first = w
        .registry
        .list(&w.widgets, Some("default"), &ListOptions { limit: Some(1), ..ListOptions::default() })
        .await
        .unwrap();
    w.registry.delete(&w.widgets, Some("default"), "a", &unadmitted_delete()).await.unwrap();
    let current = w.store.revision().await.unwrap();
    w.store.compact(current).await.unwrap();
    let next = ListOptions { limit: Some(1), continue_token: first.continue_token, ..ListOptions::default() };
    let Err(RegistryError::Expired { message, continue_from: Some(hint) }) =
        w.registry.list(&w.widgets, Some("default"), &next).await
    else {
        panic!("a compacted token must expire with a hint")
    };
    assert!(message.starts_with("The provided continue parameter is too old"));
    let rest = ListOptions { continue_token: Some(hint), ..ListOptions::default() };
    assert_eq!(names(&w.registry.list(&w.widgets, Some("default"), &rest).await.unwrap()), ["b", "c"]);
}

#[tokio::test]
async fn resource_versions_select_what_a_list_reads() {
    let w = world().await;
    seed(&w, &[("default", "a", "x")]).await;
    let before = w.store.revision().await.unwrap();
    seed(&w, &[("default", "b", "x")]).await;
    let exact = ListOptions {
        resource_version: Some(before.to_string()),
        resource_version_match: Some("Exact".into()),
        ..ListOptions::default()
    };
    let old = w.registry.list(&w.widgets, Some("default"), &exact).await.unwrap();
    assert_eq!((names(&old), old.resource_version.clone()), (vec!["a".to_owned()], before.to_string()));
    let not_older = ListOptions { resource_version: Some(before.to_string()), ..ListOptions::default() };
    assert_eq!(names(&w.registry.list(&w.widgets, Some("default"), &not_older).await.unwrap()), ["a", "b"]);
    let any = ListOptions { resource_version: Some("0".into()), ..ListOptions::default() };
    assert_eq!(names(&w.registry.list(&w.widgets, Some("default"), &any).await.unwrap()), ["a", "b"]);
    let future = ListOptions { resource_version: Some("999999".into()), ..ListOptions::default() };
    assert!(matches!(
        w.registry.list(&w.widgets, None, &future).await,
        Err(RegistryError::TooLargeResourceVersion { .. })
    ));
    assert!(w.registry.not_older_than(Some("0")).await.is_ok());
    assert!(w.registry.not_older_than(Some(&before.to_string())).await.is_ok());
    assert!(matches!(
        w.registry.not_older_than(Some("999999")).await,
        Err(RegistryError::TooLargeResourceVersion { .. })
    ));
    assert!(matches!(w.registry.not_older_than(Some("x")).await, Err(RegistryError::BadRequest(_))));
    let match_alone = ListOptions { resource_version_match: Some("Exact".into()), ..ListOptions::default() };
    assert!(matches!(
        w.registry.list(&w.widgets, None, &match_alone).await,
        Err(RegistryError::BadRequest(_))
    ));
    let unknown = ListOptions {
        resource_version: Some("1".into()),
        resource_version_match: Some("Newest".into()),
        ..ListOptions::default()
    };
    assert!(matches!(w.registry.list(&w.widgets, None, &unknown).await, Err(RegistryError::BadRequest(_))));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Objects that exist from before the first page to after the last appear exactly once,
    /// whatever is created and deleted between pages; nothing appears twice.
    #[test]
    fn continuation_never_skips_or_repeats(
        initial in proptest::collection::btree_set(0..40u32, 0..25),
        churn in proptest::collection::vec((any::<bool>(), 0..40u32), 0..30),
        limit in 1..6usize,
        selector in any::<bool>(),
    ) {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(async {
            let w = world().await;
            for n in &initial {
                let mut body = widget(&format!("w{n:02}"), 1);
                body["metadata"]["labels"] = json!({"parity": if n % 2 == 0 { "even" } else { "odd" }});
                w.registry.create(&w.widgets, Some("default"), body, unadmitted()).await.unwrap();
            }
            let mut options = ListOptions {
                limit: Some(limit),
                label_selector: selector.then(|| "parity=even".to_owned()),
                ..ListOptions::default()
            };
            let mut seen = Vec::new();
            let mut touched = BTreeSet::new();
            let mut churn = churn.into_iter();
            loop {
                let page = w.registry.list(&w.widgets, Some("default"), &options).await.unwrap();
                seen.extend(names(&page));
                for (create, n) in churn.by_ref().take(3) {
                    touched.insert(format!("w{n:02}"));
                    if create {
                        let _ = w.registry.create(&w.widgets, Some("default"), widget(&format!("w{n:02}"), 1), unadmitted()).await;
                    } else {
                        let _ = w.registry.delete(&w.widgets, Some("default"), &format!("w{n:02}"), &unadmitted_delete()).await;
                    }
                }
                match page.continue_token {
                    Some(token) => options.continue_token = Some(token),
                    None => break,
                }
            }
            let unique: BTreeSet<&String> = seen.iter().collect();
            prop_assert_eq!(unique.len(), seen.len(), "an item came twice: {:?}", seen);
            let expected: Vec<String> = initial
                .iter()
                .filter(|n| !selector || *n % 2 == 0)
                .map(|n| format!("w{n:02}"))
                .collect();
            prop_assert_eq!(&seen, &expected, "a list reads one revision: {:?}", touched);
            Ok(())
        })?;
    }
}

#[tokio::test]
async fn a_list_of_the_latest_state_answers_the_caches_encodings_as_a_store_read_would() {
    let w = world().await;
    seed(
        &w,
        &[("default", "a", "web"), ("default", "b", "db"), ("team-a", "c", "web"), ("default", "d", "web")],
    )
    .await;
    let patch = br#"{"status":{"phase":"Ready"}}"#;
    w.registry
        .patch(&w.widgets, Some("default"), "b", kayra_registry::PatchKind::Merge, patch, unadmitted())
        .await
        .unwrap();
    // Once the cache has applied the last write, it answers lists of the latest state.
    let current = w.store.revision().await.unwrap().to_string();
    let watch =
        kayra_registry::WatchOptions { resource_version: Some(current.clone()), ..Default::default() };
    w.registry.watch(&w.widgets, &watch).await.unwrap();
    let mut from_now = w.registry.watch(&w.widgets, &Default::default()).await.unwrap();
    let (_, watched) = from_now.next_json().await.unwrap();
    let cases = [
        (None, ListOptions::default()),
        (Some("default"), ListOptions::default()),
        (None, ListOptions { resource_version: Some("0".into()), ..ListOptions::default() }),
        (None, ListOptions { label_selector: Some("tier=web".into()), ..ListOptions::default() }),
        (
            None,
            ListOptions {
                field_selector: Some("metadata.namespace=team-a".into()),
                ..ListOptions::default()
            },
        ),
        (Some("default"), ListOptions { limit: Some(2), ..ListOptions::default() }),
        (None, ListOptions { limit: Some(3), ..ListOptions::default() }),
        (
            None,
            ListOptions { limit: Some(1), label_selector: Some("tier=web".into()), ..ListOptions::default() },
        ),
    ];
    for (namespace, mut options) in cases {
        loop {
            let json = w.registry.list_json(&w.widgets, namespace, &options).await.unwrap();
            let read = w.registry.list(&w.widgets, namespace, &options).await.unwrap();
            let fresh = read.items.iter().map(|item| serde_json::to_vec(item).unwrap().into());
            assert_eq!(joined(json.items.clone()), joined(fresh), "{namespace:?} {options:?}");
            assert_eq!(json.resource_version, current, "{options:?}");
            assert_eq!(json.remaining_item_count, read.remaining_item_count, "{options:?}");
            assert_eq!(json.continue_token.is_some(), read.continue_token.is_some(), "{options:?}");
            match json.continue_token {
                // The next page, from the store at the first page's revision.
                Some(token) => options.continue_token = Some(token),
                None => break,
            }
        }
    }
    // Served from the cache: the very bytes a watch carries (on a page not asked for before,
    // which is not kept whole).
    let first_ask = ListOptions { limit: Some(1000), ..ListOptions::default() };
    let all = w.registry.list_json(&w.widgets, Some("default"), &first_ask).await.unwrap();
    let first = all.items.clone().next().expect("an item");
    assert_eq!(first.as_ptr(), watched.as_ptr(), "one encoding for lists and watches");
    // What follows a page is still counted right once objects have gone.
    w.registry.delete(&w.widgets, Some("default"), "d", &unadmitted_delete()).await.unwrap();
    let current = w.store.revision().await.unwrap().to_string();
    let caught_up = kayra_registry::WatchOptions { resource_version: Some(current), ..Default::default() };
    w.registry.watch(&w.widgets, &caught_up).await.unwrap();
    for (namespace, limit) in [(Some("default"), 1), (None, 1), (None, 2), (Some("team-a"), 1)] {
        let options = ListOptions { limit: Some(limit), ..ListOptions::default() };
        let json = w.registry.list_json(&w.widgets, namespace, &options).await.unwrap();
        let read = w.registry.list(&w.widgets, namespace, &options).await.unwrap();
        assert_eq!(json.remaining_item_count, read.remaining_item_count, "{namespace:?} {limit}");
        assert_eq!(json.continue_token.is_some(), read.continue_token.is_some(), "{namespace:?} {limit}");
    }
    let bad = ListOptions { label_selector: Some("tier in (web".into()), ..ListOptions::default() };
    assert!(matches!(w.registry.list_json(&w.widgets, None, &bad).await, Err(RegistryError::BadRequest(_))));
}

/// The first list of a cached resource encodes each object as the response takes it and keeps
/// no copy (so a large first list does not hold every object twice); a version listed again
/// is encoded once more and kept, and a page with no selector asked for again is kept whole,
/// answered as those same bytes until an object changes.
#[tokio::test]
async fn a_cached_page_is_kept_whole_from_its_second_list_on_until_an_object_changes() {
    let w = world().await;
    seed(&w, &[("default", "a", "web"), ("default", "b", "db")]).await;
    // The cache is started by a watch from the current revision: no event to encode.
    let current = w.store.revision().await.unwrap().to_string();
    let watch = kayra_registry::WatchOptions { resource_version: Some(current), ..Default::default() };
    let _watch = w.registry.watch(&w.widgets, &watch).await.unwrap();
    let list = |options: ListOptions| {
        let registry = &w.registry;
        let widgets = &w.widgets;
        async move {
            let list = registry.list_json(widgets, Some("default"), &options).await.unwrap();
            list.items.collect::<Vec<bytes::Bytes>>()
        }
    };
    let (first, second, third) = (
        list(ListOptions::default()).await,
        list(ListOptions::default()).await,
        list(ListOptions::default()).await,
    );
    assert_eq!(first.len(), 2, "asked once: each object's JSON");
    assert_eq!((second.len(), third.len()), (1, 1), "asked again: the page whole");
    assert_eq!(joined(first.clone().into_iter()), second[0].to_vec(), "the same JSON");
    assert_eq!(second[0].as_ptr(), third[0].as_ptr(), "the page's encoding is kept");
    // A selector's page is never kept whole.
    let web = || ListOptions { label_selector: Some("tier=web".into()), ..ListOptions::default() };
    for _ in 0..3 {
        assert_eq!(list(web()).await.len(), 1);
        assert!(list(web()).await[0].starts_with(b"{"), "one object, not a kept page");
    }
    // A change forgets the kept page: the next lists answer the objects as they are now.
    let patch = json!({"spec": {"size": 9}}).to_string();
    w.registry
        .patch(
            &w.widgets,
            Some("default"),
            "b",
            kayra_registry::PatchKind::Merge,
            patch.as_bytes(),
            unadmitted(),
        )
        .await
        .unwrap();
    let current = w.store.revision().await.unwrap().to_string();
    let caught_up = kayra_registry::WatchOptions { resource_version: Some(current), ..Default::default() };
    w.registry.watch(&w.widgets, &caught_up).await.unwrap();
    let (after, again) = (list(ListOptions::default()).await, list(ListOptions::default()).await);
    assert_eq!(after.len(), 2, "the first list since the change");
    assert_eq!(joined(after.into_iter()), again[0].to_vec());
    let page: serde_json::Value = serde_json::from_slice(&[b"[", &again[0][..], b"]"].concat()).unwrap();
    assert_eq!(page[1]["spec"]["size"], 9, "the kept page is the patched one");
    // A page's kept form still carries its token and count.
    let one = || ListOptions { limit: Some(1), ..ListOptions::default() };
    for _ in 0..3 {
        let page = w.registry.list_json(&w.widgets, Some("default"), &one()).await.unwrap();
        assert_eq!((page.remaining_item_count, page.continue_token.is_some()), (Some(1), true));
        assert!(page.items.collect::<Vec<_>>()[0].ends_with(b"}"));
    }
}

/// A page too large to keep whole is answered as each object's JSON however often it is asked
/// for: the response never holds it whole.
#[tokio::test]
async fn a_page_too_large_to_keep_is_never_joined() {
    let w = world().await;
    for n in 0..48 {
        let mut body = widget(&format!("w{n}"), 1);
        body["metadata"]["annotations"] = json!({"example.com/pad": "x".repeat(100_000)});
        w.registry.create(&w.widgets, Some("default"), body, unadmitted()).await.unwrap();
    }
    let current = w.store.revision().await.unwrap().to_string();
    let watch = kayra_registry::WatchOptions { resource_version: Some(current), ..Default::default() };
    let _watch = w.registry.watch(&w.widgets, &watch).await.unwrap();
    for _ in 0..3 {
        let list = w.registry.list_json(&w.widgets, Some("default"), &ListOptions::default()).await.unwrap();
        assert_eq!(list.items.count(), 48, "each object's JSON, about 4.8 MB in all");
    }
}

/// List items as the response joins them.
fn joined(items: impl Iterator<Item = bytes::Bytes>) -> Vec<u8> {
    items.map(|item| item.to_vec()).collect::<Vec<_>>().join(&b","[..])
}

/// A follower's list: every object at one revision, read from the store until a watch cache
/// runs, then shared with the cache (the very object a watch hands out), not copied.
#[tokio::test]
async fn a_shared_list_is_every_object_and_once_cached_the_caches_own() {
    let w = world().await;
    seed(&w, &[("default", "a", "web"), ("team-a", "b", "db")]).await;
    let names = |objects: &[std::sync::Arc<kayra_registry::Object>]| {
        objects.iter().map(|object| meta(object, "name").as_str().unwrap().to_owned()).collect::<Vec<_>>()
    };
    let (from_store, objects) = w.registry.list_shared(&w.widgets, None).await.unwrap();
    assert_eq!(names(&objects), ["a", "b"]);
    assert_eq!(from_store, w.store.revision().await.unwrap());

    let mut watch = w.registry.watch(&w.widgets, &kayra_registry::WatchOptions::default()).await.unwrap();
    let first =
        tokio::time::timeout(std::time::Duration::from_secs(10), watch.next()).await.unwrap().unwrap();
    let (from_cache, objects) = w.registry.list_shared(&w.widgets, None).await.unwrap();
    assert_eq!(names(&objects), ["a", "b"]);
    assert_eq!(from_cache, from_store);
    assert!(std::sync::Arc::ptr_eq(&objects[0], first.shared()), "the cache's own object, not a copy");
    let (_, in_team) = w.registry.list_shared(&w.widgets, Some("team-a")).await.unwrap();
    assert_eq!(names(&in_team), ["b"]);
}
