//! Paths resolve as Kubernetes resolves them, and non-canonical ones are refused.

use super::*;

fn describe(scheme: &Scheme, path: &str) -> String {
    match parse(scheme, Gates::default(), path) {
        Ok(Target::Resource(r)) => format!(
            "{} ns={} name={} sub={}",
            r.kind.plural,
            r.namespace.unwrap_or_default(),
            r.name.unwrap_or_default(),
            r.subresource.unwrap_or_default()
        ),
        Ok(other) => format!("{other:?}"),
        Err(error) => format!("{error:?}"),
    }
}

#[test]
fn paths_resolve_as_kubernetes_resolves_them() {
    let scheme = Scheme::new("example.com");
    let cases = [
        ("/api/v1/namespaces", "namespaces ns= name= sub="),
        ("/api/v1/namespaces/dev", "namespaces ns= name=dev sub="),
        ("/api/v1/namespaces/dev/status", "namespaces ns= name=dev sub=status"),
        ("/api/v1/namespaces/dev/events", "events ns=dev name= sub="),
        ("/api/v1/namespaces/dev/events/e1", "events ns=dev name=e1 sub="),
        ("/api/v1/events", "events ns= name= sub="),
        ("/api/v1/events/e1", "NotFound"),
        (
            "/apis/fleet.example.com/v1/namespaces/default/applications/web/status",
            "applications ns=default name=web sub=status",
        ),
        ("/apis/fleet.example.com/v1/applications", "applications ns= name= sub="),
        ("/apis/fleet.example.com/v2/applications", "NotFound"),
        ("/apis/fleet.example.com/v1/namespaces/default/applications/web/status/x", "NotFound"),
        ("/apis/other.example.com/v1", "NotFound"),
        ("/apis/fleet.example.com/v1", "GroupVersion(\"fleet.example.com\", \"v1\")"),
        ("/api/v1", "GroupVersion(\"\", \"v1\")"),
        ("/version", "Version"),
        ("/healthz/ping", "Health"),
        ("/api/v1/namespaces/%2e%2e/events", "NonCanonical"),
        ("/api/v1/namespaces/a%2Fb", "NonCanonical"),
        ("/api/v1//namespaces", "NonCanonical"),
        ("/api/v1/namespaces/../events", "NonCanonical"),
        ("/api/v1/namespaces/./x", "NonCanonical"),
    ];
    for (path, expect) in cases {
        assert_eq!(describe(&scheme, path), expect, "{path}");
    }
}
