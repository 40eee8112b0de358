//! The resources an API serves, read from its OpenAPI document's paths and methods, within
//! the document's size bound.

use serde_json::json;

use super::*;

fn document(paths: Value) -> Vec<u8> {
    serde_json::to_vec(&json!({"openapi": "3.1.0", "info": {"title": "t", "version": "1"}, "paths": paths}))
        .unwrap()
}

fn summary(resources: &[ApiResource]) -> Vec<(String, bool, String)> {
    resources.iter().map(|r| (r.name.clone(), r.namespaced, r.verbs.join(","))).collect()
}

#[test]
fn resources_follow_paths_and_methods() {
    let api = "telemetry.giservices.io";
    let spec = document(json!({
        "/apis/telemetry.giservices.io/v1/namespaces/{namespace}/dashboards": {"get": {}, "post": {}},
        "/apis/telemetry.giservices.io/v1/namespaces/{namespace}/dashboards/{name}": {"get": {}, "put": {}, "patch": {}, "delete": {}, "parameters": []},
        "/apis/telemetry.giservices.io/v1/namespaces/{namespace}/dashboards/{name}/refresh": {"post": {}},
        "/apis/telemetry.giservices.io/v1/sources": {"get": {}},
        "/apis/telemetry.giservices.io/v1/sources/{id}": {"get": {}, "delete": {}},
        "/apis/other.example.com/v1/things": {"get": {}},
        "/-/openapi.json": {"get": {}},
        "/apis/telemetry.giservices.io/v1": {"get": {}},
        "/apis/telemetry.giservices.io/v1/a/b/c/d": {"get": {}},
        "/apis/telemetry.giservices.io/v1/options-only": {"options": {}},
    }));
    let resources = resources(api, &spec).unwrap();
    assert_eq!(
        summary(&resources),
        [
            ("dashboards".to_owned(), true, "get,list,create,update,patch,delete".to_owned()),
            ("dashboards/refresh".to_owned(), true, "create".to_owned()),
            ("sources".to_owned(), false, "get,list,delete".to_owned()),
        ]
    );
    assert!(resources.iter().all(|r| r.version == "v1"));
}

#[test]
fn only_openapi_documents_of_at_most_a_mebibyte_are_read() {
    assert!(matches!(resources("a.b", b"<html>"), Err(SpecError::NotOpenApi(_))));
    assert!(matches!(resources("a.b", br#"{"paths": {}}"#), Err(SpecError::NotOpenApi(_))), "no version");
    assert!(matches!(
        resources("a.b", br#"{"openapi": "3.0.0", "paths": []}"#),
        Err(SpecError::NotOpenApi(_))
    ));
    assert_eq!(resources("a.b", br#"{"swagger": "2.0", "paths": {}}"#), Ok(Vec::new()));
    let mut big = document(json!({}));
    big.resize(MAX_DOCUMENT + 1, b' ');
    assert_eq!(resources("a.b", &big), Err(SpecError::TooLarge(MAX_DOCUMENT + 1)));
}
