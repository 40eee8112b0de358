//! Authorization answers in Kubernetes' order: 401 to nobody, then 404 and 405 before any
//! decision, then RBAC's refusal worded as kube-apiserver words it.

use axum::body::Body;
use axum::http::{Request, StatusCode};
use kayra_authn::Identity;
use tower::ServiceExt;

use crate::serve::PeerIdentity;
use crate::tests::{admin_request, router, status_of};

fn as_user(user: &str, method: &str, path: &str) -> Request<Body> {
    let mut request = Request::builder().method(method).uri(path);
    if let Some(extensions) = request.extensions_mut() {
        extensions.insert(PeerIdentity(Identity::new(user.to_owned(), String::new(), vec![])));
    }
    request.body(Body::empty()).expect("a request")
}

#[tokio::test]
async fn nobody_is_unauthorized_everywhere_and_the_rest_is_decided_in_kubernetes_order() {
    let dir = tempfile::tempdir().expect("a directory");
    let app = router(dir.path());
    let send = |request: Request<Body>| app.clone().oneshot(request);
    let anonymous = |path: &str| Request::builder().uri(path).body(Body::empty()).expect("a request");
    for path in ["/api/v1/namespaces", "/no/such/path", "/version"] {
        let (code, _) = status_of(send(anonymous(path)).await.expect("an answer")).await;
        assert_eq!(code, StatusCode::UNAUTHORIZED, "{path}: 401 before anything, even 404");
    }
    let cases = [
        // No route: 404, to an authenticated caller.
        (as_user("mallory", "GET", "/no/such/path"), StatusCode::NOT_FOUND),
        // A subresource the Kind does not have is no resource at all, before any decision.
        (as_user("mallory", "GET", "/api/v1/namespaces/a/nodes"), StatusCode::NOT_FOUND),
        // A verb the resource does not serve, before any decision.
        (as_user("mallory", "DELETE", "/api/v1/namespaces"), StatusCode::METHOD_NOT_ALLOWED),
        (as_user("mallory", "DELETE", "/api/v1/nodes"), StatusCode::FORBIDDEN),
        (as_user("mallory", "GET", "/apis/fleet.example.com/v1/applications"), StatusCode::FORBIDDEN),
        (as_user("mallory", "GET", "/metrics"), StatusCode::FORBIDDEN),
        (
            admin_request("GET", "/apis/fleet.example.com/v1/applications")
                .body(Body::empty())
                .expect("a request"),
            StatusCode::OK,
        ),
    ];
    for (request, expected) in cases {
        let what = format!("{} {}", request.method(), request.uri());
        let (code, status) = status_of(send(request).await.expect("an answer")).await;
        assert_eq!(code, expected, "{what}: {status}");
    }
    let (_, refusal) = status_of(
        send(as_user("mallory", "GET", "/apis/fleet.example.com/v1/applications")).await.expect("an answer"),
    )
    .await;
    assert_eq!(
        refusal["message"],
        "applications.fleet.example.com is forbidden: User \"mallory\" cannot list resource \"applications\" in API group \"fleet.example.com\" at the cluster scope"
    );
}
