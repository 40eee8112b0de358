//! ApiRegistration names and validation, and the documented flat JSON read and written.

use super::*;

#[test]
fn names_are_dns_names_of_two_labels_or_more() {
    for good in ["compute.example.com", "a.b", "telemetry.giservices.io", "x-1.y2"] {
        assert!(is_api_name(good), "{good}");
    }
    for bad in
        ["compute", "", "Compute.example.com", "a..b", "-a.b", "a-.b", "a.b.", ".a.b", "a_b.c", "a.b/c"]
    {
        assert!(!is_api_name(bad), "{bad}");
    }
    assert!(!is_api_name(&format!("{}.com", "a".repeat(64))), "a label over 63");
    assert!(is_short_name("compute") && !is_short_name("compute.io") && !is_short_name(""));
}

#[test]
fn a_registration_names_what_is_wrong_with_it() {
    let mut registration = ApiRegistration {
        name: "compute".into(),
        short_name: "Compute".into(),
        platform: "p".into(),
        region: "r".into(),
        depends_on: vec![DependencyRef { platform: String::new(), region: "r".into(), name: "x".into() }],
        ..ApiRegistration::default()
    };
    let fields: Vec<String> =
        validate(&registration).into_iter().map(|Problem::Invalid { field, .. }| field).collect();
    assert_eq!(fields, ["name", "short_name", "depends_on[0].name", "depends_on[0].platform"]);
    registration.name = "compute.example.com".into();
    registration.short_name = "compute".into();
    registration.depends_on = vec![registration.reference()];
    let problems = validate(&registration);
    assert_eq!(problems.len(), 1);
    assert!(problems[0].to_string().contains("itself"));
}

#[test]
fn registrations_read_and_write_the_documented_json() {
    let body = r#"{"name": "compute.example.com", "short_name": "compute", "active": true, "owner": "sre-a",
                   "depends_on": [{"platform": "sandbox", "region": "eu-west-1", "name": "vault.example.com"}]}"#;
    let registration: ApiRegistration = serde_json::from_str(body).unwrap();
    assert_eq!(registration.short_name, "compute");
    assert_eq!(registration.depends_on[0].region, "eu-west-1");
    let written = serde_json::to_value(&registration).unwrap();
    assert_eq!(written["owner"], "sre-a");
    assert!(written.get("canary_namespaces").is_none(), "no rollout pending, no field");
}
