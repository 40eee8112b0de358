//! A Service's tags and meta: bounded in count, length and form, each refusal naming its field.

use super::*;

fn with(tags: Vec<String>, meta: Vec<(&str, String)>) -> Service {
    Service {
        spec: ServiceSpec {
            tags,
            meta: meta.into_iter().map(|(k, v)| (k.to_owned(), v)).collect(),
            ..ServiceSpec::default()
        },
        ..Service::default()
    }
}

fn fields(service: &Service) -> Vec<String> {
    service.validate(None).into_iter().map(|error| format!("{} {}", error.field, error.reason)).collect()
}

#[test]
fn routing_tags_and_string_meta_are_accepted() {
    let tags = vec![
        "traefik.enable=true".to_owned(),
        "traefik.http.routers.web.rule=Host(`web.example.com`)".to_owned(),
        "canary".to_owned(),
    ];
    let service = with(tags, vec![("version", "1".to_owned()), ("owner_team", "payments".to_owned())]);
    assert!(fields(&service).is_empty(), "{:?}", fields(&service));
    let round = serde_json::to_value(&service).unwrap();
    assert_eq!(round["spec"]["tags"][0], "traefik.enable=true");
    assert_eq!(round["spec"]["meta"]["version"], "1");
    assert!(
        serde_json::to_value(Service::default()).unwrap()["spec"].get("tags").is_none(),
        "no empty list written"
    );
}

#[test]
fn tags_and_meta_out_of_bounds_are_refused_by_field() {
    let too_many = with((0..=MAX_TAGS).map(|i| format!("t{i}")).collect(), vec![]);
    assert_eq!(fields(&too_many), ["spec.tags FieldValueTooMany"]);
    let bad = with(
        vec![
            String::new(),
            "x".repeat(MAX_TAG_BYTES + 1),
            "a\nb".into(),
            "=v".into(),
            "dup".into(),
            "dup".into(),
        ],
        vec![],
    );
    assert_eq!(
        fields(&bad),
        [
            "spec.tags[0] FieldValueInvalid",
            "spec.tags[1] FieldValueTooLong",
            "spec.tags[2] FieldValueInvalid",
            "spec.tags[3] FieldValueInvalid",
            "spec.tags[5] FieldValueDuplicate",
        ]
    );
    let meta = with(vec![], vec![("bad key", "v".into()), ("long", "v".repeat(MAX_META_VALUE_BYTES + 1))]);
    assert_eq!(fields(&meta), ["spec.meta[bad key] FieldValueInvalid", "spec.meta[long] FieldValueTooLong"]);
    let mut too_much = with(vec![], vec![]);
    too_much.spec.meta = (0..=MAX_META).map(|i| (format!("k{i}"), String::new())).collect();
    assert_eq!(fields(&too_much), ["spec.meta FieldValueTooMany"]);
}
