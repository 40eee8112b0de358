//! Label selectors: a table of what kubectl sends, and properties against a model.

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;

use super::LabelSelector;

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
}

fn check(selector: &str, pairs: &[(&str, &str)], expect: bool) {
    let parsed = LabelSelector::parse(selector).unwrap_or_else(|e| panic!("{selector:?}: {e}"));
    assert_eq!(parsed.matches(&labels(pairs)), expect, "{selector:?} on {pairs:?}");
}

#[test]
fn kubectl_selectors_match_as_kubernetes_does() {
    let web = [("tier", "web"), ("idx", "3"), ("app.kubernetes.io/name", "shop")];
    check("", &web, true);
    check("tier=web", &web, true);
    check("tier==web", &web, true);
    check("tier = web", &web, true);
    check("tier!=web", &web, false);
    check("tier!=db", &[], true);
    check("tier=web,idx!=4", &web, true);
    check("tier=web,idx!=3", &web, false);
    check("tier in (db)", &web, false);
    check("tier in (db, web)", &web, true);
    check("tier notin (db)", &web, true);
    check("tier notin (db)", &[], true);
    check("tier in (db)", &[], false);
    check("tier", &web, true);
    check("!tier", &web, false);
    check("!missing", &web, true);
    check("idx>2", &web, true);
    check("idx<3", &web, false);
    check("tier>2", &web, false);
    check("app.kubernetes.io/name=shop", &web, true);
    check("tier in (web),idx in (1,2,3),!gone", &web, true);
    check("tier=", &[("tier", "")], true);
}

#[test]
fn malformed_selectors_are_refused_with_the_part_named() {
    for bad in [
        "tier in (web",
        "tier in web)",
        "tier=web,",
        "=web",
        "tier=we b",
        "-x=1",
        "a/b/c=1",
        "Tier.Example.com/x=1",
        "tier between (a)",
        "idx>two",
        "x in ((a))",
    ] {
        let error = LabelSelector::parse(bad).expect_err(bad);
        assert!(error.to_string().contains("unable to parse requirement"), "{bad:?}: {error}");
    }
}

fn key() -> impl Strategy<Value = String> {
    prop_oneof!["[a-c]", "[a-c]\\.io/[a-c]"]
}

fn value() -> impl Strategy<Value = String> {
    prop_oneof!["[xy]", "[0-9]", Just(String::new())]
}

/// A requirement as text, and the model of what it accepts.
fn requirement() -> impl Strategy<Value = (String, Model)> {
    (
        key(),
        0..8u8,
        proptest::collection::btree_set(value().prop_filter("sets hold names", |v| !v.is_empty()), 1..3),
        value(),
        -2..12i64,
    )
        .prop_map(|(key, op, set, value, number)| {
            let list = set.iter().cloned().collect::<Vec<_>>().join(", ");
            match op {
                0 => (format!("{key}={value}"), Model::Equals(key, value)),
                1 => (format!("{key} == {value}"), Model::Equals(key, value)),
                2 => (format!("{key}!={value}"), Model::NotEquals(key, value)),
                3 => (format!("{key} in ({list})"), Model::In(key, set)),
                4 => (format!("{key} notin ({list})"), Model::NotIn(key, set)),
                5 => (key.clone(), Model::Exists(key)),
                6 => (format!("!{key}"), Model::Absent(key)),
                _ => (format!("{key}>{number}"), Model::Greater(key, number)),
            }
        })
}

#[derive(Debug, Clone)]
enum Model {
    Equals(String, String),
    NotEquals(String, String),
    In(String, BTreeSet<String>),
    NotIn(String, BTreeSet<String>),
    Exists(String),
    Absent(String),
    Greater(String, i64),
}

impl Model {
    fn accepts(&self, labels: &BTreeMap<String, String>) -> bool {
        match self {
            Model::Equals(k, v) => labels.get(k) == Some(v),
            Model::NotEquals(k, v) => labels.get(k) != Some(v),
            Model::In(k, set) => labels.get(k).is_some_and(|v| set.contains(v)),
            Model::NotIn(k, set) => labels.get(k).is_none_or(|v| !set.contains(v)),
            Model::Exists(k) => labels.contains_key(k),
            Model::Absent(k) => !labels.contains_key(k),
            Model::Greater(k, n) => labels.get(k).and_then(|v| v.parse::<i64>().ok()).is_some_and(|v| v > *n),
        }
    }
}

proptest! {
    #[test]
    fn parse_print_parse_is_the_identity(requirements in proptest::collection::vec(requirement(), 0..5)) {
        let text = requirements.iter().map(|(text, _)| text.as_str()).collect::<Vec<_>>().join(",");
        let parsed = LabelSelector::parse(&text).unwrap();
        let printed = parsed.to_string();
        prop_assert_eq!(LabelSelector::parse(&printed).unwrap(), parsed);
    }

    #[test]
    fn matching_agrees_with_the_model(
        requirements in proptest::collection::vec(requirement(), 0..5),
        labels in proptest::collection::btree_map(key(), value(), 0..5),
    ) {
        let text = requirements.iter().map(|(text, _)| text.as_str()).collect::<Vec<_>>().join(",");
        let selector = LabelSelector::parse(&text).unwrap();
        let expected = requirements.iter().all(|(_, model)| model.accepts(&labels));
        prop_assert_eq!(selector.matches(&labels), expected, "{} on {:?}", text, labels);
    }
}
